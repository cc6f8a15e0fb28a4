"""Approval and execution statuses move only along their tables, with their side effects (STYLE.md 8)."""

from __future__ import annotations

import pytest

from approvals.models import ApprovalRequest, AuditEntry, ToolExecution
from approvals.services import notify
from approvals.transitions import (
    APPROVAL_TRANSITIONS,
    EXECUTION_TRANSITIONS,
    AuditFact,
    approval_transition,
    call_transition,
    execution_transition,
)
from threads.exceptions import IllegalTransition
from threads.models import Run, Thread, ToolCall


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


@pytest.fixture
def sent(monkeypatch) -> list[dict[str, object]]:
    """The notifications sent to threads' groups (after commit), in order."""
    payloads: list[dict[str, object]] = []
    monkeypatch.setattr(
        notify,
        "publish_notification",
        lambda *, thread_pk, payload: payloads.append(payload),
    )
    return payloads


def _call(user) -> ToolCall:
    thread = Thread.objects.create(owner=user, thread_id="t-effects")
    run = Run.objects.create(
        thread=thread, run_id="r-effects", status=Run.Status.AWAITING_TOOLS
    )
    return ToolCall.objects.create(
        thread=thread,
        run=run,
        tool_call_id="c-effects",
        name="refund_order",
        state=ToolCall.State.PENDING,
    )


@pytest.mark.django_db
def test_a_move_carries_its_audit_entry_and_notification(
    user, sent, django_capture_on_commit_callbacks
) -> None:
    """One call moves the row, appends the audit entry and tells browsers after commit."""
    call = _call(user)
    # when the call is approved by policy
    with django_capture_on_commit_callbacks(execute=True):
        call_transition(
            call=call,
            to=ToolCall.State.APPROVED,
            audit=AuditFact(action="tool_call.auto_approved", after={"grant": None}),
            notify=True,
        )
    # then the move is saved, audited about the call, and announced once
    assert ToolCall.objects.get(pk=call.pk).state == "approved"
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.target_type, entry.target_id, entry.after) == (
        "tool_call.auto_approved",
        "threads.toolcall",
        str(call.pk),
        {"grant": None},
    )
    assert [(p["toolCallId"], p["state"]) for p in sent] == [("c-effects", "approved")]


@pytest.mark.django_db
def test_an_illegal_move_audits_and_announces_nothing(
    user, sent, django_capture_on_commit_callbacks
) -> None:
    call = _call(user)
    with (
        django_capture_on_commit_callbacks(execute=True),
        pytest.raises(IllegalTransition),
    ):
        call_transition(
            call=call,
            to=ToolCall.State.EXECUTING,
            audit=AuditFact(action="execution.reserved"),
            notify=True,
        )
    assert not AuditEntry.objects.exists()
    assert sent == []
