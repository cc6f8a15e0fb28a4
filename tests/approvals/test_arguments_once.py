"""An approved call's arguments are validated once, when it is dispatched.

The value validated then (params, hash, schema hash) is what the approval, the
votes and the execution refer to; an operator's edit is validated once more,
through the same ladder. Re-checking at execution compares hashes. Rules: RT-05,
SEC-01, SEC-02.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agentcore import arguments as arguments_module
from approvals.models import ApprovalRequest, ApprovalVote, ToolExecution
from approvals.services.decisions import edited_arguments_validate
from demo.models import Refund
from orchestration.pipeline import approval_decide
from threads.models import ToolCall
from threads.services import message_post, thread_create


@pytest.fixture
def validations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Count every schema validation of the ladder, by tool name."""
    seen: list[str] = []
    original: Callable[..., bool] = arguments_module._schema_accepts

    def counting(tool: Any, value: Any) -> bool:
        seen.append(tool.name)
        return original(tool, value)

    monkeypatch.setattr(arguments_module, "_schema_accepts", counting)
    return seen


def _refund_awaiting_approval(user: Any, executor: Any) -> ToolCall:
    thread = thread_create(owner=user, title="refund")
    message_post(thread=thread, content="refund order A-1001 25.00")
    executor.settle(thread)
    call = ToolCall.objects.get(thread=thread, name="refund_order")
    assert call.state == ToolCall.State.AWAITING_APPROVAL
    return call


def _approve_and_run(
    approval: ApprovalRequest, approver: Any, executor: Any, edited: Any = None
) -> None:
    approval_decide(
        approval=approval,
        decided_by=approver,
        decision="approve",
        edited_arguments=edited,
    )
    executor.settle(approval.thread)


@pytest.mark.parametrize("executor", ["embedded"], indirect=True)
def test_an_approved_call_is_validated_once(
    user: Any, approver: Any, executor: Any, validations: list[str]
) -> None:
    """Dispatch validates the refund's arguments; approving and executing it validate nothing."""
    # given a refund the policy held for approval
    call = _refund_awaiting_approval(user, executor)
    assert validations.count("refund_order") == 1
    # when an operator approves it as proposed and it executes
    approval = ApprovalRequest.objects.get(tool_call=call)
    _approve_and_run(approval, approver, executor)
    # then it ran once, and its arguments were validated once in all
    assert Refund.objects.count() == 1
    assert validations.count("refund_order") == 1
    # and the approval, the vote and the execution refer to one hash
    approval.refresh_from_db()
    execution = ToolExecution.objects.get(tool_call=call)
    vote = ApprovalVote.objects.get(approval=approval)
    assert execution.state == ToolExecution.State.SUCCEEDED
    assert {approval.approved_arguments_hash, vote.arguments_hash} == {
        execution.arguments_hash
    }
    assert execution.arguments == approval.proposed_arguments


@pytest.mark.parametrize("executor", ["embedded"], indirect=True)
def test_an_edit_is_validated_once_more(
    user: Any, approver: Any, executor: Any, validations: list[str]
) -> None:
    """An edit adds one validation (the edit's own); the edited value runs as validated."""
    # given a refund awaiting approval
    call = _refund_awaiting_approval(user, executor)
    approval = ApprovalRequest.objects.get(tool_call=call)
    edited = {**approval.proposed_arguments, "amount": 20.0}
    # when an operator approves it with a smaller amount and it executes
    _approve_and_run(approval, approver, executor, edited)
    # then the dispatch and the edit were the only validations
    assert validations.count("refund_order") == 2
    execution = ToolExecution.objects.get(tool_call=call)
    assert (execution.state, execution.arguments) == ("succeeded", edited)
    assert Refund.objects.get().amount == 20


@pytest.mark.parametrize("executor", ["embedded"], indirect=True)
def test_an_edit_checked_before_deciding_is_not_validated_again(
    user: Any, approver: Any, executor: Any, validations: list[str]
) -> None:
    """An edit validated ahead of the decision (AG-UI resume) is handed over as its value."""
    # given a refund awaiting approval and an edit checked before any decision
    call = _refund_awaiting_approval(user, executor)
    approval = ApprovalRequest.objects.get(tool_call=call)
    edited = edited_arguments_validate(
        approval=approval, edited={**approval.proposed_arguments, "amount": 20.0}
    )
    # when the operator's decision takes that value and the call executes
    _approve_and_run(approval, approver, executor, edited)
    # then the edit was validated once, and the value ran
    assert validations.count("refund_order") == 2
    execution = ToolExecution.objects.get(tool_call=call)
    assert (execution.arguments_hash, execution.state) == (edited.sha256, "succeeded")


@pytest.mark.parametrize("executor", ["embedded"], indirect=True)
def test_an_earlier_approvers_edit_is_not_validated_again_by_the_deciding_vote(
    user: Any,
    approver: Any,
    second_approver: Any,
    executor: Any,
    validations: list[str],
) -> None:
    """Two of two: the first approver's edit is validated once; the second approves that value."""
    # given a refund that needs two approvals, the first approver editing the amount
    call = _refund_awaiting_approval(user, executor)
    ApprovalRequest.objects.filter(tool_call=call).update(approvals_required=2)
    approval = ApprovalRequest.objects.get(tool_call=call)
    edited = {**approval.proposed_arguments, "amount": 20.0}
    _approve_and_run(approval, approver, executor, edited)
    assert ToolExecution.objects.filter(tool_call=call).count() == 0
    # when the second approver approves as it stands and the call executes
    _approve_and_run(approval, second_approver, executor)
    # then the dispatch and the one edit were the only validations
    assert validations.count("refund_order") == 2
    execution = ToolExecution.objects.get(tool_call=call)
    assert (execution.state, execution.arguments) == ("succeeded", edited)
    hashes = set(
        ApprovalVote.objects.filter(approval=approval).values_list(
            "arguments_hash", flat=True
        )
    )
    assert hashes == {execution.arguments_hash}
