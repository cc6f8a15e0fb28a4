"""A real WebSocket client against a running ASGI server (uvicorn, in a subprocess).

The ``live`` fixture starts ``uvicorn config.asgi:application`` on 127.0.0.1 with an
ephemeral port, pointed at the test database, in two modes: ``embedded`` (no
``REDIS_URL``: runs execute on the server's own thread pool, the in-memory channel
layer) and ``celery`` (``REDIS_URL`` set: a real Celery worker process runs the
runs and rings the doorbell through Redis). The server's log re-read is pushed out
of reach (``SOCKET_POLL_SECONDS`` = 1 hour, keep-alive 1 hour), so every live
event a client receives came through the channel layer. Runs are started with
``POST /agui/demo/`` on the server, as an integration would. The fixtures are
imported by the other live modules. Implements DC-02.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import websockets
from asgiref.sync import sync_to_async
from django.conf import settings as django_settings
from django.test import Client

from tests.agentcore.helpers import collapsed
from tests.helpers.live import (
    LiveServer,
    run_input,
    token_for,
)
from threads.models import Event, Thread

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("close_thread_connections"),
]


def session_cookie(user: Any) -> str:
    """Log ``user`` in (a session row in the test database); return the Cookie header."""
    client = Client()
    client.force_login(user)
    name = django_settings.SESSION_COOKIE_NAME
    return f"{name}={client.cookies[name].value}"


def sse_events(body: str) -> list[dict[str, Any]]:
    """Return the JSON ``data:`` payloads of an SSE body, in order."""
    events = []
    for frame in body.split("\n\n"):
        data = [
            line[5:].lstrip(" ")
            for line in frame.split("\n")
            if line.startswith("data:")
        ]
        if data:
            events.append(json.loads("\n".join(data)))
    return events


async def ws_receive_until(
    socket: Any,
    done: Callable[[list[dict[str, Any]]], bool],
    *,
    timeout: float = 30.0,
    what: str,
    server: LiveServer,
) -> list[dict[str, Any]]:
    """Collect JSON frames from a real socket until ``done``; fail with the server log."""
    received: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while not done(received):
        remaining = deadline - time.monotonic()
        try:
            if remaining <= 0:
                raise TimeoutError
            received.append(
                json.loads(await asyncio.wait_for(socket.recv(), remaining))
            )
        except TimeoutError:
            pytest.fail(
                f"timed out after {timeout}s waiting for {what}; got {received!r}\n"
                f"{server.logs()}"
            )
    return received


def events_of(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in messages if "seq" in m]


def runs_finished(count: int) -> Callable[[list[dict[str, Any]]], bool]:
    def done(messages: list[dict[str, Any]]) -> bool:
        return (
            sum(1 for e in events_of(messages) if e["type"] == "RUN_FINISHED") >= count
        )

    return done


async def test_dc02_real_websocket_client_streams_and_resumes_live(user, live):
    """Real sockets see the refund run in seq order; a resumed socket misses and repeats nothing.

    The run is one client-visible run (lookup_order answered inside it, the refund
    an interrupt), so the POST's stream and the sockets see the same events.
    """
    thread = await sync_to_async(Thread.objects.create)(
        thread_id=f"ws-live-{live.mode}", owner=user
    )
    cookie = await sync_to_async(session_cookie)(user)
    token = await sync_to_async(token_for)(user)
    headers = {"Cookie": cookie}
    path = f"{live.ws_url}/ws/threads/{thread.thread_id}/"

    async with (
        websockets.connect(
            f"{path}?after=0", additional_headers=headers, origin=live.url
        ) as watcher,
        websockets.connect(
            f"{path}?after=0", additional_headers=headers, origin=live.url
        ) as leaver,
        httpx.AsyncClient(base_url=live.url, timeout=30) as http,
    ):
        # when: the run starts on the server
        body = run_input(
            thread.thread_id,
            "run-1",
            [{"id": "u1", "role": "user", "content": "refund order A-1001 25.00"}],
        )
        response = await http.post(
            "/agui/demo/", json=body, headers={"Authorization": f"Token {token}"}
        )
        assert response.status_code == 200, response.text
        # One socket leaves after three events, and comes back with ?after=<seq>.
        part_one = await ws_receive_until(
            leaver, lambda m: len(events_of(m)) >= 3, what="three events", server=live
        )
        await leaver.close()
        last_seq = events_of(part_one)[-1]["seq"]
        async with websockets.connect(
            f"{path}?after={last_seq}", additional_headers=headers, origin=live.url
        ) as resumed:
            part_two = await ws_receive_until(
                resumed,
                lambda m: any(e["type"] == "RUN_FINISHED" for e in events_of(m)),
                what="the run's RUN_FINISHED",
                server=live,
            )
        everything = await ws_receive_until(
            watcher,
            lambda m: (
                runs_finished(1)(m)
                and any(
                    n.get("state") == "awaiting_approval" for n in m if "seq" not in n
                )
            ),
            what="the run and the approval notification",
            server=live,
        )

    log = await sync_to_async(list)(
        Event.objects.filter(thread=thread).order_by("seq").values_list("seq", "type")
    )
    assert [seq for seq, _ in log] == list(range(1, len(log) + 1))
    assert [(e["seq"], e["type"]) for e in events_of(everything)] == log
    assert collapsed(events_of(everything)) == [
        "RUN_STARTED",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",  # the application's lookup result (BC21, FT-09)
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "RUN_FINISHED",
    ]
    resumed_seqs = [e["seq"] for e in events_of(part_one) + events_of(part_two)]
    assert resumed_seqs == [seq for seq, _ in log]
    notes = [m for m in everything if "seq" not in m]
    assert [(n["kind"], n["state"]) for n in notes] == [
        ("notification", "approved"),
        ("notification", "executing"),
        ("notification", "succeeded"),
        ("notification", "awaiting_approval"),
    ]
    # The POST's own stream carried the same run, ending with the refund's interrupt.
    posted = sse_events(response.text)
    assert [e["type"] for e in posted] == [t for _, t in log]
    assert posted[-1]["outcome"]["type"] == "interrupt"


@pytest.mark.parametrize("live", ["embedded"], indirect=True)
async def test_dc02_real_websocket_client_sees_refusal_close_codes(
    user, other_user, live
):
    """A browser-like client reads 4401 (no session) and 4404 (another user's thread) as close codes."""
    thread = await sync_to_async(Thread.objects.create)(
        thread_id="ws-private", owner=user
    )
    stranger = await sync_to_async(session_cookie)(other_user)
    path = f"{live.ws_url}/ws/threads/{thread.thread_id}/?after=0"

    async with websockets.connect(path, origin=live.url) as anonymous:
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await asyncio.wait_for(anonymous.recv(), 10)
    assert closed.value.rcvd.code == 4401

    async with websockets.connect(
        path, origin=live.url, additional_headers={"Cookie": stranger}
    ) as other:
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await asyncio.wait_for(other.recv(), 10)
    assert closed.value.rcvd.code == 4404
