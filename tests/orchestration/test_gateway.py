"""An MCP gateway's call through the pipeline, in process (the live MCP path: tests/api).

A gateway is an agent entry with provider ``mcp_gateway`` and no model: its calls
are recorded as runs of the session's thread, dispatched by the same policies,
answered once, and never continued. Refused input records nothing.
Implements SEC-01, DC-04, FT-06.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from approvals.models import ApprovalRequest
from orchestration.gateway import (
    GatewayRefused,
    gateway_call_cancel,
    gateway_call_execute,
    gateway_call_finish,
    gateway_call_outcome,
    gateway_call_start,
    gateway_tool_call_id,
    gateway_tools,
)
from orchestration.pipeline import approval_decide
from threads.agent_config import agent_build, config_problems
from threads.exceptions import UnknownAgent
from threads.execution import wait_embedded
from threads.models import Run, Thread, ToolCall

GATEWAY = {
    "provider": "mcp_gateway",
    "toolsets": ["demo.tools.DEMO_TOOLS"],
    "hold_seconds": 5.0,
}
REFUND = {"order_id": "A-1001", "amount": 5, "reason": "damaged box"}


@pytest.fixture
def gateway(settings):
    settings.COUNTERSIGN_AGENTS = {**settings.COUNTERSIGN_AGENTS, "gw": GATEWAY}
    return "gw"


def start(user, name, arguments, *, tool_call_id=None, gateway="gw"):
    return gateway_call_start(
        gateway=gateway,
        user=user,
        session="session-1",
        tool_call_id=tool_call_id,
        name=name,
        arguments=arguments,
        metadata={"requestId": 1},
    )


def run_here(started):
    result = asyncio.run(gateway_call_execute(started=started))
    return gateway_call_finish(started=started, result=result)


@pytest.mark.parametrize("executor", ["embedded"], indirect=True)
def test_an_auto_call_is_answered_once_and_its_run_is_not_continued(
    user, gateway, executor
):
    """lookup_order (auto) runs at once; the thread is the user's; no continuation run."""
    started = start(user, "lookup_order", {"order_id": "A-1001"})
    assert started.run_here is not None  # reserved: it runs in the caller's request
    run_here(started)

    outcome = gateway_call_outcome(tool_call_pk=started.tool_call_pk)
    assert outcome is not None
    assert outcome.is_error is False
    assert outcome.status == ToolCall.State.SUCCEEDED
    assert json.loads(outcome.content[0]["text"])["order_id"] == "A-1001"
    call = ToolCall.objects.select_related("thread", "run").get(pk=started.tool_call_pk)
    assert call.thread.owner == user
    assert call.thread.agent == "gw"
    assert call.metadata["mcp"] == {"requestId": 1}
    assert list(
        Run.objects.filter(thread=call.thread).values_list("status", flat=True)
    ) == [Run.Status.FINISHED]


@pytest.mark.parametrize("executor", ["embedded"], indirect=True)
def test_a_destructive_call_waits_for_another_person_and_a_rejection_is_an_error(
    user, approver, gateway, executor
):
    """refund_order waits; the token's user is the requester; a rejection answers isError."""
    started = start(user, "refund_order", REFUND)
    wait_embedded()
    assert gateway_call_outcome(tool_call_pk=started.tool_call_pk) is None
    approval = ApprovalRequest.objects.get(tool_call_id=started.tool_call_pk)
    assert approval.requested_by == user
    assert approval.proposed_arguments == REFUND

    approval_decide(
        approval=approval, decided_by=approver, decision="reject", reason="not yet"
    )
    outcome = gateway_call_outcome(tool_call_pk=started.tool_call_pk)

    assert outcome is not None
    assert outcome.is_error is True
    assert json.loads(outcome.content[0]["text"]) == {
        "status": "rejected",
        "reason": "not yet",
        "executed": False,
    }
    assert Run.objects.filter(thread__agent="gw").count() == 1


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("name", "arguments", "code", "words"),
    [
        ("drop_tables", {}, "unknown_tool", "tool 'drop_tables' is not offered"),
        ("get_weather", {"city": "Oslo"}, "unknown_tool", "not offered"),
        ("lookup_order", {}, "invalid_arguments", "arguments of 'lookup_order'"),
        ("lookup_order", {"order_id": 7}, "invalid_arguments", "were refused"),
        (
            "lookup_order",
            {"order_id": "A-1001", "extra": 1},
            "invalid_arguments",
            "were refused",
        ),
    ],
)
def test_refused_input_records_nothing(user, gateway, name, arguments, code, words):
    """Unknown tools (an agent-side tool included) and schema failures: refused, nothing kept."""
    with pytest.raises(GatewayRefused) as refused:
        start(user, name, arguments)

    assert refused.value.code == code
    assert words in str(refused.value)
    assert not ToolCall.objects.exists()
    assert not Thread.objects.exists()


@pytest.mark.django_db
def test_an_unknown_gateway_and_an_agent_are_refused(user, gateway):
    """Only an mcp_gateway entry is a gateway; a gateway is never built as an agent."""
    with pytest.raises(GatewayRefused) as unknown:
        gateway_tools(gateway="demo")
    with pytest.raises(UnknownAgent):
        agent_build("gw")

    assert unknown.value.code == "unknown_gateway"
    assert config_problems("gw", GATEWAY) == []
    assert [p.message for p in config_problems("gw", {**GATEWAY, "model": 1})] == [
        "COUNTERSIGN_AGENTS['gw']['model'] is invalid: Input should be a valid string "
        "(got 1)"
    ]
    assert [
        p.message for p in config_problems("gw", {**GATEWAY, "system_prompt": "x"})
    ] == [
        "COUNTERSIGN_AGENTS['gw'] has the unknown key 'system_prompt' "
        "(provider 'mcp_gateway')"
    ]


@pytest.mark.parametrize("executor", ["embedded"], indirect=True)
def test_a_retry_refers_to_the_kept_call_and_other_arguments_conflict(
    user, gateway, executor
):
    """The same toolCallId is the same call; the same id with other arguments is refused."""
    call_id = gateway_tool_call_id(
        gateway="gw",
        user_pk=user.pk,
        session=None,
        request_id=None,
        idempotency_key="k1",
    )
    first = start(user, "lookup_order", {"order_id": "A-1001"}, tool_call_id=call_id)
    run_here(first)
    again = start(user, "lookup_order", {"order_id": "A-1001"}, tool_call_id=call_id)
    with pytest.raises(GatewayRefused) as conflict:
        start(user, "lookup_order", {"order_id": "A-1002"}, tool_call_id=call_id)

    assert first.created is True
    assert (again.created, again.tool_call_pk) == (False, first.tool_call_pk)
    assert conflict.value.code == "conflict"
    assert ToolCall.objects.count() == 1
    assert (
        gateway_tool_call_id(
            gateway="gw",
            user_pk=user.pk,
            session=None,
            request_id=3,
            idempotency_key=None,
        )
        is None
    )


@pytest.mark.parametrize("executor", ["embedded"], indirect=True)
def test_a_cancelled_waiting_call_is_answered_cancelled_once(user, gateway, executor):
    """The client gave up: the waiting call is cancelled, its approval closed; then answered."""
    started = start(user, "refund_order", REFUND)
    wait_embedded()

    first = gateway_call_cancel(tool_call_pk=started.tool_call_pk, cancelled_by=user)
    second = gateway_call_cancel(tool_call_pk=started.tool_call_pk, cancelled_by=user)

    assert (first, second) == ("cancelled", "answered")
    assert ApprovalRequest.objects.get(tool_call_id=started.tool_call_pk).status == (
        ApprovalRequest.Status.CANCELLED
    )
    outcome = gateway_call_outcome(tool_call_pk=started.tool_call_pk)
    assert outcome is not None
    assert outcome.is_error is True
    assert Run.objects.get(thread__agent="gw").status == Run.Status.FINISHED
