"""Abandoning a thread's pending calls, and cancelling a client's run (FT-06, BC20, BC21, IR-01)."""

from __future__ import annotations

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from approvals.exceptions import ApprovalPermissionDenied
from approvals.locks import approval_lock, call_approval_lock
from approvals.models import (
    CANCEL_ANY_PENDING_PERMISSION,
    DECIDE_PERMISSION,
    ApprovalRequest,
)
from approvals.services.audit import audit_append
from approvals.services.dispatch import call_answer_refused
from approvals.services.notify import notify_approval_changed, notify_call_changed
from approvals.transitions import approval_transition
from core.types import User
from threads.answers import run_finish_if_answered
from threads.exceptions import RunNotCancellable
from threads.locks import calls_lock, run_lock, thread_lock
from threads.models import Run, Thread, ToolCall
from threads.selectors import client_run
from threads.services import run_cancel, run_resume_record
from threads.transitions import tool_call_transition
from threads.wire import wire_run_close_cancelled


def client_run_cancel(*, run: Run, cancelled_by: User) -> Run:
    """Cancel the client-visible run ``run`` stands for, whatever part of it is live.

    ``run`` is the run a client named by its ``runId`` (or one of its segments).
    A segment that is queued or running is cancelled as any run is
    (:func:`threads.services.run_cancel`: a queued one ends at once, a running one
    at its worker's next event boundary), and its cancelled ``RUN_FINISHED`` ends
    the client's run. While Countersign is answering the calls a segment handed
    over, the parts not yet under way are abandoned through
    :func:`thread_pending_calls_cancel` (held approvals and pending calls answered
    as cancelled), calls already executing finish without a continuation
    (``Run.cancel_requested``), and the client's run ends with
    ``{type:"cancelled"}`` at once. Returns the client's run as stored. Raises
    :class:`RunNotCancellable` once the client's run has ended and
    :class:`ApprovalPermissionDenied` as ``thread_pending_calls_cancel`` does.
    Implements IR-01 (a cancelled run ends ``cancelled``).
    """
    wire = run.wire_run
    if not wire.managed:
        return run_cancel(run=run)
    with transaction.atomic():
        locked = run_lock(run_pk=wire.pk, thread_pk=wire.thread_id)
        if locked.wire_state != Run.WireState.OPEN:
            ended = client_run(run=locked).status
            raise RunNotCancellable(
                f"run {locked.run_id!r} already ended ({ended}); nothing to cancel"
            )
        live = run_lock(
            run_pk=Run.objects.filter(Q(pk=wire.pk) | Q(outer=wire))
            .order_by("-created_at", "-id")
            .values_list("pk", flat=True)[0]
        )
        if live.status not in Run.ACTIVE_STATUSES:
            thread_pending_calls_cancel(
                thread=locked.thread,
                cancelled_by=cancelled_by,
                reason=f"the client's run {locked.run_id!r} was cancelled by "
                f"{getattr(cancelled_by, 'username', None) or 'its client'}",
            )
            Run.objects.filter(pk=live.pk).update(cancel_requested=True)
            live.cancel_requested = True
            wire_run_close_cancelled(run=live)
        else:
            run_cancel(run=live)
    wire.refresh_from_db()
    return wire


def thread_pending_calls_cancel(
    *, thread: Thread, cancelled_by: User, reason: str
) -> list[str]:
    """Abandon every unanswered call of ``thread``'s last run; return their ``toolCallId`` values.

    Each call is answered with a tool message saying it was cancelled and why
    (FT-06: the next run still gets one tool message per call); pending approval
    requests become ``cancelled``; calls already executing are left to finish.
    No continuation run starts: the user moves on with a new message. The thread's
    owner, a holder of the decide permission or of ``approvals.cancel_any_pending``
    may do this (``is_staff`` alone may not); others get
    :class:`ApprovalPermissionDenied`. Implements FT-06, BC20, BC21, SEC-06.
    """
    allowed = (
        cancelled_by.has_perm(CANCEL_ANY_PENDING_PERMISSION)
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
            if _call_cancel_locked(call=call, cancelled_by=cancelled_by, reason=reason):
                cancelled.append(call.tool_call_id)
        cancelled += _interrupts_cancel(
            run=run, cancelled_by=cancelled_by, reason=reason
        )
        run_finish_if_answered(run=run)
    return cancelled


def _approval_cancel(
    *, approval: ApprovalRequest, cancelled_by: User, reason: str
) -> None:
    """Move locked pending ``approval`` to ``cancelled``, recording who and why."""
    approval_transition(
        approval=approval, to=ApprovalRequest.Status.CANCELLED, save=False
    )
    approval.decided_by = cancelled_by
    approval.decided_at = timezone.now()
    approval.reason = reason
    approval.save(update_fields=["status", "decided_by", "decided_at", "reason"])


def _call_cancel_locked(*, call: ToolCall, cancelled_by: User, reason: str) -> bool:
    """Answer locked ``call`` as cancelled and close its pending approval; return whether it was.

    A call already approved, executing or of unknown outcome is left alone
    (``False``): its execution may have started. Must run holding the call's lock.
    """
    if call.state in (
        ToolCall.State.APPROVED,
        ToolCall.State.EXECUTING,
        ToolCall.State.OUTCOME_UNKNOWN,
    ):
        return False
    approval = call_approval_lock(call=call)
    if approval is not None and approval.status == ApprovalRequest.Status.PENDING:
        _approval_cancel(approval=approval, cancelled_by=cancelled_by, reason=reason)
    if not call_answer_refused(
        call=call,
        status="cancelled",
        reason=reason,
        error="cancelled",
        state=ToolCall.State.CANCELLED,
        actor=cancelled_by,
    ):
        return False
    notify_call_changed(call, approval=approval)
    return True


def call_pending_cancel(*, call: ToolCall, cancelled_by: User, reason: str) -> str:
    """Cancel one call whose caller gave up (an MCP client's cancellation); return what happened.

    ``"cancelled"``: it was still waiting (for a person, or unanswered), so it is
    answered as cancelled and its pending approval request closed, and its run
    finishes once every call of it is answered; ``"cancelled_after_start"``: it
    was approved or running, so it is left to finish and an audit entry
    ``tool_call.cancelled_after_start`` records that its result goes nowhere;
    ``"answered"``: it already had its answer. Implements FT-06, DC-04, SEC-04.
    """
    with transaction.atomic():
        run = run_lock(run_pk=call.run_id, thread_pk=call.thread_id)
        locked = calls_lock(calls=ToolCall.objects.filter(pk=call.pk))[0]
        if ToolCall.objects.filter(pk=locked.pk).answered().exists():
            return "answered"
        if _call_cancel_locked(call=locked, cancelled_by=cancelled_by, reason=reason):
            run_finish_if_answered(run=run)
            return "cancelled"
        audit_append(
            actor=cancelled_by,
            action="tool_call.cancelled_after_start",
            target=locked,
            after={"reason": reason, "state": locked.state},
        )
        return "cancelled_after_start"


def _interrupts_cancel(*, run: Run, cancelled_by: User, reason: str) -> list[str]:
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
        _approval_cancel(approval=approval, cancelled_by=cancelled_by, reason=reason)
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
