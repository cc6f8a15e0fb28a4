"""RemoteAgent against real HTTP servers on 127.0.0.1 (never a real model, STYLE 16).

The main peer is a third-party AG-UI producer: a Pydantic AI agent (``FunctionModel``,
no LLM) served by its own AG-UI adapter under uvicorn. Broken peers (HTTP 500, a
malformed frame, a truncated stream...) are small Starlette routes in the same server,
framing valid events with the SDK's ``EventEncoder``.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

pytest.importorskip(
    "pydantic_ai.ui.ag_ui", reason="pydantic-ai-slim[ag-ui] (dev extra)"
)

from ag_ui.encoder import EventEncoder
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.messages import ModelMessage, ToolReturnPart
from pydantic_ai.models.function import (
    AgentInfo,
    DeltaToolCall,
    FunctionModel,
)
from pydantic_ai.ui.ag_ui import AGUIAdapter
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from agentcore.events import (
    BaseEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageStartEvent,
    Tool,
    ToolCallChunkEvent,
    ToolMessage,
)
from agentcore.providers.agui_http import RemoteAgent
from tests.agentcore.helpers import (
    assert_valid_stream,
    collect,
    make_input,
    of_type,
    types,
)
from tests.remote_agents import serve

CONFIRM = Tool(
    name="confirm",
    description="Ask the user to confirm an action.",
    parameters={
        "type": "object",
        "properties": {"question": {"type": "string"}},
        "required": ["question"],
    },
)
SECRET = "sk-test-secret-123456"

# --- the third-party agent ------------------------------------------------------------


async def _model(
    messages: list[ModelMessage], info: AgentInfo
) -> AsyncIterator[str | dict[int, DeltaToolCall]]:
    """A scripted Pydantic AI model: call the frontend tool, then answer its result."""
    returns = [
        part
        for part in getattr(messages[-1], "parts", ())
        if isinstance(part, ToolReturnPart)
    ]
    if returns:
        yield f"Confirmed: {returns[0].content}"
        return
    if "confirm" in [tool.name for tool in info.function_tools]:
        yield {
            0: DeltaToolCall(
                name="confirm", json_args='{"question":', tool_call_id="pai_call_1"
            )
        }
        yield {0: DeltaToolCall(json_args=' "Proceed?"}')}
        return
    yield "Hello "
    yield "from Pydantic AI."


PYDANTIC_AGENT = PydanticAgent(FunctionModel(stream_function=_model))
RECEIVED: list[dict[str, Any]] = []


async def pydantic_ai_endpoint(request: Request) -> Response:
    RECEIVED.append(
        {"headers": dict(request.headers), "body": json.loads(await request.body())}
    )
    return await AGUIAdapter.dispatch_request(request, agent=PYDANTIC_AGENT)


# --- broken peers ------------------------------------------------------------------------

ENCODER = EventEncoder()


async def _ids(request: Request) -> tuple[str, str]:
    body = json.loads(await request.body())
    return body["threadId"], body["runId"]


def _sse(
    chunks: list[str | bytes], *, hang_after: int | None = None
) -> StreamingResponse:
    """Stream ``chunks``; sleep 30 seconds after the first ``hang_after`` of them."""

    async def body() -> AsyncIterator[bytes]:
        for index, chunk in enumerate(chunks):
            if index == hang_after:
                await asyncio.sleep(30)
            yield chunk.encode() if isinstance(chunk, str) else chunk

    return StreamingResponse(body(), media_type="text/event-stream")


async def status_500(request: Request) -> Response:
    return Response(f"internal detail {SECRET}", status_code=500)


async def not_sse(request: Request) -> Response:
    return Response('{"ok": true}', media_type="application/json")


async def malformed(request: Request) -> Response:
    thread_id, run_id = await _ids(request)
    return _sse(
        [
            ENCODER.encode(RunStartedEvent(thread_id=thread_id, run_id=run_id)),
            ENCODER.encode(TextMessageStartEvent(message_id="m1")),
            "data: {this is not json\n\n",
        ]
    )


async def truncated(request: Request) -> Response:
    thread_id, run_id = await _ids(request)
    return _sse(
        [
            ENCODER.encode(RunStartedEvent(thread_id=thread_id, run_id=run_id)),
            ENCODER.encode(TextMessageStartEvent(message_id="m1")),
            ENCODER.encode(TextMessageContentEvent(message_id="m1", delta="Hal")),
        ]
    )


async def cut_mid_frame(request: Request) -> Response:
    thread_id, run_id = await _ids(request)
    return _sse(
        [
            ENCODER.encode(RunStartedEvent(thread_id=thread_id, run_id=run_id)),
            'data: {"type":"TEXT_MESSAGE_START","mess',
        ]
    )


async def crlf(request: Request) -> Response:
    """A valid run framed with CRLF, comments, event/id/retry lines and multi-line data."""
    thread_id, run_id = await _ids(request)
    started = json.dumps(
        {"type": "RUN_STARTED", "threadId": thread_id, "runId": run_id}
    )
    finished = json.dumps(
        {
            "type": "RUN_FINISHED",
            "threadId": thread_id,
            "runId": run_id,
            "outcome": {"type": "success"},
        }
    )
    return _sse(
        [
            ": keep-alive\r\n\r\n",
            f"event: message\r\nid: 1\r\nretry: 1000\r\ndata: {started}\r\n\r\n",
            'data: {"type": "TEXT_MESSAGE_START",\r\ndata:  "messageId": "m1"}\r\n\r\n',
            'data:{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"hi"}\r\n\r\n',
            ': comment\r\ndata: {"type":"FUTURE_EVENT","x":1}\r\n\r\n',
            'data: {"type":"TEXT_MESSAGE_END","messageId":"m1"}\r\n\r\n',
            f"data: {finished}\r\n\r\n",
        ]
    )


async def chunks(request: Request) -> Response:
    thread_id, run_id = await _ids(request)
    return _sse(
        [
            ENCODER.encode(RunStartedEvent(thread_id=thread_id, run_id=run_id)),
            ENCODER.encode(
                ToolCallChunkEvent(
                    tool_call_id="tc1", tool_call_name="confirm", delta='{"question":'
                )
            ),
            ENCODER.encode(ToolCallChunkEvent(delta=' "ok?"}')),
            ENCODER.encode(RunFinishedEvent(thread_id=thread_id, run_id=run_id)),
        ]
    )


async def error_first(request: Request) -> Response:
    return _sse([ENCODER.encode(RunErrorEvent(message="agent is busy", code="busy"))])


async def violation(request: Request) -> Response:
    thread_id, run_id = await _ids(request)
    return _sse(
        [
            ENCODER.encode(RunStartedEvent(thread_id=thread_id, run_id=run_id)),
            ENCODER.encode(TextMessageStartEvent(message_id="m1")),
            'data: {"type":"TOOL_CALL_ARGS","toolCallId":"ghost","delta":"{}"}\n\n',
        ]
    )


async def slow(request: Request) -> Response:
    thread_id, run_id = await _ids(request)
    return _sse(
        [
            ENCODER.encode(RunStartedEvent(thread_id=thread_id, run_id=run_id)),
            ENCODER.encode(TextMessageStartEvent(message_id="m1")),
            ENCODER.encode(RunFinishedEvent(thread_id=thread_id, run_id=run_id)),
        ],
        hang_after=2,
    )


APP = Starlette(
    routes=[
        Route(path, endpoint, methods=["POST"])
        for path, endpoint in {
            "/pydantic-ai": pydantic_ai_endpoint,
            "/status-500": status_500,
            "/not-sse": not_sse,
            "/malformed": malformed,
            "/truncated": truncated,
            "/cut-mid-frame": cut_mid_frame,
            "/crlf": crlf,
            "/chunks": chunks,
            "/error-first": error_first,
            "/violation": violation,
            "/slow": slow,
        }.items()
    ]
)


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    """Serve APP with uvicorn on 127.0.0.1, an ephemeral port, in a thread."""
    with serve(APP) as url:
        yield url


async def run_remote(url: str, **input_kwargs: Any) -> tuple[list[BaseEvent], Any]:
    run_input = make_input(**input_kwargs)
    events = await asyncio.wait_for(
        collect(RemoteAgent(url, timeout=10), run_input), timeout=20
    )
    return events, run_input


# --- the Pydantic AI agent -----------------------------------------------------------------


async def test_pydantic_ai_text_run_passes_through(base_url: str) -> None:
    """A third-party AG-UI agent's text run is relayed event by event, valid (ER-01)."""
    events, run_input = await run_remote(f"{base_url}/pydantic-ai", text="hi")
    assert_valid_stream(events, run_input=run_input)
    assert types(events)[0] == "RUN_STARTED"
    assert types(events)[-1] == "RUN_FINISHED"
    text = "".join(e.delta for e in of_type(events, "TEXT_MESSAGE_CONTENT"))
    assert text == "Hello from Pydantic AI."
    assert events[0].protocol_version == "1.0"


async def test_pydantic_ai_frontend_tool_left_pending_then_answered(
    base_url: str,
) -> None:
    """A frontend tool call is left unanswered by the remote; the next run answers it (FT-02, FT-05, FT-06)."""
    RECEIVED.clear()
    url = f"{base_url}/pydantic-ai"
    agent = RemoteAgent(url, headers={"Authorization": f"Bearer {SECRET}"})
    run1 = make_input("delete the file", tools=[CONFIRM])
    events1 = await asyncio.wait_for(collect(agent, run1), timeout=20)
    stream1 = assert_valid_stream(events1, run_input=run1)
    (start,) = of_type(events1, "TOOL_CALL_START")
    assert start.tool_call_name == "confirm"
    assert of_type(events1, "TOOL_CALL_RESULT") == []
    assert stream1.pending_tool_call_ids == [start.tool_call_id]
    args = "".join(e.delta for e in of_type(events1, "TOOL_CALL_ARGS"))
    assert json.loads(args) == {"question": "Proceed?"}
    # the request was the AG-UI HTTP binding: camelCase JSON, SSE accepted, headers kept
    sent = RECEIVED[-1]
    assert sent["headers"]["accept"] == "text/event-stream"
    assert sent["headers"]["content-type"] == "application/json"
    assert sent["headers"]["authorization"] == f"Bearer {SECRET}"
    assert sent["body"]["threadId"] == "thread-1"
    assert sent["body"]["tools"][0]["name"] == "confirm"

    # the application answers the pending call in the next run's history
    answer = ToolMessage(id="tm1", tool_call_id=start.tool_call_id, content="yes")
    run2 = make_input(
        messages=[*run1.messages, *stream1.messages, answer],
        tools=[CONFIRM],
        run_id="run-2",
    )
    events2 = await asyncio.wait_for(collect(agent, run2), timeout=20)
    assert_valid_stream(events2, run_input=run2)
    text = "".join(e.delta for e in of_type(events2, "TEXT_MESSAGE_CONTENT"))
    assert text == "Confirmed: yes"


# --- broken peers ---------------------------------------------------------------------------


async def test_http_500_is_upstream_http_error_without_secrets(base_url: str) -> None:
    """A non-2xx answer ends the run with RUN_ERROR upstream_http_error after a RUN_STARTED (SEC-06)."""
    events, run_input = await run_remote(f"{base_url}/status-500")
    assert_valid_stream(events, run_input=run_input)
    assert types(events) == ["RUN_STARTED", "RUN_ERROR"]
    assert events[0].input == run_input
    assert events[-1].code == "upstream_http_error"
    assert "500" in events[-1].message
    for leak in (SECRET, "internal detail", "127.0.0.1"):
        assert leak not in events[-1].message


async def test_malformed_frame_is_malformed_stream(base_url: str) -> None:
    """A frame that is not JSON ends the run with malformed_stream, open items closed (ER-01)."""
    events, run_input = await run_remote(f"{base_url}/malformed")
    assert_valid_stream(events, run_input=run_input)
    assert types(events) == [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_END",
        "RUN_ERROR",
    ]
    assert events[-1].code == "malformed_stream"


async def test_truncated_stream_is_truncated_stream(base_url: str) -> None:
    """A stream ending without a terminal event is truncated_stream; RUN_FINISHED is never synthesized."""
    events, run_input = await run_remote(f"{base_url}/truncated")
    assert_valid_stream(events, run_input=run_input)
    assert types(events) == [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_ERROR",
    ]
    assert events[-1].code == "truncated_stream"


async def test_stream_cut_mid_frame_is_truncated_stream(base_url: str) -> None:
    """A half-sent last frame is a truncated stream, not a malformed one."""
    events, run_input = await run_remote(f"{base_url}/cut-mid-frame")
    assert_valid_stream(events, run_input=run_input)
    assert events[-1].code == "truncated_stream"


async def test_crlf_comments_and_sse_fields_are_tolerated(base_url: str) -> None:
    """CRLF framing, comments, event/id/retry lines, multi-line data and unknown event types are handled."""
    events, run_input = await run_remote(f"{base_url}/crlf")
    assert_valid_stream(events, run_input=run_input)
    assert types(events) == [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]


async def test_chunk_events_are_expanded(base_url: str) -> None:
    """TOOL_CALL_CHUNK from the remote comes out as START/ARGS/END (TC-07)."""
    events, run_input = await run_remote(f"{base_url}/chunks")
    assert_valid_stream(events, run_input=run_input)
    assert types(events) == [
        "RUN_STARTED",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "RUN_FINISHED",
    ]


async def test_remote_run_error_first_gets_a_run_started(base_url: str) -> None:
    """A remote that starts with RUN_ERROR is relayed after a RUN_STARTED made here."""
    events, run_input = await run_remote(f"{base_url}/error-first")
    assert_valid_stream(events, run_input=run_input)
    assert types(events) == ["RUN_STARTED", "RUN_ERROR"]
    assert (events[-1].code, events[-1].message) == ("busy", "agent is busy")


async def test_ordering_violation_is_malformed_stream(base_url: str) -> None:
    """ARGS for a call never opened is fatal: RUN_ERROR malformed_stream, the open message closed (ER-01)."""
    events, run_input = await run_remote(f"{base_url}/violation")
    assert_valid_stream(events, run_input=run_input)
    assert types(events)[-2:] == ["TEXT_MESSAGE_END", "RUN_ERROR"]
    assert events[-1].code == "malformed_stream"
    assert "ER-01" in events[-1].message


async def test_non_sse_answer_is_malformed_stream(base_url: str) -> None:
    """A 200 that is not text/event-stream is refused as malformed_stream."""
    events, run_input = await run_remote(f"{base_url}/not-sse")
    assert_valid_stream(events, run_input=run_input)
    assert events[-1].code == "malformed_stream"


async def test_connection_failure_is_upstream_unavailable() -> None:
    """Nobody listening ends the run with upstream_unavailable, naming no address (SEC-06)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    events, run_input = await run_remote(f"http://user:pw@127.0.0.1:{port}/agent")
    assert_valid_stream(events, run_input=run_input)
    assert types(events) == ["RUN_STARTED", "RUN_ERROR"]
    assert events[-1].code == "upstream_unavailable"
    assert "127.0.0.1" not in events[-1].message
    assert "pw" not in events[-1].message


async def test_cancel_closes_the_connection_and_finishes_cancelled(
    base_url: str,
) -> None:
    """Cancelling mid-stream closes open items and ends with the cancelled outcome (ER-01)."""
    run_input = make_input("x")
    cancel = asyncio.Event()
    events: list[BaseEvent] = []

    async def consume() -> None:
        async for event in RemoteAgent(f"{base_url}/slow").run(
            run_input, cancel=cancel
        ):
            events.append(event)
            if event.type.value == "TEXT_MESSAGE_START":
                cancel.set()

    await asyncio.wait_for(consume(), timeout=10)
    assert_valid_stream(events, run_input=run_input)
    assert types(events) == [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]
    assert events[-1].outcome.type == "cancelled"


def test_url_must_be_http() -> None:
    """Only absolute http(s) URLs are accepted."""
    with pytest.raises(ValueError, match="absolute http"):
        RemoteAgent("file:///etc/passwd")
    assert (
        RemoteAgent("https://u:p@example.com:8443/agui?token=x").endpoint
        == "https://example.com:8443/agui"
    )
