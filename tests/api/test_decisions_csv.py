"""The decisions export (``/api/approvals/decisions.csv``): every column true for
every final state. Implements DC-05, SEC-02 (an unapproved call is never shown as
approved)."""

from __future__ import annotations

import csv
import io
import json
from datetime import timedelta

from django.utils import timezone

from approvals.models import ApprovalRequest
from orchestration.pipeline import approval_decide, approvals_expire
from tests.helpers.api import pending_refund_thread

EDIT = {"order_id": "A-1001", "amount": 10.0, "reason": "customer request"}


def _pending(owner, thread_id: str) -> ApprovalRequest:
    pending_refund_thread(owner, thread_id=thread_id)
    return ApprovalRequest.objects.get(thread__thread_id=thread_id)


def _rows(client) -> dict[str, dict[str, str]]:
    response = client.get("/api/approvals/decisions.csv")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    return {row["threadId"]: row for row in rows}


def test_dc05_csv_approved_arguments_only_on_approved_rows(
    user, nonstaff_approver, approver_api
):
    """Approved (with an edit) carries the edit; rejected and expired rows, even with
    an approver's edit voted on under N of M, carry no approved arguments."""
    # Given an approved edit, a rejection, and an expiry after one of two votes
    approved = _pending(user, "t-approved")
    approval_decide(
        approval=approved,
        decided_by=nonstaff_approver,
        decision="approve",
        edited_arguments=EDIT,
    )
    rejected = _pending(user, "t-rejected")
    approval_decide(
        approval=rejected,
        decided_by=nonstaff_approver,
        decision="reject",
        reason="duplicate",
    )
    expired = _pending(user, "t-expired")
    ApprovalRequest.objects.filter(pk=expired.pk).update(approvals_required=2)
    expired.refresh_from_db()
    approval_decide(
        approval=expired,
        decided_by=nonstaff_approver,
        decision="approve",
        edited_arguments=EDIT,
    )
    expired.refresh_from_db()
    assert expired.status == "pending"
    assert expired.edited_arguments is not None
    ApprovalRequest.objects.filter(pk=expired.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert approvals_expire() == 1

    # When the approver exports the decisions
    rows = _rows(approver_api)

    # Then each row tells the truth about its final state
    assert list(rows) == ["t-expired", "t-rejected", "t-approved"]  # newest first
    ok = rows["t-approved"]
    assert ok["status"] == "approved"
    assert ok["decidedBy"] == "ada"
    assert ok["edited"] == "yes"
    assert json.loads(ok["approvedArguments"]) == EDIT
    assert json.loads(ok["proposedArguments"])["amount"] == 25.0
    assert ok["executionState"] == "queued"
    assert ok["toolCallId"] == "t-approved-call"
    assert ok["requester"] == "olivia"

    no = rows["t-rejected"]
    assert no["status"] == "rejected"
    assert no["decidedBy"] == "ada"
    assert no["reason"] == "duplicate"
    assert no["edited"] == "no"
    assert no["approvedArguments"] == ""
    assert no["executionState"] == ""
    assert json.loads(no["proposedArguments"])["amount"] == 25.0

    late = rows["t-expired"]
    assert late["status"] == "expired"
    assert late["decidedBy"] == ""
    assert late["decidedAt"] != ""
    assert late["edited"] == "yes"  # an edit was voted on, and never approved
    assert late["approvedArguments"] == ""
    assert late["executionState"] == ""
