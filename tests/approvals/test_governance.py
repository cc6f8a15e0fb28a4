"""Governance end to end (issue 16): policy with context, four-eyes and N of M.

Every flow runs on the embedded pool and on a real Celery worker process
(``executor``). Policies the worker must see are rows of
:class:`approvals.models.ToolPolicy` (the database is shared) or the agent
``governed`` given to the worker through ``COUNTERSIGN_AGENTS_JSON``.
Implements the tests of issue 16 items 1 and 2 (LP-01, SEC-02, DC-03).
"""

from __future__ import annotations

import json
import threading

import pytest
from django.contrib.auth.models import Group, Permission
from django.db import connection

from approvals.exceptions import ApprovalPermissionDenied
from approvals.models import (
    ApprovalRequest,
    ApprovalVote,
    AuditEntry,
    ToolExecution,
)
from approvals.services import approval_decide, audit_verify
from demo.models import Refund
from tests.helpers.governance import approve_as, decider, held_refund, refund_policy
from threads.models import ToolCall

GOVERNED_AGENT = {
    "provider": "scripted",
    "model": "scripted",
    "system_prompt": "You are Countersign's governed demo agent.",
    "toolsets": ["tests.approvals.governed_tools.GOVERNED_TOOLS"],
}


@pytest.fixture
def governed_agent(monkeypatch, settings):
    """Configure agent ``governed`` here and for any worker started after this fixture."""
    agents = {**settings.COUNTERSIGN_AGENTS, "governed": GOVERNED_AGENT}
    settings.COUNTERSIGN_AGENTS = agents
    monkeypatch.setenv(
        "COUNTERSIGN_AGENTS_JSON", json.dumps({"governed": GOVERNED_AGENT})
    )
    return "governed"


def test_four_eyes_executes_once_after_the_second_distinct_approval(
    user, finance, executor
):
    """N=2: the first approval leaves the call held; the second runs it once with the hash both approved."""
    refund_policy(approvals_required=2)
    call = held_refund(user, executor)
    approval = ApprovalRequest.objects.get(tool_call=call)
    assert (approval.approvals_required, approval.policy_source) == (2, "admin")
    assert list(approval.approver_groups.values_list("name", flat=True)) == ["finance"]

    ada, grace, _ = finance
    first = approve_as(approval, ada)
    assert first.status == "pending"
    again = approve_as(approval, ada)  # the same approver twice is still one approval
    assert again.status == "pending"
    assert ApprovalVote.objects.filter(approval=approval).count() == 1
    assert not ToolExecution.objects.filter(tool_call=call).exists()

    decided = approve_as(approval, grace, reason="second pair of eyes")
    assert (decided.status, decided.decided_by) == ("approved", grace)
    executor.settle(call.thread)
    execution = ToolExecution.objects.get(tool_call=call)
    assert execution.state == "succeeded"
    assert Refund.objects.filter(order_id="A-1001").count() == 1
    hashes = set(
        ApprovalVote.objects.filter(approval=approval).values_list(
            "arguments_hash", flat=True
        )
    )
    assert hashes == {execution.arguments_hash, decided.approved_arguments_hash}
    votes = AuditEntry.objects.filter(
        target_id=str(approval.pk), action="approval.vote.approve"
    )
    assert [v.actor_label for v in votes] == ["ada", "grace"]
    assert [v.after["given"] for v in votes] == [1, 2]
    assert audit_verify() == []


def test_requester_may_not_approve_their_own_call(user, finance, client, executor):
    """Four-eyes: the user whose thread asked for the call is refused (403); it stays pending."""
    refund_policy()
    user.user_permissions.add(
        Permission.objects.get(codename="decide_approvalrequest"),
        Permission.objects.get(codename="add_refund"),
    )
    user.groups.add(Group.objects.get(name="finance"))
    call = held_refund(user, executor)
    approval = ApprovalRequest.objects.get(tool_call=call)
    requester = type(user).objects.get(pk=user.pk)
    with pytest.raises(ApprovalPermissionDenied, match="requested this call"):
        approve_as(approval, requester)
    client.force_login(requester)
    response = client.post(
        f"/api/approvals/{approval.pk}/approve/", {}, content_type="application/json"
    )
    assert response.status_code == 403, response.content
    assert "four-eyes" in response.json()["detail"]
    approval.refresh_from_db()
    assert approval.status == "pending"
    assert not ApprovalVote.objects.filter(approval=approval).exists()

    decided = approve_as(approval, finance[0])
    assert decided.status == "approved"
    executor.settle(call.thread)
    assert Refund.objects.filter(order_id="A-1001").count() == 1


def test_a_decider_outside_the_groups_is_refused(
    user, finance, django_user_model, executor
):
    """Routing: holding the decide permission is not enough outside the request's groups."""
    refund_policy()
    outsider = decider(django_user_model, "linus", "support")
    call = held_refund(user, executor)
    approval = ApprovalRequest.objects.get(tool_call=call)
    with pytest.raises(ApprovalPermissionDenied, match="finance"):
        approve_as(approval, outsider)
    assert ApprovalRequest.objects.get(pk=approval.pk).status == "pending"


def test_an_edit_mid_n_of_m_resets_earlier_approvals_and_says_so(
    user, finance, executor
):
    """N=2: grace edits after ada approved; ada's approval is reset (with why) and must be given again."""
    refund_policy(approvals_required=2)
    call = held_refund(user, executor)
    approval = ApprovalRequest.objects.get(tool_call=call)
    ada, grace, _ = finance
    approve_as(approval, ada)
    edited = {"order_id": "A-1001", "amount": 20.0, "reason": "customer request"}
    after_edit = approve_as(approval, grace, edited_arguments=edited)
    assert after_edit.status == "pending"
    assert after_edit.edited_arguments == edited
    reset = ApprovalVote.objects.get(approval=approval, voter=ada)
    assert reset.reset_at is not None
    assert reset.reset_reason == (
        "grace edited the arguments; approve the new arguments to count again"
    )
    entry = AuditEntry.objects.get(
        target_id=str(approval.pk), action="approval.votes_reset"
    )
    assert (entry.actor_label, entry.before["approved_by"]) == ("grace", ["ada"])
    assert not ToolExecution.objects.filter(tool_call=call).exists()

    decided = approve_as(approval, ada)
    assert decided.status == "approved"
    executor.settle(call.thread)
    execution = ToolExecution.objects.get(tool_call=call)
    assert (execution.state, execution.arguments["amount"]) == ("succeeded", 20.0)
    assert [str(r.amount) for r in Refund.objects.filter(order_id="A-1001")] == [
        "20.00"
    ]


def test_one_rejection_rejects_unless_configured_otherwise(user, finance, executor):
    """rejections_required=2: one rejection leaves it pending, the second rejects."""
    refund_policy(approvals_required=2, rejections_required=2)
    call = held_refund(user, executor)
    approval = ApprovalRequest.objects.get(tool_call=call)
    ada, grace, _ = finance
    first = approval_decide(
        approval=approval, decided_by=ada, decision="reject", reason="too much"
    )
    assert first.status == "pending"
    second = approval_decide(
        approval=ApprovalRequest.objects.get(pk=approval.pk),
        decided_by=grace,
        decision="reject",
        reason="agreed",
    )
    assert second.status == "rejected"
    executor.settle(call.thread)
    assert ToolCall.objects.get(pk=call.pk).state == "declined"
    assert not Refund.objects.exists()


def test_context_policy_routes_and_a_raising_policy_fails_closed(
    governed_agent, user, finance, django_user_model, executor, caplog
):
    """A (params, context) policy: 25 → finance, 1 by olivia → auto; 999 raises → the strictest group."""
    call = held_refund(user, executor, agent=governed_agent)
    approval = ApprovalRequest.objects.get(tool_call=call)
    assert (approval.policy_source, approval.risk_level) == ("tool", "medium")
    assert list(approval.approver_groups.values_list("name", flat=True)) == ["finance"]

    auto = held_refund(
        user, executor, text="refund order A-1002 1.00", agent=governed_agent
    )
    assert ToolExecution.objects.get(tool_call=auto).authorized_by == "policy"

    raised = held_refund(
        user, executor, text="refund order A-1003 999", agent=governed_agent
    )
    failed = ApprovalRequest.objects.get(tool_call=raised)
    assert (failed.status, failed.policy_source, failed.risk_level) == (
        "pending",
        "fail_closed",
        "high",
    )
    assert "RuntimeError" in failed.risk_reason
    assert list(failed.approver_groups.values_list("name", flat=True)) == [
        "approvers-strict"
    ]
    with pytest.raises(ApprovalPermissionDenied, match="approvers-strict"):
        approve_as(failed, finance[0])
    if executor.worker is not None:
        log = executor.worker.log_path.read_text()
    else:
        log = caplog.text
    assert "policy of tool 'refund_order' failed" in log
    strict = decider(django_user_model, "margaret", "approvers-strict")
    assert approve_as(failed, strict).status == "approved"


@pytest.mark.postgres
@pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="row locks under real concurrency need PostgreSQL",
)
def test_two_approvers_committing_the_nth_approval_at_once_execute_once(
    user, finance, executor
):
    """N=2 after ada: grace and hopper approve at the same moment → one approved decision, one execution."""
    refund_policy(approvals_required=2)
    call = held_refund(user, executor)
    approval = ApprovalRequest.objects.get(tool_call=call)
    ada, grace, hopper = finance
    approve_as(approval, ada)
    barrier = threading.Barrier(2)
    results: list[object] = []

    def approve(who):
        try:
            barrier.wait(10)
            results.append(approve_as(approval, who).status)
        except Exception as error:  # recorded, asserted below
            results.append(error)
        finally:
            connection.close()

    workers = [threading.Thread(target=approve, args=(w,)) for w in (grace, hopper)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(30)
    assert results == ["approved", "approved"], results
    executor.settle(call.thread)
    assert ToolExecution.objects.filter(tool_call=call).count() == 1
    assert ToolExecution.objects.get(tool_call=call).attempts == 1
    assert Refund.objects.filter(order_id="A-1001").count() == 1
    assert (
        AuditEntry.objects.filter(
            target_id=str(approval.pk), action="approval.approved"
        ).count()
        == 1
    )
