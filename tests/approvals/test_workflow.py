"""The approval loop end to end, on the embedded pool and on a real Celery worker.

Implements the tests of the approval-queue issue: FT-03..FT-06, SEC-02, DC-03, DC-04.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from approvals.exceptions import (
    ApprovalAlreadyDecided,
    ApprovalExpired,
    ApprovalPermissionDenied,
    InvalidEditedArguments,
    ReasonRequired,
)
from approvals.models import ApprovalRequest, AuditEntry, ToolExecution
from approvals.services import audit_verify
from demo.models import Refund
from orchestration.pipeline import approval_decide, approvals_expire
from threads.models import Message, Run, ToolCall


def _tool_messages(thread):
    return list(
        Message.objects.filter(thread=thread, role="tool").order_by("position", "id")
    )


def _final_text(thread) -> str:
    return (
        Message.objects.filter(thread=thread, role="assistant")
        .exclude(content="")
        .order_by("position", "id")
        .last()
        .content
    )


def test_dc03_admin_approval_executes_once_and_continues(
    client, approver, pending_refund, executor
):
    """Approve through the admin action → executed once → tool message → continuation text."""
    call = pending_refund
    thread = call.thread
    approval = ApprovalRequest.objects.get(tool_call=call)
    assert approval.proposed_arguments == {
        "order_id": "A-1001",
        "amount": 25.0,
        "reason": "customer request",
    }
    client.force_login(approver)

    changelist = reverse("admin:approvals_approvalrequest_changelist")
    page = client.get(changelist)
    assert page.status_code == 200
    assert b"refund_order" in page.content
    assert b"destructive" in page.content
    response = client.post(
        changelist,
        {
            "action": "approve_selected",
            "_selected_action": [approval.pk],
            "confirm": "1",
            "reason": "verified with the customer",
        },
    )
    assert response.status_code == 302
    executor.settle(thread)

    approval.refresh_from_db()
    assert (approval.status, approval.decided_by, approval.reason) == (
        "approved",
        approver,
        "verified with the customer",
    )
    assert Refund.objects.count() == 1
    refund = Refund.objects.get()
    assert (refund.order_id, str(refund.amount)) == ("A-1001", "25.00")
    execution = ToolExecution.objects.get(tool_call=call)
    assert (execution.state, execution.attempts, execution.authorized_by) == (
        "succeeded",
        1,
        "approval",
    )
    results = [m for m in _tool_messages(thread) if m.tool_call_id == call.tool_call_id]
    assert len(results) == 1
    assert results[0].error is None
    runs = list(Run.objects.filter(thread=thread).order_by("created_at", "id"))
    assert len(runs) == 3
    assert runs[2].continues_id == runs[1].pk
    assert runs[2].status == "finished"
    assert runs[2].pending_tool_call_ids == []
    # FT-06: the continuation's input answers every call of the thread exactly once.
    tool_ids = [
        m["toolCallId"] for m in runs[2].input["messages"] if m["role"] == "tool"
    ]
    assert sorted(tool_ids) == sorted(
        ToolCall.objects.filter(thread=thread).values_list("tool_call_id", flat=True)
    )
    assert len(tool_ids) == len(set(tool_ids)) == 2
    # The follow-up says what ran, in a sentence.
    assert _final_text(thread) == (
        f"Refund done: 25.00 EUR refunded on order A-1001 "
        f"(refund #{Refund.objects.get().pk})."
    )
    call.refresh_from_db()
    assert call.state == "succeeded"
    assert audit_verify().ok
    actions = list(AuditEntry.objects.values_list("action", flat=True))
    assert "approval.approved" in actions
    assert "execution.reserved" in actions
    assert "execution.succeeded" in actions


def test_bc21_rejection_answers_the_call_and_continues(
    approver, pending_refund, executor
):
    """A rejected call is answered by a tool message saying so and why (BC21, FT-06)."""
    call = pending_refund
    thread = call.thread
    approval = ApprovalRequest.objects.get(tool_call=call)

    approval_decide(
        approval=approval, decided_by=approver, decision="reject", reason="not now"
    )
    executor.settle(thread)

    answers = [m for m in _tool_messages(thread) if m.tool_call_id == call.tool_call_id]
    assert len(answers) == 1
    assert (
        answers[0].content
        == '{"status":"rejected","reason":"not now","executed":false}'
    )
    assert answers[0].error == "declined_by_operator"
    assert Refund.objects.count() == 0
    assert not ToolExecution.objects.filter(tool_call=call).exists()
    call.refresh_from_db()
    assert call.state == "declined"
    last_run = Run.objects.filter(thread=thread).order_by("-created_at", "-id").first()
    assert last_run.status == "finished"
    messages = last_run.input["messages"]
    tool_messages = [m for m in messages if m["role"] == "tool"]
    assert [m["toolCallId"] for m in tool_messages][-1] == call.tool_call_id
    assert _final_text(thread) == (
        "I did not refund 25.00 EUR on order A-1001: an approver declined it, "
        "saying: not now."
    )


def test_expiry_answers_the_call_so_the_thread_continues(pending_refund, executor):
    """An expired request is answered with an error tool message (periodic expiry)."""
    call = pending_refund
    approval = ApprovalRequest.objects.get(tool_call=call)
    ApprovalRequest.objects.filter(pk=approval.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )

    assert approvals_expire() == 1
    executor.settle(call.thread)

    approval.refresh_from_db()
    assert approval.status == "expired"
    answer = Message.objects.get(
        thread=call.thread, role="tool", tool_call_id=call.tool_call_id
    )
    assert json.loads(answer.content)["status"] == "expired"
    assert answer.error == "approval_expired"
    assert Refund.objects.count() == 0
    assert approvals_expire() == 0
    assert _final_text(call.thread) == (
        "I did not refund 25.00 EUR on order A-1001: nobody approved it before "
        "the request expired."
    )


def test_decision_after_expiry_is_refused_and_answers_expired(
    approver, pending_refund, executor
):
    """Expiry is checked again at decision time: a late approval executes nothing."""
    call = pending_refund
    approval = ApprovalRequest.objects.get(tool_call=call)
    ApprovalRequest.objects.filter(pk=approval.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )

    with pytest.raises(ApprovalExpired):
        approval_decide(approval=approval, decided_by=approver, decision="approve")
    executor.settle(call.thread)

    approval.refresh_from_db()
    assert approval.status == "expired"
    assert Refund.objects.count() == 0
    assert (
        Message.objects.filter(role="tool", tool_call_id=call.tool_call_id).count() == 1
    )


def test_sec02_edited_arguments_are_executed_and_original_kept(
    approver, pending_refund, executor
):
    """Edited arguments are re-validated, executed, and both versions are audited (SEC-02)."""
    call = pending_refund
    approval = ApprovalRequest.objects.get(tool_call=call)
    edited = {"order_id": "A-1001", "amount": 10.0, "reason": "partial refund"}

    with pytest.raises(InvalidEditedArguments, match="amount"):
        approval_decide(
            approval=approval,
            decided_by=approver,
            decision="approve",
            edited_arguments={"order_id": "A-1001", "amount": "lots", "reason": "x"},
        )
    approval_decide(
        approval=approval,
        decided_by=approver,
        decision="approve",
        edited_arguments=edited,
    )
    executor.settle(call.thread)

    approval.refresh_from_db()
    assert approval.proposed_arguments["amount"] == 25.0
    assert approval.edited_arguments == edited
    assert approval.edited
    refund = Refund.objects.get()
    assert str(refund.amount) == "10.00"
    assert refund.reason == "partial refund"
    entry = AuditEntry.objects.get(action="approval.approved")
    assert entry.after["proposed_arguments"]["amount"] == 25.0
    assert entry.after["edited_arguments"]["amount"] == 10.0
    # The agent reports the executed arguments, not the proposed ones.
    assert _final_text(call.thread) == (
        f"Refund done: 10.00 EUR refunded on order A-1001 (refund #{refund.pk}). "
        "The approver changed the amount: I had proposed 25.00 EUR. "
        'Reason recorded: "partial refund".'
    )


def test_bc34_repeated_approval_enqueues_nothing(
    approver, second_approver, pending_refund, executor
):
    """The decider's repeated approve returns the existing state (BC34); anyone else's
    approve or reject of the decided request is refused, saying their vote was not
    recorded, rather than answered as if it counted."""
    call = pending_refund
    approval = ApprovalRequest.objects.get(tool_call=call)

    first = approval_decide(approval=approval, decided_by=approver, decision="approve")
    again = approval_decide(approval=approval, decided_by=approver, decision="approve")
    with pytest.raises(
        ApprovalAlreadyDecided,
        match="already 'approved' by ada; your decision was not recorded",
    ):
        approval_decide(
            approval=approval, decided_by=second_approver, decision="approve"
        )
    with pytest.raises(ApprovalAlreadyDecided, match="already 'approved'"):
        approval_decide(
            approval=approval,
            decided_by=second_approver,
            decision="reject",
            reason="changed my mind",
        )
    executor.settle(call.thread)

    assert first.pk == again.pk
    assert again.decided_by == approver
    assert Refund.objects.count() == 1
    assert ToolExecution.objects.get(tool_call=call).attempts == 1
    assert (
        Message.objects.filter(role="tool", tool_call_id=call.tool_call_id).count() == 1
    )


def test_permission_required_to_decide(user, staff_user, client, pending_refund):
    """Without approvals.decide_approvalrequest nobody can approve: service, action, POST."""
    call = pending_refund
    approval = ApprovalRequest.objects.get(tool_call=call)
    from django.contrib.auth.models import Permission

    staff_user.user_permissions.add(
        Permission.objects.get(codename="view_approvalrequest"),
        Permission.objects.get(codename="change_approvalrequest"),
    )
    for who in (user, staff_user):
        with pytest.raises(ApprovalPermissionDenied):
            approval_decide(approval=approval, decided_by=who, decision="approve")

    client.force_login(staff_user)
    changelist = reverse("admin:approvals_approvalrequest_changelist")
    page = client.get(changelist)
    assert page.status_code == 200
    assert b"approve_selected" not in page.content  # the action is not offered
    crafted = client.post(
        changelist,
        {
            "action": "approve_selected",
            "_selected_action": [approval.pk],
            "confirm": "1",
        },
    )
    assert crafted.status_code in (200, 302)
    decide = client.post(
        reverse("admin:approvals_approvalrequest_decide", args=[approval.pk]),
        {"decision": "approve", "reason": ""},
    )
    assert decide.status_code == 403
    approval.refresh_from_db()
    assert approval.status == "pending"
    assert not ToolExecution.objects.filter(tool_call=call).exists()


def test_reject_requires_reason(approver, pending_refund):
    approval = ApprovalRequest.objects.get(tool_call=pending_refund)
    with pytest.raises(ReasonRequired):
        approval_decide(
            approval=approval, decided_by=approver, decision="reject", reason=" "
        )
    approval.refresh_from_db()
    assert approval.status == "pending"


@pytest.mark.parametrize("executor", ["embedded"], indirect=True)
def test_dc03_admin_edit_then_approve_form(client, approver, pending_refund, executor):
    """The admin's decide form re-validates edits, shows errors, then approves the edit."""
    call = pending_refund
    approval = ApprovalRequest.objects.get(tool_call=call)
    client.force_login(approver)
    page = client.get(
        reverse("admin:approvals_approvalrequest_change", args=[approval.pk])
    )
    assert page.status_code == 200
    assert b'name="decision" value="approve"' in page.content
    decide = reverse("admin:approvals_approvalrequest_decide", args=[approval.pk])

    bad = client.post(
        decide,
        {
            "decision": "approve",
            "reason": "",
            "edited_arguments": '{"order_id": "A-1001", "amount": -3, '
            '"reason": "customer"}',
        },
        follow=True,
    )
    text = bad.content.decode()
    assert "Edited arguments are invalid" in text
    assert (
        "field &#x27;amount&#x27;: -3 is less than or equal to the minimum of 0" in text
    )
    approval.refresh_from_db()
    assert approval.status == "pending"

    client.post(
        decide,
        {
            "decision": "approve",
            "reason": "partial",
            "edited_arguments": '{"order_id": "A-1001", "amount": 12.5, '
            '"reason": "partial"}',
        },
    )
    executor.settle(call.thread)

    approval.refresh_from_db()
    assert approval.status == "approved"
    assert approval.edited
    assert str(Refund.objects.get().amount) == "12.50"
    page = client.get(
        reverse("admin:approvals_approvalrequest_changelist") + "?status=approved"
    )
    assert b"edited" in page.content
    # Decided requests are read-only: no decide form any more.
    page = client.get(
        reverse("admin:approvals_approvalrequest_change", args=[approval.pk])
    )
    assert b'name="decision" value="approve"' not in page.content
