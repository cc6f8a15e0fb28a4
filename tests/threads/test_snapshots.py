"""Reconciling a remote agent's MESSAGES_SNAPSHOT with the thread (TC-08, TC-09).

Direct tests of :mod:`threads.snapshots` on a thread whose run was recorded
through the real recorder; the flows with a real remote agent (LangGraph) are in
``test_agui_snapshots.py``.
"""

from __future__ import annotations

import pytest

from agentcore.events import MessagesSnapshotEvent, RunStartedEvent, event_from_dict
from threads.models import Message, Run
from threads.recording import record_events
from threads.services import thread_create
from threads.snapshots import (
    REMOTE_ID,
    input_echo_thread_ids,
    message_remote_ids_record,
    snapshot_reconcile,
)

pytestmark = pytest.mark.django_db

WEATHER_ARGS = '{"city":"Oslo"}'


@pytest.fixture
def answered(user):
    """Return a thread and its run: assistant ``m-a`` called get_weather, answered by ``m-t``."""
    thread = thread_create(owner=user, title="weather", thread_id="t-snap")
    run = Run.objects.create(
        thread=thread, run_id="r-snap", status=Run.Status.RUNNING, agent="demo"
    )
    record_events(
        run=run,
        events=[
            {"type": "RUN_STARTED", "threadId": "t-snap", "runId": "r-snap"},
            {"type": "TEXT_MESSAGE_START", "messageId": "m-a", "role": "assistant"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m-a", "delta": "Checking."},
            {"type": "TEXT_MESSAGE_END", "messageId": "m-a"},
            {
                "type": "TOOL_CALL_START",
                "toolCallId": "call-1",
                "toolCallName": "get_weather",
                "parentMessageId": "m-a",
            },
            {"type": "TOOL_CALL_ARGS", "toolCallId": "call-1", "delta": WEATHER_ARGS},
            {"type": "TOOL_CALL_END", "toolCallId": "call-1"},
            {
                "type": "TOOL_CALL_RESULT",
                "messageId": "m-t",
                "toolCallId": "call-1",
                "content": "sunny",
                "role": "tool",
            },
        ],
    )
    run.refresh_from_db()
    return thread, run


def _snapshot(*messages):
    return event_from_dict({"type": "MESSAGES_SNAPSHOT", "messages": list(messages)})


def _assistant(message_id, content, call_id, arguments=WEATHER_ARGS):
    return {
        "id": message_id,
        "role": "assistant",
        "content": content,
        "toolCalls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": "get_weather", "arguments": arguments},
            }
        ],
    }


def _types(events):
    return [e.type for e in events]


def _ids(snapshot):
    return [m.id for m in snapshot.messages]


def test_messages_the_thread_holds_keep_the_thread_ids(answered):
    """The remote's own ids of a known call and its answer become the thread's; nothing added."""
    thread, run = answered
    snapshot = _snapshot(
        {"id": "u1", "role": "user", "content": "Weather in Oslo?"},
        _assistant("lg-a", "Checking.", "call-1"),
        {"id": "lg-t", "role": "tool", "toolCallId": "call-1", "content": "sunny"},
    )

    events, remote_ids = snapshot_reconcile(thread=thread, run=run, snapshot=snapshot)

    assert _types(events) == ["MESSAGES_SNAPSHOT"]
    assert _ids(events[-1]) == ["u1", "m-a", "m-t"]
    assert remote_ids == {"m-a": "lg-a", "m-t": "lg-t"}


def test_a_call_only_the_snapshot_shows_becomes_stream_events_before_it(answered):
    """A model that did not stream: its text and call are recorded first, arguments verbatim."""
    thread, run = answered
    arguments = '{"city": "Bergen"}'
    snapshot = _snapshot(_assistant("lg-b", "And Bergen.", "call-2", arguments))

    events, _ = snapshot_reconcile(thread=thread, run=run, snapshot=snapshot)

    assert _types(events) == [
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "MESSAGES_SNAPSHOT",
    ]
    start, args = events[3], events[4]
    assert (start.tool_call_id, start.tool_call_name) == ("call-2", "get_weather")
    assert args.delta == arguments
    assert isinstance(events[-1], MessagesSnapshotEvent)


def test_remote_ids_are_remembered_and_echoed_under_the_thread_ids(answered):
    """The remote's next input names its own ids; the RUN_STARTED echo shows the thread's."""
    thread, _ = answered
    message_remote_ids_record(thread=thread, remote_ids={"m-a": "lg-a"})
    started = event_from_dict(
        {
            "type": "RUN_STARTED",
            "threadId": "t-snap",
            "runId": "r-2",
            "input": {
                "threadId": "t-snap",
                "runId": "r-2",
                "state": {},
                "messages": [
                    {"id": "u1", "role": "user", "content": "Weather in Oslo?"},
                    {"id": "lg-a", "role": "assistant", "content": "Checking."},
                ],
                "tools": [],
                "context": [],
                "forwardedProps": {},
            },
        }
    )

    echoed = input_echo_thread_ids(thread=thread, event=started)

    assert Message.objects.get(message_id="m-a").metadata[REMOTE_ID] == "lg-a"
    assert isinstance(echoed, RunStartedEvent)
    assert [m.id for m in echoed.input.messages] == ["u1", "m-a"]
    assert [m.id for m in started.input.messages] == ["u1", "lg-a"]
