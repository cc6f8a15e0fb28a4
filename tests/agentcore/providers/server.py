"""A local HTTP server that plays scripted provider responses and records requests.

Tests point the real SDKs at it (``base_url=server.url``), so adapters are exercised
end to end over HTTP in each API's real wire format, and no real model is reached
(STYLE 16).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(slots=True)
class Reply:
    """One scripted HTTP response."""

    status: int = 200
    body: bytes = b""
    content_type: str = "text/event-stream"
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class Recorded:
    """One request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


def sse(events: list[dict[str, Any]], *, done: bool = False) -> bytes:
    """Return ``events`` as ``data:`` SSE lines (OpenAI and Gemini ``alt=sse`` style)."""
    text = "".join(f"data: {json.dumps(e)}\n\n" for e in events)
    if done:
        text += "data: [DONE]\n\n"
    return text.encode()


def named_sse(events: list[dict[str, Any]]) -> bytes:
    """Return ``events`` as ``event: <type>`` + ``data:`` SSE frames (Anthropic, Responses)."""
    return "".join(
        f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events
    ).encode()


def json_reply(status: int, payload: dict[str, Any]) -> Reply:
    """Return a JSON (error) reply with ``status``."""
    return Reply(
        status=status,
        body=json.dumps(payload).encode(),
        content_type="application/json",
    )


class ScriptServer:
    """Serve queued :class:`Reply` objects in order and record every request."""

    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.requests: list[Recorded] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body: Any = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode(errors="replace")
                outer.requests.append(
                    Recorded(self.command, self.path, dict(self.headers), body)
                )
                reply = (
                    outer.replies.pop(0)
                    if outer.replies
                    else Reply(
                        status=599, body=b"no scripted reply", content_type="text/plain"
                    )
                )
                self.send_response(reply.status)
                self.send_header("Content-Type", reply.content_type)
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(reply.body)
                self.wfile.flush()

            do_POST = _handle
            do_GET = _handle

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.02},
            daemon=True,
        )

    @property
    def url(self) -> str:
        """Return ``http://127.0.0.1:<port>``."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> ScriptServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    @property
    def last_body(self) -> Any:
        """Return the JSON body of the last request."""
        return self.requests[-1].body
