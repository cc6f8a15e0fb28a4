"""Escalation: a request not decided within its step's time moves to the next group(s).

Driven by the beat schedule (``approvals.tasks.expire_approvals``, Celery beat or
the embedded beat), which escalates before it expires. Only the request's final
``expires_at`` answers the call as expired. Each move is audited
(``approval.escalated``), drops any claim, and sends the ``approval_escalated``
signal (``approvals.signals``) for the notification channels. Implements DC-03.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from approvals.governance import groups_named
from approvals.locks import approval_lock
from approvals.models import ApprovalRequest
from approvals.services.audit import audit_append
from approvals.services.notify import notify_approval_changed
from approvals.signals import approval_escalated, send_on_commit


def approval_escalate_locked(approval: ApprovalRequest, *, now: datetime) -> bool:
    """Move the locked, pending ``approval`` to its next escalation step; return whether it moved.

    The step's groups replace the approver groups; the next step's deadline (or
    none after the last) is set; approvals already given are kept.
    """
    steps = approval.escalation or []
    if (
        approval.status != ApprovalRequest.Status.PENDING
        or approval.step_deadline is None
        or approval.step_deadline > now
        or approval.escalation_step >= len(steps)
    ):
        return False
    before = sorted(approval.approver_groups.values_list("name", flat=True))
    step = steps[approval.escalation_step]
    approval.escalation_step += 1
    following = steps[approval.escalation_step : approval.escalation_step + 1]
    approval.step_deadline = (
        now + timedelta(seconds=float(following[0]["after_seconds"]))
        if following
        else None
    )
    approval.claimed_by = None
    approval.claimed_at = None
    approval.save(
        update_fields=["escalation_step", "step_deadline", "claimed_by", "claimed_at"]
    )
    groups = groups_named(step["groups"])
    approval.approver_groups.set(groups)
    names = [g.name for g in groups]
    audit_append(
        actor=None,
        action="approval.escalated",
        target=approval,
        before={"groups": before, "step": approval.escalation_step - 1},
        after={"groups": names, "step": approval.escalation_step},
    )
    send_on_commit(
        approval_escalated,
        approval,
        group=names[0] if names else "",
        groups=names,
        step=approval.escalation_step,
    )
    notify_approval_changed(approval, call=approval.call)
    return True


def approvals_escalate(*, now: datetime | None = None) -> int:
    """Escalate every pending request whose step deadline passed; return how many moved.

    Called by the beat task before expiry. Implements DC-03.
    """
    now = now or timezone.now()
    count = 0
    due = ApprovalRequest.objects.filter(
        status=ApprovalRequest.Status.PENDING,
        step_deadline__lte=now,
        expires_at__gt=now,
    )
    for pending in list(due):
        with transaction.atomic():
            _, _, approval = approval_lock(approval=pending)
            count += approval_escalate_locked(approval, now=now)
    return count
