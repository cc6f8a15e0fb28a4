"""Input required mid-call: an MCP server's elicitation as a request in the queue.

While an approved MCP call runs on the tools worker, the server may ask for more
input (``elicitation/create``, or an ``InputRequiredResult`` round on 2026-07-28
servers). :func:`input_requester_for` gives the call's
:class:`~agentcore.tools.ToolContext` a requester that queues an
:class:`ApprovalRequest` of kind ``input`` (the server's message, its requested
schema as the form) and waits, bounded by the tool's timeout, for the operator:
approve with a ``response`` → ``accept`` with that content; reject → ``decline``;
expiry or the timeout → ``cancel`` (the request is expired). The call keeps its one
execution record: the answer only continues it. Implements DC-03, SEC-04.
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta
from typing import Any

from django.db import close_old_connections, connection, transaction
from django.utils import timezone

from agentcore.tools import InputRequester
from approvals.locks import approval_lock
from approvals.models import ApprovalRequest
from approvals.services.audit import audit_append
from approvals.services.decisions import approval_expire_locked
from approvals.services.notify import notify_approval_changed
from approvals.signals import approval_requested, send_on_commit
from threads.models import ToolCall

logger = logging.getLogger(__name__)

#: How often the waiting worker looks for the operator's answer, in seconds.
POLL_SECONDS = 0.2

_ACTIONS = {
    ApprovalRequest.Status.APPROVED: "accept",
    ApprovalRequest.Status.REJECTED: "decline",
}


def input_requester_for(*, call: ToolCall) -> InputRequester:
    """Return the requester an executing ``call`` hands to its tool (see the module).

    The requester runs in a thread of its own (not the tool's event loop), so it
    uses its own database connection and closes it when done.
    """
    call_pk = call.pk

    def request_input(
        message: str, schema: dict[str, Any], timeout: float
    ) -> tuple[str, dict[str, Any] | None]:
        close_old_connections()
        try:
            return input_request_wait(
                call_pk=call_pk, message=message, schema=schema, timeout=timeout
            )
        finally:
            connection.close()

    return request_input


def input_request_wait(
    *, call_pk: int, message: str, schema: dict[str, Any], timeout: float
) -> tuple[str, dict[str, Any] | None]:
    """Queue an ``input`` request for call ``call_pk`` and wait for its decision.

    Returns ``("accept", response)``, ``("decline", None)`` or ``("cancel", None)``
    (expired, cancelled, or no decision within ``timeout`` seconds; then the
    request is expired so nobody can answer it late). Implements DC-03.
    """
    call = ToolCall.objects.select_related("run", "thread").get(pk=call_pk)
    with transaction.atomic():
        asked = ApprovalRequest.objects.filter(
            run=call.run, interrupt_id__startswith=f"input-{call.tool_call_id}-"
        ).count()
        approval = ApprovalRequest.objects.create(
            kind=ApprovalRequest.Kind.INPUT,
            tool_call=None,
            thread=call.thread,
            run=call.run,
            tool_name=call.name,
            interrupt_id=f"input-{call.tool_call_id}-{asked + 1}",
            message=message,
            response_schema=schema,
            requested_by=call.thread.owner,
            expires_at=timezone.now() + timedelta(seconds=max(timeout, 0.0)),
            proposed_arguments={},
        )
        audit_append(
            actor=None,
            action="approval.requested",
            target=approval,
            after={"input": {"message": message, "schema": schema}},
        )
        notify_approval_changed(approval)
        send_on_commit(approval_requested, approval)
    deadline = time.monotonic() + max(timeout, 0.0)
    while time.monotonic() < deadline:
        status, response = ApprovalRequest.objects.values_list(
            "status", "response"
        ).get(pk=approval.pk)
        if status != ApprovalRequest.Status.PENDING:
            return _answer(status, response)
        time.sleep(POLL_SECONDS)
    with transaction.atomic():
        _, _, locked = approval_lock(approval=approval)
        if locked.status != ApprovalRequest.Status.PENDING:
            return _answer(locked.status, locked.response)
        approval_expire_locked(locked, None)
    return "cancel", None


def _answer(status: str, response: Any) -> tuple[str, dict[str, Any] | None]:
    action = _ACTIONS.get(status, "cancel")  # type: ignore[call-overload]
    if action == "accept":
        return action, response if isinstance(response, dict) else {}
    return action, None
