"""The client-visible AG-UI run in the thread's log: one per request, whatever happens inside.

Through :func:`threads.services.message_post` and the approval decision, on the
embedded pool; the log is read as a client replaying it would. Implements
FT-03, FT-04, IR-01.
"""

from __future__ import annotations

import pytest

from approvals.models import ApprovalRequest
from orchestration.pipeline import approval_decide
from threads.models import Event
from threads.services import message_post, thread_create
from threads.wire import wire_run_current

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.parametrize("executor", ["embedded"], indirect=True),
]


def _wire(thread):
    return [e.as_wire() for e in Event.objects.filter(thread=thread).order_by("seq")]


def _bounds(log):
    return [
        (e["type"], e.get("runId"))
        for e in log
        if e["type"] in {"RUN_STARTED", "RUN_FINISHED", "RUN_ERROR"}
    ]


def test_a_posted_message_is_one_wire_run_from_started_to_finished(user, executor):
    """Agent-side calls and the answer happen inside it; nothing stays open after it."""
    thread = thread_create(owner=user, title="weather")

    message_post(thread=thread, content="What is the weather in Oslo?")
    executor.settle(thread)

    log = _wire(thread)
    (run_id,) = {e["runId"] for e in log if e["type"] == "RUN_STARTED"}
    assert _bounds(log) == [("RUN_STARTED", run_id), ("RUN_FINISHED", run_id)]
    assert (log[0]["type"], log[-1]["type"]) == ("RUN_STARTED", "RUN_FINISHED")
    assert log[-1]["outcome"] == {"type": "success"}
    assert wire_run_current(thread=thread) is None


def test_a_call_held_for_approval_ends_the_wire_run_with_its_interrupt(user, executor):
    """IR-01: the run ends once only a human can go on, naming the approval and the call."""
    thread = thread_create(owner=user, title="refund")

    message_post(thread=thread, content="refund order A-1001 25.00")
    executor.settle(thread)

    approval = ApprovalRequest.objects.get(thread=thread)
    log = _wire(thread)
    assert [t for t, _ in _bounds(log)] == ["RUN_STARTED", "RUN_FINISHED"]
    outcome = log[-1]["outcome"]
    assert outcome["type"] == "interrupt"
    assert [(i["id"], i["toolCallId"]) for i in outcome["interrupts"]] == [
        (f"cs-approval-{approval.pk}", approval.tool_call.tool_call_id)
    ]
    assert wire_run_current(thread=thread) is None


def test_a_decision_opens_a_wire_run_that_reports_the_answer_first(
    user, executor, nonstaff_approver
):
    """The continuation nobody requested starts with the rejected call's result, then ends."""
    thread = thread_create(owner=user, title="refund")
    message_post(thread=thread, content="refund order A-1001 25.00")
    executor.settle(thread)
    approval = ApprovalRequest.objects.get(thread=thread)
    before = len(_wire(thread))

    approval_decide(
        approval=approval,
        decided_by=nonstaff_approver,
        decision="reject",
        reason="not this order",
    )
    executor.settle(thread)

    log = _wire(thread)[before:]
    assert [e["type"] for e in log[:2]] == ["RUN_STARTED", "TOOL_CALL_RESULT"]
    assert "input" not in log[0]
    assert log[1]["toolCallId"] == approval.tool_call.tool_call_id
    assert [t for t, _ in _bounds(log)] == ["RUN_STARTED", "RUN_FINISHED"]
    assert log[-1]["outcome"] == {"type": "success"}
    assert wire_run_current(thread=thread) is None
