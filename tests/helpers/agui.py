"""AG-UI over HTTP against a live server: SSE parsing, reading until a condition, remote agents.

Used by the live AG-UI tests (``tests/threads/test_agui_*.py``) with the ``live``
fixture; the refund flow's expected event types are :data:`REFUND_RUN_TYPES`.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from agentcore.events import event_from_dict
from approvals.models import ApprovalRequest
from tests.helpers.live import token_for, wait_until


def parse_stream(raw: bytes) -> tuple[list[dict[str, Any]], list[str], list[int]]:
    """Split an SSE body into event payloads, comment lines and ``id:`` values.

    Fails on a CR anywhere (AG-UI framing is LF only) and on a frame with more than
    one ``data:`` line (one event per frame).
    """
    text = raw.decode("utf-8")
    assert "\r" not in text, "SSE framing must use LF line endings only"
    assert text.endswith("\n\n"), (
        f"the stream must end at a frame boundary: {text[-80:]!r}"
    )
    events: list[dict[str, Any]] = []
    comments: list[str] = []
    ids: list[int] = []
    for frame in text[:-2].split("\n\n"):
        data = [line for line in frame.split("\n") if line.startswith("data: ")]
        comments += [line for line in frame.split("\n") if line.startswith(":")]
        ids += [int(line[4:]) for line in frame.split("\n") if line.startswith("id: ")]
        assert len(data) <= 1, f"one event per frame: {frame!r}"
        if data:
            event = event_from_dict(json.loads(data[0][6:]))
            events.append(
                event.model_dump(mode="json", by_alias=True, exclude_none=True)
            )
    return events, comments, ids


async def read_until(
    response: httpx.Response, done: Any, *, timeout: float, what: str, server: Any
) -> bytes:
    """Read a streaming response until ``done(events)``; fail with the server log."""
    buffer = b""
    deadline = time.monotonic() + timeout
    iterator = response.aiter_bytes()
    while True:
        events = parse_stream(buffer)[0] if buffer.endswith(b"\n\n") else []
        if done(events):
            return buffer
        if time.monotonic() > deadline:
            pytest.fail(
                f"timed out after {timeout}s waiting for {what}; got {buffer!r}\n"
                f"{server.logs()}"
            )
        try:
            buffer += await anext(iterator)
        except StopAsyncIteration:
            pytest.fail(f"stream ended before {what}; got {buffer!r}")


def bearer(token: str) -> dict[str, str]:
    """Return the headers of an SSE request authenticated with ``token``."""
    return {"Authorization": f"Token {token}", "Accept": "text/event-stream"}


REFUND_RUN_TYPES = [
    "RUN_STARTED",
    "TOOL_CALL_START",
    "TOOL_CALL_ARGS",
    "TOOL_CALL_END",
    "TOOL_CALL_RESULT",
    "TOOL_CALL_START",
    "TOOL_CALL_ARGS",
    "TOOL_CALL_END",
    "RUN_FINISHED",
]


REFUND = "refund order A-1001 25.00"


@contextmanager
def agents_env(agents: dict[str, Any]) -> Iterator[None]:
    """Add ``agents`` to ``COUNTERSIGN_AGENTS_JSON`` for processes started meanwhile."""
    previous = os.environ.get("COUNTERSIGN_AGENTS_JSON")
    os.environ["COUNTERSIGN_AGENTS_JSON"] = json.dumps(
        {**json.loads(previous or "{}"), **agents}
    )
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("COUNTERSIGN_AGENTS_JSON", None)
        else:
            os.environ["COUNTERSIGN_AGENTS_JSON"] = previous


def remote_agents_config(url: str) -> dict[str, Any]:
    """Return the ``COUNTERSIGN_AGENTS`` entries of the two LangGraph agents at ``url``."""
    return {
        name: {
            "provider": "agui_http",
            "url": f"{url}{path}",
            "toolsets": ["demo.tools.DEMO_TOOLS"],
            "options": {"timeout": 30},
        }
        for name, path in (("lg", "/streaming"), ("lg_snapshot", "/snapshot-only"))
    }


def approver_token(django_user_model: Any) -> str:
    """Return the Token of a user who may decide calls and authorize refunds."""
    from django.contrib.auth.models import Permission

    approver = django_user_model.objects.create_user(
        username="ada-lg", password="pw-ada-1"
    )
    approver.user_permissions.add(
        Permission.objects.get(codename="decide_approvalrequest"),
        Permission.objects.get(codename="add_refund"),
    )
    return token_for(approver)


async def approve_refund(
    http: httpx.AsyncClient, thread_id: str, token: str, server: Any
) -> None:
    """Wait until the thread's refund_order call awaits approval; approve it as ``token``."""
    pending = ApprovalRequest.objects.filter(
        thread__client_thread_id=thread_id,
        tool_call__name="refund_order",
        status="pending",
    )
    await wait_until(pending.exists, what="the refund approval", server=server)
    approval = await pending.aget()
    response = await http.post(
        f"/api/approvals/{approval.pk}/approve/",
        json={},
        headers={"Authorization": f"Token {token}"},
    )
    assert response.status_code == 200, response.text


async def follow_raw(
    http: httpx.AsyncClient, thread_id: str, token: str, runs: int, server: Any
) -> bytes:
    """Return the thread's follow stream from its first event until ``runs`` runs ended."""
    async with http.stream(
        "GET", f"/agui/threads/{thread_id}/events?after=0", headers=bearer(token)
    ) as follow:
        assert follow.status_code == 200
        assert follow.headers["content-type"] == "text/event-stream"
        return await read_until(
            follow,
            lambda evs: (
                sum(e["type"] in ("RUN_FINISHED", "RUN_ERROR") for e in evs) >= runs
            ),
            timeout=60,
            what=f"{runs} ended runs",
            server=server,
        )
