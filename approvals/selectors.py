"""Reads for the approval queue: who may see which requests, and the queue's order.

Implements SEC-02 (an operator sees exactly what was proposed and decided) and the
visibility rules of the REST API (DC-05).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db.models import Case, IntegerField, Q, QuerySet, Value, When
from django.utils import timezone

from approvals.governance import assigned_to
from approvals.models import DECIDE_PERMISSION, ApprovalGrant, ApprovalRequest
from threads.selectors import thread_visible_to

VIEW_PERMISSION = "approvals.view_approvalrequest"


def approval_visible_to(*, user: Any) -> QuerySet[ApprovalRequest]:
    """Return the requests ``user`` may see.

    Staff and holders of the decide or view permission see every request; other
    users see the requests on their own threads.
    """
    approvals = ApprovalRequest.objects.select_related(
        "tool_call",
        "thread",
        "run",
        "decided_by",
        "supersedes",
        "superseded_by__tool_call",
        "claimed_by",
    ).prefetch_related("approver_groups", "votes__voter")
    if not getattr(user, "is_authenticated", False):
        return approvals.none()
    if (
        user.is_staff
        or user.has_perm(DECIDE_PERMISSION)
        or user.has_perm(VIEW_PERMISSION)
    ):
        return approvals
    return approvals.filter(thread__in=thread_visible_to(user=user))


def approval_list(
    *,
    user: Any,
    tool: str | None = None,
    thread_id: str | None = None,
    status: str | None = None,
    older_than: float | None = None,
    assigned_to_me: bool = False,
) -> QuerySet[ApprovalRequest]:
    """Return the requests ``user`` may see: pending first, then newest first.

    ``older_than`` (seconds) keeps requests made at least that long ago;
    ``assigned_to_me`` only the pending ones ``user`` may work on now
    (:func:`approvals.governance.assigned_to`).
    """
    approvals = approval_visible_to(user=user)
    if assigned_to_me:
        approvals = approvals.filter(
            pk__in=assigned_to(
                user=user, approvals=ApprovalRequest.objects.all()
            ).values("pk")
        )
    if tool is not None:
        approvals = approvals.filter(tool_name=tool)
    if thread_id is not None:
        approvals = approvals.filter(thread__thread_id=thread_id)
    if status is not None:
        approvals = approvals.filter(status=status)
    if older_than is not None:
        approvals = approvals.filter(
            requested_at__lte=timezone.now() - timedelta(seconds=older_than)
        )
    return approvals.annotate(
        pending_rank=Case(
            When(status=ApprovalRequest.Status.PENDING, then=Value(0)),
            default=Value(1),
            output_field=IntegerField(),
        )
    ).order_by("pending_rank", "-requested_at", "-id")


def approval_get(*, user: Any, pk: int) -> ApprovalRequest | None:
    """Return request ``pk`` if ``user`` may see it, else ``None``."""
    return approval_visible_to(user=user).filter(pk=pk).first()


def grant_list(
    *, user: Any, tool: str | None = None, active: bool | None = None
) -> QuerySet[ApprovalGrant]:
    """Return the scoped grants ``user`` may see, newest first (deciders and viewers see all).

    ``active`` true keeps the unrevoked, unexpired ones; false the others.
    """
    grants = ApprovalGrant.objects.select_related(
        "thread", "user", "granted_by", "revoked_by"
    )
    if not getattr(user, "is_authenticated", False) or not (
        user.is_staff
        or user.has_perm(DECIDE_PERMISSION)
        or user.has_perm(VIEW_PERMISSION)
    ):
        return grants.none()
    if tool is not None:
        grants = grants.filter(tool_name=tool)
    if active is not None:
        live = Q(revoked_at__isnull=True, expires_at__gt=timezone.now())
        grants = grants.filter(live) if active else grants.exclude(live)
    return grants


def grant_get(*, user: Any, pk: int) -> ApprovalGrant | None:
    """Return grant ``pk`` if ``user`` may see it, else ``None``."""
    return grant_list(user=user).filter(pk=pk).first()
