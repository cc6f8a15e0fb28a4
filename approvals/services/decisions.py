"""Deciding approval requests: approve (maybe with edits), reject, or expire them.

Implements SEC-02, DC-03, DC-04, FT-06.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Literal

from django.db import transaction
from django.utils import timezone

from agentcore.arguments import parse_arguments
from approvals.exceptions import (
    ApprovalAlreadyDecided,
    ApprovalExpired,
    ApprovalPermissionDenied,
    InvalidEditedArguments,
    ReasonRequired,
)
from approvals.locks import approval_lock
from approvals.models import DECIDE_PERMISSION, ApprovalRequest, arguments_hash
from approvals.services.audit import audit_append
from approvals.services.dispatch import call_answer_refused, execution_create, run_tools
from approvals.services.notify import notify_call_changed
from approvals.transitions import approval_transition
from threads.models import Run, ToolCall
from threads.services import continuation_maybe_start
from threads.transitions import tool_call_transition

Decision = Literal["approve", "reject"]


def approval_decide(
    *,
    approval: ApprovalRequest,
    decided_by: Any,
    decision: Decision,
    reason: str = "",
    edited_arguments: dict[str, Any] | None = None,
) -> ApprovalRequest:
    """Record an operator's decision on ``approval`` and act on it; return the request.

    Approve: the arguments (edited ones re-validated against the schema, SEC-02)
    are hashed and the call queued for execution after commit. Reject: the call is
    answered with a tool message saying an operator declined it and why. A repeated
    identical decision returns the request unchanged and enqueues nothing (BC34).

    Raises :class:`ApprovalPermissionDenied` without ``approvals.decide_approvalrequest``,
    :class:`ApprovalAlreadyDecided` when decided otherwise, :class:`ApprovalExpired`
    when it expired (it is answered as expired), :class:`ReasonRequired` for a
    rejection without a reason, :class:`InvalidEditedArguments` for edits that fail
    the schema. Implements SEC-02, DC-03, DC-04, FT-06.
    """
    if not getattr(decided_by, "is_active", False) or not decided_by.has_perm(
        DECIDE_PERMISSION
    ):
        raise ApprovalPermissionDenied(
            f"user {getattr(decided_by, 'username', None)!r} may not decide tool calls; "
            f"ask an administrator for the {DECIDE_PERMISSION!r} permission"
        )
    if decision == "reject" and not reason.strip():
        raise ReasonRequired(
            "give a reason when rejecting a call; it is sent to the agent"
        )
    target_status = (
        ApprovalRequest.Status.APPROVED
        if decision == "approve"
        else ApprovalRequest.Status.REJECTED
    )
    with transaction.atomic():
        _, call, locked = approval_lock(approval=approval)
        if locked.status != ApprovalRequest.Status.PENDING:
            if locked.status == target_status and (
                edited_arguments is None or edited_arguments == locked.edited_arguments
            ):
                return locked
            raise ApprovalAlreadyDecided(
                f"approval {locked.pk!r} was already {locked.status!r}"
                + (f" by {locked.decided_by.username!r}" if locked.decided_by else "")
                + "; reload the queue"
            )
        expired = locked.expires_at <= timezone.now()
        if expired:
            _expire_locked(locked, call)
        else:
            _decide_locked(
                approval=locked,
                call=call,
                decided_by=decided_by,
                decision=decision,
                reason=reason,
                edited_arguments=edited_arguments,
            )
        notify_call_changed(call, approval=locked)
        if expired or decision == "reject":
            continuation_maybe_start(run=locked.run)
    if expired:
        raise ApprovalExpired(
            f"approval {locked.pk!r} expired at {locked.expires_at.isoformat()}; "
            "the agent was told it expired"
        )
    return locked


def _decide_locked(
    *,
    approval: ApprovalRequest,
    call: ToolCall,
    decided_by: Any,
    decision: Decision,
    reason: str,
    edited_arguments: dict[str, Any] | None,
) -> None:
    before = {"status": approval.status}
    if decision == "approve":
        arguments = approval.proposed_arguments
        if edited_arguments is not None:
            arguments = _validate_edit(
                call=call, run=approval.run, edited=edited_arguments
            )
            if arguments != approval.proposed_arguments:
                approval.edited_arguments = arguments
        approval.approved_arguments_hash = arguments_hash(arguments)
        approval_transition(
            approval=approval, to=ApprovalRequest.Status.APPROVED, save=False
        )
        approval.reason = reason
        tool_call_transition(call=call, to=ToolCall.State.APPROVED)
        execution_create(call=call, arguments=arguments, authorized_by="approval")
    else:
        approval_transition(
            approval=approval, to=ApprovalRequest.Status.REJECTED, save=False
        )
        approval.reason = reason
        call_answer_refused(
            call=call,
            status="rejected",
            reason=reason,
            error="declined_by_operator",
            state=ToolCall.State.DECLINED,
        )
    approval.decided_by = decided_by
    approval.decided_at = timezone.now()
    approval.save()
    audit_append(
        actor=decided_by,
        action=f"approval.{approval.status}",
        target=approval,
        before=before,
        after={
            "status": approval.status,
            "reason": reason,
            "proposed_arguments": approval.proposed_arguments,
            "edited_arguments": approval.edited_arguments,
            "approved_arguments_hash": approval.approved_arguments_hash,
        },
    )


def _validate_edit(*, call: ToolCall, run: Run, edited: Any) -> dict[str, Any]:
    """Validate an operator's edited arguments against the tool's schema (SEC-02)."""
    if not isinstance(edited, dict):
        raise InvalidEditedArguments(
            f"edited arguments must be a JSON object, not {type(edited).__name__}"
        )
    toolset, _ = run_tools(run)
    tool = toolset.resolve(call.name)
    if tool is None:
        raise InvalidEditedArguments(f"tool {call.name!r} is no longer configured")
    parsed = parse_arguments(json.dumps(edited), tool=tool)
    if not parsed.ok or parsed.repair:
        # The validator's message is written for the model; an operator needs only
        # what is wrong, not the advice to "call the tool again".
        detail = (parsed.error or "").split(" Expected parameters:")[0]
        raise InvalidEditedArguments(f"edited arguments are invalid: {detail}")
    params = parsed.params or {}
    if tool.policy_for(params) == "deny":
        # Edited arguments go through policy again (IR-11): an edit cannot make a
        # call the policy refuses.
        raise InvalidEditedArguments(
            f"policy refuses {tool.name!r} with the edited arguments; edit them "
            "differently or reject the call"
        )
    return params


def edited_arguments_validate(
    *, approval: ApprovalRequest, edited: Any
) -> dict[str, Any]:
    """Return ``edited`` validated for ``approval``'s tool, schema and policy (SEC-02, IR-11).

    Raises :class:`InvalidEditedArguments`. Changes nothing: callers check a whole
    input before any decision (IR-09).
    """
    return _validate_edit(call=approval.tool_call, run=approval.run, edited=edited)


def _expire_locked(approval: ApprovalRequest, call: ToolCall) -> None:
    approval_transition(
        approval=approval, to=ApprovalRequest.Status.EXPIRED, save=False
    )
    approval.decided_at = timezone.now()
    approval.save(update_fields=["status", "decided_at"])
    call_answer_refused(
        call=call,
        status="expired",
        reason=f"no operator decided before {approval.expires_at.isoformat()}",
        error="approval_expired",
        state=ToolCall.State.EXPIRED,
    )
    audit_append(
        actor=None,
        action="approval.expired",
        target=approval,
        before={"status": "pending"},
        after={"status": "expired"},
    )
    notify_call_changed(call, approval=approval)


def approvals_expire(*, now: datetime | None = None) -> int:
    """Expire every pending request past its ``expires_at``; return how many expired.

    Each expired call is answered with an error tool message so its thread can
    continue. Called periodically by Celery beat; expiry is checked again at
    decision time.
    """
    now = now or timezone.now()
    count = 0
    for pending in list(
        ApprovalRequest.objects.filter(
            status=ApprovalRequest.Status.PENDING, expires_at__lte=now
        )
    ):
        with transaction.atomic():
            _, call, approval = approval_lock(approval=pending)
            if approval.status == ApprovalRequest.Status.PENDING:
                _expire_locked(approval, call)
                count += 1
                continuation_maybe_start(run=approval.run)
    return count
