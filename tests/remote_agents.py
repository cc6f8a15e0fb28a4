"""Third-party AG-UI agents with fake models that ask for approval by interrupt (IR-18).

``pydantic_ai_app`` is a Pydantic AI agent (``FunctionModel``, no LLM, no API key)
served by Pydantic AI's own ``AGUIAdapter``: its ``delete_file`` tool is declared
``requires_approval=True``, so the adapter ends the run with
``RUN_FINISHED {outcome: {type: "interrupt", interrupts: [...]}}`` and reads the
operator's answer from ``RunAgentInput.resume[]`` in the next run. Every real execution
of the tool is appended to :data:`EXECUTED`, so a test can count them.
:func:`serve` runs an ASGI app under uvicorn on an ephemeral 127.0.0.1 port.
"""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.messages import ModelMessage, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel
from pydantic_ai.tools import DeferredToolRequests
from pydantic_ai.ui.ag_ui import AGUIAdapter
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

#: Paths the Pydantic AI agent's ``delete_file`` really deleted, in order.
EXECUTED: list[str] = []
#: The JSON body of every request the agents received, in order.
RECEIVED: list[dict[str, Any]] = []


async def _approval_model(
    messages: list[ModelMessage], info: AgentInfo
) -> AsyncIterator[str | dict[int, DeltaToolCall]]:
    """Propose ``delete_file`` once; after its result, say what happened."""
    returns = [
        part
        for message in messages
        for part in getattr(message, "parts", ())
        if isinstance(part, ToolReturnPart)
    ]
    if returns:
        yield f"Done: {returns[-1].content}"
        return
    yield {
        0: DeltaToolCall(
            name="delete_file",
            json_args='{"path": "/srv/report.txt"}',
            tool_call_id="pai_delete_1",
        )
    }


PYDANTIC_APPROVAL_AGENT = PydanticAgent(
    FunctionModel(stream_function=_approval_model),
    output_type=[str, DeferredToolRequests],
)


@PYDANTIC_APPROVAL_AGENT.tool_plain(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete the file at ``path`` (destructive; needs a human's approval)."""
    EXECUTED.append(path)
    return f"deleted {path}"


async def pydantic_ai_endpoint(request: Request) -> Response:
    import json

    RECEIVED.append(json.loads(await request.body()))
    return await AGUIAdapter.dispatch_request(request, agent=PYDANTIC_APPROVAL_AGENT)


#: The form the ``ask-shipping`` agent asks an operator to fill in.
SHIPPING_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "carrier": {"type": "string", "enum": ["dhl", "ups"]},
        "express": {"type": "boolean"},
    },
    "required": ["carrier"],
}


async def ask_shipping_endpoint(request: Request) -> Response:
    """A minimal AG-UI agent that asks a question by interrupt (no tool call).

    With no ``resume`` it ends the run with one ``reason: "input_required"`` interrupt
    carrying :data:`SHIPPING_SCHEMA`; given a ``resume`` it says what it received.
    """
    import json

    from ag_ui.core import (
        Interrupt,
        RunFinishedEvent,
        RunFinishedInterruptOutcome,
        RunStartedEvent,
        TextMessageContentEvent,
        TextMessageEndEvent,
        TextMessageStartEvent,
    )
    from ag_ui.encoder import EventEncoder

    body = json.loads(await request.body())
    RECEIVED.append(body)
    encoder = EventEncoder()
    thread_id, run_id = body["threadId"], body["runId"]
    events: list[Any] = [RunStartedEvent(thread_id=thread_id, run_id=run_id)]
    resume = body.get("resume") or []
    if not resume:
        events.append(
            RunFinishedEvent(
                thread_id=thread_id,
                run_id=run_id,
                outcome=RunFinishedInterruptOutcome(
                    interrupts=[
                        Interrupt(
                            id=f"ask-{run_id}",
                            reason="input_required",
                            message="Which carrier should ship order A-1001?",
                            response_schema=SHIPPING_SCHEMA,
                        )
                    ]
                ),
            )
        )
    else:
        text = f"Shipping with {json.dumps(resume, sort_keys=True)}"
        events += [
            TextMessageStartEvent(message_id=f"m-{run_id}", role="assistant"),
            TextMessageContentEvent(message_id=f"m-{run_id}", delta=text),
            TextMessageEndEvent(message_id=f"m-{run_id}"),
            RunFinishedEvent(thread_id=thread_id, run_id=run_id),
        ]
    payload = "".join(encoder.encode(event) for event in events)
    return Response(payload, media_type="text/event-stream")


APP = Starlette(
    routes=[
        Route("/pydantic-ai", pydantic_ai_endpoint, methods=["POST"]),
        Route("/ask-shipping", ask_shipping_endpoint, methods=["POST"]),
    ]
)


@contextmanager
def serve(app: Any = APP) -> Iterator[str]:
    """Serve ``app`` with uvicorn on 127.0.0.1 in a thread; yield its base URL."""
    config = uvicorn.Config(
        app, host="127.0.0.1", port=0, log_level="warning", lifespan="off"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start within 10 seconds")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
