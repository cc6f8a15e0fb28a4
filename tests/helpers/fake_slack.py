"""A local fake of Slack's Web API, and signed interaction requests, for the Slack tests.

The product talks to it through the real ``slack_sdk.WebClient`` (its ``base_url``
is the target's ``api_url``): the fake answers the methods Countersign calls
(``chat.postMessage``, ``chat.update``, ``views.open``, ``chat.postEphemeral``,
``users.info``) as Slack documents them, records every call, checks the bot
token, and can answer the next calls of a method with an error (a 429 with
``Retry-After``). Interaction requests are signed with
``slack_sdk.signature.SignatureVerifier``, as Slack signs them.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlparse

from slack_sdk.signature import SignatureVerifier

TOKEN = "xoxb-test-0000-countersign"
SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
TEAM = "T0COUNTER"
_CLICKS = itertools.count(1)


class FakeSlack:
    """A Slack Web API on 127.0.0.1 (``api_url``); ``calls`` holds ``(method, params)``."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        #: user id → ``{"email": str, "confirmed": bool}``
        self.users: dict[str, dict[str, Any]] = {}
        #: method → answers to give first: ``(status, headers, body)``
        self.failures: dict[str, list[tuple[int, dict[str, str], dict[str, Any]]]] = (
            defaultdict(list)
        )
        #: ts → the message as it now reads (``channel``, ``text``, ``blocks``)
        self.messages: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._count = 0
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def api_url(self) -> str:
        """Return the base URL to give ``slack_sdk`` (ends with ``/api/``)."""
        return f"http://127.0.0.1:{self._server.server_address[1]}/api/"

    def start(self) -> FakeSlack:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def of(self, method: str) -> list[dict[str, Any]]:
        """Return the params of every call of ``method``, oldest first."""
        with self._lock:
            return [params for name, params in self.calls if name == method]

    def fail_next(
        self,
        method: str,
        status: int,
        error: str,
        headers: dict[str, str] | None = None,
    ) -> None:
        """Answer the next call of ``method`` with HTTP ``status`` and ``{"ok": false, "error"}``."""
        self.failures[method].append(
            (status, headers or {}, {"ok": False, "error": error})
        )

    def message_text(self, ts: str) -> str:
        """Return every text of message ``ts``'s blocks, joined (what a reader sees)."""
        texts: list[str] = []

        def walk(node: Any) -> None:
            if isinstance(node, dict):
                if isinstance(node.get("text"), str):
                    texts.append(node["text"])
                for value in node.values():
                    walk(value)
            elif isinstance(node, list):
                for value in node:
                    walk(value)

        walk(self.messages[ts]["blocks"])
        return "\n".join(texts)

    def buttons(self, ts: str) -> list[str]:
        """Return the ``action_id`` of every button of message ``ts``."""
        return [
            element["action_id"]
            for block in self.messages[ts]["blocks"]
            if block["type"] == "actions"
            for element in block["elements"]
        ]

    def _answer(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self._count += 1
            count = self._count
            self.calls.append((method, params))
        if method == "chat.postMessage":
            ts = f"1700000000.{count:06d}"
            self.messages[ts] = {**params}
            return {"ok": True, "channel": params["channel"], "ts": ts}
        if method == "chat.update":
            if params["ts"] not in self.messages:
                return {"ok": False, "error": "message_not_found"}
            self.messages[params["ts"]] = {**params}
            return {"ok": True, "channel": params["channel"], "ts": params["ts"]}
        if method == "views.open":
            return {"ok": True, "view": {"id": f"V{count}", **params["view"]}}
        if method == "chat.postEphemeral":
            return {"ok": True, "message_ts": f"1700000001.{count:06d}"}
        if method == "users.info":
            user = self.users.get(str(params.get("user")))
            if user is None:
                return {"ok": False, "error": "user_not_found"}
            return {
                "ok": True,
                "user": {
                    "id": params["user"],
                    "team_id": TEAM,
                    "deleted": False,
                    "is_bot": False,
                    "is_email_confirmed": user["confirmed"],
                    "profile": {"email": user["email"]},
                },
            }
        return {"ok": False, "error": "unknown_method"}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _reply(
                self, status: int, body: dict[str, Any], headers: dict[str, str]
            ) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json; charset=utf-8")
                self.send_header("content-length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def _take(self, params: dict[str, Any]) -> None:
                method = urlparse(self.path).path.removeprefix("/api/")
                if self.headers.get("authorization") != f"Bearer {TOKEN}":
                    self._reply(200, {"ok": False, "error": "invalid_auth"}, {})
                    return
                with fake._lock:
                    queued = fake.failures.get(method)
                    failure = queued.pop(0) if queued else None
                if failure is not None:
                    with fake._lock:
                        fake.calls.append((method, {**params, "_failed": failure[0]}))
                    self._reply(failure[0], failure[2], failure[1])
                    return
                self._reply(200, fake._answer(method, params), {})

            def do_GET(self) -> None:
                query = parse_qs(urlparse(self.path).query)
                self._take({k: v[0] for k, v in query.items()})

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                if "json" in (self.headers.get("content-type") or ""):
                    params = json.loads(raw or b"{}")
                else:
                    params = {k: v[0] for k, v in parse_qs(raw.decode()).items()}
                for key in ("blocks", "view"):
                    if isinstance(params.get(key), str):
                        params[key] = json.loads(params[key])
                self._take(params)

            def log_message(self, *args: Any) -> None:
                pass

        return Handler


def signed(
    payload: dict[str, Any] | None = None,
    *,
    body: bytes | None = None,
    secret: str = SIGNING_SECRET,
    timestamp: int | None = None,
) -> tuple[bytes, dict[str, str]]:
    """Return an interaction's form body (``payload=<JSON>``) and Slack's signature headers."""
    if body is None:
        body = urlencode({"payload": json.dumps(payload)}).encode()
    stamp = str(int(time.time()) if timestamp is None else timestamp)
    signature = SignatureVerifier(secret).generate_signature(timestamp=stamp, body=body)
    return body, {
        "X-Slack-Request-Timestamp": stamp,
        "X-Slack-Signature": str(signature),
    }


def click(
    action_id: str, value: Any, *, user: str, channel: str = "", ts: str = ""
) -> dict[str, Any]:
    """Return a ``block_actions`` payload: ``user`` clicked button ``action_id`` on message ``ts``."""
    return {
        "type": "block_actions",
        "team": {"id": TEAM, "domain": "countersign"},
        "user": {"id": user, "team_id": TEAM},
        # Slack gives every click its own trigger id (so no two bodies are equal).
        "trigger_id": f"trigger-{user}-{action_id}-{next(_CLICKS)}",
        "container": {"type": "message", "channel_id": channel, "message_ts": ts},
        "channel": {"id": channel},
        "message": {"ts": ts},
        "actions": [
            {
                "type": "button",
                "action_id": action_id,
                "block_id": "actions",
                "value": str(value),
            }
        ],
    }


def submission(
    view: dict[str, Any], *, user: str, values: dict[str, Any]
) -> dict[str, Any]:
    """Return a ``view_submission`` payload: ``user`` sent modal ``view`` with ``values``.

    ``values`` maps a block id to the element's state (``{"type": ..., "value": ...}``).
    """
    return {
        "type": "view_submission",
        "team": {"id": TEAM},
        "user": {"id": user, "team_id": TEAM},
        "view": {
            "id": "V1",
            "callback_id": view["callback_id"],
            "private_metadata": view["private_metadata"],
            "state": {
                "values": {block: {"value": state} for block, state in values.items()}
            },
        },
    }
