"""``agui_http`` against a raw local HTTP server that fails the way networks do (SEC-06, ER-01).

The server is a plain ``asyncio`` TCP server on 127.0.0.1 (an OS-chosen port) that
writes HTTP/1.1 by hand, so it can do what a well-behaved framework will not: reset
the connection in the middle of a chunked body, send bytes that are not an event,
stop sending, or refuse with 429 / 503 and a ``Retry-After``. The real
:class:`RemoteAgent` (httpx) connects to it; nothing is mocked.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from agentcore.events import BaseEvent
from agentcore.providers.agui_http import RemoteAgent
from tests.agentcore.helpers import assert_valid_stream, collect, make_input, of_type


@dataclass
class FaultServer:
    """What the server received: request arrival times per path."""

    url: str = ""
    arrivals: dict[str, list[float]] = field(default_factory=dict)


def _frame(event: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(event)}\n\n".encode()


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def _run_frames(body: dict[str, Any]) -> list[bytes]:
    ids = {"threadId": body["threadId"], "runId": body["runId"]}
    return [
        _frame({"type": "RUN_STARTED", **ids}),
        _frame({"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"}),
        _frame({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "Hel"}),
        _frame({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "lo"}),
        _frame({"type": "TEXT_MESSAGE_END", "messageId": "m1"}),
        _frame({"type": "RUN_FINISHED", **ids}),
    ]


_SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
    b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
)


def _refusal(status: int, retry_after: str) -> bytes:
    reason = {429: "Too Many Requests", 503: "Service Unavailable"}[status]
    body = b'{"error": "internal detail 10.0.0.7"}'
    return (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
        f"Retry-After: {retry_after}\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode() + body


async def _serve(
    state: FaultServer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    path = lines[0].split(" ")[1]
    length = next(
        int(line.split(":", 1)[1])
        for line in lines
        if line.lower().startswith("content-length:")
    )
    body = json.loads(await reader.readexactly(length))
    seen = state.arrivals.setdefault(path, [])
    seen.append(time.monotonic())
    frames = _run_frames(body)
    try:
        if path == "/reset":
            writer.write(_SSE_HEAD + b"".join(_chunk(f) for f in frames[:3]))
            await writer.drain()
            await asyncio.sleep(0.05)
            writer.transport.abort()  # RST: no terminating chunk, no FIN
            return
        if path == "/garbage":
            writer.write(_SSE_HEAD + _chunk(frames[0]))
            writer.write(_chunk(b'data: {"type": "TEXT_MESS\xff\xfe garbage\n\n'))
            writer.write(b"".join(_chunk(f) for f in frames[1:]) + b"0\r\n\r\n")
        elif path == "/stall":
            writer.write(_SSE_HEAD + _chunk(frames[0]) + _chunk(frames[1]))
            await writer.drain()
            await asyncio.sleep(5)
        elif path == "/429-once" and len(seen) == 1:
            writer.write(_refusal(429, "0.3"))
        elif path == "/503-always":
            writer.write(_refusal(503, "0"))
        elif path == "/429-long":
            writer.write(_refusal(429, "120"))
        else:
            writer.write(_SSE_HEAD + b"".join(_chunk(f) for f in frames) + b"0\r\n\r\n")
        await writer.drain()
    finally:
        if not writer.transport.is_closing():
            writer.close()


@pytest.fixture
async def fault_server() -> AsyncIterator[FaultServer]:
    """Yield a started :class:`FaultServer` on 127.0.0.1 with an ephemeral port."""
    state = FaultServer()
    server = await asyncio.start_server(
        lambda r, w: _serve(state, r, w), "127.0.0.1", 0
    )
    port = server.sockets[0].getsockname()[1]
    state.url = f"http://127.0.0.1:{port}"
    try:
        yield state
    finally:
        server.close()
        await server.wait_closed()


async def run_remote(url: str, **options: Any) -> list[BaseEvent]:
    """Run a RemoteAgent at ``url``; check the stream it yields (ER-01)."""
    run_input = make_input("hi")
    agent = RemoteAgent(url, retry_backoff=0.01, **options)
    events = await asyncio.wait_for(collect(agent, run_input), timeout=20)
    assert_valid_stream(events, run_input=run_input)
    return events


def error_of(events: list[BaseEvent]) -> Any:
    (error,) = of_type(events, "RUN_ERROR")
    assert "127.0.0.1" not in error.message
    assert "10.0.0.7" not in error.message
    return error


def assert_no_traceback_logged(caplog: pytest.LogCaptureFixture) -> None:
    """A remote's fault is one warning line, never a logged traceback (SEC-06)."""
    for record in caplog.records:
        if record.name == "asyncio":
            continue
        assert record.exc_info is None, record.getMessage()
        assert record.levelno < logging.ERROR, record.getMessage()


async def test_connection_reset_mid_stream_is_truncated_stream(
    fault_server: FaultServer, caplog: pytest.LogCaptureFixture
) -> None:
    """A reset after three events: what came is relayed and closed, then truncated_stream."""
    events = await run_remote(f"{fault_server.url}/reset")
    assert [e.delta for e in of_type(events, "TEXT_MESSAGE_CONTENT")] == ["Hel"]
    assert of_type(events, "TEXT_MESSAGE_END"), "the open message is closed (ER-01)"
    assert error_of(events).code == "truncated_stream"
    assert_no_traceback_logged(caplog)


async def test_garbage_mid_stream_is_malformed_stream(
    fault_server: FaultServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Bytes that are not an event, mid-stream, end the run as malformed_stream."""
    events = await run_remote(f"{fault_server.url}/garbage")
    assert error_of(events).code == "malformed_stream"
    assert of_type(events, "TEXT_MESSAGE_START") == []
    assert_no_traceback_logged(caplog)


async def test_stall_times_out_as_upstream_unavailable(
    fault_server: FaultServer, caplog: pytest.LogCaptureFixture
) -> None:
    """A stream that stops sending fails on the read timeout, closing what was open."""
    events = await run_remote(f"{fault_server.url}/stall", timeout=0.5)
    error = error_of(events)
    assert error.code == "upstream_unavailable"
    assert "0.5 seconds" in error.message
    assert of_type(events, "TEXT_MESSAGE_END"), "the open message is closed (ER-01)"
    assert_no_traceback_logged(caplog)


async def test_429_is_retried_after_retry_after(
    fault_server: FaultServer, caplog: pytest.LogCaptureFixture
) -> None:
    """429 with ``Retry-After: 0.3``: the run is requested again no sooner, and finishes."""
    events = await run_remote(f"{fault_server.url}/429-once")
    assert of_type(events, "RUN_FINISHED")
    assert "".join(e.delta for e in of_type(events, "TEXT_MESSAGE_CONTENT")) == "Hello"
    first, second = fault_server.arrivals["/429-once"]
    assert second - first >= 0.3
    assert_no_traceback_logged(caplog)


async def test_503_kept_up_ends_as_upstream_unavailable_within_retries(
    fault_server: FaultServer, caplog: pytest.LogCaptureFixture
) -> None:
    """503 on every attempt: 1 + max_retries requests, then upstream_unavailable."""
    events = await run_remote(f"{fault_server.url}/503-always", max_retries=2)
    assert error_of(events).code == "upstream_unavailable"
    assert len(fault_server.arrivals["/503-always"]) == 3
    assert_no_traceback_logged(caplog)


async def test_retry_after_beyond_the_cap_is_not_waited_for(
    fault_server: FaultServer,
) -> None:
    """A ``Retry-After`` longer than ``retry_max_delay`` ends the run at once: rate_limited."""
    started = time.monotonic()
    events = await run_remote(f"{fault_server.url}/429-long", retry_max_delay=5)
    assert time.monotonic() - started < 5
    assert error_of(events).code == "rate_limited"
    assert len(fault_server.arrivals["/429-long"]) == 1


def test_retry_settings_must_not_be_negative() -> None:
    """A negative retry setting is refused when the agent is built."""
    with pytest.raises(ValueError, match="max_retries"):
        RemoteAgent("http://127.0.0.1:1/", max_retries=-1)
