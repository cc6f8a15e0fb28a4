"""A remote AG-UI agent that streams text slowly: a raw ASGI app for uvicorn.

``POST /`` with a ``RunAgentInput`` answers ``text/event-stream``:
``RUN_STARTED``, ``TEXT_MESSAGE_START``, N ``TEXT_MESSAGE_CONTENT`` deltas
(``"w<i> "``) S seconds apart, ``TEXT_MESSAGE_END``, ``RUN_FINISHED``. N and S
come from the last user message (``"deltas=120 delay=0.05"``), else the query
string, else 50 and 0.05.

    uvicorn tests.prod.slow_agent:app --port 8765
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from typing import Any
from urllib.parse import parse_qs


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    query = {
        k: v[0] for k, v in parse_qs(scope.get("query_string", b"").decode()).items()
    }
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    run_input = json.loads(body or b"{}")
    users = [m for m in run_input.get("messages", []) if m.get("role") == "user"]
    text = users[-1].get("content", "") if users else ""
    params = {**query, **dict(re.findall(r"(deltas|delay)=([0-9.]+)", str(text)))}
    deltas = int(params.get("deltas", 50))
    delay = float(params.get("delay", 0.05))
    thread_id, run_id = run_input.get("threadId", "t"), run_input.get("runId", "r")
    message_id = f"slow-{uuid.uuid4().hex[:12]}"
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/event-stream")],
        }
    )

    async def event(payload: dict[str, Any]) -> None:
        data = f"data: {json.dumps(payload)}\n\n".encode()
        await send({"type": "http.response.body", "body": data, "more_body": True})

    await event({"type": "RUN_STARTED", "threadId": thread_id, "runId": run_id})
    await event(
        {"type": "TEXT_MESSAGE_START", "messageId": message_id, "role": "assistant"}
    )
    for index in range(deltas):
        await asyncio.sleep(delay)
        await event(
            {
                "type": "TEXT_MESSAGE_CONTENT",
                "messageId": message_id,
                "delta": f"w{index} ",
            }
        )
    await event({"type": "TEXT_MESSAGE_END", "messageId": message_id})
    await event({"type": "RUN_FINISHED", "threadId": thread_id, "runId": run_id})
    await send({"type": "http.response.body", "body": b"", "more_body": False})
