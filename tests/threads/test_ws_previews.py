"""Previews on the thread socket: "show first, persist in batches" (B1).

A recording worker sends each validated event to the thread's group before its
coalesced row is written; sockets that asked with ``?preview=1`` forward it as
``{"kind": "preview", "previews": [...]}`` and, after the batch that writes it, a
``{"kind": "confirmed", ...}``. Sockets without ``preview=1`` see only log rows,
byte for byte as without previews. The recorder runs in a worker thread, as in a
server; the sockets are the real ASGI application (tests.threads.test_ws_consumer).
Implements DC-01, DC-02.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from tests.helpers.ws import (
    HOLD,
    NO_POLL,
    assert_silent,
    expect_close,
    open_socket,
    raw_frames,
    session_headers,
    text_run,
)
from threads.models import Event, Run, Thread
from threads.recording import RunRecorder

pytestmark = pytest.mark.django_db(transaction=True)


async def record_run_between_sockets(
    user: Any, thread_id: str
) -> tuple[list[str], list[str], list[dict[str, Any]]]:
    """Record ``text_run`` with a preview socket and a plain socket open.

    Returns (the preview socket's frames, the plain socket's frames, the log rows
    as sent) with the explicit flush in the middle.
    """
    thread = await sync_to_async(Thread.objects.create)(thread_id=thread_id, owner=user)
    run = await sync_to_async(Run.objects.create)(
        thread=thread, run_id="r-pv", status=Run.Status.RUNNING
    )
    headers = await sync_to_async(session_headers)(user)
    watcher = await open_socket(f"/ws/threads/{thread_id}/?after=0&preview=1", headers)
    plain = await open_socket(f"/ws/threads/{thread_id}/?after=0", headers)
    first, rest = text_run(thread_id, "r-pv")
    recorder = await sync_to_async(RunRecorder)(run, **HOLD)
    await sync_to_async(recorder.record)(first)
    before_flush = await sync_to_async(lambda: recorder.previewed)()
    preview_frames: list[str] = []
    if before_flush:
        preview_frames += await raw_frames(watcher, before_flush)
    await assert_silent(plain)
    await sync_to_async(recorder.flush)()
    await sync_to_async(recorder.record)(rest)
    log = await sync_to_async(list)(Event.objects.filter(thread=thread).order_by("seq"))
    wire = [e.as_wire() for e in log]
    extra = 2 if recorder.previews else 0  # one confirmation per batch
    preview_frames += await raw_frames(
        watcher, len(wire) + len(rest) * bool(recorder.previews) + extra
    )
    plain_frames = await raw_frames(plain, len(wire))
    await assert_silent(watcher)
    await assert_silent(plain)
    await watcher.disconnect()
    await plain.disconnect()
    return preview_frames, plain_frames, wire


async def test_b1_preview_socket_sees_events_before_their_rows_then_a_confirmation(
    user, settings
):
    """Previews p=1..4 arrive before any row; each batch's rows are followed by confirmed."""
    settings.COUNTERSIGN = NO_POLL
    frames, plain, wire = await record_run_between_sockets(user, "pv-on")
    received = [json.loads(f) for f in frames]
    first, rest = text_run("pv-on", "r-pv")

    assert [len(wire), [e["type"] for e in wire]] == [
        5,
        [
            "RUN_STARTED",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "RUN_FINISHED",
        ],
    ]
    assert wire[2]["delta"] == "Hello"  # the two previewed deltas, coalesced
    assert received == [
        *(
            {"kind": "preview", "runId": "r-pv", "previews": [{"p": p, "event": event}]}
            for p, event in enumerate(first, 1)
        ),
        *wire[:3],
        {"kind": "confirmed", "runId": "r-pv", "through": 4},
        *(
            {"kind": "preview", "runId": "r-pv", "previews": [{"p": p, "event": event}]}
            for p, event in enumerate(rest, 5)
        ),
        *wire[3:],
        {"kind": "confirmed", "runId": "r-pv", "through": 6},
    ]
    assert [json.loads(f) for f in plain] == wire


async def test_b1_sockets_without_preview_get_the_same_bytes_with_previews_on_or_off(
    user, settings
):
    """A plain socket's frames are byte-identical either way; with previews off a
    preview=1 socket gets exactly the plain frames too."""
    settings.COUNTERSIGN = NO_POLL
    _, plain_on, _ = await record_run_between_sockets(user, "pv-same")
    await sync_to_async(Thread.objects.filter(client_thread_id="pv-same").delete)()

    settings.COUNTERSIGN = {**NO_POLL, "PREVIEW_EVENTS": False}
    watcher_off, plain_off, wire = await record_run_between_sockets(user, "pv-same")

    assert plain_on == plain_off
    assert watcher_off == plain_off
    assert [json.loads(f) for f in plain_off] == wire
    assert all("kind" not in json.loads(f) for f in watcher_off)


async def test_b1_a_delta_the_stream_machine_rejects_is_never_previewed(user, settings):
    """Only validated events are previewed: every preview's event is a log row."""
    settings.COUNTERSIGN = NO_POLL
    thread = await sync_to_async(Thread.objects.create)(thread_id="pv-bad", owner=user)
    run = await sync_to_async(Run.objects.create)(
        thread=thread, run_id="r-bad", status=Run.Status.RUNNING
    )
    headers = await sync_to_async(session_headers)(user)
    watcher = await open_socket("/ws/threads/pv-bad/?preview=1", headers)
    recorder = await sync_to_async(RunRecorder)(run, **HOLD)

    # when a delta names a message that was never started
    await sync_to_async(recorder.record)(
        [
            {"type": "RUN_STARTED", "threadId": "pv-bad", "runId": "r-bad"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "ghost", "delta": "boo"},
        ]
    )
    received = [json.loads(f) for f in await raw_frames(watcher, 5)]
    await assert_silent(watcher)
    await watcher.disconnect()

    # then the run ends with the violation, and the ghost delta went nowhere
    log = await sync_to_async(list)(Event.objects.filter(thread=thread).order_by("seq"))
    previews = [
        item["event"]
        for m in received
        if m.get("kind") == "preview"
        for item in m["previews"]
    ]
    assert [e["type"] for e in previews] == ["RUN_STARTED", "RUN_ERROR"]
    assert previews == [e.payload for e in log]
    assert log[1].payload["code"] == "protocol_violation"
    assert all(m.get("delta") != "boo" for m in received)  # nor as a row
    assert received[-1] == {"kind": "confirmed", "runId": "r-bad", "through": 2}


async def test_b1_bad_preview_values_are_refused_like_a_bad_after(user):
    """preview=abc, preview=2 and preview=-1 → 4400; preview=0 is a plain socket."""
    await sync_to_async(Thread.objects.create)(thread_id="pv-q", owner=user)
    headers = await sync_to_async(session_headers)(user)
    for value in ("abc", "2", "-1", ""):
        socket = await open_socket(f"/ws/threads/pv-q/?preview={value}", headers)
        if value == "":
            # An empty value is no value (parse_qs drops it): the default, 0.
            await assert_silent(socket)
            await socket.disconnect()
            continue
        await expect_close(socket, 4400)
    plain = await open_socket("/ws/threads/pv-q/?preview=0&after=0", headers)
    await assert_silent(plain)
    await plain.disconnect()


def test_coalesce_previews_merges_consecutive_previews_of_one_run_only():
    """Consecutive previews of one group and run become one message; others are boundaries."""
    from threads.realtime import PREVIEW_TYPE, coalesce_previews

    def preview(run, p):
        return {"type": PREVIEW_TYPE, "runId": run, "previews": [{"p": p, "event": {}}]}

    first = preview("r1", 1)
    bell = {"type": "thread.events", "events": []}
    batch = [
        ("g", first),
        ("g", preview("r1", 2)),
        ("g", preview("r2", 1)),
        ("g", bell),
        ("g", preview("r1", 3)),
        ("h", preview("r1", 4)),
    ]

    out = coalesce_previews(batch)

    assert [
        (g, m.get("runId"), [x["p"] for x in m.get("previews", [])]) for g, m in out
    ] == [
        ("g", "r1", [1, 2]),
        ("g", "r2", [1]),
        ("g", None, []),
        ("g", "r1", [3]),
        ("h", "r1", [4]),
    ]
    assert out[2][1] is bell
    assert first["previews"] == [
        {"p": 1, "event": {}}
    ]  # the sender's message is untouched


def test_b1_only_a_preview_in_a_stream_waits_to_merge(monkeypatch):
    """A preview within the stream gap of the previous one lingers; a lone one does not."""
    from threads import realtime

    monkeypatch.setattr(realtime, "PREVIEW_LINGER_SECONDS", 0.003)
    monkeypatch.setattr(realtime, "PREVIEW_STREAM_GAP_SECONDS", 0.010)

    assert [
        realtime.preview_linger(since) for since in (0.001, 0.0099, 0.010, 2.5, 1e9)
    ] == [0.003, 0.003, 0.0, 0.0, 0.0]

    monkeypatch.setattr(realtime, "PREVIEW_LINGER_SECONDS", 0.0)
    assert realtime.preview_linger(0.001) == 0.0
