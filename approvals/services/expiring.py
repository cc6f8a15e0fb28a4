"""Announcing pending requests about to expire, once each (``approval_expiring``)."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.utils import timezone

from approvals.models import ApprovalRequest
from approvals.signals import approval_expiring, send_now
from core.conf import countersign_settings


def approvals_expiring_announce(*, now: datetime | None = None) -> int:
    """Send ``approval_expiring`` for each pending request expiring within the threshold.

    The threshold is ``COUNTERSIGN["NOTIFY_EXPIRING_SECONDS"]``; a request is
    announced once (``expiry_announced_at`` is claimed by a conditional update, so
    two beats never both announce it). Returns how many were announced. Run by
    the beat every 30 s.
    """
    now = now or timezone.now()
    horizon = now + timedelta(
        seconds=float(countersign_settings.NOTIFY_EXPIRING_SECONDS)
    )
    due = ApprovalRequest.objects.filter(
        status=ApprovalRequest.Status.PENDING,
        expiry_announced_at__isnull=True,
        expires_at__gt=now,
        expires_at__lte=horizon,
    )
    count = 0
    for approval in list(due):
        claimed = ApprovalRequest.objects.filter(
            pk=approval.pk, expiry_announced_at__isnull=True
        ).update(expiry_announced_at=now)
        if claimed:
            approval.expiry_announced_at = now
            send_now(approval_expiring, approval)
            count += 1
    return count
