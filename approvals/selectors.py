"""Reads for the approval queue: who may see which requests, and the queue's order.

Implements SEC-02 (an operator sees exactly what was proposed and decided) and the
visibility rules of the REST API (DC-05).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db.models import Case, IntegerField, QuerySet, Value, When
from django.utils import timezone

from approvals.models import DECIDE_PERMISSION, ApprovalRequest
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
    )
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
) -> QuerySet[ApprovalRequest]:
    """Return the requests ``user`` may see: pending first, then newest first.

    ``older_than`` (seconds) keeps requests made at least that long ago.
    """
    approvals = approval_visible_to(user=user)
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
