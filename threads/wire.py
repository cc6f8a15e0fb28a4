"""The client-visible AG-UI run: one run per request, whatever Countersign does inside it.

A POST to ``/agui/<agent>/`` (or a posted message, or a continuation nobody
requested, such as the one after an operator's decision) opens one *wire run*:
Countersign writes its ``RUN_STARTED`` (carrying only what the client sent) when
the run is created. The agent's own runs are *segments* of it: their events are
streamed, their own ``RUN_STARTED`` and a ``RUN_FINISHED`` that leaves calls for
Countersign are not (:class:`threads.recording.RunRecorder`). Calls Countersign
answers itself are reported in the wire run as ``TOOL_CALL_RESULT`` as soon as
they are answered, and the agent continues in a new segment of the same wire run.
The wire run ends when the agent is done, needs the client (its frontend tools,
named in ``pendingToolCallIds``) or needs a human (an ``interrupt`` outcome whose
interrupts the approval workflow supplies through :func:`threads.interrupt_sources.interrupt_source_register`).
The log holds exactly the wire, so ``GET /agui/threads/<id>/events`` replays what
the POSTs streamed. Implements FT-03, FT-04, FT-08, IR-01, IR-04, IR-06.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from agentcore.events import PROTOCOL_VERSION, BaseEvent, ToolCallResultEvent
from threads.interrupt_sources import (  # noqa: F401  (re-exported)
    InterruptSource,
    interrupt_source_register,
    open_interrupts,
)
from threads.locks import run_lock
from threads.models import Run, Thread, ToolCall
from threads.recording import (
    record_wire_events,
    unreported_application_results,
    wire_usage,
)
from threads.transitions import run_transition, run_wire_transition

#: Call states in which Countersign is still answering a call by itself.
_ANSWERING_STATES = frozenset({ToolCall.State.APPROVED, ToolCall.State.EXECUTING})


def wire_run_current(*, thread: Thread) -> Run | None:
    """Return ``thread``'s open wire run, or ``None`` (at most one is open at a time)."""
    return (
        Run.objects.filter(thread=thread, wire_state=Run.WireState.OPEN)
        .order_by("-created_at", "-id")
        .first()
    )


def wire_run_open(*, run: Run, run_input: dict[str, Any] | None) -> None:
    """Make ``run`` a client-visible run and write its ``RUN_STARTED``.

    ``run_input`` is the ``RunAgentInput`` the client sent (echoed as
    ``RUN_STARTED.input``), or ``None`` for a run nobody requested. Results that
    Countersign wrote while no wire run was open follow at once, in the same
    append as the ``RUN_STARTED`` (one ``next_seq`` advance, B2): ``run`` is the
    thread's open wire run now, at most one is open at a time. A ``run`` created
    with ``wire_state`` open already (``run_create``) is not updated again. Must
    run inside the transaction that created ``run``.
    """
    run_wire_transition(run=run, to=Run.WireState.OPEN)
    started: dict[str, Any] = {
        "type": "RUN_STARTED",
        "threadId": run.thread.agui_id,
        "runId": run.run_id,
        "protocolVersion": PROTOCOL_VERSION,
    }
    if run.parent_run_id is not None and run.parent_run is not None:
        started["parentRunId"] = run.parent_run.run_id
    events: list[BaseEvent | dict[str, Any]] = [started]
    events += _unreported_results(thread=run.thread)
    record_wire_events(run=run, events=events, run_input=run_input)


def wire_results_report(*, thread: Thread) -> int:
    """Report Countersign's not yet reported results in the open wire run; return how many.

    Nothing is written while no wire run is open: the next one reports them right
    after its ``RUN_STARTED``. Implements FT-09 (agent-side answers in-stream), BC21.
    """
    wire = wire_run_current(thread=thread)
    if wire is None:
        return 0
    events = _unreported_results(thread=thread)
    record_wire_events(run=wire, events=events)
    return len(events)


def _unreported_results(*, thread: Thread) -> list[ToolCallResultEvent]:
    """Return a ``TOOL_CALL_RESULT`` for each of ``thread``'s unreported application results."""
    return [
        ToolCallResultEvent(
            message_id=m.message_id,
            tool_call_id=m.tool_call_id or "",
            content=m.content,
            role="tool",
            metadata={"error": m.error} if m.error else None,
        )
        for m in unreported_application_results(thread=thread)
    ]


def wire_run_close_if_waiting(*, run: Run, wire: Run | None = None) -> bool:
    """End the wire run of ``awaiting_tools`` ``run`` once only a human or the client can go on.

    Returns whether it wrote the wire's terminal event. ``wire`` is the open wire
    run to end, by default ``run``'s own; a resume's continuation, created before
    the resumed calls were answered, is passed here. While Countersign is still
    answering one of the run's calls (approved, executing) the wire run stays
    open. A call whose outcome became unknown (its worker died mid-execution of a
    tool that may not run twice) ends it with ``RUN_ERROR`` code
    ``outcome_unknown`` (:func:`wire_run_fail_outcome_unknown`). Open approval
    requests end it with ``{type:"interrupt", interrupts}`` (IR-01); otherwise
    the client's frontend calls still unanswered are its ``pendingToolCallIds``
    (FT-04). Must run holding ``run``'s lock.
    """
    if not run.managed:
        return False
    wire = run_lock(run_pk=(wire or run.wire_run).pk)
    if wire.wire_state != Run.WireState.OPEN:
        return False
    calls = {
        c.tool_call_id: c
        for c in ToolCall.objects.filter(
            thread_id=run.thread_id, tool_call_id__in=run.pending_tool_call_ids
        ).unanswered()
    }
    if any(c.state in _ANSWERING_STATES for c in calls.values()):
        return False
    unknown = [c for c in calls.values() if c.state == ToolCall.State.OUTCOME_UNKNOWN]
    if unknown:
        wire_run_fail_outcome_unknown(wire=wire, calls=unknown)
        return True
    if wire.pk != run.wire_run.pk:
        # A resume's continuation waits for its calls' answers, and gets them.
        return False
    interrupts = open_interrupts(run=run)
    outcome: dict[str, Any]
    if interrupts:
        outcome = {"type": "interrupt", "interrupts": interrupts}
    else:
        pending = [
            call_id
            for call_id in run.pending_tool_call_ids
            if call_id in calls and calls[call_id].state == ToolCall.State.PENDING
        ]
        outcome = {"type": "success"}
        if pending:
            outcome["pendingToolCallIds"] = pending
    wire_run_finish(wire=wire, outcome=outcome)
    return True


def wire_run_finish(*, wire: Run, outcome: dict[str, Any]) -> None:
    """Write open wire run ``wire``'s ``RUN_FINISHED`` with ``outcome`` and close it.

    ``outcome`` is an AG-UI outcome object (``{"type": "success"|"interrupt"|
    "cancelled", ...}``); the token usage of every segment is summed in. Must run
    holding ``wire``'s lock, with every item of its segments closed.
    """
    finished: dict[str, Any] = {
        "type": "RUN_FINISHED",
        "threadId": wire.thread.agui_id,
        "runId": wire.run_id,
        "outcome": outcome,
    }
    usage = wire_usage(wire)
    if usage:
        finished["usage"] = usage
    with transaction.atomic():
        record_wire_events(run=wire, events=[finished])
        run_wire_transition(run=wire, to=Run.WireState.CLOSED)


def wire_run_close_cancelled(*, run: Run) -> bool:
    """End the open wire run of ``run`` with ``{type:"cancelled"}``; return whether it did.

    For a client's run cancelled while Countersign answered its calls (no segment
    is running to write its own cancelled ``RUN_FINISHED``). IR-01: no interrupts.
    Must run inside a transaction; takes the wire run's lock.
    """
    if not run.managed:
        return False
    wire = run_lock(run_pk=run.wire_run.pk)
    if wire.wire_state != Run.WireState.OPEN:
        return False
    wire_run_finish(wire=wire, outcome={"type": "cancelled"})
    return True


#: ``RUN_ERROR.code`` of a client's run that cannot go on because a call's outcome is unknown.
OUTCOME_UNKNOWN_CODE = "outcome_unknown"


def wire_run_fail_outcome_unknown(*, wire: Run, calls: list[ToolCall]) -> None:
    """End open wire run ``wire`` with ``RUN_ERROR`` code ``outcome_unknown`` for ``calls``.

    Nobody knows whether the calls' side effects happened, so the run neither
    succeeds nor asks the client: it fails, saying which calls, and that an
    operator establishes what happened (``POST /api/approvals/<id>/resolve/``),
    after which Countersign continues the thread in a run of its own (followed
    on ``GET /agui/threads/<threadId>/events``). A resume's continuation that
    never started (``wire`` itself still ``queued``) ends in ``error`` and stops
    waiting for the calls, so that later run is the one continuing them. Must run
    holding ``wire``'s lock. Implements docs/agui.md "Outcome unknown", IR-01.
    """
    names = ", ".join(f"{c.name} ({c.tool_call_id})" for c in calls)
    message = (
        f"The outcome of {names} is unknown: the worker executing it stopped "
        "mid-call and the tool may not run twice. An operator must find out whether "
        "it happened and resolve it in the approval queue; the thread continues in "
        "a new run after that (follow GET /agui/threads/"
        f"{wire.thread.thread_id}/events)."
    )
    with transaction.atomic():
        record_wire_events(
            run=wire,
            events=[
                {"type": "RUN_ERROR", "message": message, "code": OUTCOME_UNKNOWN_CODE}
            ],
        )
        run_wire_transition(run=wire, to=Run.WireState.CLOSED)
        if wire.status == Run.Status.QUEUED:
            run_transition(run=wire, to=Run.Status.RUNNING, save=False)
            run_transition(run=wire, to=Run.Status.ERROR, save=False)
            wire.error_code = OUTCOME_UNKNOWN_CODE
            wire.error_message = message
            wire.finished_at = timezone.now()
            wire.continues = None
            wire.save(
                update_fields=[
                    "status",
                    "error_code",
                    "error_message",
                    "finished_at",
                    "continues",
                ]
            )
