"""WebSocket helpers: an in-process ASGI WebSocket client, session headers, frames.

``channels.testing`` imports daphne, which is not a dependency here, so
:class:`WebsocketCommunicator` is the same few lines over asgiref's
``ApplicationCommunicator``. ``NO_POLL`` pushes the consumer's periodic re-read
of the log out of reach, so live events must come through the channel layer.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import unquote, urlparse

from asgiref.sync import sync_to_async
from asgiref.testing import ApplicationCommunicator
from django.conf import settings as django_settings
from django.test import Client

from config.asgi import application
from threads.models import Run, Thread
from threads.recording import RunRecorder

NO_POLL = {"SOCKET_POLL_SECONDS": 3600.0}


def session_headers(user: Any) -> list[tuple[bytes, bytes]]:
    """Log ``user`` in (a real session row) and return WebSocket handshake headers."""
    client = Client()
    client.force_login(user)
    cookie = client.cookies[django_settings.SESSION_COOKIE_NAME].value
    return [
        (b"cookie", f"{django_settings.SESSION_COOKIE_NAME}={cookie}".encode()),
        (b"origin", b"http://testserver"),
    ]


async def open_socket(
    path: str, headers: list[tuple[bytes, bytes]]
) -> WebsocketCommunicator:
    """Open a WebSocket to ``path`` with ``headers``; fail unless the handshake succeeds."""
    communicator = WebsocketCommunicator(application, path, headers=headers)
    connected, code = await communicator.connect(timeout=10)
    assert connected, f"handshake for {path} refused (code {code})"
    return communicator


async def expect_close(communicator: WebsocketCommunicator, code: int) -> None:
    """Assert the server closes the socket with ``code`` after the handshake."""
    output = await communicator.receive_output(timeout=10)
    assert output == {"type": "websocket.close", "code": code}


def record_silently(run: Run, events: list[dict[str, Any]]) -> None:
    """Record ``events`` of ``run`` without ringing the doorbell."""
    recorder = RunRecorder(run, publish=False)
    recorder.record(events)
    recorder.flush()


async def owned_thread(user: Any) -> Thread:
    """Return thread ``frames`` of ``user`` with one finished run, recorded silently."""
    thread = await Thread.objects.acreate(thread_id="frames", owner=user)
    run = await Run.objects.acreate(
        thread=thread, run_id="r1", status=Run.Status.RUNNING
    )
    await sync_to_async(record_silently)(
        run,
        [
            {"type": "RUN_STARTED", "threadId": "frames", "runId": "r1"},
            {"type": "RUN_FINISHED", "threadId": "frames", "runId": "r1"},
        ],
    )
    return thread


#: The window never closes by itself in these tests: only a terminal event or an
#: explicit flush writes.
HOLD = {"coalesce_ms": 60_000, "coalesce_bytes": 1_000_000}


def text_run(
    thread_id: str, run_id: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Return a run's events in two parts: before the explicit flush, and the rest."""
    ids = {"threadId": thread_id, "runId": run_id}
    return (
        [
            {"type": "RUN_STARTED", **ids},
            {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "Hel"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "lo"},
        ],
        [
            {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
            {"type": "RUN_FINISHED", **ids},
        ],
    )


async def raw_frames(socket: WebsocketCommunicator, count: int) -> list[str]:
    """Return the next ``count`` text frames as sent (the exact bytes)."""
    frames = []
    for _ in range(count):
        output = await socket.receive_output(timeout=10)
        assert output["type"] == "websocket.send", output
        frames.append(output["text"])
    return frames


async def assert_silent(socket: WebsocketCommunicator) -> None:
    """Assert the socket sends nothing more within 0.3 s."""
    assert await socket.receive_nothing(timeout=0.3), "the socket sent more frames"


class WebsocketCommunicator(ApplicationCommunicator):
    """A WebSocket client speaking ASGI to ``application`` in-process (as channels' own)."""

    def __init__(self, app: Any, path: str, headers: list[tuple[bytes, bytes]]) -> None:
        parsed = urlparse(path)
        scope = {
            "type": "websocket",
            "path": unquote(parsed.path),
            "query_string": parsed.query.encode(),
            "headers": headers,
            "subprotocols": [],
        }
        super().__init__(app, scope)

    async def connect(self, timeout: float = 1) -> tuple[bool, Any]:
        await self.send_input({"type": "websocket.connect"})
        response = await self.receive_output(timeout)
        if response["type"] == "websocket.close":
            return False, response.get("code", 1000)
        assert response["type"] == "websocket.accept", response
        return True, response.get("subprotocol")

    async def send_json_to(self, data: Any) -> None:
        await self.send_input({"type": "websocket.receive", "text": json.dumps(data)})

    async def receive_json_from(self, timeout: float = 1) -> Any:
        response = await self.receive_output(timeout)
        assert response["type"] == "websocket.send", response
        return json.loads(response["text"])

    async def disconnect(self, code: int = 1000, timeout: float = 1) -> None:
        await self.send_input({"type": "websocket.disconnect", "code": code})
        await self.wait(timeout)
