"""Deciding a request: who may, what an edit or a response must satisfy, expiry.

Through :func:`orchestration.pipeline.approval_decide` and its checks, on a request
recorded without any agent run (no executor: nothing is executed, callbacks on
commit do not fire inside a test transaction). The flows that execute the
decided call are in ``test_workflow.py``. Implements SEC-02, DC-03, IR-09.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from agentcore.arguments import canonical_sha256
from approvals.exceptions import (
    ApprovalAlreadyDecided,
    ApprovalPermissionDenied,
    InvalidEditedArguments,
    InvalidResponse,
    ReasonRequired,
)
from approvals.models import ApprovalRequest
from approvals.services.decisions import edited_arguments_validate, response_validate
from orchestration.pipeline import approval_decide, approvals_expire
from threads.models import Message

pytestmark = pytest.mark.django_db

PROPOSED = {"order_id": "A-1001", "amount": 25.0, "reason": "customer request"}
APPROVED_SCHEMA = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}},
    "required": ["approved"],
}


@pytest.mark.parametrize(
    "schema",
    [
        {"type": 5},
        {"properties": 3},
        {"required": "approved"},
        {"properties": {"note": {"type": "string", "pattern": "["}}},
        {"items": 5},
    ],
)
def test_response_validate_refuses_nothing_against_a_malformed_schema(schema):
    """An agent's responseSchema that is no JSON Schema neither refuses nor crashes."""
    assert response_validate(schema, {"approved": True, "note": "x"}) is None


def test_response_validate_names_where_the_response_breaks_the_schema():
    """A response outside the interrupt's schema is refused at its path; a valid one passes."""
    response_validate(APPROVED_SCHEMA, {"approved": True})

    with pytest.raises(InvalidResponse, match="at 'approved': 'yes' is not of type"):
        response_validate(APPROVED_SCHEMA, {"approved": "yes"})


@pytest.mark.parametrize("schema", [None, "boolean", ["type", "object"]])
def test_response_validate_lets_a_schema_that_is_not_one_refuse_nothing(schema):
    """The agent's schema is its own: when it is not a JSON Schema object, any response goes."""
    response_validate(schema, {"anything": ["at", "all"]})


def test_edited_arguments_are_validated_against_the_tool_schema(approval):
    """A valid edit comes back as its validated value; a wrong type or a non-object is refused."""
    edited = {**PROPOSED, "amount": 20.0}

    value = edited_arguments_validate(approval=approval, edited=edited)
    assert value.as_dict() == edited
    assert value.sha256 == canonical_sha256(edited)
    with pytest.raises(InvalidEditedArguments, match="must be a JSON object, not list"):
        edited_arguments_validate(approval=approval, edited=[edited])
    with pytest.raises(InvalidEditedArguments, match="edited arguments are invalid"):
        edited_arguments_validate(
            approval=approval, edited={**PROPOSED, "amount": "lots"}
        )


def test_deciding_needs_the_decide_permission_and_a_rejection_a_reason(
    approval, user, nonstaff_approver
):
    """Without the permission nothing is recorded; a rejection without a reason is refused."""
    with pytest.raises(ApprovalPermissionDenied):
        approval_decide(approval=approval, decided_by=user, decision="approve")
    with pytest.raises(ReasonRequired):
        approval_decide(
            approval=approval, decided_by=nonstaff_approver, decision="reject"
        )

    assert ApprovalRequest.objects.get(pk=approval.pk).status == "pending"


def test_a_rejection_is_recorded_with_who_and_why_and_answers_the_call(
    approval, nonstaff_approver
):
    """Reject: the decision keeps decider and reason; the call gets one tool message."""
    decided = approval_decide(
        approval=approval,
        decided_by=nonstaff_approver,
        decision="reject",
        reason="wrong order",
    )

    assert (decided.status, decided.decided_by, decided.reason) == (
        ApprovalRequest.Status.REJECTED,
        nonstaff_approver,
        "wrong order",
    )
    answers = Message.objects.filter(role="tool", tool_call_id="t-refund-call")
    assert answers.count() == 1
    assert "wrong order" in answers.get().content


def test_approvals_expire_answers_overdue_requests_once(approval, nonstaff_approver):
    """An overdue request expires once (and is answered); deciding it afterwards is refused."""
    ApprovalRequest.objects.filter(pk=approval.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )

    assert approvals_expire() == 1
    assert approvals_expire() == 0
    assert ApprovalRequest.objects.get(pk=approval.pk).status == "expired"
    assert (
        Message.objects.filter(role="tool", tool_call_id="t-refund-call").count() == 1
    )
    with pytest.raises(ApprovalAlreadyDecided, match="was already 'expired'"):
        approval_decide(
            approval=ApprovalRequest.objects.get(pk=approval.pk),
            decided_by=nonstaff_approver,
            decision="approve",
        )
