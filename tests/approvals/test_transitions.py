"""Approval and execution statuses move only along their tables (STYLE.md 8)."""

from __future__ import annotations

import pytest

from approvals.models import ApprovalRequest, ToolExecution
from approvals.transitions import (
    APPROVAL_TRANSITIONS,
    EXECUTION_TRANSITIONS,
    approval_transition,
    execution_transition,
)
from threads.exceptions import IllegalTransition


def test_every_status_has_a_row_in_its_table() -> None:
    assert set(APPROVAL_TRANSITIONS) == set(ApprovalRequest.Status.values)
    assert set(EXECUTION_TRANSITIONS) == set(ToolExecution.State.values)


def test_a_decided_approval_cannot_be_decided_again() -> None:
    approval = ApprovalRequest(status=ApprovalRequest.Status.REJECTED)
    with pytest.raises(IllegalTransition, match="'rejected' to 'approved'"):
        approval_transition(
            approval=approval, to=ApprovalRequest.Status.APPROVED, save=False
        )
    assert approval.status == "rejected"


def test_a_finished_execution_is_never_reserved_again() -> None:
    execution = ToolExecution(state=ToolExecution.State.SUCCEEDED)
    with pytest.raises(IllegalTransition, match="'succeeded' to 'reserved'"):
        execution_transition(
            execution=execution, to=ToolExecution.State.RESERVED, save=False
        )


def test_an_unknown_outcome_may_be_resolved() -> None:
    execution = ToolExecution(state=ToolExecution.State.OUTCOME_UNKNOWN)
    assert execution_transition(
        execution=execution, to=ToolExecution.State.RESOLVED, save=False
    )
    assert execution.state == "resolved"
