"""End to end: external agents through a live Countersign (uvicorn + a Celery worker).

Each framework's tool waits for a person; an approver approves with an edit in
the queue (over the REST API, as the queue page does); the tool runs once with
the edited arguments; the thread shows the call, the decision and the reported
outcome. Also: 2-of-N with the second approver on the REST API, long-poll, SSE,
and two replicas racing to claim. The frameworks are the real packages with a
fake model (no API key).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from countersign_client import AsyncClient, Client, Conflict
from countersign_client.adapters.gate import Gate

from approvals.models import ApprovalRequest, ApprovalVote
from tests.helpers.external import (
    EXTERNAL_AGENTS,
    REFUND_SCHEMA,
    approve_when_pending,
    docs_examples,
    langgraph_refund_model,
    pydantic_ai_refund_model,
    signed_webhook_receiver,
    story,
)
from tests.helpers.live import token_for
from threads.models import Message, ToolCall

pytestmark = [
    pytest.mark.django_db(transaction=True),
    # The caller runs the tools; the worker only delivers (and must leave alone)
    # what approvals enqueue: one server with a worker proves both.
    pytest.mark.parametrize("live", ["celery"], indirect=True),
]


SECRET = "whsec_" + base64.b64encode(b"countersign-e2e-callback-secret").decode()


@pytest.fixture(scope="module", autouse=True)
def callbacks() -> Iterator[list[dict[str, Any]]]:
    """Configure the external agents for the server and the worker, ``billing``'s webhook here.

    Yields the webhook deliveries received, each verified with ``SECRET``.
    """
    with signed_webhook_receiver(SECRET) as (received, url):
        agents = dict(EXTERNAL_AGENTS)
        agents["billing"] = {
            **agents["billing"],
            "webhook": {"url": url, "secret": SECRET},
        }
        before = os.environ.get("COUNTERSIGN_AGENTS_JSON")
        os.environ["COUNTERSIGN_AGENTS_JSON"] = json.dumps(agents)
        yield received
    if before is None:
        del os.environ["COUNTERSIGN_AGENTS_JSON"]
    else:
        os.environ["COUNTERSIGN_AGENTS_JSON"] = before


def test_two_of_n_with_an_edit_long_poll_sse_webhook_and_a_claim_race(
    live: Any,
    user: Any,
    nonstaff_approver: Any,
    second_approver: Any,
    callbacks: list[dict[str, Any]],
) -> None:
    """The decision reaches a long-poll, an SSE stream and the signed webhook; one replica runs it."""
    token = token_for(user)
    agent = Client(live.url, token=token, agent="billing", holder="declarer")
    state = agent.declare(
        "refund2",
        {"order_id": "A-7", "amount": 40},
        input_schema=REFUND_SCHEMA,
        summary="Refund A-7: parcel lost",
        conversation_id="conv-e2e",
    )
    assert state.status == "pending"
    call_id = state.tool_call_id
    streamed: list[str] = []

    def follow() -> None:
        with httpx.stream(
            "GET",
            f"{live.url}/api/external/tool-calls/{call_id}/events/",
            headers={"Authorization": f"Bearer {token}"},
            timeout=60,
        ) as response:
            assert response.headers["content-type"] == "text/event-stream"
            for line in response.iter_lines():
                if line.startswith("data: "):
                    streamed.append(json.loads(line[6:])["status"])

    follower = threading.Thread(target=follow)
    follower.start()
    with ThreadPoolExecutor(max_workers=2) as pool:
        polled = pool.submit(agent.get, call_id, wait=45)
        # ada edits the amount (1 of 2), grace approves the edit over the REST API
        first = approve_when_pending(
            live.url,
            token_for(nonstaff_approver),
            tool="refund2",
            edit={"order_id": "A-7", "amount": 30},
        )
        assert first["status"] == "pending"
        approve_when_pending(live.url, token_for(second_approver), tool="refund2")
        decided = polled.result(timeout=60)
    assert decided.status == "approved", live.logs()
    assert decided.decision is not None
    assert decided.decision.arguments == {"order_id": "A-7", "amount": 30}
    assert decided.decision.edited

    replicas = [
        Client(live.url, token=token, agent="billing", holder=f"replica-{i}")
        for i in range(2)
    ]
    barrier = threading.Barrier(2)

    def claim(replica: Client) -> str:
        barrier.wait()
        try:
            replica.claim(call_id, lease_seconds=60)
        except Conflict as lost:
            return f"lost to {lost.holder}"
        return "won"

    with ThreadPoolExecutor(max_workers=2) as pool:
        outcomes = list(pool.map(claim, replicas))
    assert sorted(outcomes)[1] == "won", outcomes
    winner = replicas[outcomes.index("won")]
    assert sorted(outcomes)[0] == f"lost to {winner.holder}"
    ran = [decided.decision.arguments]
    reported = winner.report(call_id, result={"refunded": 30})
    follower.join(timeout=60)

    assert reported.status == "succeeded"
    assert ran == [{"order_id": "A-7", "amount": 30}]
    assert streamed[0] == "pending"
    assert streamed[-1] == "succeeded"
    assert "approved" in streamed
    shown = story(call_id)
    assert shown["state"] == "succeeded"
    assert shown["answer"] == '{"refunded":30}'
    assert shown["events"][:1] == ["RUN_STARTED"]
    assert "TOOL_CALL_START" in shown["events"]
    assert {"execution.reserved", "execution.succeeded"} <= set(shown["audit"])
    approval = ApprovalRequest.objects.get(tool_call__tool_call_id=call_id)
    assert approval.status == "approved"
    assert ApprovalVote.objects.filter(approval=approval, reset_at=None).count() == 2
    # the worker delivers the signed webhook after the decision
    deadline = time.monotonic() + 30
    while not callbacks and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [c["type"] for c in callbacks] == ["approval.decided"], live.logs()
    assert callbacks[0]["data"]["id"] == approval.pk


def test_pydantic_ai_deferred_tools_run_the_edited_call_once(
    live: Any, user: Any, nonstaff_approver: Any
) -> None:
    """DeferredToolRequests → Countersign → DeferredToolResults with the approver's edit."""
    from countersign_client.adapters.pydantic_ai import (
        deferred_tool_results,
        report_tool_returns,
    )
    from pydantic_ai import Agent, DeferredToolRequests

    model = pydantic_ai_refund_model(order_id="P-1", amount=25, call_id="pa-1")
    agent = Agent(model, output_type=[str, DeferredToolRequests])
    ran: list[dict[str, Any]] = []

    @agent.tool_plain(requires_approval=True)
    def refund(order_id: str, amount: float) -> str:
        ran.append({"order_id": order_id, "amount": amount})
        return f"refunded {amount}"

    token = token_for(user)

    async def flow() -> str:
        client = AsyncClient(live.url, token=token, agent="helper")
        gate = Gate(client, conversation_id="conv-pydantic-ai")
        first = await agent.run("Refund P-1")
        assert isinstance(first.output, DeferredToolRequests)
        results = await deferred_tool_results(gate, first.output)
        final = await agent.run(
            message_history=first.all_messages(), deferred_tool_results=results
        )
        assert await report_tool_returns(gate, final.new_messages()) == 1
        await client.aclose()
        return str(final.output)

    with ThreadPoolExecutor(max_workers=1) as pool:
        running = pool.submit(asyncio.run, flow())
        approve_when_pending(
            live.url,
            token_for(nonstaff_approver),
            tool="refund",
            edit={"order_id": "P-1", "amount": 5},
            alongside=running,
        )
        output = running.result(timeout=60)
    assert ran == [{"order_id": "P-1", "amount": 5}]
    assert output == "done: refunded 5.0"
    (call,) = ToolCall.objects.filter(thread__client_thread_id="conv-pydantic-ai")
    assert story(call.tool_call_id)["answer"] == "refunded 5.0"
    assert call.state == "succeeded"


def test_langgraph_human_in_the_loop_runs_the_edited_call_once(
    live: Any, user: Any, nonstaff_approver: Any
) -> None:
    """HumanInTheLoopMiddleware's interrupt answered by Command(resume=…) from Countersign."""
    from countersign_client.adapters.langgraph import (
        report_tool_messages,
        resume_command,
    )
    from langchain.agents import create_agent
    from langchain.agents.middleware import HumanInTheLoopMiddleware
    from langchain_core.tools import tool
    from langgraph.checkpoint.memory import InMemorySaver

    ran: list[dict[str, Any]] = []

    @tool
    def refund(order_id: str, amount: float) -> str:
        """Refund an order."""
        ran.append({"order_id": order_id, "amount": amount})
        return f"refunded {amount}"

    model = langgraph_refund_model(order_id="L-1", amount=25, call_id="lg-1")
    agent = create_agent(
        model,
        tools=[refund],
        middleware=[HumanInTheLoopMiddleware(interrupt_on={"refund": True})],
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": "lg"}}

    token = token_for(user)

    def flow() -> Any:
        client = Client(live.url, token=token, agent="helper")
        gate = Gate(client, conversation_id="conv-langgraph")
        first = agent.invoke(
            {"messages": [{"role": "user", "content": "Refund L-1"}]},
            config,
            version="v2",
        )
        command = resume_command(
            gate, first.interrupts, messages=first.value["messages"]
        )
        final = agent.invoke(command, config, version="v2")
        assert report_tool_messages(gate, final.value["messages"]) == 1
        return final

    with ThreadPoolExecutor(max_workers=1) as pool:
        running = pool.submit(flow)
        approve_when_pending(
            live.url,
            token_for(nonstaff_approver),
            tool="refund",
            edit={"order_id": "L-1", "amount": 7},
            alongside=running,
        )
        final = running.result(timeout=60)
    assert ran == [{"order_id": "L-1", "amount": 7}]
    assert final.value["messages"][-1].content == "done"
    (call,) = ToolCall.objects.filter(thread__client_thread_id="conv-langgraph")
    assert call.state == "succeeded"
    assert "refunded 7" in story(call.tool_call_id)["answer"]


def test_claude_agent_sdk_can_use_tool_allows_the_edited_input(
    live: Any, user: Any, nonstaff_approver: Any
) -> None:
    """The callback answers with the SDK's PermissionResultAllow(updated_input=…); the hook reports."""
    from claude_agent_sdk import (
        PermissionResultAllow,
        PermissionResultDeny,
        ToolPermissionContext,
    )
    from countersign_client.adapters.claude_agent_sdk import (
        can_use_tool,
        post_tool_use_hook,
    )

    token = token_for(user)

    async def flow() -> tuple[Any, Any]:
        client = AsyncClient(live.url, token=token, agent="billing")
        gate = Gate(
            client,
            conversation_id="conv-claude",
            input_schemas={"refund": REFUND_SCHEMA},
        )
        decide = can_use_tool(gate, tools={"refund", "wipe"})
        allowed = await decide(
            "refund",
            {"order_id": "C-1", "amount": 25},
            ToolPermissionContext(tool_use_id="toolu_1"),
        )
        # (the SDK runs the tool with updated_input here)
        await post_tool_use_hook(gate)(
            {
                "hook_event_name": "PostToolUse",
                "session_id": "s",
                "transcript_path": "",
                "cwd": "",
                "tool_name": "refund",
                "tool_input": {"order_id": "C-1", "amount": 9},
                "tool_response": "refunded 9",
                "tool_use_id": "toolu_1",
            },
            "toolu_1",
            {"signal": None},
        )
        denied = await decide("wipe", {}, ToolPermissionContext(tool_use_id="toolu_2"))
        await client.aclose()
        return allowed, denied

    with ThreadPoolExecutor(max_workers=1) as pool:
        running = pool.submit(asyncio.run, flow())
        approve_when_pending(
            live.url,
            token_for(nonstaff_approver),
            tool="refund",
            edit={"order_id": "C-1", "amount": 9},
            alongside=running,
        )
        allowed, denied = running.result(timeout=60)
    assert isinstance(allowed, PermissionResultAllow)
    assert allowed.updated_input == {"order_id": "C-1", "amount": 9}
    assert isinstance(denied, PermissionResultDeny)
    assert "wipe" in denied.message
    (call,) = ToolCall.objects.filter(
        thread__client_thread_id="conv-claude", name="refund"
    )
    assert call.state == "succeeded"
    assert story(call.tool_call_id)["answer"] == "refunded 9"


def _approve_until(base_url: str, token: str, running: Future[Any]) -> int:
    """Approve every pending request, as an approver in the queue would, until ``running`` ends."""
    approved = 0
    with httpx.Client(
        base_url=base_url, headers={"Authorization": f"Token {token}"}, timeout=30
    ) as http:
        deadline = time.monotonic() + 60
        while not running.done() and time.monotonic() < deadline:
            pending = http.get("/api/approvals/", params={"status": "pending"})
            for approval in pending.json()["results"]:
                http.post(f"/api/approvals/{approval['id']}/approve/", json={})
                approved += 1
            time.sleep(0.05)
    running.result(timeout=5)
    return approved


def test_the_integration_docs_examples_run(
    live: Any, user: Any, nonstaff_approver: Any, capsys: Any
) -> None:
    """Each Python example of docs/integrations.md runs against the live server."""
    from claude_agent_sdk import ClaudeAgentOptions
    from langchain_core.tools import tool

    examples = docs_examples()
    # openai-agents runs in .venv-oai (tests/clients/test_openai_agents.py)
    assert set(examples) == {
        "client",
        "pydantic-ai",
        "langgraph",
        "claude-agent-sdk",
        "openai-agents",
    }
    token = token_for(user)
    approver = token_for(nonstaff_approver)
    base = {"BASE_URL": live.url, "TOKEN": token}

    @tool
    def refund(order_id: str, amount: float) -> str:
        """Refund an order."""
        return f"refunded {amount}"

    namespaces = {
        "client": dict(base),
        "pydantic-ai": {
            **base,
            "model": pydantic_ai_refund_model(order_id="A-1", amount=25, call_id="p1"),
        },
        "langgraph": {
            **base,
            "model": langgraph_refund_model(order_id="A-1", amount=25, call_id="c1"),
            "refund": refund,
        },
        "claude-agent-sdk": dict(base),
    }

    def run(name: str) -> None:
        namespace = namespaces[name]
        exec(compile(examples[name], f"docs/integrations.md:{name}", "exec"), namespace)
        if "main" in namespace:
            asyncio.run(namespace["main"]())

    with ThreadPoolExecutor(max_workers=1) as pool:
        for name in ("client", "pydantic-ai", "langgraph"):
            assert _approve_until(live.url, approver, pool.submit(run, name)) == 1, name
    run("claude-agent-sdk")
    assert isinstance(namespaces["claude-agent-sdk"]["options"], ClaudeAgentOptions)
    assert "{'refunded': 25}" in capsys.readouterr().out
    answers = list(
        Message.objects.filter(role="tool")
        .order_by("thread__client_thread_id")
        .values_list("thread__client_thread_id", "content")
    )
    assert ("lg-1", "refunded 25.0") in answers
    assert ("pa-1", "refunded 25.0") in answers
    assert len(answers) == 3
