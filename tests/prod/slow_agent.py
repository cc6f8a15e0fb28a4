"""A remote AG-UI agent that streams text slowly: a raw ASGI app for uvicorn.

``POST /?deltas=N&delay=S`` with a ``RunAgentInput`` answers ``text/event-stream``:
``RUN_STARTED``, ``TEXT_MESSAGE_START``, N ``TEXT_MESSAGE_CONTENT`` deltas
(``"w<i> "``) S seconds apart, ``TEXT_MESSAGE_END``, ``RUN_FINISHED``.

    uvicorn tests.prod.slow_agent:app --port 8765
"""

from __future__ import annotations

import asyncio
import json
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
    query = parse_qs(scope.get("query_string", b"").decode())
    deltas = int(query.get("deltas", ["50"])[0])
    delay = float(query.get("delay", ["0.05"])[0])
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    run_input = json.loads(body or b"{}")
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
