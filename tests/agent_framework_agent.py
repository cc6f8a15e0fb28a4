"""Microsoft Agent Framework's own AG-UI server with a scripted chat client (no LLM).

Run by the tests in its own virtualenv (``.venv-af``, from
``tests/remote_envs/agent-framework.txt``): ``python tests/agent_framework_agent.py``
binds an ephemeral 127.0.0.1 port and prints it on its first line.

``POST /agent-framework`` is ``agent-framework-ag-ui``'s endpoint for an ``Agent``
whose ``issue_refund`` tool is ``approval_mode="always_require"``: the run ends with
an interrupt outcome (``reason: "tool_call"``, a ``responseSchema`` that lists each
tool argument as a top-level property, and its companion ``confirm_changes`` call),
and the operator's answer comes back as ``RunAgentInput.resume[]``.
``POST /mismatch`` is the same agent whose tool reports arguments other than the
ones it was approved with (a deliberately misbehaving remote). ``GET /executed``
returns every real execution of the tool and every request body received.
"""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import Sequence
from typing import Any

import uvicorn
from agent_framework import (
    Agent,
    BaseChatClient,
    ChatResponse,
    ChatResponseUpdate,
    Content,
    FunctionInvocationLayer,
    Message,
    ResponseStream,
    tool,
)
from agent_framework_ag_ui import add_agent_framework_fastapi_endpoint
from fastapi import FastAPI, Request

#: Every real execution of ``issue_refund``: the arguments it ran with.
EXECUTED: list[dict[str, Any]] = []
#: The JSON body of every request the agents received, in order.
RECEIVED: list[dict[str, Any]] = []

PROPOSED = {
    "order_id": "A-1001",
    "amount": 25.0,
    "reason": "customer request (agent-framework)",
}


@tool(
    name="issue_refund",
    description="Refund an order (needs a person's approval).",
    approval_mode="always_require",
)
def issue_refund(order_id: str, amount: float, reason: str) -> str:
    """Refund ``amount`` on ``order_id``."""
    EXECUTED.append({"order_id": order_id, "amount": amount, "reason": reason})
    return f"refunded {amount} on {order_id} ({reason})"


def _next(messages: Sequence[Message]) -> Message:
    """Propose ``issue_refund`` once; after its result, say what happened."""
    results = [c for m in messages for c in m.contents if c.type == "function_result"]
    if results:
        text = f"Refund done: {results[-1].result}"
        return Message(role="assistant", contents=[Content.from_text(text)])
    call = Content.from_function_call(
        call_id="af_refund_1", name="issue_refund", arguments=json.dumps(PROPOSED)
    )
    return Message(role="assistant", contents=[call])


class ScriptedClient(FunctionInvocationLayer, BaseChatClient):  # type: ignore[misc]
    """A chat client that answers by :func:`_next`, streaming or not."""

    def _inner_get_response(
        self, *, messages: Any, stream: bool, options: Any, **kwargs: Any
    ) -> Any:
        message = _next(messages)
        if stream:

            async def updates() -> Any:
                yield ChatResponseUpdate(
                    role="assistant", contents=message.contents, message_id="af-m"
                )

            return ResponseStream(updates(), finalizer=ChatResponse.from_updates)

        async def response() -> ChatResponse:
            return ChatResponse(messages=[message])

        return response()


def build_app() -> FastAPI:
    """Return the FastAPI app with both agents and the ``/executed`` report."""
    app = FastAPI()

    @app.middleware("http")
    async def record(request: Request, call_next: Any) -> Any:
        if request.method == "POST":
            RECEIVED.append(json.loads(await request.body()))
        return await call_next(request)

    @app.get("/executed")
    def executed() -> dict[str, Any]:
        return {"executed": EXECUTED, "received": RECEIVED}

    agent = Agent(name="refunds", client=ScriptedClient(), tools=[issue_refund])
    add_agent_framework_fastapi_endpoint(
        app, agent, path="/agent-framework", single_user=True
    )
    return app


def main() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    print(sock.getsockname()[1], flush=True)
    config = uvicorn.Config(build_app(), log_level="warning", lifespan="off")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    sys.exit(main())
