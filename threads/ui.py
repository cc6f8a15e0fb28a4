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
from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.csrf import ensure_csrf_cookie
from django.views.decorators.http import require_GET

from approvals.models import ApprovalRequest
from approvals.services import approval_snapshot
from threads.agent_config import agent_toolset
from threads.exceptions import UnknownAgent
from threads.models import Message, Thread, ToolCall
from threads.selectors import (
    ClientRun,
    thread_client_runs,
    thread_status,
    thread_visible_to,
)

logger = logging.getLogger(__name__)

DECIDE_PERMISSION = "approvals.decide_approvalrequest"
VIEW_PERMISSION = "approvals.view_approvalrequest"

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


def _threads_for(user: Any, *, limit: int = 200) -> list[dict[str, Any]]:
    threads = thread_visible_to(user=user).filter(archived_at__isnull=True)
    return [_thread_row(t) for t in threads.order_by("-updated_at", "-id")[:limit]]


def _activity_label(toolset: Any, call: ToolCall, arguments: Any) -> str:
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


def _approval_view(approval: Any) -> dict[str, Any]:
    return {
        "id": approval.pk,
        "status": approval.status,
        "proposedArguments": approval.proposed_arguments,
        "editedArguments": approval.edited_arguments,
        "decidedBy": getattr(approval.decided_by, "username", None),
        "reason": approval.reason,
        "expiresAt": approval.expires_at.isoformat(),
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


def thread_ui_state(*, thread: Thread) -> dict[str, Any]:
    """Return what a thread page needs beyond the event log, as JSON-ready data.

    ``calls`` maps each ``toolCallId`` to its name, activity label, state (and
    label), approval (with proposed and edited arguments) and result (the tool
    message's content and error); ``pendingUserMessages`` are user messages whose
    run has not started yet (their ``RUN_STARTED`` echo is not in the log);
    ``status`` is :func:`threads.selectors.thread_status`; ``runs`` lists one entry
    per client-visible run (one per POST or posted message: ``runId``, ``status``,
    ``outcome``, ``pendingToolCallIds``, ``interruptIds``, ``error``, and the agent's
    ``segments`` inside it), and each call's ``runId`` is the run that streamed it,
    so the page tells the story the AG-UI client saw (issue 13.1).
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
        .select_related("run", "run__outer", "approval", "approval__decided_by")
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
            "approval": _approval_view(approval) if approval is not None else None,
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
    thread = thread_visible_to(user=request.user).filter(thread_id=thread_id).first()
    if thread is None:
        raise Http404("No such thread, or it is not yours.")
    return thread


def _can_see_queue(user: Any) -> bool:
    return bool(user.has_perm(DECIDE_PERMISSION) or user.has_perm(VIEW_PERMISSION))


# -- pages ----------------------------------------------------------------------


@require_GET
@login_required
@ensure_csrf_cookie
def thread_list(request: HttpRequest) -> HttpResponse:
    """Render the thread list with a "new thread" form; the script keeps it live."""
    agents = sorted(getattr(settings, "COUNTERSIGN_AGENTS", {}))
    return render(
        request,
        "ui/thread_list.html",
        {
            "threads": _threads_for(request.user),
            "agents": agents,
            "can_see_queue": _can_see_queue(request.user),
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
    """Render a thread page; its script replays the event log and follows it live."""
    thread = _visible_thread(request, thread_id)
    return render(
        request,
        "ui/thread_detail.html",
        {
            "thread": thread,
            "ui_state": thread_ui_state(thread=thread),
            "can_see_queue": _can_see_queue(request.user),
            "nav": "threads",
        },
    )


@require_GET
@login_required
def thread_state_json(request: HttpRequest, thread_id: str) -> JsonResponse:
    """Return :func:`thread_ui_state` for a thread the user may see."""
    thread = _visible_thread(request, thread_id)
    return JsonResponse(thread_ui_state(thread=thread))


@require_GET
@login_required
@ensure_csrf_cookie
def approval_queue(request: HttpRequest) -> HttpResponse:
    """Render the approval queue; read-only for users without the decide permission."""
    if not _can_see_queue(request.user):
        # A page that says why and what to do, with the status a client can read.
        return render(request, "ui/no_queue.html", {"nav": "approvals"}, status=403)
    pending = (
        ApprovalRequest.objects.filter(status=ApprovalRequest.Status.PENDING)
        .select_related("tool_call", "thread", "decided_by")
        .order_by("requested_at", "id")
    )
    return render(
        request,
        "ui/approval_queue.html",
        {
            "approvals": [approval_snapshot(a) for a in pending],
            "can_decide": request.user.has_perm(DECIDE_PERMISSION),
            "can_see_queue": True,
            "nav": "approvals",
        },
    )
