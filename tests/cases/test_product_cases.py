"""Cases from shared/cases/tool-calling.jsonl that need the whole product (DB, workers)."""

from __future__ import annotations

import json

import pytest

from agentcore.events import message_from_dict
from agentcore.history import prepare_history
from approvals.models import ApprovalRequest
from orchestration.pipeline import approval_decide
from threads.models import Message, Run, ToolCall
from threads.services import message_post, run_cancel, thread_create

INTERRUPTED = (
    '{"error":"interrupted","detail":"tool call was cancelled before it completed"}'
)


CASE_AGENTS = {
    "parallel": {
        "provider": "scripted",
        "provider_factory": "tests.cases.agents.parallel_provider",
        "toolsets": ["tests.cases.agents.PARALLEL_TOOLS"],
    },
    "pay": {
        "provider": "scripted",
        "provider_factory": "tests.cases.agents.pay_provider",
        "toolsets": ["tests.cases.agents.PAY_TOOLS"],
    },
    "confirm": {
        "provider": "scripted",
        "provider_factory": "tests.cases.agents.confirm_provider",
        "toolsets": [],
    },
    "slow": {
        "provider": "scripted",
        "provider_factory": "tests.cases.agents.slow_provider",
        "toolsets": ["tests.cases.agents.SLOW_TOOLS"],
    },
}


@pytest.fixture
def case_agents(settings, monkeypatch):
    """Configure the test agents here and, by environment, in worker processes."""
    settings.COUNTERSIGN_AGENTS = {**settings.COUNTERSIGN_AGENTS, **CASE_AGENTS}
    monkeypatch.setenv("COUNTERSIGN_AGENTS_JSON", json.dumps(CASE_AGENTS))
    from threads.agent_config import toolset_load

    toolset_load.cache_clear()


def test_bc21_rejected_parallel_call_still_answered_once(
    user, case_agents, executor, django_user_model
):
    """One of two parallel calls rejected: one tool message per call, in call order (BC21)."""
    from django.contrib.auth.models import Permission

    operator = django_user_model.objects.create_user(username="op", password="pw-op-1")
    operator.user_permissions.add(
        Permission.objects.get(codename="decide_approvalrequest")
    )
    thread = thread_create(owner=user, title="bc21", agent="parallel")
    message_post(thread=thread, content="email the team and check the status")
    executor.settle(thread)

    send = ToolCall.objects.get(thread=thread, name="send_email")
    lookup = ToolCall.objects.get(thread=thread, name="lookup")
    assert (send.state, lookup.state) == ("awaiting_approval", "succeeded")
    approval = ApprovalRequest.objects.get(tool_call=send)
    approval_decide(
        approval=approval,
        decided_by=django_user_model.objects.get(pk=operator.pk),
        decision="reject",
        reason="not now",
    )
    executor.settle(thread)

    tool_messages = Message.objects.filter(thread=thread, role="tool")
    by_call = {m.tool_call_id: m.content for m in tool_messages}
    assert by_call == {
        send.tool_call_id: '{"status":"rejected","reason":"not now","executed":false}',
        lookup.tool_call_id: "status ok",
    }
    continuation = (
        Run.objects.filter(thread=thread).order_by("-created_at", "-id").first()
    )
    assert continuation.status == "finished"
    history = prepare_history(
        [message_from_dict(m) for m in continuation.input["messages"]]
    )
    answers = [(m.tool_call_id, m.content) for m in history if m.role == "tool"]
    assert answers == [
        (
            send.tool_call_id,
            '{"status":"rejected","reason":"not now","executed":false}',
        ),
        (lookup.tool_call_id, "status ok"),
    ]
    final = (
        Message.objects.filter(thread=thread, role="assistant")
        .exclude(content="")
        .last()
    )
    assert "not now" in final.content
    assert "status ok" in final.content
    # The AG-UI log reports both answers as TOOL_CALL_RESULT events, in the order the
    # application wrote them, at the start of the continuation run.
    from threads.models import Event

    results = [
        (e.payload["toolCallId"], e.payload["content"])
        for e in Event.objects.filter(thread=thread, type="TOOL_CALL_RESULT").order_by(
            "seq"
        )
    ]
    assert results == [
        (lookup.tool_call_id, "status ok"),
        (
            send.tool_call_id,
            '{"status":"rejected","reason":"not now","executed":false}',
        ),
    ]


def test_bc20_cancel_while_tools_execute_persists_interrupted_results(
    user, case_agents, executor
):
    """Cancelling a run mid-execution answers every open call before the next message (BC20)."""
    thread = thread_create(owner=user, title="bc20", agent="slow")
    _, run = message_post(thread=thread, content="how long ago was the landing?")
    executor.wait_for(
        lambda: ToolCall.objects.filter(thread=thread, state="complete").count() == 2
    )

    run_cancel(run=run)
    executor.settle(thread)

    run.refresh_from_db()
    assert (run.status, run.outcome) == ("cancelled", "cancelled")
    answers = list(
        Message.objects.filter(thread=thread, role="tool").order_by("position", "id")
    )
    # The loop answers the calls it was executing in-stream when cancelled; a call
    # it could not answer would get the synthetic INTERRUPTED answer afterwards.
    cancelled = (
        '{"error":"cancelled","detail":"slow_count was cancelled before it finished; '
        'nothing more will run."}'
    )
    assert [(m.content, m.error) for m in answers] == [(cancelled, "cancelled")] * 2
    calls = list(ToolCall.objects.filter(thread=thread).order_by("position"))
    assert {m.tool_call_id for m in answers} == {c.tool_call_id for c in calls}
    assert all(c.state == "cancelled" for c in calls)

    # The next message is accepted, and its run's history is well formed.
    _, retry = message_post(thread=thread, content="try again")
    executor.settle(thread)
    retry.refresh_from_db()
    roles = [m["role"] for m in retry.input["messages"]]
    assert roles[:4] == ["user", "assistant", "tool", "tool"]
    assert roles[4] == "user"
    assert retry.input["messages"][4]["content"] == "try again"
    assert json.loads(retry.input["messages"][2]["content"])["error"] == "cancelled"


def test_bc20_calls_left_open_by_a_dead_run_get_the_interrupted_answer(user, executor):
    """A run that died mid-call is failed and its open calls answered (BC20, FT-06)."""
    from orchestration.pipeline import run_execute
    from threads.recording import RunRecorder

    thread = thread_create(owner=user, title="bc20-dead")
    run = Run.objects.create(thread=thread, status=Run.Status.RUNNING)
    recorder = RunRecorder(run)
    recorder.record(
        [
            {"type": "RUN_STARTED", "threadId": thread.thread_id, "runId": run.run_id},
            {
                "type": "TOOL_CALL_START",
                "toolCallId": "call_X",
                "toolCallName": "get_weather",
            },
            {
                "type": "TOOL_CALL_ARGS",
                "toolCallId": "call_X",
                "delta": '{"city":"Oslo"}',
            },
            {"type": "TOOL_CALL_END", "toolCallId": "call_X"},
            {
                "type": "TOOL_CALL_START",
                "toolCallId": "call_Y",
                "toolCallName": "get_weather",
            },
        ]
    )
    recorder.flush()

    run_execute(run_pk=run.pk)  # a redelivery finds the run claimed by a dead worker

    run.refresh_from_db()
    assert (run.status, run.error_code) == ("error", "worker_lost")
    answers = Message.objects.filter(thread=thread, role="tool").order_by(
        "position", "id"
    )
    assert [(m.tool_call_id, m.content, m.error) for m in answers] == [
        ("call_X", INTERRUPTED, "interrupted"),
        ("call_Y", INTERRUPTED, "interrupted"),
    ]
    from threads.models import Event

    types = list(Event.objects.filter(thread=thread).values_list("type", flat=True))
    assert types[-2:] == ["TOOL_CALL_END", "RUN_ERROR"]


@pytest.mark.parametrize(
    ("amount", "state", "approvals"),
    [(5, "succeeded", 0), (50, "awaiting_approval", 1)],
)
def test_lp01_policy_depends_on_validated_arguments(
    user, case_agents, executor, amount, state, approvals
):
    """A callable policy decides per call: small payments run, large ones wait (LP-01)."""
    thread = thread_create(owner=user, title="pay", agent="pay")
    message_post(thread=thread, content=f"pay {amount}")
    executor.settle(thread)

    call = ToolCall.objects.get(thread=thread, name="pay")
    assert call.state == state
    assert ApprovalRequest.objects.filter(tool_call=call).count() == approvals
    if state == "succeeded":
        final = (
            Message.objects.filter(thread=thread, role="assistant")
            .exclude(content="")
            .last()
        )
        assert final.content == "Payment: paid 5.00"


@pytest.mark.parametrize("executor", ["embedded"], indirect=True)
def test_ft01_agui_client_tools_are_offered_and_left_for_the_client(
    user, case_agents, executor
):
    """A client's own frontend tool is advertised, left pending, and answered by the client."""
    from agentcore.events import RunAgentInput
    from threads.models import Thread
    from threads.services import run_start_from_agui

    confirm = {
        "name": "confirm",
        "description": "Ask the user to confirm",
        "parameters": {
            "type": "object",
            "properties": {"question": {"type": "string"}},
        },
    }
    first = RunAgentInput.model_validate(
        {
            "threadId": "t-client",
            "runId": "r-1",
            "state": {"step": 1},
            "tools": [confirm],
            "context": [{"description": "tz", "value": "UTC"}],
            "forwardedProps": {"a": 1},
            "messages": [{"id": "u1", "role": "user", "content": "delete the file"}],
        }
    )
    thread, run, _ = run_start_from_agui(user=user, agent="confirm", run_input=first)
    # The call stays pending for the client, so wait for the embedded pool itself.
    from threads.execution import wait_embedded

    executor.wait_for(lambda: Run.objects.get(pk=run.pk).status == "awaiting_tools")
    wait_embedded()

    run.refresh_from_db()
    assert [t["name"] for t in run.input["tools"]] == ["confirm"]
    assert run.input["context"] == [{"description": "tz", "value": "UTC"}]
    assert run.input["forwardedProps"] == {"a": 1}
    assert Thread.objects.get(pk=thread.pk).state == {"step": 1}
    assert run.pending_tool_call_ids == ["call_confirm"]
    call = ToolCall.objects.get(thread=thread, tool_call_id="call_confirm")
    assert call.state == "pending"  # the client's to answer, not the approval queue's
    assert not ApprovalRequest.objects.exists()

    answer = RunAgentInput.model_validate(
        {
            "threadId": "t-client",
            "runId": "r-2",
            "tools": [confirm],
            "messages": [
                {"id": "u1", "role": "user", "content": "delete the file"},
                {
                    "id": "tm1",
                    "role": "tool",
                    "toolCallId": "call_confirm",
                    "content": "yes",
                },
            ],
        }
    )
    _, second, _ = run_start_from_agui(user=user, agent="confirm", run_input=answer)
    executor.settle(thread)

    second.refresh_from_db()
    run.refresh_from_db()
    assert second.status == "finished"
    assert second.continues_id == run.pk
    assert run.status == "finished"
    call.refresh_from_db()
    assert call.state == "succeeded"
    final = (
        Message.objects.filter(thread=thread, role="assistant")
        .exclude(content="")
        .last()
    )
    assert final.content == "The user said: yes"
