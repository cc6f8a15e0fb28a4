"""A LangGraph graph served by ``ag-ui-langgraph`` that asks a question by interrupt (IR-18).

No model: the graph's one node calls LangGraph's ``interrupt()`` with a message and a
``responseSchema``; ``LangGraphAgent(emit_interrupt_outcome=True)`` ends the run with
``RUN_FINISHED {outcome: {type: "interrupt"}}`` and turns ``RunAgentInput.resume[]``
into LangGraph's ``Command(resume=...)``. Each answer the node received after resuming
is appended to :data:`ANSWERS`, so a test can see it was resumed exactly once.
"""

from __future__ import annotations

import json
from typing import Any

from ag_ui_langgraph import LangGraphAgent, add_langgraph_fastapi_endpoint
from fastapi import FastAPI
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import MemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import interrupt

from tests.remote_agents import SHIPPING_SCHEMA

#: The resume values the graph's node received, in order.
ANSWERS: list[Any] = []


def ask_carrier(state: MessagesState) -> dict[str, Any]:
    """Ask which carrier ships the order; answer with what the operator chose."""
    answer = interrupt(
        {
            "reason": "input_required",
            "message": "Which carrier should ship order A-1001?",
            "responseSchema": SHIPPING_SCHEMA,
        }
    )
    ANSWERS.append(answer)
    text = f"Shipping with {json.dumps(answer, sort_keys=True)}"
    return {"messages": [AIMessage(content=text)]}


def build_app() -> FastAPI:
    """Return a FastAPI app serving the graph at ``/langgraph``."""
    graph = StateGraph(MessagesState)
    graph.add_node("ask_carrier", ask_carrier)
    graph.add_edge(START, "ask_carrier")
    graph.add_edge("ask_carrier", END)
    agent = LangGraphAgent(
        name="shipping",
        graph=graph.compile(checkpointer=MemorySaver()),
        emit_interrupt_outcome=True,
    )
    app = FastAPI()
    add_langgraph_fastapi_endpoint(app, agent, "/langgraph")
    return app
