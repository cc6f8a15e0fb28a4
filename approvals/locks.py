"""Row locks of the approval workflow, extending :mod:`threads.locks`.

The one lock order is **thread → tool call → approval → execution** (documented in
:mod:`threads.locks` and ``docs/architecture.md``). These helpers lock the thread
and the call through :mod:`threads.locks` first, then the approval-side row, and
return them all. Call them inside ``transaction.atomic()`` and re-check state
after locking.
"""

from __future__ import annotations

from approvals.models import (
    ApprovalRequest,
    AuditChainHead,
    NotificationDelivery,
    ToolExecution,
)
from threads.locks import thread_lock, tool_call_lock
from threads.models import Thread, ToolCall


def approval_lock(
    *, approval: ApprovalRequest
) -> tuple[Thread, ToolCall | None, ApprovalRequest]:
    """Lock ``approval``'s thread, its call, then the request; return all three freshly read.

    A request a re-approval superseded locks the call its successor decides. The
    call is ``None`` for a request bound to no call (an interrupt without a
    ``toolCallId``, IR-18); then only the thread is locked before the request.
    """
    call: ToolCall | None = None
    decided = approval.call
    if decided is None:
        thread = thread_lock(thread_pk=approval.thread_id)
    else:
        thread, call = tool_call_lock(
            thread_pk=approval.thread_id, tool_call_pk=decided.pk
        )
    locked = (
        ApprovalRequest.objects.select_for_update(of=("self",))
        .select_related("run", "supersedes")
        .get(pk=approval.pk)
    )
    # The rows locked above are the request's own: not read again through it.
    locked.thread = thread
    if call is not None and locked.tool_call_id == call.pk:
        locked.tool_call = call
    return thread, call, locked


def execution_lock(
    *, thread_pk: int, tool_call_pk: int
) -> tuple[Thread, ToolCall, ToolExecution | None]:
    """Lock the thread, call ``tool_call_pk``, then its execution record (``None`` if none)."""
    thread, call = tool_call_lock(thread_pk=thread_pk, tool_call_pk=tool_call_pk)
    execution = ToolExecution.objects.select_for_update().filter(tool_call=call).first()
    return thread, call, execution


def execution_approval_lock(
    *, thread_pk: int, tool_call_pk: int
) -> tuple[Thread, ToolCall, ApprovalRequest | None, ToolExecution | None]:
    """Lock the thread, call ``tool_call_pk``, its open approval request, then its execution.

    Either of the last two is ``None`` when the call has none. For the executor,
    which may send the call back to an operator when it changed since approval.
    """
    thread, call = tool_call_lock(thread_pk=thread_pk, tool_call_pk=tool_call_pk)
    # With its decider: the executor checks the approver's permission (SEC-02).
    approval = (
        ApprovalRequest.objects.select_for_update(of=("self",))
        .select_related("decided_by")
        .filter(tool_call=call)
        .first()
    )
    return thread, call, approval, call_execution_lock(call=call)


def call_approval_lock(*, call: ToolCall) -> ApprovalRequest | None:
    """Lock and return ``call``'s approval request, or ``None``; the call must be locked."""
    return ApprovalRequest.objects.select_for_update().filter(tool_call=call).first()


def call_execution_lock(*, call: ToolCall) -> ToolExecution | None:
    """Lock and return ``call``'s execution record, or ``None``; the call (and any approval) must be locked."""
    return ToolExecution.objects.select_for_update().filter(tool_call=call).first()


def audit_head_lock() -> AuditChainHead:
    """Lock the audit chain's head row (created on first use) and return it.

    Taken last, after any thread/call/approval/execution lock, so appends to the
    chain are serialized without breaking the one lock order. Implements SEC-04.
    """
    head, _ = AuditChainHead.objects.select_for_update().get_or_create(pk=1)
    return head


def delivery_lock(*, delivery_pk: int) -> NotificationDelivery | None:
    """Lock and return notification delivery ``delivery_pk`` (``None`` if deleted).

    Taken alone, never while holding a thread/call/approval lock: a delivery is
    sent outside the workflow's transactions.
    """
    return (
        NotificationDelivery.objects.select_for_update(of=("self",))
        .select_related("approval")
        .filter(pk=delivery_pk)
        .first()
    )
