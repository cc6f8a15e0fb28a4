"""Resuming interrupts from AG-UI input: ids, races and failures (IR-02, IR-13, IR-14, IR-17).

Each test drives the demo agent through :func:`orchestration.resume.agui_run_start`
(what ``POST /agui/demo/`` calls) on real PostgreSQL with the ``executor`` fixture
(embedded pool and a Celery worker), until ``refund_order`` waits for approval;
then resumes it. Concurrency is real: two threads released by a barrier, each
with its own database connection; row locks decide, not timing.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Any

import pytest
from rest_framework.test import APIClient

from agentcore.providers.base import (
    ModelEvent,
    ModelRequest,
    Provider,
    TextDelta,
    ToolCallBegin,
    ToolCallDelta,
    TurnEnd,
)
from approvals.exceptions import ResumeRefused
from approvals.interrupts import (
    interrupt_approval_pk,
    interrupt_for,
    interrupt_id,
    run_interrupts,
)
from approvals.models import ApprovalRequest, AuditEntry, ToolExecution
from demo.models import Refund
from orchestration.pipeline import approval_decide
from orchestration.resume import agui_run_start
from tests.helpers.concurrency import in_threads
from tests.helpers.interrupts import (
    agui_input,
    approve,
    interrupted,
    resume_post,
)
from threads.ids import ReservedId, check_input_messages
from threads.models import Message, Thread, ToolCall

pytestmark = pytest.mark.django_db(transaction=True)


class TwoRefundsProvider(Provider):
    """Ask for two refunds in one turn (two held calls, two interrupts); then summarize."""

    name = "two-refunds-test"

    async def stream_turn(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        answers = [m for m in request.messages if getattr(m, "role", "") == "tool"]
        if not answers:
            for call_id, order_id in (("call_r1", "A-1001"), ("call_r2", "A-1002")):
                arguments = {"order_id": order_id, "amount": 5.0, "reason": "pair"}
                yield ToolCallBegin(call_id=call_id, name="refund_order")
                yield ToolCallDelta(call_id=call_id, delta=json.dumps(arguments))
            yield TurnEnd(stop_reason="tool_use")
            return
        yield TextDelta(text=f"{len(answers)} refunds answered")
        yield TurnEnd(stop_reason="end_turn")


def two_refunds_provider(*, model: str) -> Provider:
    return TwoRefundsProvider()


class FailsAfterRefundProvider(Provider):
    """Ask for one refund; fail when continued with its answer (a broken continuation)."""

    name = "fails-after-refund-test"

    async def stream_turn(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        if any(getattr(m, "role", "") == "tool" for m in request.messages):
            raise RuntimeError("the model went away after the refund")
        arguments = {"order_id": "A-1001", "amount": 5.0, "reason": "once"}
        yield ToolCallBegin(call_id="call_once", name="refund_order")
        yield ToolCallDelta(call_id="call_once", delta=json.dumps(arguments))
        yield TurnEnd(stop_reason="tool_use")


def fails_after_refund_provider(*, model: str) -> Provider:
    return FailsAfterRefundProvider()


PAIR_AGENT = {
    "pair": {
        "provider": "scripted",
        "provider_factory": "tests.approvals.test_interrupt_resume.two_refunds_provider",
        "toolsets": ["demo.tools.DEMO_TOOLS"],
    },
    "fragile": {
        "provider": "scripted",
        "provider_factory": "tests.approvals.test_interrupt_resume.fails_after_refund_provider",
        "toolsets": ["demo.tools.DEMO_TOOLS"],
    },
}


@pytest.fixture
def pair_agent(settings, monkeypatch):
    """Configure the ``pair`` agent here and, by environment, in worker processes."""
    settings.COUNTERSIGN_AGENTS = {**settings.COUNTERSIGN_AGENTS, **PAIR_AGENT}
    monkeypatch.setenv("COUNTERSIGN_AGENTS_JSON", json.dumps(PAIR_AGENT))
    from threads.agent_config import toolset_load

    toolset_load.cache_clear()


def test_ir02_interrupt_ids_are_namespaced_and_only_that_form_resumes(
    approver, executor
):
    """IR-02: an interrupt id is ``cs-approval-<pk>``, never a bare pk a client could mint.

    ``metadata.approvalId`` keeps the integer pk of ``/api/approvals/<pk>/``; a
    resume naming the bare pk names no interrupt (the open one stays uncovered),
    and a client tool call may not take the namespace.
    """
    approval = interrupted(approver, executor, "ir02-ids")
    interrupt = interrupt_for(approval)
    assert interrupt["id"] == f"cs-approval-{approval.pk}"
    assert interrupt["id"] != interrupt["toolCallId"]
    assert interrupt["metadata"]["approvalId"] == approval.pk
    assert interrupt_approval_pk(interrupt["id"]) == approval.pk
    for foreign in (str(approval.pk), f"approval-{approval.pk}", "cs-approval-x", ""):
        assert interrupt_approval_pk(foreign) is None

    thread = Thread.objects.get(client_thread_id="ir02-ids")
    bare = [{"interruptId": str(approval.pk), "status": "resolved", "payload": {}}]
    with pytest.raises(ResumeRefused) as refused:
        resume_post(approver, thread.thread_id, "run-bare", bare)
    assert refused.value.code == "interrupts_uncovered"
    assert refused.value.extra == {"interruptIds": [interrupt["id"]]}
    approval.refresh_from_db()
    assert approval.status == ApprovalRequest.Status.PENDING

    with pytest.raises(ReservedId) as reserved:
        check_input_messages(
            thread=thread,
            messages=[
                {
                    "id": "a-client",
                    "role": "assistant",
                    "toolCalls": [
                        {
                            "id": interrupt["id"],
                            "type": "function",
                            "function": {"name": "x", "arguments": "{}"},
                        }
                    ],
                }
            ],
        )
    assert reserved.value.field == "messages.0.toolCalls.0.id"

    resume_post(approver, thread.thread_id, "run-2", approve(approval))
    executor.settle(thread)
    approval.refresh_from_db()
    assert approval.status == ApprovalRequest.Status.APPROVED
    assert [(r.order_id, r.amount) for r in Refund.objects.all()] == [
        ("A-1001", Decimal("25.00"))
    ]


def _answers(call: ToolCall) -> int:
    return Message.objects.filter(
        thread=call.thread, role="tool", tool_call_id=call.tool_call_id
    ).count()


def test_ir13_concurrent_resumes_decide_and_execute_once(approver, executor):
    """IR-13: two POSTs with the same resume[] at the same moment.

    One decides and starts the continuation; the other gets 409
    ``interrupt_decided`` with the recorded decision. One refund, one answer.
    """
    approval = interrupted(approver, executor, "ir13-concurrent")
    resume = approve(approval)

    results = in_threads(
        lambda: resume_post(approver, "ir13-concurrent", "run-a", resume),
        lambda: resume_post(approver, "ir13-concurrent", "run-b", resume),
    )
    executor.settle(approval.thread)

    refusals = [r for r in results if isinstance(r, ResumeRefused)]
    started = [r for r in results if isinstance(r, tuple)]
    assert (len(started), len(refusals)) == (1, 1), results
    (refusal,) = refusals
    assert (refusal.status, refusal.code) == (409, "interrupt_decided")
    assert [
        (i["interruptId"], i["status"], i["decidedBy"])
        for i in refusal.extra["interrupts"]
    ] == [(interrupt_id(approval), "approved", "ada")]
    assert Refund.objects.count() == 1
    assert _answers(approval.tool_call) == 1
    assert ToolExecution.objects.get(tool_call=approval.tool_call).attempts == 1


def test_ir13_resume_racing_a_rest_queue_approval_executes_once(
    approver, second_approver, executor
):
    """IR-13: a resume and an operator's ``POST /api/approvals/<pk>/approve/`` at once.

    Both hold the thread's lock while they decide, so whichever commits first
    decides. When the resume wins, the queue's identical approval is refused (409:
    the operator's vote was not recorded, and saying 200 would tell them it was);
    when the queue wins, the resume gets 409 ``interrupt_decided``. Either way one
    decision, one refund, one answer.
    """
    approval = interrupted(approver, executor, "ir13-rest-race")
    operator = APIClient()
    operator.force_authenticate(second_approver)

    def rest() -> Any:
        return operator.post(
            f"/api/approvals/{approval.pk}/approve/", {}, format="json"
        )

    resumed, queued = in_threads(
        lambda: resume_post(approver, "ir13-rest-race", "run-2", approve(approval)),
        rest,
    )
    executor.settle(approval.thread)

    approval.refresh_from_db()
    assert approval.status == ApprovalRequest.Status.APPROVED
    if isinstance(resumed, tuple):
        assert approval.decided_by == approver
        assert queued.status_code == 409, queued.content
        assert "was not recorded" in queued.json()["detail"]
    else:
        assert queued.status_code == 200, queued.content
        assert queued.json()["decidedBy"] == second_approver.username
        assert isinstance(resumed, ResumeRefused), resumed
        assert resumed.code == "interrupt_decided"
        assert approval.decided_by == second_approver
    assert (
        AuditEntry.objects.filter(
            action="approval.approved", target_id=str(approval.pk)
        ).count()
        == 1
    )
    assert Refund.objects.count() == 1
    assert _answers(approval.tool_call) == 1
    assert ToolExecution.objects.get(tool_call=approval.tool_call).attempts == 1


def test_ir14_a_failure_after_the_decision_keeps_it_and_answers_once(
    approver, executor
):
    """IR-14: the approved tool fails; the decision stays recorded, one answer, no retry ask.

    The order is already refunded in full, so ``refund_order`` fails after the
    resume approved it. The approval stays approved, the call has exactly one
    tool message (the error), the agent continues, and a replayed resume gets
    the recorded decision back without running the tool again.
    """
    approval = interrupted(approver, executor, "ir14-failure")
    Refund.objects.create(
        idempotency_key="earlier", order_id="A-1001", amount="500.00", reason="all"
    )
    resume_post(approver, "ir14-failure", "run-2", approve(approval))
    executor.settle(approval.thread)

    approval.refresh_from_db()
    call = ToolCall.objects.get(pk=approval.tool_call_id)
    assert approval.status == ApprovalRequest.Status.APPROVED
    assert call.state == ToolCall.State.FAILED
    answer = Message.objects.get(
        thread=call.thread, role="tool", tool_call_id=call.tool_call_id
    )
    assert "exceeds what is left to refund" in answer.content
    execution = ToolExecution.objects.get(tool_call=call)
    assert (execution.state, execution.attempts) == ("failed", 1)

    with pytest.raises(ResumeRefused) as replay:
        resume_post(approver, "ir14-failure", "run-3", approve(approval))
    assert replay.value.code == "interrupt_decided"
    executor.settle(approval.thread)
    assert _answers(call) == 1
    assert ToolExecution.objects.get(tool_call=call).attempts == 1
    assert list(Refund.objects.values_list("idempotency_key", flat=True)) == ["earlier"]
    assert not ApprovalRequest.objects.filter(
        thread=call.thread, status=ApprovalRequest.Status.PENDING
    ).exists()


def test_ir14_a_continuation_that_errors_after_the_decision_keeps_it_and_runs_once(
    approver, pair_agent, executor
):
    """IR-14: the refund runs, then the resumed run's model fails.

    The decision stays recorded, the refund happened once, the call has exactly
    one answer, the client's run ends in an error (not a new ask), and a retried
    resume gets the recorded decision back without running the tool again.
    """
    agui_run_start(
        user=approver,
        agent="fragile",
        run_input=agui_input(
            "ir14-continuation",
            "run-1",
            [{"id": "u1", "role": "user", "content": "refund once"}],
        ),
    )
    thread = Thread.objects.get(client_thread_id="ir14-continuation")
    executor.settle(thread)
    approval = ApprovalRequest.objects.select_related("tool_call").get(thread=thread)

    resume_post(
        approver, "ir14-continuation", "run-2", approve(approval), agent="fragile"
    )
    executor.settle(thread)

    approval.refresh_from_db()
    assert (approval.status, approval.decided_by) == ("approved", approver)
    resumed = thread.runs.get(run_id="run-2")
    assert resumed.status == "error"
    assert Refund.objects.count() == 1
    assert _answers(approval.tool_call) == 1
    with pytest.raises(ResumeRefused) as retry:
        resume_post(
            approver, "ir14-continuation", "run-3", approve(approval), agent="fragile"
        )
    assert retry.value.code == "interrupt_decided"
    executor.settle(thread)
    assert Refund.objects.count() == 1
    assert _answers(approval.tool_call) == 1
    assert ToolExecution.objects.get(tool_call=approval.tool_call).attempts == 1
    assert not ApprovalRequest.objects.filter(
        thread=thread, status=ApprovalRequest.Status.PENDING
    ).exists()


def test_ir17_queue_decides_one_of_two_and_the_client_resumes_the_rest(
    approver, second_approver, pair_agent, executor
):
    """IR-17: the queue decides one of two open interrupts after the client's run ended.

    The thread keeps the other open under its original id. A POST with entries for
    both gets 409 ``interrupt_decided`` with the recorded decision and
    ``openInterruptIds`` naming what is still open, and decides nothing; a POST
    that resumes only the still-open one is accepted and the agent continues once
    both calls are answered: one refund per approval, one answer per call.
    """
    agui_run_start(
        user=approver,
        agent="pair",
        run_input=agui_input(
            "ir17-partial", "run-1", [{"id": "u1", "role": "user", "content": "go"}]
        ),
    )
    thread = Thread.objects.get(client_thread_id="ir17-partial")
    executor.settle(thread)
    first, second = ApprovalRequest.objects.filter(thread=thread).order_by(
        "tool_call__position"
    )
    assert [interrupt_for(a)["toolCallId"] for a in (first, second)] == [
        "call_r1",
        "call_r2",
    ]
    interrupted_run = first.run
    approval_decide(approval=first, decided_by=second_approver, decision="approve")
    executor.settle(thread)

    assert [i["id"] for i in run_interrupts(interrupted_run)] == [interrupt_id(second)]
    both = approve(first) + approve(second)
    with pytest.raises(ResumeRefused) as refused:
        resume_post(approver, "ir17-partial", "run-2", both, agent="pair")
    assert refused.value.code == "interrupt_decided"
    assert [
        (i["interruptId"], i["status"], i["decidedBy"])
        for i in refused.value.extra["interrupts"]
    ] == [(interrupt_id(first), "approved", "grace")]
    assert refused.value.extra["openInterruptIds"] == [interrupt_id(second)]
    second.refresh_from_db()
    assert second.status == ApprovalRequest.Status.PENDING

    resume_post(approver, "ir17-partial", "run-3", approve(second), agent="pair")
    executor.settle(thread)
    second.refresh_from_db()
    assert (second.status, second.decided_by) == ("approved", approver)
    assert sorted(Refund.objects.values_list("order_id", flat=True)) == [
        "A-1001",
        "A-1002",
    ]
    for call in ToolCall.objects.filter(thread=thread):
        assert _answers(call) == 1, call.tool_call_id
    final = thread.runs.order_by("-created_at", "-id").first()
    assert final is not None
    assert final.run_id == "run-3"
    assert (final.status, final.outcome) == ("finished", "success")
