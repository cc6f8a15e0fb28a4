"""Four-eyes and N of M: each approver's vote, what it counts for, and what resets it.

The end-to-end flows run on the embedded pool and on a real Celery worker
process (``executor``); the direct tests of :mod:`approvals.services.votes`
decide a request recorded without any agent run. Implements SEC-02, DC-03.
"""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from approvals.exceptions import ApprovalAlreadyDecided
from approvals.models import (
    ApprovalRequest,
    ApprovalVote,
    AuditEntry,
    ToolExecution,
)
from approvals.services import audit_verify
from approvals.services.votes import approvals_progress, governance_snapshot
from demo.models import Refund
from orchestration.pipeline import approval_decide
from tests.helpers.governance import approve_as, held_refund, refund_policy
from threads.models import ToolCall


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
    assert audit_verify().ok


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


@pytest.mark.postgres
@pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="row locks under real concurrency need PostgreSQL",
)
def test_two_approvers_committing_the_nth_approval_at_once_execute_once(
    user, finance, executor
):
    """N=2 after ada: grace and hopper approve at once → one decision, one execution, the other told."""
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
    # the loser's vote came after the decision stood: refused, and told so
    assert results.count("approved") == 1, results
    [lost] = [r for r in results if r != "approved"]
    assert isinstance(lost, ApprovalAlreadyDecided), results
    assert "your decision was not recorded" in str(lost)
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


EDITED = {"order_id": "A-1001", "amount": 20.0, "reason": "customer request"}


def _needing(approval, approvals=1, rejections=1):
    approval.approvals_required = approvals
    approval.rejections_required = rejections
    approval.save(update_fields=["approvals_required", "rejections_required"])
    return approval


def _decide(approval, user, decision="approve", **kwargs):
    return approval_decide(
        approval=ApprovalRequest.objects.get(pk=approval.pk),
        decided_by=user,
        decision=decision,
        **kwargs,
    )


@pytest.mark.django_db
def test_the_first_of_two_approvals_is_counted_and_leaves_the_request_pending(
    approval, nonstaff_approver
):
    """N=2: one approval is recorded as a vote and shown in the progress, nothing decided."""
    _needing(approval, approvals=2)

    decided = _decide(approval, nonstaff_approver)

    assert decided.status == ApprovalRequest.Status.PENDING
    assert approvals_progress(ApprovalRequest.objects.get(pk=approval.pk)) == {
        "required": 2,
        "given": 1,
        "by": ["ada"],
        "rejections": [],
        "rejectionsRequired": 1,
        "reset": [],
    }


@pytest.mark.django_db
def test_repeating_the_same_approval_adds_no_vote(approval, nonstaff_approver):
    """An approver's identical repeat changes nothing (no second vote, still one of two)."""
    _needing(approval, approvals=2)

    _decide(approval, nonstaff_approver)
    _decide(approval, nonstaff_approver)

    assert ApprovalVote.objects.filter(approval=approval).count() == 1
    assert ApprovalRequest.objects.get(pk=approval.pk).status == "pending"


@pytest.mark.django_db
def test_an_edit_resets_the_earlier_approval_and_says_who_and_why(
    approval, nonstaff_approver, second_approver
):
    """N=3: grace approves edited arguments; ada's approval no longer counts, with the reason."""
    _needing(approval, approvals=3)
    _decide(approval, nonstaff_approver)

    _decide(approval, second_approver, edited_arguments=EDITED)

    progress = approvals_progress(ApprovalRequest.objects.get(pk=approval.pk))
    assert (progress["given"], progress["by"]) == (1, ["grace"])
    assert [(r["by"], r["reason"]) for r in progress["reset"]] == [
        (
            "ada",
            "grace edited the arguments; approve the new arguments to count again",
        )
    ]
    assert AuditEntry.objects.filter(action="approval.votes_reset").count() == 1


@pytest.mark.django_db
def test_a_rejection_short_of_rejections_required_is_a_vote_not_a_decision(
    approval, nonstaff_approver, second_approver
):
    """rejections_required=2: the first rejection is listed; the second rejects."""
    _needing(approval, approvals=1, rejections=2)

    first = _decide(approval, nonstaff_approver, "reject", reason="too much")
    progress = approvals_progress(ApprovalRequest.objects.get(pk=approval.pk))
    second = _decide(approval, second_approver, "reject", reason="not ours")

    assert first.status == ApprovalRequest.Status.PENDING
    assert progress["rejections"] == [{"by": "ada", "reason": "too much"}]
    assert second.status == ApprovalRequest.Status.REJECTED


@pytest.mark.django_db
def test_governance_snapshot_of_an_unrouted_request(approval):
    """No groups, no escalation, no claim: the snapshot says so in the REST API's shape."""
    snapshot = governance_snapshot(approval)

    assert snapshot == {
        "approvals": approvals_progress(approval),
        "approverGroups": [],
        "requesterMayApprove": approval.requester_may_approve,
        "escalation": [],
        "escalationStep": 0,
        "stepDeadline": None,
        "policySource": approval.policy_source,
        "claimedBy": None,
        "claimedAt": None,
    }
    assert snapshot["approvals"]["required"] == 1
