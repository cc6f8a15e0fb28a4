"""Races and redelivery end with one decision, one execution, one tool message.

Enforced by row locks and unique constraints, not by timing (DC-04, BC32, BC34).
"""

from __future__ import annotations

import pytest

from approvals.exceptions import ApprovalAlreadyDecided
from approvals.models import ApprovalRequest, ToolExecution
from demo.models import Refund
from orchestration.pipeline import approval_decide, tool_call_execute
from orchestration.tasks import execute_tool_call
from tests.helpers.concurrency import in_threads
from threads.execution import enqueue
from threads.models import Message, Run


def _assert_exactly_once(call):
    from threads.models import Event

    assert Refund.objects.count() == 1
    assert (
        Message.objects.filter(role="tool", tool_call_id=call.tool_call_id).count() == 1
    )
    # BC32: one TOOL_CALL_RESULT event for the call in the thread's AG-UI log.
    results = Event.objects.filter(
        thread=call.thread,
        type="TOOL_CALL_RESULT",
        payload__toolCallId=call.tool_call_id,
    )
    assert results.count() == 1
    execution = ToolExecution.objects.get(tool_call=call)
    assert execution.state == "succeeded"
    runs = Run.objects.filter(thread=call.thread)
    # One continuation per run that stopped on calls.
    continued = [r.continues_id for r in runs if r.continues_id]
    assert len(continued) == len(set(continued))


def test_dc04_two_operators_approving_at_once(
    approver, second_approver, pending_refund, executor
):
    """Two simultaneous approvals: one decision, one execution, one tool message; the
    loser is told its vote was not recorded."""
    call = pending_refund
    approval = ApprovalRequest.objects.get(tool_call=call)

    results = in_threads(
        lambda: approval_decide(
            approval=approval, decided_by=approver, decision="approve"
        ),
        lambda: approval_decide(
            approval=approval, decided_by=second_approver, decision="approve"
        ),
    )
    executor.settle(call.thread)

    approval.refresh_from_db()
    assert approval.decided_by in (approver, second_approver)
    won = [r for r in results if isinstance(r, ApprovalRequest)]
    lost = [r for r in results if isinstance(r, ApprovalAlreadyDecided)]
    assert (len(won), len(lost)) == (1, 1), results
    assert won[0].decided_by_id == approval.decided_by_id
    assert "your decision was not recorded" in str(lost[0])
    _assert_exactly_once(call)
    assert ToolExecution.objects.get(tool_call=call).attempts == 1


def test_dc04_approve_and_reject_racing_end_with_one_decision(
    approver, second_approver, pending_refund, executor
):
    """An approval racing a rejection: exactly one wins, the other is told it lost."""
    call = pending_refund
    approval = ApprovalRequest.objects.get(tool_call=call)

    results = in_threads(
        lambda: approval_decide(
            approval=approval, decided_by=approver, decision="approve"
        ),
        lambda: approval_decide(
            approval=approval,
            decided_by=second_approver,
            decision="reject",
            reason="too much",
        ),
    )
    executor.settle(call.thread)

    losers = [r for r in results if isinstance(r, ApprovalAlreadyDecided)]
    assert len(losers) == 1, results
    approval.refresh_from_db()
    answers = Message.objects.filter(role="tool", tool_call_id=call.tool_call_id)
    assert answers.count() == 1
    if approval.status == "approved":
        assert Refund.objects.count() == 1
    else:
        assert approval.status == "rejected"
        assert Refund.objects.count() == 0


def test_bc32_duplicate_task_delivery_executes_once(approver, pending_refund, executor):
    """The same execute task delivered three times runs the tool once (BC32)."""
    call = pending_refund
    approval = ApprovalRequest.objects.get(tool_call=call)
    approval_decide(approval=approval, decided_by=approver, decision="approve")
    # Two more deliveries of the same task, through the real queue.
    from django.db import transaction

    with transaction.atomic():
        enqueue(execute_tool_call, tool_call_pk=call.pk)
        enqueue(execute_tool_call, tool_call_pk=call.pk)
    executor.settle(call.thread)
    # And one delivered straight to the service after everything settled.
    assert tool_call_execute(tool_call_pk=call.pk).state == "succeeded"

    _assert_exactly_once(call)
    assert ToolExecution.objects.get(tool_call=call).attempts == 1


@pytest.mark.parametrize("executor", ["celery"], indirect=True)
@pytest.mark.parametrize("hook", ["after_reservation", "after_tool"])
def test_bc32_worker_killed_between_reservation_and_outcome(
    approver, pending_refund, executor, hook
):
    """A worker killed mid-execution: the idempotent tool is re-run with the same key.

    ``after_tool`` kills it after the refund was written: the redelivered task runs
    the tool again with the same idempotency key, and the refund ledger still holds
    one refund (LP-07). One tool message, one continuation.
    """
    call = pending_refund
    worker = executor.worker
    worker.stop()
    worker.env["CELERY_VISIBILITY_TIMEOUT"] = "1"
    # The execution lease is the tool's timeout (10 s) plus this grace.
    worker.env["COUNTERSIGN_EXECUTION_LEASE_GRACE_SECONDS"] = "0"
    worker.start(COUNTERSIGN_TEST_CRASH_AT=hook)
    approval = ApprovalRequest.objects.get(tool_call=call)
    approval_decide(approval=approval, decided_by=approver, decision="approve")

    assert worker.process is not None
    worker.process.wait(30)  # the hook ends the worker process
    execution = ToolExecution.objects.get(tool_call=call)
    assert execution.state == "reserved"
    assert execution.attempts == 1
    assert Refund.objects.count() == (1 if hook == "after_tool" else 0)

    worker.start()  # a fresh worker restores the unacknowledged message
    executor.settle(call.thread, timeout=60)

    execution.refresh_from_db()
    assert execution.attempts == 2
    _assert_exactly_once(call)
