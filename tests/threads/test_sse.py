"""web.sse: the SSE framing and ``follow_log``, the generator behind both AG-UI endpoints.

``follow_log`` is driven directly on the test's event loop (as the ASGI server
drives it). With the log re-read and keep-alive intervals pushed out of reach, a
frame can only arrive because the run's worker rang the doorbell: on the embedded
pool from another thread, or on a Celery worker through Redis. Implements DC-02.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from tests.agentcore.helpers import collapsed
from threads.models import Event, Run, Thread
from threads.recording import RunRecorder
from threads.services import message_post, thread_create
from web.sse import KEEPALIVE, follow_log, sse_frame

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("close_thread_connections"),
]


async def next_frame(stream: AsyncIterator[str], *, timeout: float = 30.0) -> str:
    try:
        return await asyncio.wait_for(anext(stream), timeout)
    except TimeoutError:
        pytest.fail(f"no SSE frame within {timeout}s")


def payload_of(frame: str) -> dict[str, Any]:
    """Return the frame's event as logged: without the timestamp the wire adds."""
    (data,) = [line for line in frame.split("\n") if line.startswith("data: ")]
    event = json.loads(data[len("data: ") :])
    assert isinstance(event.pop("timestamp", None), int), "every SSE event is stamped"
    return event


def record_silently(run: Run, events: list[dict[str, Any]]) -> None:
    recorder = RunRecorder(run, publish=False)
    recorder.record(events)
    recorder.flush()


def test_sse_frame_is_one_lf_framed_data_line_with_the_seq_as_id():
    frame = sse_frame({"type": "RUN_STARTED", "threadId": "t", "runId": "r"}, seq=7)

    assert frame == 'id: 7\ndata: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\n'


async def test_follow_log_opens_with_a_comment_and_keeps_alive_while_silent(user):
    """A silent thread gets the opening comment, then a keep-alive comment per interval."""
    thread = await Thread.objects.acreate(thread_id="silent", owner=user)
    stream = follow_log(thread=thread, after=0, keepalive=0.05)

    frames = [await next_frame(stream) for _ in range(3)]
    await stream.aclose()

    assert frames == [KEEPALIVE, KEEPALIVE, KEEPALIVE] == [": keep-alive\n\n"] * 3


async def test_follow_log_for_a_run_sends_only_its_events_and_ends_at_its_terminal(
    user, settings
):
    """With ``run``, other runs' rows are skipped and the stream stops after RUN_FINISHED."""
    settings.COUNTERSIGN = {"SOCKET_POLL_SECONDS": 0.05}
    thread = await Thread.objects.acreate(thread_id="two-runs", owner=user)
    first = await Run.objects.acreate(
        thread=thread, run_id="r1", status=Run.Status.RUNNING
    )
    await sync_to_async(record_silently)(
        first,
        [
            {"type": "RUN_STARTED", "threadId": "two-runs", "runId": "r1"},
            {"type": "RUN_FINISHED", "threadId": "two-runs", "runId": "r1"},
        ],
    )
    second = await Run.objects.acreate(
        thread=thread, run_id="r2", status=Run.Status.RUNNING
    )
    await sync_to_async(record_silently)(
        second,
        [
            {"type": "RUN_STARTED", "threadId": "two-runs", "runId": "r2"},
            {"type": "STEP_STARTED", "stepName": "think"},
            {"type": "STEP_FINISHED", "stepName": "think"},
            {"type": "RUN_FINISHED", "threadId": "two-runs", "runId": "r2"},
        ],
    )

    frames = [frame async for frame in follow_log(thread=thread, after=0, run=second)]

    assert frames[0] == KEEPALIVE
    assert [(f.split("\n")[0], payload_of(f)["type"]) for f in frames[1:]] == [
        ("id: 3", "RUN_STARTED"),
        ("id: 4", "STEP_STARTED"),
        ("id: 5", "STEP_FINISHED"),
        ("id: 6", "RUN_FINISHED"),
    ]


async def test_dc02_follow_log_is_woken_by_the_doorbell_of_a_worker(
    user, executor, settings
):
    """A run on the embedded pool or a Celery worker reaches the stream with polling disabled."""
    settings.COUNTERSIGN = {
        "SOCKET_POLL_SECONDS": 3600.0,
        "SSE_KEEPALIVE_SECONDS": 3600.0,
    }
    thread = await sync_to_async(thread_create)(owner=user, title="sse")
    stream = follow_log(thread=thread, after=0)
    assert (
        await next_frame(stream) == KEEPALIVE
    )  # subscribed and caught up; now waiting

    await sync_to_async(message_post)(
        thread=thread, content="What is the weather in Oslo?"
    )
    frames = [await next_frame(stream)]
    while payload_of(frames[-1])["type"] != "RUN_FINISHED":
        frames.append(await next_frame(stream))
    await stream.aclose()

    log = await sync_to_async(list)(
        Event.objects.filter(thread=thread)
        .order_by("seq")
        .values_list("seq", "payload")
    )
    assert [(int(f.split("\n")[0][4:]), payload_of(f)) for f in frames] == log
    assert collapsed([payload_of(f) for f in frames]) == [
        "RUN_STARTED",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]
