"""The pipeline's steps: services say what they did, the pipeline decides what comes next."""

from __future__ import annotations

import pytest
from django.db import transaction

from approvals.models import ApprovalRequest, ToolExecution
from approvals.services import (
    QueuedExecution,
    Reserved,
    Settled,
    approval_decision_record,
    execution_outcome_record,
    execution_reserve,
)
from demo.models import Refund
from orchestration.pipeline import run_continue, tool_run
from threads.execution import wait_embedded
from threads.models import Run, ToolCall


@pytest.mark.parametrize("executor", ["embedded"], indirect=True)
def test_an_approval_queues_the_execution_and_the_service_enqueues_nothing(
    approver, pending_refund, executor
):
    """``approval_decision_record`` returns the queued execution; nothing runs it."""
    # given a refund awaiting approval
    call = pending_refund
    approval = ApprovalRequest.objects.get(tool_call=call)
    # when the decision service alone approves it
    with transaction.atomic():
        decided = approval_decision_record(
            approval=approval, decided_by=approver, decision="approve"
        )
    wait_embedded()
    # then it says what it queued, and the execution waits for the pipeline
    assert decided.queued == QueuedExecution(tool_call_pk=call.pk)
    assert not decided.answered
    assert not decided.expired
    assert ToolExecution.objects.get(tool_call=call).state == "queued"
    assert Refund.objects.count() == 0


@pytest.mark.parametrize("executor", ["embedded"], indirect=True)
def test_a_rejection_answers_the_call_and_only_run_continue_continues_the_run(
    approver, pending_refund, executor
):
    """The decision answers the call; the continuation starts at the pipeline's last step."""
    # given a refund awaiting approval
    call = pending_refund
    approval = ApprovalRequest.objects.get(tool_call=call)
    # when the decision service rejects it
    with transaction.atomic():
        decided = approval_decision_record(
            approval=approval, decided_by=approver, decision="reject", reason="no"
        )
    # then the call is answered, and no continuation exists yet
    assert decided.answered
    assert decided.queued is None
    assert ToolCall.objects.get(pk=call.pk).state == "declined"
    assert not Run.objects.filter(continues=call.run).exists()
    # when the pipeline continues the run
    with transaction.atomic():
        continuation = run_continue(run=call.run)
    # then exactly one continuation starts, and a second call starts none
    assert continuation is not None
    assert continuation.continues_id == call.run_id
    with transaction.atomic():
        assert run_continue(run=call.run) is None
    wait_embedded()
    assert Run.objects.filter(continues=call.run).count() == 1


@pytest.mark.parametrize("executor", ["embedded"], indirect=True)
def test_reserve_run_record_are_three_steps_and_the_tool_runs_between_them(
    approver, pending_refund, executor
):
    """The reservation commits before the tool runs; the outcome answers the call."""
    # given an approved refund whose execution is queued (not yet enqueued)
    call = pending_refund
    approval = ApprovalRequest.objects.get(tool_call=call)
    with transaction.atomic():
        approval_decision_record(
            approval=approval, decided_by=approver, decision="approve"
        )
    # when its execution is reserved
    with transaction.atomic():
        reserved = execution_reserve(thread_pk=call.thread_id, tool_call_pk=call.pk)
    # then it is reserved and nothing ran
    assert isinstance(reserved, Reserved)
    assert ToolExecution.objects.get(tool_call=call).state == "reserved"
    assert Refund.objects.count() == 0
    # when the pipeline runs the tool and records its outcome
    result = tool_run(reserved)
    assert Refund.objects.count() == 1
    with transaction.atomic():
        outcome = execution_outcome_record(
            thread_pk=call.thread_id, tool_call_pk=call.pk, result=result
        )
    # then the call is answered, and recording the outcome again changes nothing
    assert isinstance(outcome, Settled)
    assert outcome.answered
    assert ToolExecution.objects.get(tool_call=call).state == "succeeded"
    assert not Run.objects.filter(continues=call.run).exists()
    with transaction.atomic():
        again = execution_outcome_record(
            thread_pk=call.thread_id, tool_call_pk=call.pk, result=result
        )
    assert not again.answered
    assert Refund.objects.count() == 1
