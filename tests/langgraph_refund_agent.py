"""A real LangGraph agent served over AG-UI by ``ag-ui-langgraph``, with a fake model.

No API key and no network: :class:`RulesChatModel` is a LangChain chat model that
reads the conversation and answers like a small tool-using model over the refund
job. The graph is the usual ReAct shape (model node, ``ToolNode`` for the agent's
own tools, back to the model); a call to a tool the graph does not own (an
application tool Countersign advertised in ``RunAgentInput.tools``) ends the run
with that call unanswered, for Countersign to dispose of (FT-06).

The refund job, by what the history holds after the user's ``refund order <id>
<amount>``:

1. no ``order_status`` result yet → call ``order_status`` (the graph's own tool,
   answered in-stream with ``TOOL_CALL_RESULT``);
2. no ``refund_order`` result yet → call ``refund_order`` (Countersign's
   approval-gated application tool);
3. otherwise → ``Refund done: <result>``.

Two endpoints share the graph shape and differ only in the model:

- ``/streaming``: the model streams its text and tool-call chunks;
- ``/snapshot-only``: the model does not stream (``disable_streaming``), so
  ``ag-ui-langgraph`` shows its tool calls only in ``MESSAGES_SNAPSHOT``.

``ag-ui-langgraph`` names a backend tool's ``TOOL_CALL_RESULT`` by the tool call id
while the ``ToolMessage`` LangGraph keeps (and puts in ``MESSAGES_SNAPSHOT``) gets
its own uuid: the snapshot disagrees with the stream, which is what Countersign
has to reconcile.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import uvicorn
from ag_ui_langgraph import LangGraphAgent, add_langgraph_fastapi_endpoint
from fastapi import FastAPI
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode

_REFUND = re.compile(r"refund\s+order\s+(?P<id>[\w-]+)\s+(?P<amount>\d+(?:\.\d+)?)")


@tool
def order_status(order_id: str) -> str:
    """Return an order's status (the LangGraph agent's own tool)."""
    return json.dumps({"order_id": order_id, "status": "delivered"})


BACKEND_TOOLS = [order_status]
BACKEND_NAMES = {t.name for t in BACKEND_TOOLS}


def _next_message(messages: Sequence[BaseMessage]) -> AIMessage:
    """Decide the model's next message from the history (see the module docstring)."""
    users = [m for m in messages if isinstance(m, HumanMessage)]
    asked = _REFUND.search(str(users[-1].content)) if users else None
    if asked is None:
        return AIMessage(content="Ask me to refund an order.")
    answered = {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}
    calls = {
        call["name"]: call
        for m in messages
        if isinstance(m, AIMessage)
        for call in m.tool_calls
    }
    order_id, amount = asked["id"], asked["amount"]
    status = calls.get("order_status")
    if status is None or status["id"] not in answered:
        return AIMessage(
            content="",
            tool_calls=[
                {
                    "id": "lg_status_1",
                    "name": "order_status",
                    "args": {"order_id": order_id},
                }
            ],
        )
    refund = calls.get("refund_order")
    if refund is None or refund["id"] not in answered:
        return AIMessage(
            content="",
            tool_calls=[
                {
                    "id": "lg_refund_1",
                    "name": "refund_order",
                    "args": {
                        "order_id": order_id,
                        "amount": float(amount),
                        "reason": "customer request",
                    },
                }
            ],
        )
    return AIMessage(content=f"Refund done: {answered[refund['id']].content}")


class RulesChatModel(BaseChatModel):
    """A fake chat model: :func:`_next_message` decides, streaming optional."""

    @property
    def _llm_type(self) -> str:
        return "countersign-rules"

    def bind_tools(self, tools: Any, **kwargs: Any) -> RulesChatModel:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=_next_message(messages))])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        message = _next_message(messages)
        if message.content:
            text = str(message.content)
            for start in range(0, len(text), 8):
                yield ChatGenerationChunk(
                    message=AIMessageChunk(content=text[start : start + 8])
                )
        for index, call in enumerate(message.tool_calls):
            # As real models stream a call: the id and name first, then the
            # argument text in fragments.
            args = json.dumps(call["args"])
            half = len(args) // 2
            first = {"id": call["id"], "name": call["name"], "args": ""}
            for fragment in (first, {"args": args[:half]}, {"args": args[half:]}):
                chunk = {"id": None, "name": None, "index": index, **fragment}
                yield ChatGenerationChunk(
                    message=AIMessageChunk(content="", tool_call_chunks=[chunk])
                )


def build_graph(*, streaming: bool) -> Any:
    """Return the compiled ReAct graph over :class:`RulesChatModel` (in-memory checkpoints)."""
    model = RulesChatModel(disable_streaming=not streaming)

    def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    def route(state: MessagesState) -> str:
        last = state["messages"][-1]
        calls = getattr(last, "tool_calls", None) or []
        if calls and all(call["name"] in BACKEND_NAMES for call in calls):
            return "tools"
        # No call, or a call the graph does not own: the run ends here.
        return END

    graph = StateGraph(MessagesState)
    graph.add_node("model", call_model)
    graph.add_node("tools", ToolNode(BACKEND_TOOLS))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", route, ["tools", END])
    graph.add_edge("tools", "model")
    return graph.compile(checkpointer=InMemorySaver())


#: The compiled graph behind each path, so tests can read LangGraph's own state.
GRAPHS: dict[str, Any] = {}


def build_app() -> FastAPI:
    """Return the FastAPI app serving ``/streaming`` and ``/snapshot-only``."""
    app = FastAPI()
    for path, streaming in (("/streaming", True), ("/snapshot-only", False)):
        GRAPHS[path] = build_graph(streaming=streaming)
        add_langgraph_fastapi_endpoint(
            app,
            LangGraphAgent(name=path.strip("/").replace("-", "_"), graph=GRAPHS[path]),
            path=path,
        )
    return app


def tool_messages_by_call(path: str, thread_id: str) -> dict[str, int]:
    """Return how many ToolMessages LangGraph's state at ``path`` holds per call id."""
    state = GRAPHS[path].get_state({"configurable": {"thread_id": thread_id}})
    counts: dict[str, int] = {}
    for message in state.values.get("messages", []):
        if isinstance(message, ToolMessage):
            counts[message.tool_call_id] = counts.get(message.tool_call_id, 0) + 1
    return counts


def serve() -> tuple[str, Any]:
    """Serve :func:`build_app` with uvicorn on 127.0.0.1 (ephemeral port) in a thread.

    Returns the base URL and a ``stop()`` callable.
    """
    config = uvicorn.Config(
        build_app(), host="127.0.0.1", port=0, log_level="warning", lifespan="off"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("the LangGraph agent server did not start")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]

    def stop() -> None:
        server.should_exit = True
        thread.join(timeout=10)

    return f"http://127.0.0.1:{port}", stop
