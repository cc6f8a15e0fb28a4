"""Baseline server: a raw ``websockets`` server fanning out one Redis Pub/Sub channel.

    python -m bench.raw_ws_server PORT REDIS_URL CHANNEL

Every WebSocket client receives every message published on CHANNEL, as is; one
subscription per process, fanned out in memory (like the PubSub channel layer).
"""

from __future__ import annotations

import asyncio
import sys

import redis.asyncio as aioredis
from websockets.asyncio.server import ServerConnection, broadcast, serve


async def main(port: int, url: str, channel: str) -> None:
    clients: set[ServerConnection] = set()

    async def handler(socket: ServerConnection) -> None:
        clients.add(socket)
        try:
            await socket.wait_closed()
        finally:
            clients.discard(socket)

    client = aioredis.Redis.from_url(url)
    pubsub = client.pubsub()
    await pubsub.subscribe(channel)
    async with serve(handler, "127.0.0.1", port, compression=None, max_queue=None):
        print("ready", flush=True)
        async for message in pubsub.listen():
            if message["type"] == "message":
                broadcast(clients, message["data"].decode())


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), sys.argv[2], sys.argv[3]))
