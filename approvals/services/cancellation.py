"""Abandoning a thread's pending calls (FT-06, BC20, BC21)."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from approvals.exceptions import ApprovalPermissionDenied
from approvals.locks import approval_lock, call_approval_lock
from approvals.models import DECIDE_PERMISSION, ApprovalRequest
from approvals.services.audit import audit_append
from approvals.services.dispatch import call_answer_refused
from approvals.services.notify import notify_approval_changed, notify_call_changed
from approvals.transitions import approval_transition
from threads.answers import run_finish_if_answered
from threads.locks import calls_lock, run_lock, thread_lock
from threads.models import Run, Thread, ToolCall
from threads.services import run_resume_record
from threads.transitions import tool_call_transition


def thread_pending_calls_cancel(
    *, thread: Thread, cancelled_by: Any, reason: str
) -> list[str]:
    """Abandon every unanswered call of ``thread``'s last run; return their ``toolCallId`` values.

    Each call is answered with a tool message saying it was cancelled and why
    (FT-06: the next run still gets one tool message per call); pending approval
    requests become ``cancelled``; calls already executing are left to finish.
    No continuation run starts: the user moves on with a new message. The thread's
    owner, staff, or a holder of the decide permission may do this; others get
    :class:`ApprovalPermissionDenied`. Implements FT-06, BC20, BC21.
    """
    allowed = (
        getattr(cancelled_by, "is_staff", False)
        or cancelled_by.has_perm(DECIDE_PERMISSION)
        or thread.owner_id == getattr(cancelled_by, "pk", None)
    )
    if not allowed:
        raise ApprovalPermissionDenied(
            "only the thread's owner or an operator may cancel its calls"
        )
    cancelled: list[str] = []
    with transaction.atomic():
        locked_thread = thread_lock(thread_pk=thread.pk)
        latest = locked_thread.runs.order_by("-created_at", "-id").first()
        if latest is None:
            return []
        run = run_lock(run_pk=latest.pk)
        if run.status != Run.Status.AWAITING_TOOLS:
            return []
        calls = calls_lock(
            calls=ToolCall.objects.filter(
                thread=locked_thread, tool_call_id__in=run.pending_tool_call_ids
            )
        )
        for call in calls:
            if call.state in (
                ToolCall.State.APPROVED,
                ToolCall.State.EXECUTING,
                ToolCall.State.OUTCOME_UNKNOWN,
            ):
                continue
            approval = call_approval_lock(call=call)
            if (
                approval is not None
                and approval.status == ApprovalRequest.Status.PENDING
            ):
                approval_transition(
                    approval=approval, to=ApprovalRequest.Status.CANCELLED, save=False
                )
                approval.decided_by = cancelled_by
                approval.decided_at = timezone.now()
                approval.reason = reason
                approval.save(
                    update_fields=["status", "decided_by", "decided_at", "reason"]
                )
            if call_answer_refused(
                call=call,
                status="cancelled",
                reason=reason,
                error="cancelled",
                state=ToolCall.State.CANCELLED,
                actor=cancelled_by,
            ):
                cancelled.append(call.tool_call_id)
                notify_call_changed(call, approval=approval)
        cancelled += _interrupts_cancel(
            run=run, cancelled_by=cancelled_by, reason=reason
        )
        run_finish_if_answered(run=run)
    return cancelled


def _interrupts_cancel(*, run: Run, cancelled_by: Any, reason: str) -> list[str]:
    """Cancel ``run``'s pending interrupt requests; return the ``toolCallId`` of bound ones.

    Each gets a ``cancelled`` resume entry, sent to the agent in the thread's next
    run (IR-18); a bound call waits for the agent's own answer. The run is locked.
    """
    done: list[str] = []
    for pending in ApprovalRequest.objects.filter(
        run=run,
        kind=ApprovalRequest.Kind.INTERRUPT,
        status=ApprovalRequest.Status.PENDING,
    ):
        _, call, approval = approval_lock(approval=pending)
        if approval.status != ApprovalRequest.Status.PENDING:
            continue
        approval_transition(
            approval=approval, to=ApprovalRequest.Status.CANCELLED, save=False
        )
        approval.decided_by = cancelled_by
        approval.decided_at = timezone.now()
        approval.reason = reason
        approval.save(update_fields=["status", "decided_by", "decided_at", "reason"])
        run_resume_record(
            run=run, entry={"interruptId": approval.interrupt_id, "status": "cancelled"}
        )
        if call is not None and call.state == ToolCall.State.AWAITING_APPROVAL:
            tool_call_transition(call=call, to=ToolCall.State.CANCELLED)
        audit_append(
            actor=cancelled_by,
            action="approval.cancelled",
            target=approval,
            after={"reason": reason, "interrupt_id": approval.interrupt_id},
        )
        notify_approval_changed(approval, call=call)
        if call is not None:
            done.append(call.tool_call_id)
    return done
