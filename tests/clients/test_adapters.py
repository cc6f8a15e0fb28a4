"""The adapters in process, where the policy decides at once (auto, deny): no person to wait for.

A person's decision with an edit is proven against a live server
(test_end_to_end.py); here each adapter's translation of the other outcomes,
with the real framework packages and Countersign's real HTTP stack.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

import pytest
from countersign_client import Client
from countersign_client.adapters.gate import Gate
from rest_framework.authtoken.models import Token

from tests.helpers.external import DjangoTransport
from threads.models import ToolCall

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("external_agents")]


class State(TypedDict):
    """A graph that asks about each of ``asks`` with ``interrupt()``."""

    asks: list[dict[str, Any]]
    answers: Annotated[list[Any], operator.add]


def gate_for(user: Any, conversation_id: str) -> Gate:
    token = Token.objects.get_or_create(user=user)[0].key
    client = Client(
        "http://testserver", token=token, agent="billing", transport=DjangoTransport()
    )
    return Gate(client, conversation_id=conversation_id)


def test_a_plain_interrupt_is_answered_with_the_decision(user: Any) -> None:
    """A graph's own interrupt({"name", "args"}) resumes with {"approved", "args", "reason"}."""

    from countersign_client.adapters.langgraph import resume_command
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import interrupt

    def ask(state: State) -> dict[str, Any]:
        return {"answers": [interrupt(ask_) for ask_ in state["asks"]]}

    builder = StateGraph(State)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    builder.add_edge("ask", END)
    graph = builder.compile(checkpointer=InMemorySaver())
    gate = gate_for(user, "conv-interrupt")
    for asked, expected in [
        (
            {"name": "lookup", "args": {"order_id": "A-1"}},
            {"approved": True, "args": {"order_id": "A-1"}, "reason": ""},
        ),
        ({"name": "wipe", "args": {}}, {"approved": False}),
    ]:
        config: Any = {"configurable": {"thread_id": asked["name"]}}
        paused = graph.invoke({"asks": [asked], "answers": []}, config, version="v2")
        (pending,) = paused.interrupts
        done = graph.invoke(resume_command(gate, [pending]), config, version="v2")
        (answer,) = done.value["answers"]
        assert {k: answer[k] for k in expected} == expected
    assert "wipe" in answer["reason"]
    assert (
        ToolCall.objects.filter(thread__client_thread_id="conv-interrupt").count() == 2
    )


def test_per_call_hitl_rejects_a_denied_call_with_the_reason(user: Any) -> None:
    """HumanInTheLoopMiddleware(per_call): a denied call is rejected; the tool never runs."""
    from countersign_client.adapters.langgraph import (
        report_tool_messages,
        resume_command,
    )
    from langchain.agents import create_agent
    from langchain.agents.middleware import HumanInTheLoopMiddleware
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.tools import tool
    from langgraph.checkpoint.memory import InMemorySaver

    ran: list[int] = []

    @tool
    def wipe() -> str:
        """Wipe everything."""
        ran.append(1)
        return "wiped"

    class ToolCallingFake(GenericFakeChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

    model = ToolCallingFake(
        messages=iter(
            [
                AIMessage(
                    content="", tool_calls=[{"name": "wipe", "args": {}, "id": "w1"}]
                ),
                AIMessage(content="ok, not wiped"),
            ]
        )
    )
    agent = create_agent(
        model,
        tools=[wipe],
        middleware=[
            HumanInTheLoopMiddleware(
                interrupt_on={"wipe": True}, interrupt_mode="per_call"
            )
        ],
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": "per-call"}}
    gate = gate_for(user, "conv-per-call")
    paused = agent.invoke(
        {"messages": [{"role": "user", "content": "wipe"}]}, config, version="v2"
    )
    assert paused.interrupts[0].value["type"] == "tool_approval"
    done = agent.invoke(resume_command(gate, paused.interrupts), config, version="v2")
    assert ran == []
    refusal = next(m for m in done.value["messages"] if isinstance(m, ToolMessage))
    assert "wipe" in refusal.text
    assert report_tool_messages(gate, done.value["messages"]) == 0
    assert gate.claimed == {}
