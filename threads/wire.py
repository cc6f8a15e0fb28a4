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
interrupts the approval workflow supplies through :func:`interrupt_source_register`).
The log holds exactly the wire, so ``GET /agui/threads/<id>/events`` replays what
the POSTs streamed. Implements FT-03, FT-04, FT-08, IR-01, IR-04, IR-06.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import transaction

from agentcore.events import PROTOCOL_VERSION, ToolCallResultEvent
from threads.locks import run_lock
from threads.models import Run, Thread, ToolCall
from threads.recording import (
    WIRE_CLOSED,
    WIRE_OPEN,
    record_wire_events,
    unreported_application_results,
    wire_usage,
)

#: Functions returning the open interrupts (AG-UI ``Interrupt`` JSON objects) of an
#: ``awaiting_tools`` run; the approval workflow registers one (approvals.apps).
InterruptSource = Callable[[Run], list[dict[str, Any]]]
_INTERRUPT_SOURCES: list[InterruptSource] = []

#: Call states in which Countersign is still answering a call by itself.
_ANSWERING_STATES = frozenset({ToolCall.State.APPROVED, ToolCall.State.EXECUTING})


def interrupt_source_register(source: InterruptSource) -> None:
    """Register ``source`` as a provider of a run's open interrupts (idempotent)."""
    if source not in _INTERRUPT_SOURCES:
        _INTERRUPT_SOURCES.append(source)


def open_interrupts(*, run: Run) -> list[dict[str, Any]]:
    """Return the open interrupts of ``run``, from every registered source, in call order."""
    return [item for source in _INTERRUPT_SOURCES for item in source(run)]


def wire_run_current(*, thread: Thread) -> Run | None:
    """Return ``thread``'s open wire run, or ``None`` (at most one is open at a time)."""
    return (
        Run.objects.filter(thread=thread, wire_state=WIRE_OPEN)
        .order_by("-created_at", "-id")
        .first()
    )


def wire_run_open(*, run: Run, run_input: dict[str, Any] | None) -> None:
    """Make ``run`` a client-visible run and write its ``RUN_STARTED``.

    ``run_input`` is the ``RunAgentInput`` the client sent (echoed as
    ``RUN_STARTED.input``), or ``None`` for a run nobody requested. Results that
    Countersign wrote while no wire run was open follow at once. Must run inside
    the transaction that created ``run``.
    """
    Run.objects.filter(pk=run.pk).update(wire_state=WIRE_OPEN)
    run.wire_state = WIRE_OPEN
    started: dict[str, Any] = {
        "type": "RUN_STARTED",
        "threadId": run.thread.thread_id,
        "runId": run.run_id,
        "protocolVersion": PROTOCOL_VERSION,
    }
    if run.parent_run_id is not None and run.parent_run is not None:
        started["parentRunId"] = run.parent_run.run_id
    if run_input is not None:
        started["input"] = run_input
    record_wire_events(run=run, events=[started])
    wire_results_report(thread=run.thread)


def wire_results_report(*, thread: Thread) -> int:
    """Report Countersign's not yet reported results in the open wire run; return how many.

    Nothing is written while no wire run is open: the next one reports them right
    after its ``RUN_STARTED``. Implements FT-09 (agent-side answers in-stream), BC21.
    """
    wire = wire_run_current(thread=thread)
    if wire is None:
        return 0
    events = [
        ToolCallResultEvent(
            message_id=m.message_id,
            tool_call_id=m.tool_call_id or "",
            content=m.content,
            role="tool",
            metadata={"error": m.error} if m.error else None,
        )
        for m in unreported_application_results(thread=thread)
    ]
    record_wire_events(run=wire, events=events)
    return len(events)


def wire_run_close_if_waiting(*, run: Run) -> bool:
    """End the wire run of ``awaiting_tools`` ``run`` once only a human or the client can go on.

    Returns whether it wrote the ``RUN_FINISHED``. While Countersign is still
    answering one of the run's calls (approved, executing) the wire run stays open.
    Open approval requests end it with ``{type:"interrupt", interrupts}`` (IR-01);
    otherwise the client's frontend calls still unanswered are its
    ``pendingToolCallIds`` (FT-04). Must run holding ``run``'s lock.
    """
    if not run.managed:
        return False
    wire = run_lock(run_pk=run.wire_run.pk)
    if wire.wire_state != WIRE_OPEN:
        return False
    calls = {
        c.tool_call_id: c
        for c in ToolCall.objects.filter(
            thread_id=run.thread_id, tool_call_id__in=run.pending_tool_call_ids
        ).unanswered()
    }
    if any(c.state in _ANSWERING_STATES for c in calls.values()):
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
    finished: dict[str, Any] = {
        "type": "RUN_FINISHED",
        "threadId": run.thread.thread_id,
        "runId": wire.run_id,
        "outcome": outcome,
    }
    usage = wire_usage(wire)
    if usage:
        finished["usage"] = usage
    with transaction.atomic():
        record_wire_events(run=wire, events=[finished])
        Run.objects.filter(pk=wire.pk).update(wire_state=WIRE_CLOSED)
    return True
