"""Executing an approved call exactly once, and resolving an unknown outcome.

:func:`tool_call_execute` reserves the execution under the call's row lock (commit
before the side effect), runs the tool, then records the outcome and the one tool
message. A reservation found by a later delivery means a worker died mid-call:
idempotent tools run again with the same key; others become ``outcome_unknown``
for an operator (:func:`execution_resolve`). Implements DC-04, LP-01, LP-05,
LP-07, LP-08, BC32, BC34.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from agentcore.dispatch import ToolCallRequest, execute_call
from agentcore.tools import Tool, ToolContext
from approvals import crashpoints
from approvals.exceptions import (
    ApprovalAlreadyDecided,
    ApprovalPermissionDenied,
    ExecutionDeferred,
    ExecutionInProgress,
)
from approvals.governance import call_policy
from approvals.locks import execution_approval_lock, execution_lock
from approvals.models import DECIDE_PERMISSION, ApprovalRequest, ToolExecution
from approvals.services.audit import audit_append
from approvals.services.dispatch import run_tools
from approvals.services.elicitation import input_requester_for
from approvals.services.grants import grant_refusal
from approvals.services.notify import call_approval_for_snapshot, notify_call_changed
from approvals.services.reapproval import (
    MAX_REAPPROVALS,
    approval_reopen,
    call_change,
    execution_arguments,
    schema_hashes,
)
from approvals.transitions import execution_transition
from threads.answers import error_content, tool_message_write
from threads.conf import countersign_settings
from threads.mcp_servers import agent_mcp_refresh
from threads.models import ToolCall
from threads.services import continuation_maybe_start
from threads.transitions import tool_call_transition

logger = logging.getLogger(__name__)

_DONE_STATES = frozenset(
    {
        ToolExecution.State.SUCCEEDED,
        ToolExecution.State.FAILED,
        ToolExecution.State.OUTCOME_UNKNOWN,
        ToolExecution.State.RESOLVED,
    }
)


def tool_call_execute(
    *, tool_call_pk: int, located: tuple[int, str] | None = None
) -> ToolExecution | None:
    """Execute an approved (or auto-approved) application call exactly once.

    Under the call's row lock: refuse anything not approved or already answered;
    send a queued approved call back to an operator as a new approval request
    when its arguments no longer match the approved hash or its tool's input
    schema changed since the approval (:mod:`.reapproval`; an error after
    ``MAX_REAPPROVALS`` rounds); re-validate the arguments, check the permission
    the tool requires, and commit a reservation before the side effect. Then run
    the tool with its timeout and an idempotency key derived from thread and
    ``toolCallId`` (handed to the tool, never to the model), record the outcome
    and write the one tool message. Returns the
    execution record (``None`` when the call has none, e.g. an undone approval).
    Raises :class:`ExecutionInProgress` while another delivery holds a live
    lease, :class:`ExecutionDeferred` before the execution's ``not_before``.
    ``located`` is the call's ``(thread pk, agent)`` when the caller read them.
    Implements DC-04, LP-01, LP-05, LP-07, LP-08, BC32, BC34.
    """
    thread_pk, agent = located or ToolCall.objects.values_list(
        "thread_id", "run__agent"
    ).get(pk=tool_call_pk)
    # Outside any lock (network I/O): an MCP server's schema change made after the
    # approval is seen now, not when its list-changed notice happens to arrive.
    agent_mcp_refresh(agent)
    with transaction.atomic():
        _, call, approval, execution = execution_approval_lock(
            thread_pk=thread_pk, tool_call_pk=tool_call_pk
        )
        if execution is None:
            logger.warning(
                "call %s has no execution record; refusing", call.tool_call_id
            )
            return None
        answered = ToolCall.objects.filter(pk=call.pk).answered().exists()
        if answered or execution.state in _DONE_STATES:
            return execution
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
        toolset, _ = run_tools(call.run)
        tool = toolset.resolve(call.name)
        if execution.state == ToolExecution.State.RESERVED:
            now = timezone.now()
            if (
                execution.lease_expires_at is not None
                and now < execution.lease_expires_at
            ):
                raise ExecutionInProgress(
                    f"call {call.tool_call_id!r} is being executed by another delivery",
                    retry_after=min(
                        (execution.lease_expires_at - now).total_seconds(), 5.0
                    )
                    + 0.1,
                )
            if not (tool and tool.idempotent):
                _give_up_unknown(call=call, execution=execution)
                return execution
        if (
            execution.authorized_by == "approval"
            and approval is not None
            and _sent_back(call=call, approval=approval, execution=execution, tool=tool)
        ):
            return execution
        refusal = _execution_refusal(
            call=call, execution=execution, tool=tool, approval=approval
        )
        if refusal is not None or tool is None:
            _refuse(call=call, execution=execution, detail=refusal or "")
            return execution
        _reserve(call=call, execution=execution, tool=tool)
    crashpoints.crash_point("after_reservation")

    # The tool's permission was checked above, against whoever authorized the call;
    # the runtime gets no user object (its ORM is not usable from the tool's loop).
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
    # Checked under the lock above (hash and schema): run as validated, no ladder.
    validated = execution_arguments(execution=execution, tool=tool)
    result = asyncio.run(
        execute_call(
            request, tool=tool, toolset=toolset, context=context, validated=validated
        )
    )
    crashpoints.crash_point("after_tool")

    with transaction.atomic():
        _, call, locked = execution_lock(thread_pk=thread_pk, tool_call_pk=tool_call_pk)
        assert locked is not None  # an execution record is never deleted
        if locked.state not in (
            ToolExecution.State.RESERVED,
            ToolExecution.State.OUTCOME_UNKNOWN,
        ):
            return locked  # a late duplicate: the outcome was already recorded
        # OUTCOME_UNKNOWN here means a redelivery gave up on this (slow, not dead)
        # execution meanwhile: the outcome is known now, so it is recorded.
        succeeded = result.error is None
        execution_transition(
            execution=locked,
            to=ToolExecution.State.SUCCEEDED
            if succeeded
            else ToolExecution.State.FAILED,
            save=False,
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
        audit_append(
            actor=None,
            action=f"execution.{locked.state}",
            target=locked,
            after={"error": result.error, "details": result.details},
        )
        notify_call_changed(call, approval=call_approval_for_snapshot(call))
        continuation_maybe_start(run=call.run)
    crashpoints.crash_point("after_outcome")
    return locked


def _give_up_unknown(*, call: ToolCall, execution: ToolExecution) -> None:
    """A dead worker's reservation of a non-idempotent tool: an operator decides (BC32).

    The client's run waiting on the call ends with ``RUN_ERROR`` code
    ``outcome_unknown`` (:func:`threads.wire.wire_run_close_if_waiting`).
    """
    execution_transition(execution=execution, to=ToolExecution.State.OUTCOME_UNKNOWN)
    tool_call_transition(call=call, to=ToolCall.State.OUTCOME_UNKNOWN)
    audit_append(
        actor=None,
        action="execution.outcome_unknown",
        target=execution,
        after={"attempts": execution.attempts},
    )
    notify_call_changed(call, approval=call_approval_for_snapshot(call))
    continuation_maybe_start(run=call.run)


def _refuse(*, call: ToolCall, execution: ToolExecution, detail: str) -> None:
    execution_transition(execution=execution, to=ToolExecution.State.FAILED, save=False)
    execution.error = "refused"
    execution.save(update_fields=["state", "error"])
    tool_message_write(
        call=call,
        content=error_content(error="refused", detail=detail),
        error="refused",
        state=ToolCall.State.FAILED,
    )
    audit_append(
        actor=None,
        action="execution.refused",
        target=execution,
        after={"detail": detail},
    )
    notify_call_changed(call)
    continuation_maybe_start(run=call.run)


def _reserve(*, call: ToolCall, execution: ToolExecution, tool: Tool) -> None:
    # An expired reservation of an idempotent tool is taken again (same key, LP-07).
    if execution.state != ToolExecution.State.RESERVED:
        execution_transition(
            execution=execution, to=ToolExecution.State.RESERVED, save=False
        )
    execution.attempts += 1
    execution.started_at = timezone.now()
    execution.lease_expires_at = execution.started_at + timedelta(
        seconds=float(tool.timeout or 60)
        + float(countersign_settings.EXECUTION_LEASE_GRACE_SECONDS)
    )
    execution.save(
        update_fields=["state", "attempts", "started_at", "lease_expires_at"]
    )
    tool_call_transition(call=call, to=ToolCall.State.EXECUTING)
    audit_append(
        actor=None,
        action="execution.reserved",
        target=execution,
        after={"attempt": execution.attempts},
    )
    notify_call_changed(call)


def _sent_back(
    *,
    call: ToolCall,
    approval: ApprovalRequest,
    execution: ToolExecution,
    tool: Tool | None,
) -> bool:
    """Return whether an approved call stays with (or went back to) an operator.

    True while its re-approval is pending; true after sending a queued call that
    changed since its approval back as a new request, or answering it with an
    error once it has been sent back ``MAX_REAPPROVALS`` times. Implements issue
    14 item 6 and issue 17 item 5.
    """
    if approval.status == ApprovalRequest.Status.PENDING:
        return True  # approving the re-approval enqueues the call again
    if (
        tool is None
        or approval.status != ApprovalRequest.Status.APPROVED
        or execution.state != ToolExecution.State.QUEUED
    ):
        return False
    change = call_change(call=call, execution=execution, tool=tool, approval=approval)
    if change is None:
        return False
    if approval.reapproval_count < MAX_REAPPROVALS:
        approval_reopen(
            call=call, approval=approval, execution=execution, tool=tool, change=change
        )
    else:
        _refuse(
            call=call,
            execution=execution,
            detail=f"{change.detail}, after {MAX_REAPPROVALS} re-approvals of this "
            "call already; it was not executed. Do not retry it; tell the user the "
            "tool keeps changing.",
        )
    return True


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


def execution_resolve(
    *, tool_call: ToolCall, resolved_by: Any, succeeded: bool, content: str, reason: str
) -> ToolExecution:
    """Answer an ``outcome_unknown`` call as an operator determined it; return the execution.

    Raises :class:`ApprovalPermissionDenied` without the decide permission and
    :class:`ApprovalAlreadyDecided` when the call is not ``outcome_unknown``.
    """
    if not resolved_by.has_perm(DECIDE_PERMISSION):
        raise ApprovalPermissionDenied(
            "resolving an execution needs the decide permission"
        )
    with transaction.atomic():
        _, call, execution = execution_lock(
            thread_pk=tool_call.thread_id, tool_call_pk=tool_call.pk
        )
        if execution is None or execution.state != ToolExecution.State.OUTCOME_UNKNOWN:
            found = execution.state if execution is not None else "not executed"
            raise ApprovalAlreadyDecided(
                f"call {call.tool_call_id!r} is {found!r}, not outcome_unknown; "
                "only a call whose execution outcome is unknown can be resolved"
            )
        execution_transition(execution=execution, to=ToolExecution.State.RESOLVED)
        tool_message_write(
            call=call,
            content=content,
            error=None if succeeded else "outcome_unknown",
            state=ToolCall.State.SUCCEEDED if succeeded else ToolCall.State.FAILED,
        )
        audit_append(
            actor=resolved_by,
            action="execution.resolved",
            target=execution,
            after={"succeeded": succeeded, "content": content, "reason": reason},
        )
        notify_call_changed(call)
        continuation_maybe_start(run=call.run)
    return execution
