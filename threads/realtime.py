"""Sending to the channel layer from synchronous code, after commit.

The channel layer is a doorbell (at-most-once); failures are logged and swallowed,
because every consumer can catch up from the database log. With the in-memory
layer, messages are sent on the server's event loop (registered by the embedded
executor) so that a worker thread never touches another loop's queues.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

logger = logging.getLogger(__name__)

_server_loop: asyncio.AbstractEventLoop | None = None


def register_server_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Remember the ASGI server's event loop, for sends from worker threads."""
    global _server_loop
    _server_loop = loop


def group_send(group: str, message: dict[str, Any]) -> None:
    """Send ``message`` to ``group``; never raises (the log is the truth)."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        loop = _server_loop
        if loop is not None and loop.is_running():
            try:
                running = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if running is loop:
                loop.create_task(layer.group_send(group, message))
                return
            future = asyncio.run_coroutine_threadsafe(layer.group_send(group, message), loop)
            future.result(timeout=5)
            return
        async_to_sync(layer.group_send)(group, message)
    except Exception:  # noqa: BLE001 - a lost doorbell is recovered from the log
        logger.warning("group_send to %s failed; clients will catch up from the log", group,
                       exc_info=True)
