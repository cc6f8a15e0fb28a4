"""Safe decisions and governance together.

One authorization check (:func:`approvals.authorization.approval_authorization`)
covers permissions, approver groups, four-eyes and claims, so the REST
``canAuthorize`` / ``authorization`` say why not and who can; the undo window
works with the N-th approval of an N-of-M request. Runs on the embedded pool
and on a real Celery worker process (``executor``). Implements SEC-02, DC-03.
"""

from __future__ import annotations

import pytest

from approvals.authorization import approval_authorization
from approvals.exceptions import ApprovalNotAuthorized, UndoTooLate
from approvals.models import ApprovalRequest, ApprovalVote, AuditEntry, ToolExecution
from approvals.services import approval_undo
from approvals.services.claims import approval_claim
from demo.models import Refund
from tests.helpers.governance import approve_as, held_refund, refund_policy


def test_outsider_is_told_the_groups_and_who_can_over_rest(
    user, finance_and_support, client, executor
):
    """Routed to finance: linus holds every permission but is not in the group; REST says so."""
    refund_policy()
    ada, _, linus = finance_and_support
    call = held_refund(user, executor)
    approval = ApprovalRequest.objects.get(tool_call=call)

    client.force_login(linus)
    body = client.get(f"/api/approvals/{approval.pk}/").json()
    assert body["canAuthorize"] is False
    assert "canDecide" not in body
    auth = body["authorization"]
    assert auth["missingPermissions"] == []
    assert auth["refusals"] == [
        f"approval {approval.pk} is assigned to the group(s) ['finance']; user "
        "'linus' is in none of them and may only view it"
    ]
    assert (auth["canReject"], auth["claimedBy"]) == (False, None)
    # The deciders hold the permissions themselves, not through the group.
    assert auth["whoCan"] == {"users": ["ada", "grace"], "groups": []}
    assert auth["reason"].endswith("(who can: ada, grace)")

    refused = client.post(
        f"/api/approvals/{approval.pk}/approve/", {}, "application/json"
    )
    assert (refused.status_code, refused.json()["type"]) == (403, "not_authorized")
    rejected = client.post(
        f"/api/approvals/{approval.pk}/reject/", {"reason": "no"}, "application/json"
    )
    assert (rejected.status_code, rejected.json()["type"]) == (403, "not_authorized")
    approval.refresh_from_db()
    assert approval.status == "pending"
    assert not ApprovalVote.objects.filter(approval=approval).exists()

    client.force_login(ada)
    assert client.get(f"/api/approvals/{approval.pk}/").json()["canAuthorize"] is True


def test_requester_is_refused_four_eyes_and_left_out_of_who_can(
    django_user_model, finance_and_support, executor
):
    """The thread's owner, a finance decider, may not approve the call they requested."""
    refund_policy()
    ada, grace, _ = finance_and_support
    call = held_refund(ada, executor)
    approval = ApprovalRequest.objects.get(tool_call=call)
    assert approval.requested_by == ada

    mine = approval_authorization(approval, ada)
    assert (mine.can_authorize, mine.can_reject) == (False, False)
    assert mine.refusals == (
        "user 'ada' requested this call and may not approve it; another approver "
        "must decide (four-eyes)",
    )
    assert mine.who_can_users == ("grace",)
    with pytest.raises(ApprovalNotAuthorized, match="four-eyes"):
        approve_as(approval, ada)
    assert approval_authorization(approval, grace).can_authorize is True


def test_claim_shows_in_authorization_and_refuses_with_409(
    user, finance_and_support, client, executor
):
    """Ada's claim: grace's authorization names it; her approve is 409 claimed, not 403."""
    refund_policy()
    ada, grace, _ = finance_and_support
    call = held_refund(user, executor)
    approval = ApprovalRequest.objects.get(tool_call=call)
    approval_claim(approval=approval, user=ada)

    client.force_login(grace)
    auth = client.get(f"/api/approvals/{approval.pk}/").json()["authorization"]
    assert (auth["canAuthorize"], auth["claimedBy"], auth["refusals"]) == (
        False,
        "ada",
        [],
    )
    assert f"approval {approval.pk} is claimed by 'ada'" in auth["reason"]
    blocked = client.post(
        f"/api/approvals/{approval.pk}/approve/", {}, "application/json"
    )
    assert (blocked.status_code, blocked.json()["type"]) == (409, "claimed")


def test_nth_approval_with_undo_defers_and_undo_withdraws_only_that_vote(
    user, finance_and_support, client, executor
):
    """2 of 2: grace's approval (undo) gets not_before; undo deletes her vote, ada's still
    counts; grace approving again at once executes exactly once."""
    refund_policy(approvals_required=2)
    ada, grace, _ = finance_and_support
    call = held_refund(user, executor)
    approval = ApprovalRequest.objects.get(tool_call=call)
    approve_as(approval, ada)

    client.force_login(grace)
    second = client.post(
        f"/api/approvals/{approval.pk}/approve/", {"undo": True}, "application/json"
    )
    assert (second.status_code, second.json()["status"]) == (200, "approved")
    assert second.json()["undoUntil"]
    execution = ToolExecution.objects.get(tool_call=call)
    assert execution.not_before is not None
    assert execution.state == "queued"

    undone = client.post(f"/api/approvals/{approval.pk}/undo/")
    assert undone.status_code == 200, undone.content
    assert undone.json()["status"] == "pending"
    assert undone.json()["approvals"]["given"] == 1
    assert undone.json()["approvals"]["by"] == ["ada"]
    assert list(
        ApprovalVote.objects.filter(approval=approval).values_list(
            "voter__username", flat=True
        )
    ) == ["ada"]
    assert not ToolExecution.objects.filter(tool_call=call).exists()
    entry = AuditEntry.objects.get(action="approval.undone", target_id=str(approval.pk))
    assert entry.before["vote"] is not None

    again = approve_as(approval, grace)
    assert again.status == "approved"
    executor.settle(call.thread)
    assert ToolExecution.objects.get(tool_call=call).state == "succeeded"
    assert Refund.objects.filter(order_id="A-1001").count() == 1
    with pytest.raises(UndoTooLate):
        approval_undo(approval=ApprovalRequest.objects.get(pk=approval.pk), user=grace)
