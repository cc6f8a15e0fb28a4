"""The operator's approval queue page and its JSON read (thin shells over selectors).

``/approvals/`` renders the queue: the pending view (default) or recently decided
requests with their outcomes, filtered by tool, agent, requester and risk,
searched, sorted by expiry. Every card is :func:`approvals.selectors.approval_context`
for the viewer (``canAuthorize``, who can, risk, rationale...).
``/approvals/<id>/context.json`` re-reads one card after a live notification;
``/approvals/<id>/preview.json`` grades an approver's edit before it is confirmed.
Decisions go through the REST API. Implements DC-03, DC-05, SEC-02.
``/approvals/link/<token>/`` is the page a notification's signed link opens
(:mod:`approvals.notifications.links`).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode, urlsplit

from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.core import signing
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import Resolver404, resolve, reverse
from django.views.decorators.csrf import ensure_csrf_cookie
from django.views.decorators.http import require_GET, require_POST

from approvals.exceptions import InvalidEditedArguments
from approvals.labels import approval_label
from approvals.models import DECIDE_PERMISSION, ApprovalRequest
from approvals.notifications.links import approval_link_verify
from approvals.selectors import (
    QUEUE_SORTS,
    QUEUE_VIEWS,
    RISK_LEVELS,
    approval_context,
    approval_edit_preview,
    approval_get,
    approval_queue,
    approval_queue_facets,
    approvals_waiting_for,
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
#: Every parameter the queue page takes; anything else is a 400 naming it.
QUEUE_PARAMETERS = ("view", *QUEUE_FILTERS, "mine", "page")
#: The values some parameters may take (the others are free text or a facet).
QUEUE_CHOICES = {
    "view": QUEUE_VIEWS,
    "sort": QUEUE_SORTS,
    "risk": ("", *RISK_LEVELS),
    "mine": ("", "0", "1"),
}


def _queue_problem(request: HttpRequest) -> str:
    """Return what is wrong with the queue's query string, as a sentence, or ``""``."""
    for name in request.GET:
        if name not in QUEUE_PARAMETERS:
            return (
                f"The queue has no filter called “{name[:60]}”. It filters by "
                + ", ".join(QUEUE_PARAMETERS)
                + "; remove it from the address."
            )
    for name, allowed in QUEUE_CHOICES.items():
        value = request.GET.get(name)
        if value is not None and value not in allowed:
            return (
                f"The filter “{name}” cannot be “{value[:60]}”: use one of "
                + ", ".join(f"“{a}”" for a in allowed if a)
                + "."
            )
    page = request.GET.get("page")
    if page is not None and not (page.isdigit() and 0 < int(page) < 10**6):
        return f"The page “{page[:60]}” is not a page number: use 1, 2, 3…"
    return ""


@require_GET
@login_required
@ensure_csrf_cookie
def approval_queue_page(request: HttpRequest) -> HttpResponse:
    """Render one page of the queue; read-only for users without the decide permission.

    Deciders see the requests they can decide now by default (``mine=1``;
    ``mine=0`` shows every pending request). An unknown parameter or a value
    outside its choices answers 400 with a page naming it (DC-03).
    """
    if not can_see_queue(request.user):
        # A page that says why and what to do, with the status a client can read.
        return render(request, "ui/no_queue.html", {"nav": "approvals"}, status=403)
    problem = _queue_problem(request)
    if problem:
        return render(
            request,
            "ui/queue_bad_filter.html",
            {"problem": problem, "nav": "approvals"},
            status=400,
        )
    view = request.GET.get("view", "pending")
    can_decide = request.user.has_perm(DECIDE_PERMISSION)
    mine = (
        view == "pending" and request.GET.get("mine", "1" if can_decide else "0") == "1"
    )
    filters = {
        name: request.GET.get(name, default)[:200]
        for name, default in QUEUE_FILTERS.items()
    }
    queue = approval_queue(
        user=request.user,
        view=view,
        tool=filters["tool"],
        agent=filters["agent"],
        requester=filters["requester"],
        risk=filters["risk"],
        search=filters["q"].strip(),
        sort=filters["sort"],
        mine=mine,
        page=int(request.GET.get("page", "1")),
    )
    # Beside "All pending", the number the tab title counts (the "I can decide" view).
    waiting_count = (
        approvals_waiting_for(user=request.user).count()
        if can_decide and view == "pending" and not mine
        else None
    )
    keep = {k: v for k, v in request.GET.items() if k != "page"}
    return render(
        request,
        "ui/approval_queue.html",
        {
            "approvals": queue["cards"],
            "queue": queue,
            "previous_url": "?" + urlencode({**keep, "page": queue["page"] - 1})
            if queue["page"] > 1
            else "",
            "next_url": "?" + urlencode({**keep, "page": queue["page"] + 1})
            if queue["page"] < queue["pages"]
            else "",
            "mine_url": "?" + urlencode({**keep, "mine": "0" if mine else "1"}),
            "view": view,
            "mine": mine,
            "waiting_count": waiting_count,
            "filters": filters,
            "facets": approval_queue_facets(user=request.user),
            "risks": ["critical", "high", "medium", "low"],
            "can_decide": can_decide,
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


@require_POST
@login_required
def approval_preview_json(request: HttpRequest, pk: int) -> JsonResponse:
    """Read an approver's edit before it is approved: ``{"arguments": {...}}`` in, the preview out.

    Answers :func:`approvals.selectors.approval_edit_preview` (the edit's risk,
    review and whether to confirm), so the confirmation of "Edit & approve"
    shows what would run, on the queue and the thread page alike. 400 naming
    the problem for a body that is not ``{"arguments": <object>}`` or an edit
    the approval would refuse; 404 for a request the user may not see. Changes
    nothing. Implements LP-01, SEC-02.
    """
    approval = approval_get(user=request.user, pk=pk)
    if approval is None or not can_see_queue(request.user):
        raise Http404("No such approval request, or you may not see it.")
    try:
        body = json.loads(request.body or b"null")
    except (json.JSONDecodeError, UnicodeDecodeError):
        body = None
    arguments = body.get("arguments") if isinstance(body, dict) else None
    if not isinstance(arguments, dict):
        return JsonResponse(
            {
                "error": "invalid_request",
                "field": "arguments",
                "detail": "send the edited arguments as a JSON object: "
                '{"arguments": {...}}',
            },
            status=400,
        )
    try:
        return JsonResponse(approval_edit_preview(approval, arguments=arguments))
    except InvalidEditedArguments as error:
        return JsonResponse(
            {"error": error.code, "field": "editedArguments", "detail": str(error)},
            status=400,
        )


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


def approval_link_waiting(next_url: str) -> str:
    """Return what waits behind a signed approval link ``next_url``, as a sentence, or ``""``.

    ``"Sign in to decide: Refunding 25.0 on order A-1001 (refund_order), requested
    by olivia."`` for a pending request; a decided one says how to see its
    outcome. Only what the notification that carried the link already said (its
    label, tool and requester; never arguments), and only for the request the
    link names: ``""`` for any other address, a forged, altered or expired link,
    or a request that no longer exists. Implements DC-05.
    """
    try:
        match = resolve(urlsplit(next_url).path)
    except Resolver404:
        return ""
    if match.url_name != "approval-link":
        return ""
    try:
        pk = approval_link_verify(str(match.kwargs.get("token", "")))
    except signing.BadSignature:  # SignatureExpired is one
        return ""
    approval = (
        ApprovalRequest.objects.select_related("requested_by", "thread__owner", "run")
        .filter(pk=pk)
        .first()
    )
    if approval is None:
        return ""
    label = approval_label(approval)
    what = f"{label} ({approval.tool_name})" if label else approval.tool_name
    requester = approval.requested_by or approval.thread.owner
    who = getattr(requester, "username", None) or "unknown"
    if approval.status == ApprovalRequest.Status.PENDING:
        return f"Sign in to decide: {what}, requested by {who}."
    return (
        f"Sign in to see how it ended: {what}, requested by {who}, "
        f"is {approval.status} already."
    )


class LoginView(auth_views.LoginView):
    """Django's login, saying what waits when it was reached from a signed approval link."""

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        """Add ``waiting`` (:func:`approval_link_waiting` of the ``next`` address)."""
        context = super().get_context_data(**kwargs)
        context["waiting"] = approval_link_waiting(self.get_redirect_url())
        return context
