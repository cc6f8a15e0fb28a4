"""Executing an approved call passes its crash points in order (BC32, LP-07)."""

from __future__ import annotations

import pytest

from approvals import crashpoints
from approvals.models import ApprovalRequest, ToolExecution
from demo.models import Refund
from orchestration.pipeline import approval_decide


@pytest.mark.parametrize("executor", ["embedded"], indirect=True)
def test_crash_points_follow_the_reservation_and_the_side_effect(
    approver, pending_refund, executor, monkeypatch
):
    """``after_reservation`` sees a committed reservation and no refund; ``after_tool`` the refund; ``after_outcome`` it recorded."""
    # given a refund awaiting approval, and crash points that record what they see
    call = pending_refund
    seen: list[tuple[str, str, int]] = []

    def record(name: crashpoints.CrashPoint) -> None:
        if name not in ("after_reservation", "after_tool", "after_outcome"):
            return  # the runs' own points (the continuation runs on another thread)
        execution = ToolExecution.objects.get(tool_call=call)
        seen.append((name, execution.state, Refund.objects.count()))

    monkeypatch.setattr(crashpoints, "crash_point", record)
    # when an operator approves it and the call executes
    approval = ApprovalRequest.objects.get(tool_call=call)
    approval_decide(approval=approval, decided_by=approver, decision="approve")
    executor.settle(call.thread)
    # then each crash point was passed once, in order, with the state a crash there leaves
    assert seen == [
        ("after_reservation", "reserved", 0),
        ("after_tool", "reserved", 1),
        ("after_outcome", "succeeded", 1),
    ]
    assert ToolExecution.objects.get(tool_call=call).state == "succeeded"


def test_crash_point_is_a_no_op() -> None:
    """Production code's crash point does nothing."""
    assert crashpoints.crash_point("after_reservation") is None
