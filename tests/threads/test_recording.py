"""record_events / RunRecorder: log, projection, constraints, violations, replay."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from threads.models import Event, Message, Run, Thread, ToolCall
from threads.recording import RunRecorder, record_events

pytestmark = pytest.mark.django_db


def _thread_and_run(
    user, *, thread_id: str = "t1", run_id: str = "r1"
) -> tuple[Thread, Run]:
    thread = Thread.objects.create(thread_id=thread_id, owner=user)
    run = Run.objects.create(thread=thread, run_id=run_id, status=Run.Status.RUNNING)
    return thread, run


def _pending_stream(thread_id: str = "t1", run_id: str = "r1") -> list[dict]:
    return [
        {
            "type": "RUN_STARTED",
            "threadId": thread_id,
            "runId": run_id,
            "protocolVersion": "1.0",
        },
        {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "Let me "},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "check."},
        {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
        {
            "type": "TOOL_CALL_START",
            "toolCallId": "tc1",
            "toolCallName": "get_weather",
            "parentMessageId": "m1",
        },
        {"type": "TOOL_CALL_ARGS", "toolCallId": "tc1", "delta": '{"city":'},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "tc1", "delta": '"Oslo"}'},
        {"type": "TOOL_CALL_END", "toolCallId": "tc1"},
        {
            "type": "TOOL_CALL_RESULT",
            "messageId": "m2",
            "toolCallId": "tc1",
            "content": "sunny",
            "role": "tool",
        },
        {
            "type": "TOOL_CALL_START",
            "toolCallId": "tc2",
            "toolCallName": "refund_order",
            "parentMessageId": "m1",
        },
        {
            "type": "TOOL_CALL_ARGS",
            "toolCallId": "tc2",
            "delta": '{"order_id":"A-1001",',
        },
        {"type": "TOOL_CALL_ARGS", "toolCallId": "tc2", "delta": '"amount":25.0'},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "tc2", "delta": "}"},
        {"type": "TOOL_CALL_END", "toolCallId": "tc2"},
        {
            "type": "RUN_FINISHED",
            "threadId": thread_id,
            "runId": run_id,
            "outcome": {"type": "success", "pendingToolCallIds": ["tc2"]},
        },
    ]


def test_dc01_record_events_projects_messages_calls_and_run(user):
    """Events land in the log with gapless seq and project onto rows (DC-01, FT-04)."""
    thread, run = _thread_and_run(user)

    rows = record_events(run=run, events=_pending_stream())

    # Deltas of one item that follow each other are coalesced into one row.
    assert [r.type for r in rows] == [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "RUN_FINISHED",
    ]
    assert [r.seq for r in rows] == list(range(1, 13))
    assert rows[2].payload == {
        "type": "TEXT_MESSAGE_CONTENT",
        "messageId": "m1",
        "delta": "Let me check.",
    }
    thread.refresh_from_db()
    assert thread.next_seq == 13
    assistant = Message.objects.get(thread=thread, message_id="m1")
    assert (assistant.role, assistant.content) == ("assistant", "Let me check.")
    tool_message = Message.objects.get(thread=thread, message_id="m2")
    assert (tool_message.role, tool_message.tool_call_id, tool_message.content) == (
        "tool",
        "tc1",
        "sunny",
    )
    weather = ToolCall.objects.get(thread=thread, tool_call_id="tc1")
    assert (weather.arguments_text, weather.arguments, weather.state) == (
        '{"city":"Oslo"}',
        {"city": "Oslo"},
        ToolCall.State.SUCCEEDED,
    )
    refund = ToolCall.objects.get(thread=thread, tool_call_id="tc2")
    assert refund.arguments == {"order_id": "A-1001", "amount": 25.0}
    assert refund.state == ToolCall.State.PENDING
    run.refresh_from_db()
    assert (run.status, run.outcome, run.pending_tool_call_ids) == (
        Run.Status.AWAITING_TOOLS,
        "success",
        ["tc2"],
    )


def test_fT05_pending_derived_when_list_absent(user):
    """An absent pendingToolCallIds never means nothing pending (FT-05)."""
    _thread, run = _thread_and_run(user)
    events = _pending_stream()
    events[-1] = {"type": "RUN_FINISHED", "threadId": "t1", "runId": "r1"}

    record_events(run=run, events=events)

    run.refresh_from_db()
    assert run.pending_tool_call_ids == ["tc2"]
    assert run.status == Run.Status.AWAITING_TOOLS


def test_tc03_unparseable_argument_text_is_kept_verbatim(user):
    """Malformed argument text is stored exactly and parses to null (TC-03, TC-05)."""
    _thread, run = _thread_and_run(user)
    events = [
        {"type": "RUN_STARTED", "threadId": "t1", "runId": "r1"},
        {"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "x"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": "{'city': Oslo"},
        {"type": "TOOL_CALL_END", "toolCallId": "c"},
        {"type": "RUN_FINISHED", "threadId": "t1", "runId": "r1"},
    ]
    record_events(run=run, events=events)
    call = ToolCall.objects.get(tool_call_id="c")
    assert (call.arguments_text, call.arguments) == ("{'city': Oslo", None)
    # No parentMessageId: the call's assistant message takes the call's id.
    assert Message.objects.get(message_id="c").role == "assistant"


def test_er01_violation_keeps_valid_prefix_and_ends_run_with_error(user):
    """A fatal violation records what was valid, closes open items and ends the run (ER-01)."""
    thread, run = _thread_and_run(user)
    events = [
        {"type": "RUN_STARTED", "threadId": "t1", "runId": "r1"},
        {"type": "TEXT_MESSAGE_START", "messageId": "m1"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "partial"},
        {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "f"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "zz", "delta": "{}"},  # never opened
        {"type": "TOOL_CALL_END", "toolCallId": "c1"},
    ]
    recorder = RunRecorder(run)
    recorder.record(events)

    assert recorder.violation is not None
    assert recorder.violation.rule == "ER-01"
    assert recorder.violation.index == 4
    types = list(Event.objects.filter(thread=thread).values_list("type", flat=True))
    assert types[:4] == [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TOOL_CALL_START",
    ]
    assert types[-1] == "RUN_ERROR"
    assert set(types[4:-1]) == {"TEXT_MESSAGE_END", "TOOL_CALL_END"}
    error = Event.objects.get(thread=thread, type="RUN_ERROR").payload
    assert error["code"] == "protocol_violation"
    assert "ER-01" in error["message"]
    assert "zz" in error["message"]
    run.refresh_from_db()
    assert run.status == Run.Status.ERROR
    assert Message.objects.get(message_id="m1").content == "partial"
    assert ToolCall.objects.get(tool_call_id="c1").state == ToolCall.State.CANCELLED
    # Events after the violation are ignored, not written.
    recorder.record([{"type": "TEXT_MESSAGE_START", "messageId": "m9"}])
    assert not Message.objects.filter(message_id="m9").exists()


def test_dc04_second_tool_message_for_one_call_refused_by_database(user):
    """The database itself refuses a second tool message for one toolCallId (DC-04, FT-06)."""
    thread, _run = _thread_and_run(user)
    Message.objects.create(
        thread=thread,
        message_id="t-a",
        role="tool",
        tool_call_id="tc9",
        content="first",
    )
    with pytest.raises(IntegrityError), transaction.atomic():
        Message.objects.create(
            thread=thread,
            message_id="t-b",
            role="tool",
            tool_call_id="tc9",
            content="second",
        )
    assert Message.objects.filter(tool_call_id="tc9").count() == 1


def test_database_refuses_duplicate_ids_per_thread(user):
    """toolCallId, messageId, runId and seq are unique per thread, in the database."""
    thread, run = _thread_and_run(user)
    other = Thread.objects.create(thread_id="t2", owner=user)
    ToolCall.objects.create(thread=thread, run=run, tool_call_id="x", name="f")
    Message.objects.create(thread=thread, message_id="m", role="user", content="hi")
    Event.objects.create(thread=thread, run=run, seq=1, type="RUN_STARTED", payload={})
    for make in (
        lambda: ToolCall.objects.create(
            thread=thread, run=run, tool_call_id="x", name="g"
        ),
        lambda: Message.objects.create(
            thread=thread, message_id="m", role="user", content="b"
        ),
        lambda: Run.objects.create(thread=thread, run_id="r1"),
        lambda: Event.objects.create(
            thread=thread, seq=1, type="RUN_FINISHED", payload={}
        ),
        lambda: Message.objects.create(
            thread=thread, message_id="n", role="tool", content=""
        ),
    ):
        with pytest.raises(IntegrityError), transaction.atomic():
            make()
    # The same ids on another thread are fine.
    Run.objects.create(thread=other, run_id="r1")
    Message.objects.create(thread=other, message_id="m", role="user", content="hi")


def test_continuation_run_is_unique_per_run(user):
    """A run gets at most one continuation run, enforced by the database."""
    thread, run = _thread_and_run(user)
    Run.objects.create(thread=thread, run_id="r2", continues=run)
    with pytest.raises(IntegrityError), transaction.atomic():
        Run.objects.create(thread=thread, run_id="r3", continues=run)


def _snapshot(thread: Thread) -> dict:
    return {
        "messages": list(
            Message.objects.filter(thread=thread)
            .order_by("position", "id")
            .values_list(
                "message_id", "role", "content", "tool_call_id", "error", "position"
            )
        ),
        "calls": list(
            ToolCall.objects.filter(thread=thread)
            .order_by("position")
            .values_list(
                "tool_call_id",
                "name",
                "parent_message_id",
                "arguments_text",
                "arguments",
                "state",
                "position",
            )
        ),
        "runs": list(
            Run.objects.filter(thread=thread)
            .order_by("created_at", "id")
            .values_list(
                "run_id", "status", "outcome", "pending_tool_call_ids", "error_message"
            )
        ),
        "events": list(
            Event.objects.filter(thread=thread)
            .order_by("seq")
            .values_list("seq", "type", "payload")
        ),
        "state": Thread.objects.get(pk=thread.pk).state,
    }


def test_event_log_replay_rebuilds_identical_rows(user):
    """Replaying a thread's log into an empty thread rebuilds the same rows (DC-01)."""
    thread, run = _thread_and_run(user)
    record_events(run=run, events=_pending_stream())
    run2 = Run.objects.create(thread=thread, run_id="r2", status=Run.Status.RUNNING)
    record_events(
        run=run2,
        events=[
            {"type": "RUN_STARTED", "threadId": "t1", "runId": "r2"},
            {"type": "STATE_SNAPSHOT", "snapshot": {"step": 1, "items": []}},
            {
                "type": "STATE_DELTA",
                "delta": [{"op": "add", "path": "/items/-", "value": "a"}],
            },
            {"type": "TEXT_MESSAGE_START", "messageId": "m3"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m3", "delta": "Done"},
            {"type": "TEXT_MESSAGE_END", "messageId": "m3"},
            {"type": "RUN_FINISHED", "threadId": "t1", "runId": "r2"},
        ],
    )
    original = _snapshot(thread)
    payloads = [e.payload for e in Event.objects.filter(thread=thread).order_by("seq")]
    thread.delete()  # an empty database for this thread

    from threads.recording import thread_replay

    copy = thread_replay(payloads=payloads, thread_id="t1", owner=user)

    replayed = _snapshot(copy)
    assert replayed == {**original, "events": replayed["events"]}
    assert [(s, t, p) for s, t, p in replayed["events"]] == original["events"]
    assert replayed["state"] == {"step": 1, "items": ["a"]}


def test_bc25_thought_signature_survives_the_database(user):
    """Provider metadata on TOOL_CALL_START is stored and replayed with the call (BC25)."""
    from agentcore.events import message_from_dict
    from threads.selectors import thread_messages_agui

    thread, run = _thread_and_run(user)
    signature = {"gemini": {"thought_signature": "c2lnbmF0dXJl", "synthetic_id": True}}
    record_events(
        run=run,
        events=[
            {"type": "RUN_STARTED", "threadId": "t1", "runId": "r1"},
            {
                "type": "TOOL_CALL_START",
                "toolCallId": "call_1",
                "toolCallName": "get_weather",
                "parentMessageId": "m1",
                "metadata": signature,
            },
            {
                "type": "TOOL_CALL_ARGS",
                "toolCallId": "call_1",
                "delta": '{"city":"Oslo"}',
            },
            {
                "type": "TOOL_CALL_END",
                "toolCallId": "call_1",
                "metadata": {"truncated": False},
            },
            {"type": "RUN_FINISHED", "threadId": "t1", "runId": "r1"},
        ],
    )

    history = [message_from_dict(m) for m in thread_messages_agui(thread=thread)]
    (assistant,) = [m for m in history if m.role == "assistant"]
    assert assistant.tool_calls[0].metadata == signature
    assert assistant.tool_calls[0].function.arguments == '{"city":"Oslo"}'


def test_admin_shows_a_recorded_thread_read_only(user, admin_client):
    """The admin shows a thread's runs, messages and calls, and links its event log."""
    thread, run = _thread_and_run(user)
    record_events(run=run, events=_pending_stream())

    page = admin_client.get(f"/admin/threads/thread/{thread.pk}/change/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "refund_order" in text
    assert "Let me check." in text
    assert "12 events" in text
    events = admin_client.get(f"/admin/threads/event/?thread__id__exact={thread.pk}")
    assert events.status_code == 200
    assert "TOOL_CALL_RESULT" in events.content.decode()
    # History is read-only: no add, change or delete of events, messages or calls.
    for model in ("event", "message", "toolcall"):
        assert admin_client.get(f"/admin/threads/{model}/add/").status_code == 403
    first = Event.objects.filter(thread=thread).first()
    assert (
        admin_client.post(
            f"/admin/threads/event/{first.pk}/delete/", {"post": "yes"}
        ).status_code
        == 403
    )
    assert Event.objects.filter(thread=thread).count() == 12


def test_bc30_relayed_snapshot_keeps_the_result_the_remote_omitted(user):
    """A MESSAGES_SNAPSHOT that omits the tool message TOOL_CALL_RESULT minted is
    recorded (and so relayed) with it, under the same id (BC30, threads.snapshots)."""
    from tests.cases import load_case

    case = load_case("BC30")
    _, run = _thread_and_run(user)

    record_events(run=run, events=case["input"]["agui_stream"])

    snapshot = Event.objects.get(run=run, type="MESSAGES_SNAPSHOT").payload
    expected = case["expected"]["snapshot_messages"]
    # The user message is the remote's own (the thread never heard of it).
    assert snapshot["messages"] == expected
    assert list(
        Message.objects.filter(thread=run.thread, role="tool").values_list(
            "message_id", "tool_call_id"
        )
    ) == [("m_t1", "call_1")]
