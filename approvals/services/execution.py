"""Executing an approved call exactly once: reserving it, recording its outcome.

Two steps of :mod:`orchestration.pipeline`, which runs the tool between them:
:func:`execution_reserve` reserves the execution under the call's row lock (the
caller commits it before the side effect) or settles the call without running
it; :func:`execution_outcome_record` records the outcome and the one tool
message. A reservation found by a later delivery means a worker died mid-call:
idempotent tools run again with the same key; others become ``outcome_unknown``
for an operator (:func:`execution_outcome_resolve`). Neither step continues the run:
each says whether it answered the call, and the caller continues it.
Implements DC-04, LP-01, LP-05, LP-07, LP-08, BC32, BC34.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

from django.db import transaction
from django.utils import timezone

from agentcore.arguments import ValidatedArguments
from agentcore.dispatch import ToolResult
from agentcore.tools import Tool, Toolset
from approvals.exceptions import (
    ApprovalAlreadyDecided,
    ApprovalPermissionDenied,
    ExecutionClaimed,
    ExecutionDeferred,
    ExecutionInProgress,
    OutcomeRefused,
)
from approvals.governance import call_policy
from approvals.locks import execution_approval_lock, execution_lock
from approvals.models import DECIDE_PERMISSION, ApprovalRequest, ToolExecution
from approvals.services.dispatch import run_tools
from approvals.services.grants import grant_refusal
from approvals.services.notify import call_approval_for_snapshot, notify_call_changed
from approvals.services.reapproval import (
    MAX_REAPPROVALS,
    approval_reopen,
    call_change,
    execution_arguments,
    schema_hashes,
)
from approvals.signals import approval_decided, approval_outcome, send_on_commit
from approvals.transitions import AuditFact, call_transition, execution_transition
from core.conf import countersign_settings
from core.types import JSONValue, User
from threads.agent_config import agent_is_external
from threads.answers import error_content, tool_message_write
from threads.models import ToolCall

logger = logging.getLogger(__name__)

_DONE_STATES = frozenset(
    {
        ToolExecution.State.SUCCEEDED,
        ToolExecution.State.FAILED,
        ToolExecution.State.OUTCOME_UNKNOWN,
        ToolExecution.State.RESOLVED,
    }
)


@dataclass(frozen=True)
class Reserved:
    """A reservation committed before the side effect: run ``tool`` for ``call`` now.

    ``execution`` holds the idempotency key; ``arguments`` is the value checked
    under the lock (hash and schema), which the tool runs without the ladder
    (``None`` only if it no longer restores, and then the ladder runs).
    """

    call: ToolCall
    execution: ToolExecution
    tool: Tool
    toolset: Toolset
    arguments: ValidatedArguments | None = None


@dataclass(frozen=True)
class Settled:
    """The call needs no run of the tool (now): ``execution`` as it stands.

    ``answered`` says whether this step answered the call (refused, outcome
    unknown, outcome recorded), so its run may continue. ``execution`` is
    ``None`` when the call has none (e.g. an undone approval).
    """

    call: ToolCall | None
    execution: ToolExecution | None
    answered: bool = False


def execution_reserve(
    *,
    thread_pk: int,
    tool_call_pk: int,
    holder: str = "",
    lease_seconds: float | None = None,
) -> Reserved | Settled:
    """Reserve the execution of approved (or auto-approved) call ``tool_call_pk``.

    Under the call's row lock: refuse anything not approved or already answered;
    send a queued approved call back to an operator as a new approval request
    when its arguments no longer match the approved hash or its tool's input
    schema changed since the approval (:mod:`.reapproval`; an error after
    ``MAX_REAPPROVALS`` rounds); re-validate the arguments, check the permission
    the tool requires, and reserve the execution (:class:`Reserved`), which the
    caller commits before running the tool. A dead worker's reservation of a
    non-idempotent tool becomes ``outcome_unknown``. Anything but a reservation
    returns :class:`Settled`. Raises :class:`ExecutionInProgress` while another
    delivery holds a live lease, :class:`ExecutionDeferred` before the
    execution's ``not_before``. Must run inside ``transaction.atomic()``.

    An external agent's call (``threads.agent_config.agent_is_external``) is run
    by its caller: a worker's delivery (no ``holder``) never reserves it, and
    only makes a lapsed claim ``outcome_unknown``. The caller's claim passes
    ``holder`` (the claimant, e.g. one replica) and ``lease_seconds``: the same
    holder claiming again renews its lease; another one gets
    :class:`ExecutionClaimed` naming the holder; a claim whose lease lapsed
    without an outcome becomes ``outcome_unknown`` (BC32).
    Implements DC-04, LP-01, LP-05, LP-07, LP-08, BC32, BC34.
    """
    _, call, approval, execution = execution_approval_lock(
        thread_pk=thread_pk, tool_call_pk=tool_call_pk
    )
    if execution is None:
        logger.warning("call %s has no execution record; refusing", call.tool_call_id)
        return Settled(call=call, execution=None)
    answered = ToolCall.objects.filter(pk=call.pk).answered().exists()
    if answered or execution.state in _DONE_STATES:
        return Settled(call=call, execution=execution)
    if (
        execution.state == ToolExecution.State.QUEUED
        and execution.not_before is not None
    ):
        # Still inside the decision's undo window: an early (or repeated)
        # delivery waits for it; the reservation below is the only claim.
        wait = (execution.not_before - timezone.now()).total_seconds()
        if wait > 0:
            raise ExecutionDeferred(
                f"call {call.tool_call_id!r} may not run before "
                f"{execution.not_before.isoformat()} (undo window)",
                retry_after=wait + 0.05,
            )
        if (
            not execution.attempts
            and approval is not None
            and approval.status == ApprovalRequest.Status.APPROVED
        ):
            # The window closed: the approval stands now, and only now is it
            # announced (approvals.signals), so an undone one never is.
            send_on_commit(approval_decided, approval)
    toolset, _ = run_tools(call.run)
    tool = toolset.resolve(call.name)
    external = agent_is_external(call.run.agent)
    if execution.state == ToolExecution.State.RESERVED:
        now = timezone.now()
        lease_end = execution.lease_expires_at or now
        live = now < lease_end
        if live and external:
            if not holder:
                return Settled(call=call, execution=execution)
            if holder != execution.holder:
                raise ExecutionClaimed(
                    f"call {call.tool_call_id!r} is claimed by {execution.holder!r} "
                    f"until {lease_end.isoformat()}; do not run it",
                    retry_after=(lease_end - now).total_seconds(),
                    holder=execution.holder,
                )
            # The holder's own claim again: its lease is renewed, nothing reserved anew.
            _lease_renew(execution=execution, lease_seconds=lease_seconds)
            return Settled(call=call, execution=execution)
        if live:
            raise ExecutionInProgress(
                f"call {call.tool_call_id!r} is being executed by another delivery",
                retry_after=min((lease_end - now).total_seconds(), 5.0) + 0.1,
            )
        if not (tool and tool.idempotent):
            _give_up_unknown(call=call, execution=execution)
            return Settled(call=call, execution=execution, answered=True)
    if external and not holder:
        # Delivered to a worker (an approval enqueues every execution): the
        # caller claims it instead.
        return Settled(call=call, execution=execution)
    if (
        execution.authorized_by == "approval"
        and approval is not None
        and (
            sent_back := _sent_back(
                call=call, approval=approval, execution=execution, tool=tool
            )
        )
    ):
        return Settled(call=call, execution=execution, answered=sent_back == "refused")
    refusal = _execution_refusal(
        call=call, execution=execution, tool=tool, approval=approval
    )
    if refusal is not None or tool is None:
        _refuse(call=call, execution=execution, detail=refusal or "")
        return Settled(call=call, execution=execution, answered=True)
    _reserve(
        call=call,
        execution=execution,
        tool=tool,
        holder=holder,
        lease_seconds=lease_seconds,
    )
    return Reserved(
        call=call,
        execution=execution,
        tool=tool,
        toolset=toolset,
        arguments=execution_arguments(execution=execution, tool=tool),
    )


def execution_outcome_record(
    *, thread_pk: int, tool_call_pk: int, result: ToolResult
) -> Settled:
    """Record the tool's ``result`` for reserved call ``tool_call_pk`` and answer the call.

    Under the call's row lock: the execution becomes ``succeeded`` or ``failed``,
    the one tool message is written, audited and announced. A late duplicate
    (the outcome already recorded) changes nothing (``answered`` false). Must run
    inside ``transaction.atomic()``. Implements DC-04, LP-05, BC32.
    """
    _, call, locked = execution_lock(thread_pk=thread_pk, tool_call_pk=tool_call_pk)
    assert locked is not None  # an execution record is never deleted
    if locked.state not in (
        ToolExecution.State.RESERVED,
        ToolExecution.State.OUTCOME_UNKNOWN,
    ):
        return Settled(call=call, execution=locked)
    # OUTCOME_UNKNOWN here means a redelivery gave up on this (slow, not dead)
    # execution meanwhile: the outcome is known now, so it is recorded.
    succeeded = result.error is None
    outcome = ToolExecution.State.SUCCEEDED if succeeded else ToolExecution.State.FAILED
    execution_transition(
        execution=locked,
        to=outcome,
        save=False,
        audit=AuditFact(
            action=f"execution.{outcome}",
            after={"error": result.error, "details": result.details},
        ),
    )
    locked.error = result.error or ""
    locked.details = result.details
    locked.finished_at = timezone.now()
    locked.save(update_fields=["state", "error", "details", "finished_at"])
    tool_message_write(
        call=call,
        content=result.content,
        error=result.error,
        state=ToolCall.State.SUCCEEDED if succeeded else ToolCall.State.FAILED,
    )
    approval = call_approval_for_snapshot(call)
    notify_call_changed(call, approval=approval)
    if approval is not None and locked.authorized_by == "approval":
        send_on_commit(
            approval_outcome, approval, outcome="executed" if succeeded else "failed"
        )
    return Settled(call=call, execution=locked, answered=True)


def _give_up_unknown(*, call: ToolCall, execution: ToolExecution) -> None:
    """A dead worker's reservation of a non-idempotent tool: an operator decides (BC32).

    The client's run waiting on the call ends with ``RUN_ERROR`` code
    ``outcome_unknown`` (:func:`threads.wire.wire_run_close_if_waiting`).
    """
    execution_transition(
        execution=execution,
        to=ToolExecution.State.OUTCOME_UNKNOWN,
        audit=AuditFact(
            action="execution.outcome_unknown", after={"attempts": execution.attempts}
        ),
    )
    call_transition(
        call=call,
        to=ToolCall.State.OUTCOME_UNKNOWN,
        notify=True,
        approval=call_approval_for_snapshot(call),
    )


def _refuse(*, call: ToolCall, execution: ToolExecution, detail: str) -> None:
    execution_transition(
        execution=execution,
        to=ToolExecution.State.FAILED,
        save=False,
        audit=AuditFact(action="execution.refused", after={"detail": detail}),
    )
    execution.error = "refused"
    execution.save(update_fields=["state", "error"])
    tool_message_write(
        call=call,
        content=error_content(error="refused", detail=detail),
        error="refused",
        state=ToolCall.State.FAILED,
    )
    notify_call_changed(call)
    if execution.authorized_by == "approval":
        approval = call_approval_for_snapshot(call)
        if approval is not None:
            send_on_commit(approval_outcome, approval, outcome="failed")


def _reserve(
    *,
    call: ToolCall,
    execution: ToolExecution,
    tool: Tool,
    holder: str = "",
    lease_seconds: float | None = None,
) -> None:
    # An expired reservation of an idempotent tool is taken again (same key, LP-07).
    if execution.state != ToolExecution.State.RESERVED:
        execution_transition(
            execution=execution, to=ToolExecution.State.RESERVED, save=False
        )
    execution.attempts += 1
    execution.started_at = timezone.now()
    execution.holder = holder
    execution.lease_expires_at = execution.started_at + timedelta(
        seconds=float(lease_seconds or tool.timeout or 60)
        + float(countersign_settings.EXECUTION_LEASE_GRACE_SECONDS)
    )
    execution.save(
        update_fields=["state", "attempts", "started_at", "lease_expires_at", "holder"]
    )
    after: dict[str, JSONValue] = {"attempt": execution.attempts}
    if holder:
        after["holder"] = holder
    call_transition(
        call=call,
        to=ToolCall.State.EXECUTING,
        audit=AuditFact(action="execution.reserved", target=execution, after=after),
        notify=True,
    )


def _lease_renew(*, execution: ToolExecution, lease_seconds: float | None) -> None:
    """Extend the holder's live claim by ``lease_seconds`` from now (the grace added)."""
    execution.lease_expires_at = timezone.now() + timedelta(
        seconds=float(lease_seconds or 60)
        + float(countersign_settings.EXECUTION_LEASE_GRACE_SECONDS)
    )
    execution.save(update_fields=["lease_expires_at"])


def execution_outcome_report(
    *,
    thread_pk: int,
    tool_call_pk: int,
    holder: str,
    result: ToolResult,
    outcome_sha256: str,
) -> Settled:
    """Record the outcome an external caller reports for its claimed call; return the step.

    Under the call's row lock: the report must come from the claim's ``holder``;
    the first report is recorded as a worker's outcome is
    (:func:`execution_outcome_record`: the execution, the one tool message, audit,
    notifications), also after the claim lapsed into ``outcome_unknown`` (the
    outcome is known now). ``outcome_sha256`` identifies the report's body: the
    same report again changes nothing (``answered`` false), a different one raises
    :class:`OutcomeRefused` (``outcome_conflict``), as do a report without a claim
    (``outcome_without_claim``) and one from another holder
    (``claimed_by_another``). Must run inside ``transaction.atomic()``.
    Implements DC-04, LP-05, BC32.
    """
    _, call, locked = execution_lock(thread_pk=thread_pk, tool_call_pk=tool_call_pk)
    if locked is not None and locked.outcome_sha256:
        if locked.outcome_sha256 == outcome_sha256:
            return Settled(call=call, execution=locked)
        raise OutcomeRefused(
            f"call {call.tool_call_id!r} already has a different outcome; an "
            "outcome is reported once (resending the same body is safe)",
            code="outcome_conflict",
            field="result",
        )
    if (
        locked is None
        or locked.state == ToolExecution.State.QUEUED
        or not locked.holder
    ):
        raise OutcomeRefused(
            f"call {call.tool_call_id!r} was not claimed; claim it "
            "(POST .../claim/) before running it, then report its outcome",
            code="outcome_without_claim",
            field="holder",
        )
    if locked.holder != holder:
        raise OutcomeRefused(
            f"call {call.tool_call_id!r} is claimed by {locked.holder!r}, not "
            f"{holder!r}; only the holder reports its outcome",
            code="claimed_by_another",
            field="holder",
        )
    if locked.state not in (
        ToolExecution.State.RESERVED,
        ToolExecution.State.OUTCOME_UNKNOWN,
    ):
        raise OutcomeRefused(
            f"call {call.tool_call_id!r} is already {locked.state!r} (an operator "
            "resolved it); its outcome can no longer be reported",
            code="outcome_conflict",
            field="result",
        )
    locked.outcome_sha256 = outcome_sha256
    locked.save(update_fields=["outcome_sha256"])
    return execution_outcome_record(
        thread_pk=thread_pk, tool_call_pk=tool_call_pk, result=result
    )


def _sent_back(
    *,
    call: ToolCall,
    approval: ApprovalRequest,
    execution: ToolExecution,
    tool: Tool | None,
) -> Literal["", "pending", "reopened", "refused"]:
    """Return whether (and how) an approved call stays with (or went back to) an operator.

    ``"pending"`` while its re-approval is pending; ``"reopened"`` after sending
    a queued call that changed since its approval back as a new request;
    ``"refused"`` after answering it with an error once it has been sent back
    ``MAX_REAPPROVALS`` times; ``""`` when it may go on: the executor runs only
    what was approved. Implements SEC-02, SEC-04.
    """
    if approval.status == ApprovalRequest.Status.PENDING:
        return "pending"  # approving the re-approval enqueues the call again
    if (
        tool is None
        or approval.status != ApprovalRequest.Status.APPROVED
        or execution.state != ToolExecution.State.QUEUED
    ):
        return ""
    change = call_change(call=call, execution=execution, tool=tool, approval=approval)
    if change is None:
        return ""
    if approval.reapproval_count < MAX_REAPPROVALS:
        approval_reopen(
            call=call, approval=approval, execution=execution, tool=tool, change=change
        )
        return "reopened"
    _refuse(
        call=call,
        execution=execution,
        detail=f"{change.detail}, after {MAX_REAPPROVALS} re-approvals of this "
        "call already; it was not executed. Do not retry it; tell the user the "
        "tool keeps changing.",
    )
    return "refused"


def _execution_refusal(
    *,
    call: ToolCall,
    execution: ToolExecution,
    tool: Tool | None,
    approval: ApprovalRequest | None,
) -> str | None:
    """Return why ``execution`` must not run, or ``None`` when it may (SEC-02, LP-01).

    Checks the authorization, that the stored (validated, approved) arguments
    still match their hash and that the tool's schema hash is still the one they
    were validated against (so they are not validated again).
    A queued approved call that changed was sent back to an operator before this
    check (:mod:`.reapproval`); what reaches it changed is refused, not guessed:
    an auto-approved call, or a reservation being taken again.
    """
    if tool is None:
        return f"tool {call.name!r} is no longer configured"
    if execution.authorized_by != "approval":
        approval = None
    covered, current = schema_hashes(call=call, tool=tool, approval=approval)
    if covered != current:
        return (
            f"the input schema of {tool.name!r} changed after the call was "
            "authorized; it was not executed. Propose the call again."
        )
    if execution.authorized_by == "approval":
        if approval is None or approval.status != ApprovalRequest.Status.APPROVED:
            return "the call was not approved"
        if (
            approval.approved_arguments_hash != execution.arguments_hash
            or execution_arguments(execution=execution, tool=tool) is None
        ):
            return "the arguments differ from the ones an operator approved"
    elif execution.authorized_by == "policy":
        decision = call_policy(
            thread=call.thread,
            agent=call.run.agent,
            tool=tool,
            arguments=execution.arguments,
        )
        if decision.action != "auto":
            return "the tool's policy requires approval for these arguments"
    elif execution.authorized_by == "grant":
        if execution.grant is None:
            return "the grant it was authorized under is gone"
        refusal = grant_refusal(
            grant=execution.grant,
            tool=tool,
            agent=call.run.agent,
            thread=call.thread,
            arguments=execution.arguments,
            decision=call_policy(
                thread=call.thread,
                agent=call.run.agent,
                tool=tool,
                arguments=execution.arguments,
            ),
        )
        if refusal is not None:
            return f"{refusal}; it was not executed"
    else:
        return f"unknown authorization {execution.authorized_by!r}"
    if execution_arguments(execution=execution, tool=tool) is None:
        return "the arguments differ from the ones that were authorized"
    permission = getattr(tool, "permission", None)
    if permission:
        # The person who authorized the side effect must hold the tool's permission:
        # the approver for approved calls, the thread's owner for auto-approved ones.
        if approval is not None:
            who = approval.decided_by
            role = "approver"
        elif execution.grant is not None:
            who = execution.grant.granted_by
            role = "granter"
        else:
            who = call.thread.owner
            role = "thread's owner"
        if who is None or not who.has_perm(permission):
            return f"the {role} lacks the permission {permission!r} this tool requires"
    return None


def execution_outcome_resolve(
    *,
    tool_call: ToolCall,
    resolved_by: User,
    succeeded: bool,
    content: str,
    reason: str,
) -> ToolExecution:
    """Answer an ``outcome_unknown`` call as an operator determined it; return the execution.

    Continuing the run is the caller's, in the same transaction
    (:func:`orchestration.pipeline.execution_resolve`): this service opens no
    savepoint of its own. Raises :class:`ApprovalPermissionDenied` without the
    decide permission and :class:`ApprovalAlreadyDecided` when the call is not
    ``outcome_unknown``.
    """
    if not resolved_by.has_perm(DECIDE_PERMISSION):
        raise ApprovalPermissionDenied(
            "resolving an execution needs the decide permission"
        )
    with transaction.atomic(savepoint=False):
        _, call, execution = execution_lock(
            thread_pk=tool_call.thread_id, tool_call_pk=tool_call.pk
        )
        if execution is None or execution.state != ToolExecution.State.OUTCOME_UNKNOWN:
            found = execution.state if execution is not None else "not executed"
            raise ApprovalAlreadyDecided(
                f"call {call.tool_call_id!r} is {found!r}, not outcome_unknown; "
                "only a call whose execution outcome is unknown can be resolved"
            )
        execution_transition(
            execution=execution,
            to=ToolExecution.State.RESOLVED,
            audit=AuditFact(
                actor=resolved_by,
                action="execution.resolved",
                after={"succeeded": succeeded, "content": content, "reason": reason},
            ),
        )
        tool_message_write(
            call=call,
            content=content,
            error=None if succeeded else "outcome_unknown",
            state=ToolCall.State.SUCCEEDED if succeeded else ToolCall.State.FAILED,
        )
        notify_call_changed(call)
    return execution
