"""Snoozing a pending request for oneself: out of one's own queue until a chosen time.

A snooze changes nothing about the request: it stays pending, every other
approver sees it as before, it expires as any other, and deciding it stays
possible from the "All pending" and "Snoozed" views. It is not audited: it is
a view preference, not a decision. Implements DC-03 (the queue shows each
approver what they can act on now).
"""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from approvals.exceptions import ApprovalAlreadyDecided, InvalidSnooze
from approvals.models import ApprovalRequest, ApprovalSnooze
from core.types import User

#: The shortest and the longest snooze, in seconds (one minute, one week).
SNOOZE_MIN_SECONDS = 60
SNOOZE_MAX_SECONDS = 7 * 24 * 3600


def approval_snooze(
    *, approval: ApprovalRequest, user: User, seconds: float
) -> ApprovalSnooze:
    """Snooze pending ``approval`` for ``user`` for ``seconds``; return the snooze.

    A second snooze replaces the first (one per request and user). ``seconds``
    must be within [:data:`SNOOZE_MIN_SECONDS`, :data:`SNOOZE_MAX_SECONDS`].
    Raises :class:`InvalidSnooze` (400) outside it, :class:`ApprovalAlreadyDecided`
    (409) when the request is no longer pending. The caller checked that ``user``
    may see the request.
    """
    if not SNOOZE_MIN_SECONDS <= seconds <= SNOOZE_MAX_SECONDS:
        raise InvalidSnooze(
            f"cannot snooze for {seconds!r} seconds; choose between "
            f"{SNOOZE_MIN_SECONDS} (a minute) and {SNOOZE_MAX_SECONDS} (a week)"
        )
    status = (
        ApprovalRequest.objects.filter(pk=approval.pk)
        .values_list("status", flat=True)
        .first()
    )
    if status != ApprovalRequest.Status.PENDING:
        raise ApprovalAlreadyDecided(
            f"approval {approval.pk!r} is {status!r}, not pending; there is "
            "nothing to snooze"
        )
    snooze, _ = ApprovalSnooze.objects.update_or_create(
        approval=approval,
        user=user,
        defaults={"until": timezone.now() + timedelta(seconds=seconds)},
    )
    return snooze


def approval_unsnooze(*, approval: ApprovalRequest, user: User) -> bool:
    """Bring ``approval`` back into ``user``'s queue now; return whether it was snoozed."""
    deleted, _ = ApprovalSnooze.objects.filter(approval=approval, user=user).delete()
    return deleted > 0
