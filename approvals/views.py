"""The page a notification's signed link opens (thin shell over :mod:`approvals.notifications.links`)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core import signing
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET

from approvals.models import ApprovalRequest
from approvals.notifications.links import approval_link_verify


@require_GET
@login_required
def approval_link(request: HttpRequest, token: str) -> HttpResponse:
    """Verify a notification link and redirect to its request in the approval queue.

    Sign-in is required first (the login page returns here). An expired link
    answers 410 and a forged or altered one 400, each with a page saying what to
    do; a request that no longer exists, 404. The link grants nothing: deciding
    still needs ``approvals.decide_approvalrequest``.
    """
    try:
        pk = approval_link_verify(token)
    except signing.SignatureExpired:
        return _invalid(request, "expired", status=410)
    except signing.BadSignature:
        return _invalid(request, "invalid", status=400)
    if not ApprovalRequest.objects.filter(pk=pk).exists():
        return _invalid(request, "missing", status=404)
    return redirect(f"{reverse('ui-approvals')}?approval={pk}#approval-{pk}")


def _invalid(request: HttpRequest, problem: str, *, status: int) -> HttpResponse:
    return render(
        request,
        "ui/approval_link_invalid.html",
        {"problem": problem, "nav": "approvals"},
        status=status,
    )
