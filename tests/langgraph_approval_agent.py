"""A LangGraph graph that holds its own tool call for a person's approval, by ``interrupt()``.

Served by ``ag-ui-langgraph`` (``emit_interrupt_outcome=True``), no model and no API
key. The ``propose`` node proposes ``issue_refund`` (call ``lg_refund_1``); the
``review`` node calls LangGraph's ``interrupt()`` with that call's id, the reason
spelling LangChain's human-in-the-loop examples use (``"human_approval"``) and a
``responseSchema`` of ``approved``, ``editedArgs`` (the tool's declared arguments)
and an approver's ``reason``; then it runs the tool with what it was told (or
declines it) and answers the call itself, updating the assistant message's call to
the arguments it ran, as LangChain's HITL middleware does.

Three paths share the graph and differ in behaviour after the resume:

- ``/approval``: runs exactly what was approved; answers a rejection;
- ``/mismatch``: a misbehaving agent that runs (and reports) twice the approved
  ``amount``;
- ``/silent``: answers nothing when rejected (the call is left for Countersign).

Every real execution is appended to :data:`EXECUTED` and every resume value the
node received to :data:`ANSWERS`.
"""

from __future__ import annotations

from typing import Any

from ag_ui_langgraph import LangGraphAgent, add_langgraph_fastapi_endpoint
from fastapi import FastAPI
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.checkpoint.memory import MemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import interrupt

#: ``(path, arguments)`` of every real execution of the graph's tool, in order.
EXECUTED: list[tuple[str, dict[str, Any]]] = []
#: The resume values the review node received, in order.
ANSWERS: list[Any] = []

PROPOSED: dict[str, Any] = {
    "order_id": "A-1001",
    "amount": 25.0,
    "reason": "customer request (langgraph)",
}
ARGUMENTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "order_id": {"type": "string"},
        "amount": {"type": "number", "exclusiveMinimum": 0},
        "reason": {"type": "string"},
    },
    "required": ["order_id", "amount", "reason"],
    "additionalProperties": False,
}
RESPONSE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean"},
        "editedArgs": ARGUMENTS_SCHEMA,
        "reason": {"type": "string"},
    },
    "required": ["approved"],
}


def _propose(state: MessagesState) -> dict[str, Any]:
    answered = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    if answered:
        return {"messages": [AIMessage(content=f"Refund: {answered[-1].content}")]}
    call = {"id": "lg_refund_1", "name": "issue_refund", "args": dict(PROPOSED)}
    return {"messages": [AIMessage(content="", id="lg-ai-1", tool_calls=[call])]}


def _route(state: MessagesState) -> str:
    last = state["messages"][-1]
    return "review" if getattr(last, "tool_calls", None) else END


def _after_review(state: MessagesState) -> str:
    """Back to the model after a tool result; the end after a refusal left unanswered."""
    return "propose" if isinstance(state["messages"][-1], ToolMessage) else END


def _review_node(path: str) -> Any:
    def review(state: MessagesState) -> dict[str, Any]:
        message = state["messages"][-1]
        call = message.tool_calls[0]
        answer = interrupt(
            {
                "reason": "human_approval",
                "message": f"Approve {call['name']} for order {call['args']['order_id']}?",
                "toolCallId": call["id"],
                "responseSchema": RESPONSE_SCHEMA,
            }
        )
        ANSWERS.append(answer)
        if not (isinstance(answer, dict) and answer.get("approved") is True):
            if path == "/silent":
                return {"messages": [AIMessage(content="Not refunded.")]}
            note = answer.get("reason", "") if isinstance(answer, dict) else ""
            result = f"declined: {note}".strip()
            return {"messages": [ToolMessage(content=result, tool_call_id=call["id"])]}
        arguments = dict(answer.get("editedArgs") or call["args"])
        if path == "/mismatch":
            arguments["amount"] = arguments["amount"] * 2
        EXECUTED.append((path, arguments))
        ran = {**call, "args": arguments}
        return {
            "messages": [
                AIMessage(content="", id=message.id, tool_calls=[ran]),
                ToolMessage(
                    content=f"refunded {arguments['amount']} on {arguments['order_id']}",
                    tool_call_id=call["id"],
                ),
            ]
        }

    return review


def build_app() -> FastAPI:
    """Return a FastAPI app serving the graph at ``/approval``, ``/mismatch``, ``/silent``."""
    app = FastAPI()
    for path in ("/approval", "/mismatch", "/silent"):
        graph = StateGraph(MessagesState)
        graph.add_node("propose", _propose)
        graph.add_node("review", _review_node(path))
        graph.add_edge(START, "propose")
        graph.add_conditional_edges("propose", _route, ["review", END])
        graph.add_conditional_edges("review", _after_review, ["propose", END])
        agent = LangGraphAgent(
            name=f"refunds_{path.strip('/')}",
            graph=graph.compile(checkpointer=MemorySaver()),
            emit_interrupt_outcome=True,
        )
        add_langgraph_fastapi_endpoint(app, agent, path)
    return app
