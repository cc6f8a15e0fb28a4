"""Changed arguments go back to a person, on both executors.

A call whose execution record no longer carries the approved arguments is not
run and not refused: a new pending request shows the approved and the current
version, the earlier decision stays on record, both steps are audited. Approving
the new request runs the call once with the current arguments; rejecting it
answers the call as rejected; a call that keeps changing ends in an error.
Rules: SEC-02, SEC-04, DC-04, FT-06.
"""

from __future__ import annotations

import html
import json
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.urls import reverse

from approvals.models import ApprovalRequest, AuditEntry, ToolExecution
from approvals.services import audit_verify
from approvals.services.reapproval import MAX_REAPPROVALS
from demo.models import Refund
from orchestration.janitor import lost_messages_requeue
from orchestration.pipeline import approval_decide
from threads.models import Message, ToolCall

APPROVED = {"order_id": "A-1001", "amount": 25.0, "reason": "customer request"}


def _changed(n: int) -> dict[str, Any]:
    return {**APPROVED, "amount": 25.0 + n}


def _tool_messages(call: ToolCall) -> list[Message]:
    return list(
        Message.objects.filter(
            thread=call.thread, role="tool", tool_call_id=call.tool_call_id
        )
    )


def _approve_then_change(
    approval: ApprovalRequest, approver: Any, call: ToolCall, arguments: Any
) -> None:
    """Approve, and change the queued execution's arguments before it is enqueued.

    The execution is enqueued on commit, so the change is what the executor finds:
    the arguments no longer match the hash the operator approved.
    """
    with transaction.atomic():
        approval_decide(approval=approval, decided_by=approver, decision="approve")
        ToolExecution.objects.filter(tool_call=call).update(arguments=arguments)


def test_changed_arguments_become_a_new_request_then_run_once(
    client: Any, approver: Any, pending_refund: ToolCall, executor: Any
) -> None:
    """Hash mismatch → new request with both versions, audited; approving it runs once."""
    call = pending_refund
    first = ApprovalRequest.objects.get(tool_call=call)
    assert first.proposed_arguments == APPROVED

    _approve_then_change(first, approver, call, _changed(75))
    executor.settle(call.thread)

    # Nothing ran and nothing answered the call: it waits for an operator again.
    assert Refund.objects.count() == 0
    assert _tool_messages(call) == []
    call.refresh_from_db()
    assert call.state == "awaiting_approval"
    execution = ToolExecution.objects.get(tool_call=call)
    assert (execution.state, execution.attempts) == ("queued", 0)
    # The earlier decision stays on record, linked to its successor.
    first.refresh_from_db()
    again = ApprovalRequest.objects.get(tool_call=call)
    assert (first.status, first.decided_by, first.tool_call_id) == (
        "approved",
        approver,
        None,
    )
    assert (first.superseded_by_id, first.call) == (again.pk, call)
    assert (again.status, again.reapproval, again.reapproval_count) == (
        "pending",
        "arguments_changed",
        1,
    )
    assert again.proposed_arguments == _changed(75)
    assert again.previous == first
    # Audited: the supersession and the new request, with both versions.
    superseded = AuditEntry.objects.get(action="approval.superseded")
    assert (superseded.target_id, superseded.after["superseded_by"]) == (
        str(first.pk),
        again.pk,
    )
    requested = AuditEntry.objects.filter(
        action="approval.requested", target_id=str(again.pk)
    ).get()
    assert (requested.after["arguments"], requested.after["previous_arguments"]) == (
        _changed(75),
        APPROVED,
    )
    assert requested.after["supersedes"] == first.pk
    assert audit_verify().ok

    # The REST API shows the link and both versions (camelCase).
    client.force_login(approver)
    body = client.get(f"/api/approvals/{again.pk}/").json()
    assert {
        k: body[k]
        for k in (
            "toolCallId",
            "status",
            "reapproval",
            "supersedes",
            "supersededBy",
            "proposedArguments",
            "previousArguments",
        )
    } == {
        "toolCallId": call.tool_call_id,
        "status": "pending",
        "reapproval": "arguments_changed",
        "supersedes": first.pk,
        "supersededBy": None,
        "proposedArguments": _changed(75),
        "previousArguments": APPROVED,
    }
    earlier = client.get(f"/api/approvals/{first.pk}/").json()
    assert (earlier["status"], earlier["supersededBy"], earlier["toolCallId"]) == (
        "approved",
        again.pk,
        call.tool_call_id,
    )
    assert (earlier["execution"]["state"], earlier["supersedes"]) == ("queued", None)
    # The admin page says what changed and shows both versions.
    page = html.unescape(
        client.get(
            reverse("admin:approvals_approvalrequest_change", args=[again.pk])
        ).content.decode()
    )
    assert "arguments changed since approval" in page
    assert f"request #{first.pk} approved" in page
    assert '"amount": 100.0' in page
    assert '"amount": 25.0' in page

    approval_decide(approval=again, decided_by=approver, decision="approve")
    executor.settle(call.thread)

    refund = Refund.objects.get()
    assert (refund.order_id, refund.amount) == ("A-1001", Decimal("100.00"))
    execution.refresh_from_db()
    assert (execution.state, execution.attempts, execution.arguments) == (
        "succeeded",
        1,
        _changed(75),
    )
    answers = _tool_messages(call)
    assert [a.error for a in answers] == [None]
    call.refresh_from_db()
    assert call.state == "succeeded"
    first.refresh_from_db()
    assert first.status == "approved"
    assert audit_verify().ok


def test_rejecting_the_new_request_answers_rejected(
    approver: Any, pending_refund: ToolCall, executor: Any
) -> None:
    """Rejecting the re-approval answers the call as rejected; nothing runs."""
    call = pending_refund
    first = ApprovalRequest.objects.get(tool_call=call)
    _approve_then_change(first, approver, call, _changed(1))
    executor.settle(call.thread)
    again = ApprovalRequest.objects.get(tool_call=call)

    approval_decide(
        approval=again,
        decided_by=approver,
        decision="reject",
        reason="the amount changed after I approved it",
    )
    executor.settle(call.thread)

    assert Refund.objects.count() == 0
    answers = _tool_messages(call)
    assert [(a.error, json.loads(a.content)) for a in answers] == [
        (
            "declined_by_operator",
            {
                "status": "rejected",
                "reason": "the amount changed after I approved it",
                "executed": False,
            },
        )
    ]
    call.refresh_from_db()
    assert call.state == "declined"
    execution = ToolExecution.objects.get(tool_call=call)
    assert (execution.state, execution.error, execution.attempts) == (
        "failed",
        "declined_by_operator",
        0,
    )
    first.refresh_from_db()
    again.refresh_from_db()
    assert (first.status, again.status) == ("approved", "rejected")
    assert audit_verify().ok


def test_a_call_that_keeps_changing_ends_in_an_error(
    approver: Any, pending_refund: ToolCall, executor: Any
) -> None:
    """After MAX_REAPPROVALS rounds the next change is answered with an error, not asked again."""
    call = pending_refund
    approval = ApprovalRequest.objects.get(tool_call=call)
    for n in range(1, MAX_REAPPROVALS + 1):
        _approve_then_change(approval, approver, call, _changed(n))
        executor.settle(call.thread)
        approval = ApprovalRequest.objects.get(tool_call=call)
        assert (approval.status, approval.reapproval_count) == ("pending", n)

    _approve_then_change(approval, approver, call, _changed(99))
    executor.settle(call.thread)

    assert Refund.objects.count() == 0
    answers = _tool_messages(call)
    assert len(answers) == 1
    assert answers[0].error == "refused"
    assert json.loads(answers[0].content) == {
        "error": "refused",
        "detail": (
            "the arguments differ from the ones an operator approved, after "
            f"{MAX_REAPPROVALS} re-approvals of this call already; it was not "
            "executed. Do not retry it; tell the user the tool keeps changing."
        ),
    }
    assert ApprovalRequest.objects.filter(thread=call.thread).count() == (
        MAX_REAPPROVALS + 1
    )
    assert ToolExecution.objects.get(tool_call=call).state == "failed"
    assert audit_verify().ok


def test_the_janitor_leaves_a_reapproval_queued_execution_alone(
    approver: Any, pending_refund: ToolCall, executor: Any
) -> None:
    """A call back with an operator keeps its queued execution: not a lost message."""
    call = pending_refund
    first = ApprovalRequest.objects.get(tool_call=call)
    _approve_then_change(first, approver, call, _changed(2))
    executor.settle(call.thread)
    execution = ToolExecution.objects.get(tool_call=call)
    assert execution.state == "queued"

    # When the janitor sweeps with every queued row counted as lost
    counts = lost_messages_requeue(stale_seconds=0)

    # Then the execution waiting for the new decision is not enqueued again
    assert counts["executions_requeued"] == 0
    executor.settle(call.thread)
    execution.refresh_from_db()
    assert (execution.state, execution.attempts) == ("queued", 0)
    assert Refund.objects.count() == 0
