"""The operator's approval queue page and its JSON read (thin shells over selectors).

``/approvals/`` renders the queue: the pending view (default) or recently decided
requests with their outcomes, filtered by tool, agent, requester and risk,
searched, sorted by expiry. Every card is :func:`approvals.selectors.approval_context`
for the viewer (``canAuthorize``, who can, risk, rationale...).
``/approvals/<id>/context.json`` re-reads one card after a live notification.
Decisions go through the REST API. Implements DC-03, DC-05, SEC-02.
``/approvals/link/<token>/`` is the page a notification's signed link opens
(:mod:`approvals.notifications.links`).
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core import signing
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.csrf import ensure_csrf_cookie
from django.views.decorators.http import require_GET

from approvals.models import DECIDE_PERMISSION, ApprovalRequest
from approvals.notifications.links import approval_link_verify
from approvals.selectors import (
    QUEUE_VIEWS,
    approval_context,
    approval_get,
    approval_queue,
    approval_queue_facets,
    can_see_queue,
)
from core.conf import countersign_settings

#: The query parameters the queue page reads, with their defaults.
QUEUE_FILTERS = {
    "tool": "",
    "agent": "",
    "requester": "",
    "risk": "",
    "q": "",
    "sort": "expires",
}


@require_GET
@login_required
@ensure_csrf_cookie
def approval_queue_page(request: HttpRequest) -> HttpResponse:
    """Render the queue; read-only for users without the decide permission."""
    if not can_see_queue(request.user):
        # A page that says why and what to do, with the status a client can read.
        return render(request, "ui/no_queue.html", {"nav": "approvals"}, status=403)
    view = request.GET.get("view", "pending")
    if view not in QUEUE_VIEWS:
        view = "pending"
    filters = {
        name: request.GET.get(name, default)[:200]
        for name, default in QUEUE_FILTERS.items()
    }
    cards = approval_queue(
        user=request.user,
        view=view,
        tool=filters["tool"],
        agent=filters["agent"],
        requester=filters["requester"],
        risk=filters["risk"],
        search=filters["q"].strip(),
        sort=filters["sort"],
    )
    return render(
        request,
        "ui/approval_queue.html",
        {
            "approvals": cards,
            "view": view,
            "filters": filters,
            "facets": approval_queue_facets(user=request.user),
            "risks": ["critical", "high", "medium", "low"],
            "can_decide": request.user.has_perm(DECIDE_PERMISSION),
            "undo_seconds": float(countersign_settings.DECISION_UNDO_SECONDS),
            "can_see_queue": True,
            "nav": "approvals",
        },
    )


@require_GET
@login_required
def approval_context_json(request: HttpRequest, pk: int) -> JsonResponse:
    """Return one card (:func:`approval_context`) for a request the user may see."""
    approval = approval_get(user=request.user, pk=pk)
    if approval is None or not can_see_queue(request.user):
        raise Http404("No such approval request, or you may not see it.")
    return JsonResponse(approval_context(approval, request.user))


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
    status = (
        ApprovalRequest.objects.filter(pk=pk).values_list("status", flat=True).first()
    )
    if status is None:
        return _invalid(request, "missing", status=404)
    # A request decided since the notification was sent is in the queue's decided view.
    view = "" if status == ApprovalRequest.Status.PENDING else "?view=decided"
    return redirect(f"{reverse('ui-approvals')}{view}#req-{pk}")


def _invalid(request: HttpRequest, problem: str, *, status: int) -> HttpResponse:
    return render(
        request,
        "ui/approval_link_invalid.html",
        {"problem": problem, "nav": "approvals"},
        status=status,
    )
