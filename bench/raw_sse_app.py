"""B1 SSE baseline: a raw ASGI app streaming one Redis Pub/Sub channel as SSE frames.

    uvicorn bench.raw_sse_app:app      # REDIS_URL from the environment

``GET /healthz`` answers 200 (the bench waits for it); ``GET /events?channel=C``
subscribes to Pub/Sub channel ``C``, sends a keep-alive comment once subscribed,
then every message published on ``C`` as ``id: <seq>`` / ``data: <message>`` until
a message whose ``type`` is ``RUN_FINISHED``. No framework, no database: the
floor under ``GET /agui/threads/<id>/events`` (docs/benchmarks.md, B1 SSE variant).
"""

from __future__ import annotations

import json
import os
from typing import Any
from urllib.parse import parse_qs

import redis.asyncio as aioredis

_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The ASGI application (HTTP only; lifespan is acknowledged)."""
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["path"] == "/healthz":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})
        return
    channel = parse_qs(scope["query_string"].decode()).get("channel", ["raw"])[0]
    client = aioredis.Redis.from_url(os.environ["REDIS_URL"])
    pubsub = client.pubsub()
    await pubsub.subscribe(channel)
    await send({"type": "http.response.start", "status": 200, "headers": _HEADERS})
    await send(
        {"type": "http.response.body", "body": b": keep-alive\n\n", "more_body": True}
    )
    try:
        async for message in pubsub.listen():
            if message["type"] != "message":
                continue
            data = message["data"].decode()
            seq = json.loads(data).get("seq", 0)
            frame = f"id: {seq}\ndata: {data}\n\n".encode()
            await send({"type": "http.response.body", "body": frame, "more_body": True})
            if '"RUN_FINISHED"' in data:
                break
        await send({"type": "http.response.body", "body": b""})
    finally:
        await pubsub.aclose()
        await client.aclose()
