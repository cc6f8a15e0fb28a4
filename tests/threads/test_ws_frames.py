"""WebSocket input never crashes a socket: unknown paths, junk frames, Redis down.

Driven in-process through the real ASGI application (channels' routing, auth and
origin checks), as tests/threads/test_ws_consumer.py does.
"""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Permission

from tests.helpers.ws import (
    NO_POLL,
    expect_close,
    open_socket,
    owned_thread,
    record_silently,
    session_headers,
)
from threads.models import Run
from web.consumers import CLOSE_UNAVAILABLE, MAX_FRAME_CHARS

pytestmark = pytest.mark.django_db(transaction=True)

#: A Redis nobody listens on: the channel layer cannot connect.
DEAD_REDIS = {
    "default": {
        "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
        "CONFIG": {"hosts": ["redis://127.0.0.1:9/0"]},
    }
}


async def receive_json(socket: Any) -> dict[str, Any]:
    return await socket.receive_json_from(timeout=10)


@pytest.mark.parametrize("path", ["/ws/nope/", "/ws/", "/ws/threads/", "/ws/a\nb/"])
async def test_unknown_websocket_paths_close_with_4404(user, path):
    headers = await sync_to_async(session_headers)(user)

    socket = await open_socket(path, headers)

    await expect_close(socket, 4404)


@pytest.mark.parametrize(
    ("frame", "kind", "says"),
    [
        ({"type": "websocket.receive", "bytes": b"\x00\x01"}, "binary_frame", "binary"),
        (
            {"type": "websocket.receive", "text": "{not json"},
            "invalid_json",
            "not JSON",
        ),
        (
            {"type": "websocket.receive", "text": "[" * 100_000 + "]" * 100_000},
            "frame_too_large",
            str(MAX_FRAME_CHARS),
        ),
        (
            {"type": "websocket.receive", "text": "[" * 5_000 + "]" * 5_000},
            "invalid_json",
            "levels deep",
        ),
        (
            {"type": "websocket.receive", "text": '{"type": "resync", "after": NaN}'},
            "invalid_json",
            "finite",
        ),
        (
            {"type": "websocket.receive", "text": '"\\ud800"'},
            "invalid_json",
            "surrogate",
        ),
        (
            {"type": "websocket.receive", "text": '{"type": "hello"}'},
            "unknown_message",
            "resync",
        ),
        (
            {"type": "websocket.receive", "text": '{"type": "resync", "after": -1}'},
            "invalid_after",
            "-1",
        ),
        (
            {"type": "websocket.receive", "text": '{"type": "resync", "after": true}'},
            "invalid_after",
            "True",
        ),
    ],
)
async def test_junk_frames_get_an_error_frame_and_the_socket_stays_usable(
    user, settings, frame, kind, says
):
    settings.COUNTERSIGN = NO_POLL
    thread = await owned_thread(user)
    headers = await sync_to_async(session_headers)(user)
    socket = await open_socket(f"/ws/threads/{thread.thread_id}/?after=0", headers)
    assert [(await receive_json(socket))["seq"] for _ in range(2)] == [1, 2]

    await socket.send_input(frame)
    error = await receive_json(socket)

    assert error["kind"] == "error"
    assert error["type"] == kind
    assert says in error["detail"]
    # Still open and served: a resync answers with the log again.
    await socket.send_json_to({"type": "resync", "after": 1})
    assert (await receive_json(socket))["seq"] == 2
    await socket.disconnect()


async def test_approvals_socket_answers_junk_frames_with_an_error_frame(user):
    await sync_to_async(user.user_permissions.add)(
        await Permission.objects.aget(codename="view_approvalrequest")
    )
    headers = await sync_to_async(session_headers)(user)
    socket = await open_socket("/ws/approvals/", headers)
    assert (await receive_json(socket))["kind"] == "snapshot"

    await socket.send_input({"type": "websocket.receive", "bytes": b"\xff"})
    await socket.send_input({"type": "websocket.receive", "text": "]"})
    await socket.send_json_to({"type": "resync"})

    kinds = [(await receive_json(socket))["type"] for _ in range(3)]
    assert kinds == ["binary_frame", "invalid_json", "unknown_message"]
    await socket.disconnect()


async def test_while_redis_is_down_a_thread_socket_is_served_from_the_log(
    user, settings
):
    settings.CHANNEL_LAYERS = DEAD_REDIS
    settings.COUNTERSIGN = {"SOCKET_POLL_SECONDS": 0.2}
    thread = await owned_thread(user)
    headers = await sync_to_async(session_headers)(user)

    socket = await open_socket(f"/ws/threads/{thread.thread_id}/?after=0", headers)
    first = [await receive_json(socket) for _ in range(2)]
    # Without doorbells, new rows still arrive by re-reading the log.
    run = await Run.objects.acreate(
        thread=thread, run_id="r2", status=Run.Status.RUNNING
    )
    await sync_to_async(record_silently)(
        run, [{"type": "RUN_STARTED", "threadId": "frames", "runId": "r2"}]
    )
    later = await receive_json(socket)
    await socket.disconnect()

    assert [e["seq"] for e in first] == [1, 2]
    assert (later["seq"], later["runId"]) == (3, "r2")


async def test_while_redis_is_down_the_approvals_socket_sends_its_snapshot_then_4503(
    user, settings
):
    settings.CHANNEL_LAYERS = DEAD_REDIS
    await sync_to_async(user.user_permissions.add)(
        await Permission.objects.aget(codename="view_approvalrequest")
    )
    headers = await sync_to_async(session_headers)(user)

    socket = await open_socket("/ws/approvals/", headers)

    assert (await receive_json(socket)) == {"kind": "snapshot", "approvals": []}
    await expect_close(socket, CLOSE_UNAVAILABLE)
