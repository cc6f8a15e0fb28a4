"""Claiming an approval request so two approvers don't work on the same one.

A claim is held by one allowed approver until they release it, decide the
request, the request escalates, or ``COUNTERSIGN["APPROVAL_CLAIM_SECONDS"]``
pass. While it is held, other approvers' votes are refused with 409
(:func:`approvals.authorization.claim_refusal`, part of
:func:`approvals.authorization.authorization_require`). Audited. Implements DC-03.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from approvals.authorization import authorization_require
from approvals.exceptions import ApprovalAlreadyDecided, ApprovalClaimed
from approvals.locks import approval_lock
from approvals.models import RELEASE_ANY_CLAIM_PERMISSION, ApprovalRequest
from approvals.services.audit import audit_append
from approvals.services.notify import notify_approval_changed
from core.types import User


def approval_claim(*, approval: ApprovalRequest, user: User) -> ApprovalRequest:
    """Claim the pending ``approval`` for ``user``; return it. Claiming again renews the claim.

    Raises :class:`ApprovalPermissionDenied` when ``user`` may not decide it
    (:func:`approvals.authorization.authorization_require`: the decide
    permission, approver groups, four-eyes), :class:`ApprovalClaimed` when
    someone else holds a live claim, :class:`ApprovalAlreadyDecided` when it is
    no longer pending.
    """
    with transaction.atomic():
        _, call, locked = approval_lock(approval=approval)
        _pending(locked)
        authorization_require(approval=locked, user=user, decision="reject")
        locked.claimed_by = user
        locked.claimed_at = timezone.now()
        locked.save(update_fields=["claimed_by", "claimed_at"])
        audit_append(actor=user, action="approval.claimed", target=locked)
        notify_approval_changed(locked, call=call)
    return locked


def approval_release(*, approval: ApprovalRequest, user: User) -> ApprovalRequest:
    """Release ``user``'s claim on ``approval``; return it.

    A holder of ``approvals.release_any_claim`` may release anyone's claim
    (``is_staff`` alone may not). Raises :class:`ApprovalClaimed` when the claim
    is someone else's and ``user`` lacks that permission; releasing an unclaimed
    request changes nothing. Implements SEC-06.
    """
    with transaction.atomic():
        _, call, locked = approval_lock(approval=approval)
        if locked.claimed_by_id is None:
            return locked
        if locked.claimed_by_id != user.pk and not user.has_perm(
            RELEASE_ANY_CLAIM_PERMISSION
        ):
            raise ApprovalClaimed(
                f"approval {locked.pk!r} is claimed by "
                f"{getattr(locked.claimed_by, 'username', None)!r}; only they, or a "
                f"holder of the {RELEASE_ANY_CLAIM_PERMISSION!r} permission, may "
                "release it"
            )
        holder = getattr(locked.claimed_by, "username", None)
        locked.claimed_by = None
        locked.claimed_at = None
        locked.save(update_fields=["claimed_by", "claimed_at"])
        audit_append(
            actor=user,
            action="approval.released",
            target=locked,
            before={"claimed_by": holder},
        )
        notify_approval_changed(locked, call=call)
    return locked


def _pending(approval: ApprovalRequest) -> None:
    if approval.status != ApprovalRequest.Status.PENDING:
        raise ApprovalAlreadyDecided(
            f"approval {approval.pk!r} is {approval.status!r}; only a pending "
            "request can be claimed"
        )
