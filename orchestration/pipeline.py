"""The life of a tool call, one step after another.

Read this module top to bottom to follow an application call from the run that
proposed it to the run that continues after it. Each step calls domain services
that do one thing and return what happened; the step decides what happens next
(hand an execution to a worker, continue the run). Steps run in workers (Celery
tasks in :mod:`orchestration.tasks`, or the embedded pool) or in a shell's request
(a decision).

1. **Paused with calls.** A worker runs the agent (:func:`run_execute`, driving
   it through :mod:`orchestration.runs`); a run that ends awaiting tools hands
   its pending calls to :func:`pending_calls_dispatch`.
2. **Dispatch.** Each call's policy says ``auto`` (an execution, queued), a grant
   covers it (queued too), ``require_approval`` (an approval request for an
   operator) or ``deny`` (answered with an error): ``approvals.services.
   pending_calls_route``. Queued executions go to a worker after commit
   (:func:`executions_enqueue`); calls answered now may complete the run
   (:func:`run_continue`).
3. **Decided.** An operator approves or rejects (:func:`approval_decide`, from the
   REST API, the admin, the operator UI or an AG-UI resume), or nobody does in
   time (:func:`approvals_expire`). An approval queues the execution, enqueued
   like an automatic one (after the undo window when the operator has one); a
   rejection or an expiry answers the call.
4. **Reserve.** A worker takes the call (:func:`tool_call_execute_supervised`) and
   reserves its execution under the call's row lock, committed before the side
   effect (``approvals.services.execution.execution_reserve``). A call that changed
   since its approval goes back to an operator; one that may not run is refused.
5. **Run the tool.** Outside any transaction, with the tool's timeout and an
   idempotency key (:func:`tool_run`).
6. **Record the outcome.** The execution's outcome and the call's one tool message
   (``approvals.services.execution.execution_outcome_record``).
7. **Answer, then continue the run.** Every step that answered a call ends with
   :func:`run_continue`, in the transaction that wrote the answer: once every call
   of the run is answered the one continuation run starts, and with Celery the
   worker that wrote the last answer runs it at once (:func:`continuation_run_here`).

Crash recovery sits beside the steps, not in them: a reservation whose lease ended
is handed to a worker again by the janitor (:mod:`orchestration.janitor`), and step
4 then runs an idempotent tool again with the same key or records
``outcome_unknown`` for an operator (:func:`execution_resolve`).
Implements FT-06, DC-04, LP-01, LP-05, LP-07, LP-08, SEC-02, BC32, BC34.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any

from django.db import transaction
from django.utils import timezone

from agentcore.arguments import ValidatedArguments
from agentcore.dispatch import ToolCallRequest, ToolResult, execute_call
from agentcore.tools import ToolContext
from approvals import crashpoints
from approvals.exceptions import ExecutionInProgress
from approvals.models import ApprovalRequest, ToolExecution
from approvals.selectors import approvals_past_expiry
from approvals.services.decisions import (
    Decision,
    approval_decision_record,
    approval_expire,
    approval_expired_error,
)
from approvals.services.dispatch import QueuedExecution, pending_calls_route
from approvals.services.elicitation import input_requester_for
from approvals.services.execution import (
    Reserved,
    Settled,
    execution_outcome_record,
    execution_outcome_resolve,
    execution_reserve,
)
from core import tracing
from core.conf import countersign_settings
from core.types import JSONValue, User
from orchestration.runs import run_claim, run_drive
from orchestration.supervision import (
    run_heartbeat,
    run_log_context,
    tool_call_log_context,
)
from threads.execution import enqueue, enqueue_later, uses_celery
from threads.mcp_servers import agent_mcp_refresh
from threads.models import Run, ToolCall
from threads.selectors import LostPhase, run_lost_phase, thread_unanswered_calls
from threads.services import continuation_maybe_start, run_fail, run_retry_create

logger = logging.getLogger(__name__)

# 1. Paused with calls.


def run_execute(*, run_pk: int) -> Run:
    """Claim run ``run_pk``, run its agent, record every event, dispatch its calls.

    Idempotent under at-least-once delivery: a run that is no longer ``queued``
    is not started again; one found ``running`` (its worker died) is finished with
    a ``worker_lost`` error so it never stays running forever
    (:func:`orchestration.runs.run_claim`). Agent failures end the run with
    ``RUN_ERROR``; nothing already recorded is lost. Log lines carry the run and
    thread, and a heartbeat tells the janitor the worker is alive
    (:mod:`orchestration.supervision`); a delivery that finds the run
    ``running`` with another live worker's heartbeat leaves it alone. A run that
    ended awaiting tools has its calls dispatched before the heartbeat stops.
    Returns the run, reloaded. Implements FT-06, ER-01.
    """
    with run_log_context(run_pk=run_pk):
        run, claimed = run_claim(run_pk=run_pk)
        if claimed is None:
            return run
        # The heartbeat beats only once this delivery owns the run (the claim
        # writes it first), so a duplicate tells the owner's from its own.
        with run_heartbeat(run_pk=run_pk):
            if claimed is False and not run.cancel_requested:
                # Found running with no live worker: the one before died.
                return run_worker_lost(run=run).run
            run = run_drive(run=run, claimed=claimed)
            if run.status == Run.Status.AWAITING_TOOLS:
                crashpoints.crash_point("after_run_recorded")
                pending_calls_dispatch(run=run)
                crashpoints.crash_point("after_dispatch")
                run.refresh_from_db()
            return run


# 2. Dispatched.


def pending_calls_dispatch(*, run: Run) -> None:
    """Dispatch the pending calls ``run`` ended with, then continue it if it may.

    Applies each call's policy (``approvals.services.pending_calls_route``), hands
    the executions it queued to workers after commit, and continues the run
    when every call is already answered, all in one transaction. Idempotent
    (only ``pending`` calls are handled). Implements FT-06, SEC-01, LP-01.
    """
    with transaction.atomic():
        dispatched = pending_calls_route(run=run)
        executions_enqueue(dispatched.queued)
        run_continue(run=run)


def executions_enqueue(queued: Sequence[QueuedExecution]) -> None:
    """Hand each queued execution to a worker after commit: now, or at its ``not_before``.

    Must run inside the transaction that queued them.
    """
    from orchestration.tasks import execute_tool_call

    for execution in queued:
        if execution.not_before is None:
            enqueue(execute_tool_call, tool_call_pk=execution.tool_call_pk)
            continue
        delay = max(0.0, (execution.not_before - timezone.now()).total_seconds()) + 0.05
        # A lost message (broker down) is recovered by the janitor once the window ends.
        transaction.on_commit(
            partial(
                enqueue_later,
                execute_tool_call,
                countdown=delay,
                tool_call_pk=execution.tool_call_pk,
            ),
            robust=True,
        )


# 3. Decided.


def approval_decide(
    *,
    approval: ApprovalRequest,
    decided_by: User,
    decision: Decision,
    reason: str = "",
    edited_arguments: dict[str, Any] | ValidatedArguments | None = None,
    response: JSONValue = None,
    grant: dict[str, Any] | None = None,
    undo_seconds: float = 0.0,
) -> ApprovalRequest:
    """Record an operator's decision on ``approval`` and act on it; return the request.

    The decision is :func:`approvals.services.decisions.approval_decision_record`
    (who may decide, votes, grants, edits, interrupts: see there); in the same
    transaction an approval's execution is handed to a worker after commit and a
    call answered by the decision (rejected, expired, an interrupt's resume
    entry) continues its run. Raises what ``approval_decision_record`` raises,
    and :class:`approvals.exceptions.ApprovalExpired` after committing the expiry
    when the request had expired. Implements SEC-02, DC-03, DC-04, FT-06.
    """
    with transaction.atomic():
        decided = approval_decision_record(
            approval=approval,
            decided_by=decided_by,
            decision=decision,
            reason=reason,
            edited_arguments=edited_arguments,
            response=response,
            grant=grant,
            undo_seconds=undo_seconds,
        )
        if decided.queued is not None:
            executions_enqueue([decided.queued])
        if decided.answered:
            run_continue(run=decided.approval.run)
    if decided.expired:
        raise approval_expired_error(decided.approval)
    return decided.approval


def approvals_expire(*, now: datetime | None = None) -> int:
    """Expire every pending request past its ``expires_at``; return how many expired.

    Each expired call is answered with an error tool message and its run
    continues, one transaction per request. Called periodically by Celery beat;
    expiry is checked again at decision time.
    """
    count = 0
    for pending in approvals_past_expiry(now=now or timezone.now()):
        with transaction.atomic():
            expired = approval_expire(approval=pending)
            if expired is not None:
                count += 1
                run_continue(run=expired.run)
    return count


# 4-6. Reserve, run the tool, record the outcome.


def tool_call_execute_supervised(*, tool_call_pk: int) -> None:
    """Execute approved call ``tool_call_pk`` as a worker does: logged, retried while leased.

    A delivery that finds another one holding the execution lease is scheduled
    again for when the lease ends, so a dead worker's call is still finished
    (BC32, LP-07). When the answer started the run's continuation, this worker
    runs it at once (:func:`continuation_run_here`).
    """
    from orchestration.tasks import execute_tool_call

    # One read for the log context and the executor's first lock (B2).
    row = (
        ToolCall.objects.filter(pk=tool_call_pk)
        .values_list(
            "tool_call_id",
            "run__run_id",
            "thread__thread_id",
            "thread_id",
            "run__agent",
        )
        .first()
    )
    ids = (row[0], row[1], row[2]) if row is not None else None
    with tool_call_log_context(tool_call_pk=tool_call_pk, ids=ids):
        try:
            tool_call_execute(
                tool_call_pk=tool_call_pk,
                located=(row[3], row[4]) if row is not None else None,
            )
        except ExecutionInProgress as busy:
            enqueue_later(
                execute_tool_call, countdown=busy.retry_after, tool_call_pk=tool_call_pk
            )
            return
    continuation_run_here(tool_call_pk=tool_call_pk)


def tool_call_execute(
    *, tool_call_pk: int, located: tuple[int, str] | None = None
) -> ToolExecution | None:
    """Execute an approved (or auto-approved) application call exactly once.

    Reserve (committed before the side effect), run the tool, record the outcome
    and the one tool message, continue the run: steps 4 to 7. Returns the
    execution record (``None`` when the call has none, e.g. an undone approval).
    Raises :class:`ExecutionInProgress` while another delivery holds a live
    lease, :class:`approvals.exceptions.ExecutionDeferred` before the
    execution's ``not_before``. ``located`` is the call's ``(thread pk, agent)``
    when the caller read them. Implements DC-04, LP-01, LP-05, LP-07, LP-08,
    BC32, BC34.
    """
    thread_pk, agent = located or ToolCall.objects.values_list(
        "thread_id", "run__agent"
    ).get(pk=tool_call_pk)
    # Outside any lock (network I/O): an MCP server's schema change made after the
    # approval is seen now, not when its list-changed notice happens to arrive.
    agent_mcp_refresh(agent)
    with transaction.atomic():
        step = execution_reserve(thread_pk=thread_pk, tool_call_pk=tool_call_pk)
        if isinstance(step, Settled):
            return _settled(step)
    crashpoints.crash_point("after_reservation")
    result = tool_run(step)
    crashpoints.crash_point("after_tool")
    with transaction.atomic():
        outcome = execution_outcome_record(
            thread_pk=thread_pk, tool_call_pk=tool_call_pk, result=result
        )
        execution = _settled(outcome)
    crashpoints.crash_point("after_outcome")
    return execution


def _settled(step: Settled) -> ToolExecution | None:
    """Continue the run of a call the step answered; return its execution."""
    if step.answered and step.call is not None:
        run_continue(run=step.call.run)
    return step.execution


def tool_run(reserved: Reserved) -> ToolResult:
    """Run the reserved call's tool once and return its result (never raises for the tool).

    Outside any transaction, with the tool's timeout (``agentcore.dispatch``) and
    the execution's idempotency key, handed to the tool and never to the model.
    The tool's permission was checked at reservation, against whoever
    authorized the call; the runtime gets no user object (its ORM is not usable
    from the tool's event loop).
    """
    return asyncio.run(tool_run_async(tool_run_prepare(reserved)))


@dataclass(frozen=True)
class ToolRun:
    """A reserved call's tool, ready to run on any event loop (no database access left).

    Built by :func:`tool_run_prepare` where the ORM may be used; run by
    :func:`tool_run_async`.
    """

    request: ToolCallRequest
    reserved: Reserved
    context: ToolContext
    request_context: Any


def tool_run_prepare(reserved: Reserved) -> ToolRun:
    """Read what running ``reserved`` needs from the database (sync code only).

    The tool context (thread, run and call ids, the idempotency key, who
    authorized it, the mid-call input requester) and, when tracing, the
    approval request's trace context.
    """
    call, execution = reserved.call, reserved.execution
    owner = call.thread.owner
    context = ToolContext(
        thread_id=call.thread.thread_id,
        run_id=call.run.run_id,
        tool_call_id=call.tool_call_id,
        idempotency_key=execution.idempotency_key,
        user=None,
        extras={
            "owner": getattr(owner, "username", None),
            "authorized_by": execution.authorized_by,
        },
        # An MCP server that needs more input mid-call asks the queue (kind input).
        input_requester=input_requester_for(call=call),
    )
    request = ToolCallRequest(
        tool_call_id=call.tool_call_id, name=call.name, arguments=execution.arguments
    )
    request_context = None
    if tracing.tracing_active():
        request_context = (
            ApprovalRequest.objects.filter(tool_call=call)
            .order_by("-id")
            .values_list("trace_context", flat=True)
            .first()
        )
    return ToolRun(
        request=request,
        reserved=reserved,
        context=context,
        request_context=request_context,
    )


async def tool_run_async(prepared: ToolRun) -> ToolResult:
    """Run a prepared call's tool once on the running loop; never raises for the tool.

    :func:`tool_run` in a worker; an MCP gateway's auto-approved call awaits it
    in its own request (:mod:`orchestration.gateway`), on the upstream
    connection the process keeps (``agentcore.mcp``).
    """
    reserved = prepared.reserved
    call = reserved.call
    with tracing.tool_span(
        tool_name=call.name,
        tool_call_id=call.tool_call_id,
        description=reserved.tool.description,
        request_context=prepared.request_context,
    ) as span:
        # Checked under the reservation's lock (hash and schema): no ladder again.
        result = await execute_call(
            prepared.request,
            tool=reserved.tool,
            toolset=reserved.toolset,
            context=prepared.context,
            validated=reserved.arguments,
        )
        tracing.tool_span_outcome(span, error=result.error)
    return result


def execution_resolve(
    *,
    tool_call: ToolCall,
    resolved_by: User,
    succeeded: bool,
    content: str,
    reason: str,
) -> ToolExecution:
    """Answer an ``outcome_unknown`` call as an operator determined it; continue its run.

    The answer is :func:`approvals.services.execution.execution_outcome_resolve`; raises
    what it raises. Implements BC32.
    """
    with transaction.atomic():
        execution = execution_outcome_resolve(
            tool_call=tool_call,
            resolved_by=resolved_by,
            succeeded=succeeded,
            content=content,
            reason=reason,
        )
        run_continue(run=tool_call.run)
    return execution


# Recovery: a run whose worker died.


@dataclass(frozen=True)
class Lost:
    """What :func:`run_worker_lost` did: the ended run, its phase, and its retry."""

    run: Run
    phase: LostPhase
    #: The run repeating the turn, or ``None`` (not a continuation, out of
    #: attempts, someone posted since, or another sweep retried it first).
    retry: Run | None


def run_worker_lost(*, run: Run) -> Lost:
    """End ``run``, whose worker died, with ``RUN_ERROR`` ``worker_lost``; retry a continuation.

    The error's message names the phase (:func:`threads.selectors.run_lost_phase`:
    ``before_output`` or ``streaming``) and what happens next. A continuation
    (a run continuing answered calls, or a retry of one) is started again once
    every call on the thread has its answer, with the lost run's calls answered
    as interrupted: at most ``RUN_RETRY_ATTEMPTS`` times per turn, the first
    after ``RUN_RETRY_BACKOFF_SECONDS``, each next one after twice the previous
    delay (:func:`threads.services.run_retry_create`). Model turns are
    at-least-once; tools stay exactly-once, since the new run's calls are new
    calls that go through dispatch and policy again. Idempotent: a run that
    already ended is left as it is (and retried at most once). Called by the
    janitor and by a redelivery that finds the run abandoned. Implements FT-06,
    ER-01.
    """
    phase = run_lost_phase(run=run)
    attempts = int(countersign_settings.RUN_RETRY_ATTEMPTS)
    continuation = run.continues_id is not None or run.retry_of_id is not None
    retrying = continuation and run.attempt <= attempts
    message = (
        f"The worker executing this run stopped before it finished ({phase}); "
        + (
            f"Countersign starts the turn again (attempt {run.attempt + 1} of "
            f"{attempts + 1})."
            if retrying
            else "post the message again to retry."
        )
    )
    ended = run_fail(run=run, code="worker_lost", message=message)
    retry = None
    if retrying and not thread_unanswered_calls(thread=ended.thread):
        delay = float(countersign_settings.RUN_RETRY_BACKOFF_SECONDS) * 2 ** (
            run.attempt - 1
        )
        retry = run_retry_create(run=ended, countdown=delay)
    if retry is not None:
        logger.warning(
            "run %s lost (%s); retrying as run %s (attempt %d) in %.1f s",
            ended.run_id,
            phase,
            retry.run_id,
            retry.attempt,
            delay,
        )
    return Lost(run=ended, phase=phase, retry=retry)


# 7. Answered: continue the run.


def run_continue(*, run: Run) -> Run | None:
    """Continue ``run`` once every call it paused on is answered; return the new run.

    The one caller of :func:`threads.services.continuation_maybe_start`: every
    step that answered a call ends here, inside the transaction that wrote the
    answer, so a crash leaves either both or neither. Returns ``None`` while
    calls still wait (or when the run was already continued).
    """
    return continuation_maybe_start(run=run)


def continuation_run_here(*, tool_call_pk: int) -> Run | None:
    """Run the queued continuation of call ``tool_call_pk``'s run in this worker; return it.

    Saves the second broker hop between an approval and the continuation's first
    event (B2): the worker that wrote the last answer claims the continuation run
    itself. Its broker message was still sent when the run was created, so the
    run keeps its at-least-once delivery: whichever delivery claims the run first
    runs it (``run_execute`` claims under the run's row lock), the other finds it
    claimed with a live heartbeat, or no longer queued, and does nothing; a
    worker that dies mid-run is handled as any run's worker is (``worker_lost``
    through the heartbeat). Only with Celery: a duplicate is harmless only where
    heartbeats prove a claimer alive (Redis), and the embedded pool has no broker
    hop to save. Returns ``None`` when no continuation is queued.
    """
    if not uses_celery():
        return None
    run_pk = (
        Run.objects.filter(
            continues__tool_calls__pk=tool_call_pk, status=Run.Status.QUEUED
        )
        .values_list("pk", flat=True)
        .first()
    )
    if run_pk is None:
        return None
    return run_execute(run_pk=run_pk)
