"""Telling browsers what changed: the thread's group and the approval queue's.

These are application notifications (``{"kind": "notification", ...}``), kept
apart from the thread's AG-UI event log, and sent after commit (STYLE.md 5, 7).
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Prefetch

from approvals.interrupt_ids import interrupt_id
from approvals.labels import approval_label
from approvals.models import ApprovalRequest, ApprovalVote
from approvals.services.votes import governance_snapshot
from approvals.signals import approval_changed, send_now
from threads.models import ToolCall
from threads.realtime import group_send, publish_notification

#: The Channels group of everyone watching the approval queue.
APPROVALS_GROUP = "approvals"


def approval_snapshot(approval: ApprovalRequest) -> dict[str, Any]:
    """Return the JSON shape of ``approval`` sent to browsers and the REST API."""
    return {
        "id": approval.pk,
        "toolCallId": getattr(approval.call, "tool_call_id", None),
        "kind": approval.kind,
        # One spelling everywhere: the id AG-UI clients see and resume; the
        # remote agent's own id, when there is one, stays apart.
        "interruptId": interrupt_id(approval),
        "remoteInterruptId": approval.interrupt_id_or_none,
        "message": approval.message,
        "responseSchema": approval.response_schema,
        "response": approval.response,
        "threadId": approval.thread.thread_id,
        "tool": approval.tool_name,
        "label": approval_label(approval),
        "status": approval.status,
        "isDestructive": approval.is_destructive,
        "proposedArguments": approval.proposed_arguments,
        "editedArguments": approval.edited_arguments,
        "schemaValid": approval.schema_valid,
        "schemaErrors": approval.schema_errors,
        "requestedAt": approval.requested_at.isoformat()
        if approval.requested_at
        else None,
        "expiresAt": approval.expires_at.isoformat(),
        "decidedBy": getattr(approval.decided_by, "username", None),
        "decidedAt": approval.decided_at.isoformat() if approval.decided_at else None,
        "reason": approval.reason,
        "argumentsMismatch": approval.arguments_mismatch,
        **reapproval_snapshot(approval),
        **governance_snapshot(approval),
    }


def reapproval_snapshot(approval: ApprovalRequest) -> dict[str, Any]:
    """Return the re-approval context of ``approval``: what was approved before, and why again.

    ``supersedes`` / ``supersededBy`` are request ids (or ``None``);
    ``previousArguments`` are the arguments the earlier request approved.
    Both versions are shown so the operator sees what changed since approval.
    """
    previous = approval.previous
    return {
        "reapproval": approval.reapproval,
        "supersedes": previous.pk if previous is not None else None,
        "supersededBy": approval.superseded_by_id,
        "previousArguments": previous.approved_arguments
        if previous is not None
        else None,
        "schemaHash": approval.schema_hash,
        "previousSchemaHash": approval.previous_schema_hash,
    }


def call_approval_for_snapshot(call: ToolCall) -> ApprovalRequest | None:
    """Return ``call``'s approval request loaded for :func:`approval_snapshot`, or ``None``.

    One query for the request and its rows, one each for its votes (with voters)
    and approver groups, instead of one per relation (B2). ``call``'s thread is
    reused.
    """
    approval = (
        ApprovalRequest.objects.select_related(
            "run", "decided_by", "supersedes", "claimed_by"
        )
        .prefetch_related(
            Prefetch("votes", queryset=ApprovalVote.objects.select_related("voter")),
            "approver_groups",
        )
        .filter(tool_call=call)
        .first()
    )
    if approval is not None:
        approval.thread = call.thread
        approval.tool_call = call
    return approval


def notify_call_changed(
    call: ToolCall, *, approval: ApprovalRequest | None = None
) -> None:
    """After commit, tell browsers watching the call's thread and the queue what changed."""
    payload = {
        "kind": "notification",
        "type": "tool_call.state",
        "toolCallId": call.tool_call_id,
        "state": call.state,
        "approval": approval_snapshot(approval) if approval is not None else None,
    }
    thread_pk = call.thread_id

    def send() -> None:
        publish_notification(thread_pk=thread_pk, payload=payload)
        if approval is not None:
            group_send(
                APPROVALS_GROUP, {"type": "approvals.changed", "payload": payload}
            )
            send_now(approval_changed, approval)

    transaction.on_commit(send, robust=True)


def notify_approval_changed(
    approval: ApprovalRequest, *, call: ToolCall | None = None
) -> None:
    """Tell browsers ``approval`` changed: through its call when it has one, else directly.

    A request bound to no call (an interrupt without ``toolCallId``, IR-18) is sent
    to the thread's group and the queue as ``approval.state``.
    """
    if call is not None:
        notify_call_changed(call, approval=approval)
        return
    payload = {
        "kind": "notification",
        "type": "approval.state",
        "toolCallId": None,
        "state": approval.status,
        "approval": approval_snapshot(approval),
    }
    thread_pk = approval.thread_id

    def send() -> None:
        publish_notification(thread_pk=thread_pk, payload=payload)
        group_send(APPROVALS_GROUP, {"type": "approvals.changed", "payload": payload})
        send_now(approval_changed, approval)

    transaction.on_commit(send, robust=True)
