"""Runs: one at a time per thread, cancellation at an event boundary, lost workers, coalescing.

Cancellation drives ``orchestration.runs.drive_agent`` with a :class:`LoopAgent` over a
slow :class:`ScriptedProvider` script, exactly as ``run_execute`` does, and cancels
through ``run_cancel`` from another thread. Implements DC-01, FT-06, ER-01, LP-06.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
from django.db import connections, transaction

from agentcore.events import RunAgentInput
from agentcore.loop import LoopAgent
from agentcore.providers.scripted import ScriptedProvider, text, tool_call
from agentcore.tools import ToolContext, Toolset, define_tool
from demo.tools import DEMO_TOOLS
from orchestration.pipeline import run_execute
from orchestration.runs import drive_agent
from threads.exceptions import RunConflict
from threads.execution import enqueue
from threads.models import Event, Message, Run, Thread, ToolCall
from threads.recording import RunRecorder, thread_replay
from threads.selectors import thread_status
from threads.services import message_post, run_cancel, run_input_build
from threads.tasks import run_agent

#: Queries of one RunRecorder flush of a run with one tool call (STYLE.md 24).
FLUSH_QUERIES = 13
LONG_TEXT = "All work and no play makes Jack a dull boy. " * 40  # 1760 characters


def running_run(user: Any, *, thread_id: str = "t-run", run_id: str = "r-1") -> Run:
    """Return a run claimed by a worker (``running``) on a new demo thread."""
    thread = Thread.objects.create(thread_id=thread_id, owner=user, agent="demo")
    Message.objects.create(thread=thread, message_id="u1", role="user", content="go")
    return Run.objects.create(
        thread=thread, run_id=run_id, agent="demo", status=Run.Status.RUNNING
    )


def types_of(thread: Thread) -> list[str]:
    return list(
        Event.objects.filter(thread=thread)
        .order_by("seq")
        .values_list("type", flat=True)
    )


# -- one run at a time ---------------------------------------------------------------


@pytest.mark.django_db
def test_ft06_second_message_during_an_active_run_is_refused(user):
    """message_post raises RunConflict naming the active run and what to do; nothing is stored."""
    run = running_run(user)

    with pytest.raises(RunConflict) as refused:
        message_post(thread=run.thread, content="and another thing")

    assert str(refused.value) == (
        "run 'r-1' is still running on this thread; wait for it to finish or cancel it "
        "(POST /api/runs/<id>/cancel/) before posting a message"
    )
    assert refused.value.status == 409
    assert list(
        Message.objects.filter(thread=run.thread).values_list("message_id", flat=True)
    ) == ["u1"]
    assert Run.objects.filter(thread=run.thread).count() == 1


@pytest.mark.django_db
def test_ft06_message_while_calls_await_an_answer_is_refused(user):
    """A thread whose last run left calls unanswered takes no new message until they are answered."""
    run = running_run(user)
    run.status = Run.Status.AWAITING_TOOLS
    run.save()
    ToolCall.objects.create(
        thread=run.thread,
        run=run,
        tool_call_id="tc1",
        name="refund_order",
        state=ToolCall.State.AWAITING_APPROVAL,
    )

    with pytest.raises(RunConflict) as refused:
        message_post(thread=run.thread, content="hello?")

    assert str(refused.value) == (
        "tool calls ['tc1'] are waiting for an answer; an operator approves or rejects them "
        "in the approval queue, or cancel them with "
        f"POST /api/threads/{run.thread.thread_id}/cancel-pending/ (a reason is required)"
    )


# -- cancellation ----------------------------------------------------------------------


def drive_in_background(
    run: Run, provider: ScriptedProvider
) -> tuple[threading.Thread, list]:
    """Run ``drive_agent`` for ``run`` in a worker thread, as ``run_execute`` would."""
    errors: list[BaseException] = []
    agent = LoopAgent(provider, toolset=Toolset.assemble(DEMO_TOOLS), model="scripted")
    run_input = RunAgentInput.model_validate(run_input_build(run=run))

    def work() -> None:
        try:
            drive_agent(agent=agent, run_input=run_input, recorder=RunRecorder(run))
        except BaseException as error:
            errors.append(error)
        finally:
            connections.close_all()

    worker = threading.Thread(target=work, name=f"test-driver-{run.run_id}")
    worker.start()
    return worker, errors


def wait_for_event(run: Run, event_type: str, *, timeout: float = 20.0) -> None:
    """Wait until ``run`` has logged an ``event_type`` event, or fail saying so."""
    deadline = time.monotonic() + timeout
    while not Event.objects.filter(run=run, type=event_type).exists():
        if time.monotonic() > deadline:
            pytest.fail(
                f"run {run.run_id!r} logged no {event_type} within {timeout}s: "
                f"{types_of(run.thread)!r}"
            )
        time.sleep(0.01)


@pytest.mark.django_db(transaction=True)
def test_lp06_cancel_during_streamed_text_stops_at_an_event_boundary(user):
    """run_cancel mid-text: the message is closed, the run ends cancelled, nothing stays open."""
    run = running_run(user)
    worker, errors = drive_in_background(
        run, ScriptedProvider([text(LONG_TEXT)], delay=0.01)
    )
    wait_for_event(run, "TEXT_MESSAGE_CONTENT")

    # when
    run_cancel(run=run)
    worker.join(30)

    # then
    assert not worker.is_alive()
    assert errors == []
    assert not [t for t in threading.enumerate() if t.name == f"agent-{run.run_id}"]
    types = types_of(run.thread)
    assert types[:2] == ["RUN_STARTED", "TEXT_MESSAGE_START"]
    assert types[-2:] == ["TEXT_MESSAGE_END", "RUN_FINISHED"]
    assert set(types[2:-2]) == {"TEXT_MESSAGE_CONTENT"}
    finished = Event.objects.get(run=run, type="RUN_FINISHED").payload
    assert finished["outcome"] == {"type": "cancelled"}
    run.refresh_from_db()
    assert (run.status, run.outcome, run.cancel_requested) == (
        "cancelled",
        "cancelled",
        True,
    )
    message = Message.objects.get(thread=run.thread, role="assistant")
    deltas = "".join(
        Event.objects.filter(run=run, type="TEXT_MESSAGE_CONTENT")
        .order_by("seq")
        .values_list("payload__delta", flat=True)
    )
    assert message.content == deltas
    assert 0 < len(message.content) < len(LONG_TEXT)
    assert LONG_TEXT.startswith(message.content)
    assert thread_status(thread=run.thread) == "idle"


@pytest.mark.django_db(transaction=True)
def test_lp06_cancel_during_streamed_arguments_leaves_no_call_waiting(user, executor):
    """run_cancel mid-arguments: the call is closed and cancelled, and the thread takes a new message."""
    run = running_run(user)
    script = [
        tool_call("lookup_order", {"order_id": "A-" + "1" * 1200}, call_id="tc-long")
    ]
    worker, errors = drive_in_background(run, ScriptedProvider(script, delay=0.01))
    wait_for_event(run, "TOOL_CALL_ARGS")

    run_cancel(run=run)
    worker.join(30)

    assert not worker.is_alive()
    assert errors == []
    types = types_of(run.thread)
    assert types[:2] == ["RUN_STARTED", "TOOL_CALL_START"]
    assert types[-2:] == ["TOOL_CALL_END", "RUN_FINISHED"]
    assert set(types[2:-2]) == {"TOOL_CALL_ARGS"}
    run.refresh_from_db()
    assert (run.status, run.outcome, run.pending_tool_call_ids) == (
        "cancelled",
        "cancelled",
        [],
    )
    call = ToolCall.objects.get(thread=run.thread, tool_call_id="tc-long")
    assert call.state == ToolCall.State.CANCELLED
    assert thread_status(thread=run.thread) == "idle"
    # The thread is free: the next message starts a run.
    _, next_run = message_post(
        thread=run.thread, content="What is the weather in Oslo?"
    )
    executor.wait_for(lambda: Run.objects.get(pk=next_run.pk).status == "finished")


@pytest.mark.django_db(transaction=True)
def test_cancel_of_a_queued_run_finishes_it_cancelled_at_once(user):
    """A run no worker picked up yet is recorded as started and cancelled, and never runs."""
    thread = Thread.objects.create(thread_id="t-queued", owner=user)
    run = Run.objects.create(thread=thread, run_id="r-q", status=Run.Status.QUEUED)

    run_cancel(run=run)
    again = run_execute(run_pk=run.pk)

    assert types_of(thread) == ["RUN_STARTED", "RUN_FINISHED"]
    assert (again.status, again.outcome) == ("cancelled", "cancelled")


# -- a tool over its timeout (RT-07) -----------------------------------------------------


def _stalled_lookup(params: dict[str, Any], context: ToolContext) -> str:
    """Stall until the call's own signal says stop (a cooperative sync tool)."""
    deadline = time.monotonic() + 5  # never outlive the test
    while time.monotonic() < deadline:
        if context.cancel is not None and context.cancel.is_set():
            return "stopped"
        time.sleep(0.005)
    return "late"


#: An agent-side tool that always exceeds its timeout (toolsets entry below).
STALLING_TOOLS = (
    define_tool(
        name="stalled_lookup",
        description="Look something up (test tool: never finishes in time).",
        parameters=None,
        execute=_stalled_lookup,
        is_read_only=True,
        policy="auto",
        timeout=0.05,
    ),
)
STALLING_AGENT = {
    "stalling": {
        "provider_factory": "tests.threads.test_runs.stalling_provider",
        "model": "scripted",
        "toolsets": ["tests.threads.test_runs.STALLING_TOOLS"],
    }
}
STALLED_ANSWER = "The lookup timed out, so I answer from what I know."


def stalling_provider(*, model: str) -> ScriptedProvider:
    """Call ``stalled_lookup`` once, then answer in text (a fresh script per run)."""
    return ScriptedProvider(
        [tool_call("stalled_lookup", call_id="tc-stall"), text(STALLED_ANSWER)]
    )


@pytest.mark.django_db(transaction=True)
def test_rt07_a_timed_out_tool_in_an_orchestrated_run_lets_the_turn_go_on(
    user, settings
):
    """run_execute: the tool's timeout is the model's next input and the run finishes with its answer.

    Orchestration always gives the agent a cancel event; one call's timeout must not
    set it (the run used to end cancelled here).
    """
    settings.COUNTERSIGN_AGENTS = {**settings.COUNTERSIGN_AGENTS, **STALLING_AGENT}
    from threads.agent_config import toolset_load

    toolset_load.cache_clear()
    thread = Thread.objects.create(thread_id="t-stall", owner=user, agent="stalling")
    Message.objects.create(thread=thread, message_id="u1", role="user", content="go")
    run = Run.objects.create(
        thread=thread, run_id="r-stall", agent="stalling", status=Run.Status.QUEUED
    )

    done = run_execute(run_pk=run.pk)

    assert (done.status, done.outcome, done.cancel_requested) == (
        "finished",
        "success",
        False,
    )
    types = types_of(thread)
    assert types[0] == "RUN_STARTED"
    assert types[-1] == "RUN_FINISHED"
    assert types.index("TOOL_CALL_RESULT") < types.index("TEXT_MESSAGE_START")
    result = Event.objects.get(run=run, type="TOOL_CALL_RESULT").payload
    assert result["toolCallId"] == "tc-stall"
    assert result["metadata"] == {"error": "timeout"}
    finished = Event.objects.get(run=run, type="RUN_FINISHED").payload
    assert finished["outcome"] == {"type": "success"}
    answer = Message.objects.get(
        thread=thread, role="assistant", content=STALLED_ANSWER
    )
    assert answer.content == STALLED_ANSWER
    tool_message = Message.objects.get(thread=thread, role="tool")
    assert json.loads(tool_message.content)["error"] == "timeout"
    assert thread_status(thread=thread) == "idle"
    toolset_load.cache_clear()


# -- a worker that died ------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_er01_redelivered_run_of_a_dead_worker_ends_with_worker_lost(user, executor):
    """A run still 'running' when its task is delivered again is closed with RUN_ERROR worker_lost."""
    run = running_run(user)
    recorder = RunRecorder(run)
    recorder.record(
        [
            {"type": "RUN_STARTED", "threadId": "t-run", "runId": "r-1"},
            {"type": "TEXT_MESSAGE_START", "messageId": "a1", "role": "assistant"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "a1", "delta": "Half a sent"},
        ]
    )
    recorder.flush()

    # when: the broker redelivers the task (acks_late) to a live worker
    with transaction.atomic():
        enqueue(run_agent, run_pk=run.pk)
    executor.wait_for(lambda: Run.objects.get(pk=run.pk).status == Run.Status.ERROR)

    run.refresh_from_db()
    assert (run.error_code, run.status) == ("worker_lost", "error")
    assert run.error_message.startswith("The worker executing this run stopped")
    log = list(
        Event.objects.filter(thread=run.thread)
        .order_by("seq")
        .values_list("payload", flat=True)
    )
    assert [e["type"] for e in log] == [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_ERROR",
    ]
    assert log[-1] == {
        "type": "RUN_ERROR",
        "message": run.error_message,
        "code": "worker_lost",
    }
    assert Message.objects.get(message_id="a1").content == "Half a sent"
    # Delivered once more, it changes nothing.
    assert run_execute(run_pk=run.pk).status == "error"
    assert Event.objects.filter(thread=run.thread).count() == 5


# -- coalescing ----------------------------------------------------------------------------


def long_argument_stream(deltas: int) -> tuple[list[dict[str, Any]], str]:
    pieces = [f"{i:09d}," for i in range(deltas)]  # ten bytes each
    argument_text = '{"order_id": "' + "".join(pieces) + '"}'
    events = [
        {"type": "RUN_STARTED", "threadId": "t-run", "runId": "r-1"},
        {
            "type": "TOOL_CALL_START",
            "toolCallId": "tc1",
            "toolCallName": "lookup_order",
        },
        {"type": "TOOL_CALL_ARGS", "toolCallId": "tc1", "delta": '{"order_id": "'},
        *({"type": "TOOL_CALL_ARGS", "toolCallId": "tc1", "delta": p} for p in pieces),
        {"type": "TOOL_CALL_ARGS", "toolCallId": "tc1", "delta": '"}'},
        {"type": "TOOL_CALL_END", "toolCallId": "tc1"},
        {"type": "RUN_FINISHED", "threadId": "t-run", "runId": "r-1"},
    ]
    return events, argument_text


@pytest.mark.django_db
def test_dc01_hundreds_of_argument_deltas_cost_a_few_rows_and_replay_identically(user):
    """600 TOOL_CALL_ARGS deltas become 2 rows (a 4096-byte window), and the log replays the same."""
    run = running_run(user)
    events, argument_text = long_argument_stream(600)
    recorder = RunRecorder(run, coalesce_ms=60_000, coalesce_bytes=4096)

    recorder.record(events)
    recorder.flush()

    rows = list(Event.objects.filter(thread=run.thread).order_by("seq"))
    assert [r.type for r in rows] == [
        "RUN_STARTED",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "RUN_FINISHED",
    ]
    assert [r.seq for r in rows] == [1, 2, 3, 4, 5, 6]
    assert [len(r.payload["delta"]) for r in rows[2:4]] == [4104, 1912]
    assert rows[2].payload["delta"] + rows[3].payload["delta"] == argument_text
    call = ToolCall.objects.get(thread=run.thread)
    assert (call.arguments_text, call.state) == (argument_text, ToolCall.State.PENDING)
    run.refresh_from_db()
    assert (run.status, run.pending_tool_call_ids) == ("awaiting_tools", ["tc1"])

    # when: the thread is rebuilt from its log alone
    run.thread.delete()
    copy = thread_replay(
        payloads=[r.payload for r in rows], thread_id="t-run", owner=user
    )

    replayed = list(Event.objects.filter(thread=copy).order_by("seq"))
    assert [(r.seq, r.payload) for r in replayed] == [(r.seq, r.payload) for r in rows]
    copied_call = ToolCall.objects.get(thread=copy)
    assert (
        copied_call.tool_call_id,
        copied_call.name,
        copied_call.arguments_text,
        copied_call.arguments,
        copied_call.state,
    ) == ("tc1", "lookup_order", argument_text, call.arguments, call.state)
    copied_run = Run.objects.get(thread=copy)
    assert (
        copied_run.status,
        copied_run.outcome,
        copied_run.pending_tool_call_ids,
    ) == (run.status, run.outcome, run.pending_tool_call_ids)
    # (the user message "u1" was written outside the log, so it is not replayed)
    assert list(
        Message.objects.filter(thread=copy).values_list("message_id", "role", "content")
    ) == [("tc1", "assistant", "")]


@pytest.mark.django_db
@pytest.mark.parametrize("deltas", [3, 300])
def test_dc01_flush_query_count_does_not_grow_with_deltas(
    user, deltas, django_assert_max_num_queries
):
    """Flushing a whole run is a fixed number of queries, however many deltas it holds."""
    run = running_run(user)
    events, _ = long_argument_stream(deltas)
    recorder = RunRecorder(run, coalesce_ms=60_000, coalesce_bytes=1_000_000)

    # One flush, at the terminal event, writes the whole batch.
    with django_assert_max_num_queries(FLUSH_QUERIES):
        rows = recorder.record(events)

    assert [r.type for r in rows] == [
        "RUN_STARTED",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "RUN_FINISHED",
    ]


class GatedAgent:
    """An agent that streams one delta, then pauses until ``gate`` is set (or 30 s pass)."""

    def __init__(self, gate: threading.Event) -> None:
        self.gate = gate
        self.released = False

    async def run(self, run_input: Any, *, cancel: Any = None) -> Any:
        import asyncio

        from agentcore.events import (
            RunFinishedEvent,
            RunStartedEvent,
            TextMessageContentEvent,
            TextMessageEndEvent,
            TextMessageStartEvent,
        )

        ids = {"thread_id": run_input.thread_id, "run_id": run_input.run_id}
        yield RunStartedEvent(**ids)
        yield TextMessageStartEvent(message_id="m-paused", role="assistant")
        yield TextMessageContentEvent(message_id="m-paused", delta="Hel")
        self.released = await asyncio.to_thread(self.gate.wait, 30)
        yield TextMessageContentEvent(message_id="m-paused", delta="lo")
        yield TextMessageEndEvent(message_id="m-paused")
        yield RunFinishedEvent(**ids)


class GroupListener:
    """A channel-layer member of a thread's group on its own loop, as a server's consumer is.

    The loop is registered as the server loop (threads.realtime), so sends from the
    recording thread reach it on every layer, the in-memory one included.
    """

    def __init__(self, thread: Thread) -> None:
        import asyncio

        from threads.realtime import register_server_loop, thread_group_name

        self.group = thread_group_name(thread.pk)
        self.events: list[dict[str, Any]] = []
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.runner = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.runner.start()
        register_server_loop(self.loop)
        asyncio.run_coroutine_threadsafe(self._listen(), self.loop)
        assert self.ready.wait(10), "the listener never joined the thread's group"

    async def _listen(self) -> None:
        from channels.layers import get_channel_layer

        layer = get_channel_layer()
        channel = await layer.new_channel()
        await layer.group_add(self.group, channel)
        self.ready.set()
        while True:
            message = await layer.receive(channel)
            self.events.extend(message.get("events", []))

    def received(self, event_type: str) -> bool:
        return any(e["type"] == event_type for e in self.events)

    def stop(self) -> None:
        """Stop the loop, end its tasks and close it (channels_redis flushes its layer).

        A loop left unclosed is closed by the garbage collector whenever it runs,
        inside a later test's running loop: channels_redis' close hook then cannot
        flush, the close fails half done and the loop's sockets are left to their
        finalizers, which can close a descriptor number a later test reuses (a
        later test's HTTP client hung that way in CI).
        """
        import asyncio

        self.loop.call_soon_threadsafe(self.loop.stop)
        self.runner.join(10)
        pending = asyncio.all_tasks(self.loop)
        for task in pending:
            task.cancel()
        self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        self.loop.close()


@pytest.mark.django_db(transaction=True)
def test_b1_a_paused_stream_is_written_and_published_before_its_window_closes(user):
    """drive_agent flushes once the agent pauses, though the window (60 s) is still open.

    The delta is in the log and on the thread's group while the agent waits, and
    every event the group's doorbells carried is a log row with the same seq and
    payload: a doorbell is rung after its rows commit (previews, which come before,
    are tests.threads.test_ws_previews'). Implements DC-01, DC-02.
    """
    run = running_run(user)
    listener = GroupListener(run.thread)
    gate = threading.Event()
    agent = GatedAgent(gate)
    run_input = RunAgentInput.model_validate(run_input_build(run=run))
    errors: list[BaseException] = []

    def work() -> None:
        try:
            recorder = RunRecorder(run, coalesce_ms=60_000, pause_ms=0)
            drive_agent(agent=agent, run_input=run_input, recorder=recorder)
        except BaseException as error:
            errors.append(error)
        finally:
            connections.close_all()

    worker = threading.Thread(target=work, name="test-driver-paused")
    worker.start()
    try:
        wait_for_event(run, "TEXT_MESSAGE_CONTENT")
        deadline = time.monotonic() + 20
        while not listener.received("TEXT_MESSAGE_CONTENT"):
            assert time.monotonic() < deadline, listener.events
            time.sleep(0.01)
        gate.set()
        worker.join(30)
        deadline = time.monotonic() + 20
        while not listener.received("RUN_FINISHED"):
            assert time.monotonic() < deadline, listener.events
            time.sleep(0.01)
    finally:
        gate.set()
        listener.stop()

    assert errors == []
    assert agent.released  # the pause ended because the test saw the delta
    log = {e.seq: e.payload for e in Event.objects.filter(thread=run.thread)}
    received = {
        e["seq"]: {k: v for k, v in e.items() if k != "seq"} for e in listener.events
    }
    assert received == {seq: log[seq] for seq in received}
    assert [
        log[s]["delta"] for s in sorted(log) if log[s]["type"] == "TEXT_MESSAGE_CONTENT"
    ] == ["Hel", "lo"]
    assert (
        Message.objects.get(thread=run.thread, message_id="m-paused").content == "Hello"
    )
