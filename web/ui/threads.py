"""The operator web UI: server-rendered pages plus small JSON reads for their ES modules.

Pages: the thread list (``/``), a thread (``/threads/<threadId>/``) and the approval
queue (``/approvals/``). Writes go through the REST API (``/api/...``) from the
browser, with the CSRF token; live updates come from the WebSocket consumers
(``ws/threads/<threadId>/`` and ``ws/approvals/``). The JSON views here are reads
only: the list of threads (polled for new threads) and a thread's call state
(tool labels, states, approvals, results), which are not all part of the AG-UI
event log. Data reaches the scripts through ``json_script`` and ``data-``
attributes; the Content-Security-Policy forbids inline scripts (SEC-03).
Implements DC-05, DC-02, DC-03.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import AnonymousUser
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.templatetags.static import static
from django.views.decorators.csrf import ensure_csrf_cookie
from django.views.decorators.http import require_GET

from approvals.authorization import approval_authorization, users_with_permission
from approvals.labels import approval_label
from approvals.models import DECIDE_PERMISSION, ApprovalRequest
from approvals.selectors import (
    VIEW_PERMISSION,
    approval_context,
    approvals_waiting_for,
    can_see_queue,
)
from core.conf import countersign_settings
from core.types import AnyUser
from threads.agent_config import agent_is_external, agent_is_gateway, agent_toolset
from threads.exceptions import UnknownAgent
from threads.models import Message, Thread, ToolCall
from threads.selectors import (
    ClientRun,
    thread_by_agui_id,
    thread_client_runs,
    thread_status,
    thread_visible_to,
)

if TYPE_CHECKING:
    from agentcore.tools import Toolset

logger = logging.getLogger(__name__)

STATUS_LABELS = {
    "running": "running",
    "waiting_for_approval": "waiting for approval",
    "waiting_for_tools": "waiting for tools",
    "idle": "idle",
    "failed": "failed",
}


# -- reads ----------------------------------------------------------------------


def _thread_row(thread: Thread) -> dict[str, Any]:
    status = thread_status(thread=thread)
    return {
        "id": thread.thread_id,
        "title": thread.title or "Untitled thread",
        "agent": thread.agent,
        "status": status,
        "statusLabel": STATUS_LABELS.get(status, status),
        "updatedAt": thread.updated_at.isoformat(),
        "url": f"/threads/{thread.thread_id}/",
    }


def _threads_for(user: AnyUser, *, limit: int = 200) -> list[dict[str, Any]]:
    threads = thread_visible_to(user=user).filter(archived_at__isnull=True)
    return [_thread_row(t) for t in threads.order_by("-updated_at", "-id")[:limit]]


def _activity_label(toolset: Toolset | None, call: ToolCall, arguments: Any) -> str:
    """Return the tool's ``describe_activity`` label for ``call``, or ``""`` when unknown."""
    if toolset is None or not isinstance(arguments, dict):
        return ""
    tool = toolset.resolve(call.name)
    if tool is None:
        return ""
    try:
        return str(tool.describe_activity(arguments))
    except Exception:
        logger.warning("describe_activity of %r failed", call.name, exc_info=True)
        return ""


def _approval_view(
    approval: ApprovalRequest, user: AnyUser | None = None
) -> dict[str, Any]:
    return {
        "id": approval.pk,
        "kind": approval.kind,
        "status": approval.status,
        "proposedArguments": approval.proposed_arguments,
        "editedArguments": approval.edited_arguments,
        "decidedBy": getattr(approval.decided_by, "username", None),
        "decidedAt": approval.decided_at.isoformat() if approval.decided_at else None,
        "reason": approval.reason,
        # An approver's answer in place of the tool's result (status "responded").
        "response": approval.response,
        "requestedAt": approval.requested_at.isoformat()
        if approval.requested_at
        else None,
        "expiresAt": approval.expires_at.isoformat(),
        "isDestructive": approval.is_destructive,
        "queueUrl": f"/approvals/#req-{approval.pk}",
        # Risk, requester, rationale, who may authorize, outcome (SEC-02, DC-03).
        "context": approval_context(
            approval, user if user is not None else AnonymousUser()
        ),
    }


def _run_view(run: ClientRun) -> dict[str, Any]:
    """One client-visible run as the thread page shows it (the story its client saw)."""
    return {
        "runId": run.run.run_id,
        "status": run.status,
        "outcome": run.outcome,
        "pendingToolCallIds": run.pending_tool_call_ids,
        "interruptIds": run.interrupt_ids,
        "error": run.error,
        "segments": [s.run_id for s in run.segments],
    }


def thread_ui_state(*, thread: Thread, user: AnyUser | None = None) -> dict[str, Any]:
    """Return what a thread page needs beyond the event log, as JSON-ready data.

    ``calls`` maps each ``toolCallId`` to its name, activity label, state (and
    label), approval (proposed and edited arguments, who decided when and why,
    and as ``context`` :func:`approvals.selectors.approval_context` for ``user``:
    risk, whether they may authorize it, how the execution ended) and result
    (the tool message's content and error); ``pendingUserMessages`` are user messages whose
    run has not started yet (their ``RUN_STARTED`` echo is not in the log);
    ``status`` is :func:`threads.selectors.thread_status`; ``runs`` lists one entry
    per client-visible run (one per POST or posted message: ``runId``, ``status``,
    ``outcome``, ``pendingToolCallIds``, ``interruptIds``, ``error``, and the agent's
    ``segments`` inside it), and each call's ``runId`` is the run that streamed it,
    so the page tells the story the AG-UI client saw.
    """

    try:
        toolset = agent_toolset(thread.agent)
    except UnknownAgent:
        toolset = None
    results = {
        m.tool_call_id: m
        for m in Message.objects.filter(thread=thread, role=Message.Role.TOOL)
    }
    calls: dict[str, Any] = {}
    for call in (
        ToolCall.objects.filter(thread=thread)
        .select_related(
            "run",
            "run__outer",
            "approval",
            "approval__decided_by",
            "approval__requested_by",
        )
        .order_by("position", "id")
    ):
        approval = getattr(call, "approval", None)
        result = results.get(call.tool_call_id)
        calls[call.tool_call_id] = {
            "name": call.name,
            "runId": call.run.wire_run.run_id,
            # An operator's edit is what runs, so the label describes it.
            "label": _activity_label(
                toolset,
                call,
                approval.approved_arguments if approval is not None else call.arguments,
            ),
            "state": call.state,
            "stateLabel": ToolCall.State(call.state).label,
            "argumentsText": call.arguments_text,
            "approval": _approval_view(approval, user)
            if approval is not None
            else None,
            "result": (
                {"content": result.content, "error": result.error}
                if result is not None
                else None
            ),
        }
    pending_users = [
        {"id": m.message_id, "content": m.content}
        for m in Message.objects.filter(
            thread=thread, role=Message.Role.USER, position__gte=thread.next_seq
        ).order_by("position", "id")
    ]
    status = thread_status(thread=thread)
    return {
        "threadId": thread.thread_id,
        "status": status,
        "statusLabel": STATUS_LABELS.get(status, status),
        "calls": calls,
        "runs": [_run_view(run) for run in thread_client_runs(thread=thread)],
        "pendingUserMessages": pending_users,
    }


def _visible_thread(request: HttpRequest, thread_id: str) -> Thread:
    thread = thread_by_agui_id(user=request.user, agui_id=thread_id)
    if thread is None:
        raise Http404("No such thread, or it is not yours.")
    return thread


def _administrators(limit: int = 3) -> list[str]:
    """Return the usernames of up to ``limit`` active users who can grant permissions.

    Those who may change users in the admin (``auth.change_user``; superusers
    hold every permission).
    """
    users = users_with_permission("auth.change_user")
    return [u.get_username() for u in users.order_by("username")[:limit]]


def _thread_refusal(request: HttpRequest, thread_id: str) -> HttpResponse:
    """Render why ``request.user`` cannot open ``thread_id`` and what to do about it.

    403 with the missing permission for a user who can see the approval queue
    (the queue links to every thread with a request, so its existence is no
    secret to them); 404 otherwise, saying the thread does not exist or belongs
    to someone else, without telling which. The page, not Django's debug page,
    for the UI routes.
    """
    user = request.user
    thread = Thread.objects.filter(thread_id=thread_id).select_related("owner").first()
    context: dict[str, Any] = {
        "nav": "threads",
        "can_see_queue": can_see_queue(user),
        "administrators": _administrators(),
        "decide_permission": DECIDE_PERMISSION,
    }
    if thread is not None and can_see_queue(user):
        owner = getattr(thread.owner, "username", "") if thread.owner_id else ""
        return render(
            request,
            "ui/forbidden.html",
            {
                **context,
                "heading": "You can't open this thread",
                "missing": "decide",
                "owner": owner,
                "has_view": user.has_perm(VIEW_PERMISSION),
            },
            status=403,
        )
    return render(
        request,
        "ui/forbidden.html",
        {**context, "heading": "No such thread", "missing": "thread"},
        status=404,
    )


# -- pages ----------------------------------------------------------------------


@require_GET
def favicon(request: HttpRequest) -> HttpResponse:
    """Redirect ``/favicon.ico`` (asked for by browsers on every page) to ``ui/favicon.svg``.

    302, not 301: under the manifest storage the target's hashed name changes
    with the file, so browsers must not remember it for ever. No login needed.
    """
    return redirect(static("ui/favicon.svg"))


@require_GET
@login_required
@ensure_csrf_cookie
def thread_list(request: HttpRequest) -> HttpResponse:
    """Render the thread list with a "new thread" form; the script keeps it live."""
    # Agents that run elsewhere (an MCP gateway, an external agent) take no message here.
    agents = [
        name
        for name in sorted(getattr(settings, "COUNTERSIGN_AGENTS", {}))
        if not (agent_is_gateway(name) or agent_is_external(name))
    ]
    return render(
        request,
        "ui/thread_list.html",
        {
            "threads": _threads_for(request.user),
            "agents": agents,
            "can_see_queue": can_see_queue(request.user),
            "nav": "threads",
        },
    )


@require_GET
@login_required
def thread_list_json(request: HttpRequest) -> JsonResponse:
    """Return ``{"threads": [...]}`` for the list page's polling."""
    return JsonResponse({"threads": _threads_for(request.user)})


@require_GET
@login_required
@ensure_csrf_cookie
def thread_detail(request: HttpRequest, thread_id: str) -> HttpResponse:
    """Render a thread page; its script replays the event log and follows it live.

    A thread the user may not see gets :func:`_thread_refusal`'s page (403/404).
    """
    try:
        thread = _visible_thread(request, thread_id)
    except Http404:
        return _thread_refusal(request, thread_id)
    return render(
        request,
        "ui/thread_detail.html",
        {
            "thread": thread,
            "ui_state": thread_ui_state(thread=thread, user=request.user),
            "undo_seconds": float(countersign_settings.DECISION_UNDO_SECONDS),
            "can_see_queue": can_see_queue(request.user),
            "is_owner": thread.owner_id == request.user.pk,
            "nav": "threads",
        },
    )


@require_GET
@login_required
def thread_state_json(request: HttpRequest, thread_id: str) -> JsonResponse:
    """Return :func:`thread_ui_state` for a thread the user may see."""
    thread = _visible_thread(request, thread_id)
    return JsonResponse(thread_ui_state(thread=thread, user=request.user))


@require_GET
@login_required
def attention_json(request: HttpRequest) -> JsonResponse:
    """Return the pending requests waiting for ``request.user``, for the tab title and notifications.

    ``{"count": n, "requests": [{"id", "tool", "label", "threadId",
    "threadTitle", "url", "canDecide", "canApprove"}]}``, oldest first (at most
    500); ``url`` opens the call in its thread. The requests are
    :func:`approvals.selectors.approvals_waiting_for` (the queue's "I can
    decide" view), so ``count`` (all of them, past 500 too) is the number that
    view shows; ``canApprove`` is false where the viewer may only reject (a tool
    permission they lack). Empty for users without
    ``approvals.decide_approvalrequest``. Feeds the tab-title count and the
    browser notifications of every page. Implements DC-03.
    """
    user = request.user
    requests: list[dict[str, Any]] = []
    count = 0
    if user.has_perm(DECIDE_PERMISSION):
        waiting = approvals_waiting_for(user=user)
        count = waiting.count()
        pending = waiting.select_related("tool_call", "thread").order_by(
            "requested_at", "id"
        )[:500]
        for approval in pending:
            call = approval.call
            anchor = f"#call-{call.tool_call_id}" if call is not None else ""
            requests.append(
                {
                    "id": approval.pk,
                    "tool": approval.tool_name,
                    "label": approval_label(approval),
                    "threadId": approval.thread.thread_id,
                    "threadTitle": approval.thread.title,
                    "url": f"/threads/{quote(approval.thread.thread_id)}/{anchor}",
                    "canDecide": True,
                    # The decide permission and the tool's own (approvals.authorization).
                    "canApprove": approval_authorization(approval, user).can_authorize,
                }
            )
    return JsonResponse({"count": count, "requests": requests})
