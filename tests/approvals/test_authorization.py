"""Safe decisions: who may authorize a call, refusals, context and undo.

A decider without the tool's own permission is refused before anything is recorded
(SEC-02), on the embedded pool and on a real Celery worker against Redis; the
approval's context (rationale, results it was based on, risk) comes from one
selector; an approval made with an undo window can be taken back until its
execution is claimed, and executes exactly once otherwise.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, Permission
from rest_framework.test import APIClient

from approvals.authorization import approval_authorization
from approvals.exceptions import ApprovalNotAuthorized, UndoTooLate
from approvals.models import ApprovalRequest, AuditEntry, ToolExecution
from approvals.selectors import approval_context, arguments_diff
from approvals.services import approval_undo
from demo.models import Refund
from orchestration.pipeline import approval_decide
from threads.models import Message, ToolCall


def _decider_without_tool_permission(django_user_model):
    user = django_user_model.objects.create_user(username="dora", password="pw-d-1")
    user.user_permissions.add(Permission.objects.get(codename="decide_approvalrequest"))
    return django_user_model.objects.get(pk=user.pk)


def _client(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_sec02_approval_without_the_tools_permission_is_refused_and_stays_pending(
    django_user_model, approver, pending_refund, executor
):
    """REST approve by a user with the decide permission but not demo.add_refund: 403
    ``not_authorized`` naming the permission and who can; nothing recorded or executed.
    Runs on the embedded pool and on a Celery worker with PostgreSQL and Redis."""
    # Given a pending refund, a group that grants both permissions, and a decider
    # who lacks the tool's own permission
    group = Group.objects.create(name="refund-approvers")
    group.permissions.add(
        Permission.objects.get(codename="decide_approvalrequest"),
        Permission.objects.get(codename="add_refund"),
    )
    dora = _decider_without_tool_permission(django_user_model)
    approval = ApprovalRequest.objects.get(tool_call=pending_refund)

    # When dora approves it over REST
    response = _client(dora).post(
        f"/api/approvals/{approval.pk}/approve/", {}, format="json"
    )

    # Then she is refused with the project's error body, saying why and who can
    assert response.status_code == 403
    body = response.json()
    assert body["type"] == "not_authorized"
    assert "'demo.add_refund'" in body["detail"]
    assert "ada" in body["detail"]
    assert "group refund-approvers" in body["detail"]
    # and the request is still pending, nothing executed, the call still waits
    approval.refresh_from_db()
    assert approval.status == "pending"
    assert approval.decided_by is None
    assert not ToolExecution.objects.filter(tool_call=pending_refund).exists()
    pending_refund.refresh_from_db()
    assert pending_refund.state == ToolCall.State.AWAITING_APPROVAL
    assert not AuditEntry.objects.filter(action="approval.approved").exists()
    # and GET tells her the same before she tries
    shown = _client(dora).get(f"/api/approvals/{approval.pk}/").json()
    assert shown["canAuthorize"] is False
    assert shown["authorization"]["missingPermissions"] == ["demo.add_refund"]
    assert shown["authorization"]["requiredPermissions"] == [
        "approvals.decide_approvalrequest",
        "demo.add_refund",
    ]
    assert shown["authorization"]["whoCan"] == {
        "users": ["ada"],
        "groups": ["refund-approvers"],
    }
    assert shown["authorization"]["canReject"] is True
    # while the approver may authorize it, and does: it executes once
    assert (
        _client(approver).get(f"/api/approvals/{approval.pk}/").json()["canAuthorize"]
    )
    ok = _client(approver).post(
        f"/api/approvals/{approval.pk}/approve/", {}, format="json"
    )
    assert ok.status_code == 200
    executor.settle(pending_refund.thread)
    assert Refund.objects.count() == 1
    assert ToolExecution.objects.get(tool_call=pending_refund).state == "succeeded"


def test_sec02_service_refuses_and_rejection_needs_only_the_decide_permission(
    django_user_model, pending_refund, executor
):
    """approval_decide refuses the approval (ApprovalNotAuthorized), but the same user
    may still reject: a refusal has no side effect."""
    dora = _decider_without_tool_permission(django_user_model)
    approval = ApprovalRequest.objects.get(tool_call=pending_refund)
    with pytest.raises(ApprovalNotAuthorized):
        approval_decide(approval=approval, decided_by=dora, decision="approve")
    approval.refresh_from_db()
    assert approval.status == "pending"
    rejected = approval_decide(
        approval=approval, decided_by=dora, decision="reject", reason="not today"
    )
    assert rejected.status == "rejected"
    executor.settle(pending_refund.thread)
    assert Refund.objects.count() == 0


def test_dc03_approval_context_gives_rationale_results_risk_and_links(
    approver, pending_refund, executor
):
    """approval_context: thread title, requester, agent, the assistant text before the
    call, the lookup result it was based on, risk with its reason, the call's link."""
    approval = ApprovalRequest.objects.get(tool_call=pending_refund)
    context = approval_context(approval, approver)
    thread = pending_refund.thread
    assert context["thread"] == {
        "threadId": thread.thread_id,
        "title": "refund",
        "url": f"/threads/{thread.thread_id}/",
    }
    assert context["callUrl"].endswith(f"#call-{pending_refund.tool_call_id}")
    assert context["requester"] == thread.owner.username
    assert context["agent"] == "demo"
    assert context["risk"]["level"] == "medium"
    assert context["risk"]["reasons"][0] == (
        "destructive: the tool declares that it changes or deletes data, "
        "but amount 25 is within the policy threshold 100"
    )
    lookups = [r for r in context["basedOn"] if r["tool"] == "lookup_order"]
    assert lookups
    assert "A-1001" in lookups[0]["content"]
    assistant = [
        m
        for m in Message.objects.filter(thread=thread, role="assistant")
        if isinstance(m.content, str) and m.content.strip()
    ]
    if assistant:  # the scripted agent may call without text
        assert context["rationale"]
    assert context["canAuthorize"] is True
    assert context["parametersSchema"]["properties"]["amount"]["type"] == "number"
    assert context["outcome"] is None
    assert context["undoUntil"] is None


def test_risk_over_the_policy_threshold_and_arguments_diff(
    settings, approver, pending_refund, executor
):
    """An amount over RISK_THRESHOLDS is named as a reason; the diff is by path."""
    settings.COUNTERSIGN = {
        **settings.COUNTERSIGN,
        "RISK_THRESHOLDS": {"refund_order": {"amount": 10}},
    }
    approval = ApprovalRequest.objects.get(tool_call=pending_refund)
    reasons = approval_context(approval, approver)["risk"]["reasons"]
    assert "amount 25 is over the policy threshold 10" in reasons
    assert arguments_diff({"a": 1, "b": {"c": 2}}, {"a": 1, "b": {"c": 3}, "d": 4}) == [
        {"path": "b.c", "change": "changed", "proposed": 2, "edited": 3},
        {"path": "d", "change": "added", "proposed": None, "edited": 4},
    ]


def test_sec02_undo_inside_the_window_returns_to_pending_then_executes_once(
    settings, approver, pending_refund, executor
):
    """Approve with undo: undoUntil is set, nothing runs; undo → pending, audited; the
    next (immediate) approval executes exactly once; undo after that is too late."""
    approval = ApprovalRequest.objects.get(tool_call=pending_refund)
    client = _client(approver)
    settings.COUNTERSIGN = {**settings.COUNTERSIGN, "DECISION_UNDO_SECONDS": 5}
    first = client.post(
        f"/api/approvals/{approval.pk}/approve/", {"undo": True}, format="json"
    )
    assert first.status_code == 200
    assert first.json()["undoUntil"]
    assert ToolExecution.objects.get(tool_call=pending_refund).not_before is not None

    undone = client.post(f"/api/approvals/{approval.pk}/undo/")
    assert undone.status_code == 200
    assert undone.json()["status"] == "pending"
    assert undone.json()["decidedBy"] is None
    assert not ToolExecution.objects.filter(tool_call=pending_refund).exists()
    pending_refund.refresh_from_db()
    assert pending_refund.state == ToolCall.State.AWAITING_APPROVAL
    assert AuditEntry.objects.filter(action="approval.undone").count() == 1

    approval_decide(approval=approval, decided_by=approver, decision="approve")
    executor.settle(pending_refund.thread)
    assert Refund.objects.count() == 1
    with pytest.raises(UndoTooLate):
        approval_undo(approval=approval, user=approver)
    again = client.post(f"/api/approvals/{approval.pk}/undo/")
    assert again.status_code == 409
    assert again.json()["type"] == "undo_too_late"


def test_authorization_for_anonymous_names_everything_missing(approver, pending_refund):
    """An anonymous user lacks both permissions; reason says so."""
    from django.contrib.auth.models import AnonymousUser

    approval = ApprovalRequest.objects.get(tool_call=pending_refund)
    result = approval_authorization(approval, AnonymousUser())
    assert not result.can_authorize
    assert not result.can_reject
    assert result.missing == ("approvals.decide_approvalrequest", "demo.add_refund")
    assert "anonymous lacks" in result.reason


@pytest.mark.django_db(transaction=True)
def test_ir12_resume_by_a_user_without_the_tools_permission_decides_nothing(
    django_user_model, executor
):
    """IR-12 / SEC-02: an AG-UI resume approving a refund, sent by a user who may decide
    but lacks demo.add_refund, is refused before anything is decided or run."""
    from tests.helpers.interrupts import approve, interrupted, resume_post

    dora = _decider_without_tool_permission(django_user_model)
    approval = interrupted(dora, executor, "ir12-tool-permission")

    with pytest.raises(ApprovalNotAuthorized) as refused:
        resume_post(dora, "ir12-tool-permission", "run-2", approve(approval))

    assert refused.value.status == 403
    assert "'demo.add_refund'" in str(refused.value)
    approval.refresh_from_db()
    assert approval.status == "pending"
    assert not ToolExecution.objects.filter(tool_call=approval.tool_call).exists()
    assert Refund.objects.count() == 0


def test_janitor_does_not_take_a_deferred_execution_for_a_lost_message(
    settings, approver, pending_refund, executor
):
    """An execution waiting out its undo window is not 'still queued': the janitor counts
    from the window's end (then it is enqueued again, and still runs once)."""
    from datetime import timedelta

    from django.utils import timezone

    from orchestration.janitor import lost_messages_requeue

    settings.COUNTERSIGN = {**settings.COUNTERSIGN, "DECISION_UNDO_SECONDS": 20}
    approval = ApprovalRequest.objects.get(tool_call=pending_refund)
    approval_decide(
        approval=approval, decided_by=approver, decision="approve", undo_seconds=20
    )
    old = timezone.now() - timedelta(seconds=120)
    ToolExecution.objects.filter(tool_call=pending_refund).update(created_at=old)

    assert lost_messages_requeue(stale_seconds=15)["executions_requeued"] == 0

    ToolExecution.objects.filter(tool_call=pending_refund).update(not_before=old)
    assert lost_messages_requeue(stale_seconds=15)["executions_requeued"] == 1
    executor.settle(pending_refund.thread)
    assert Refund.objects.count() == 1
    assert ToolExecution.objects.get(tool_call=pending_refund).attempts == 1
