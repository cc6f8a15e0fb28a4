"""A stream's doorbell: its subscription to a group on the channel layer, outliving the broker.

Every live stream (the AG-UI SSE responses, :mod:`web.sse`; the WebSocket
consumers, :mod:`web.consumers`) learns of new log rows from the channel layer
and reads them from the log, which it also re-reads every ``SOCKET_POLL_SECONDS``
(the layer is at-most-once, STYLE.md 7). With Redis (``RedisPubSubChannelLayer``)
every layer call can fail while the broker is away: a channel cannot be
subscribed, a group cannot be joined. :class:`Doorbell` makes each of those calls
with a timeout, and a failure is never raised: the stream goes on polling the log,
and the doorbell tries again every ``SOCKET_POLL_SECONDS`` until the broker
answers, then rings again. A subscription made before the outage is restored by
the Redis client itself when it reconnects. Implements DC-02, FT-06.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any, Final

from channels.layers import get_channel_layer

from core.conf import countersign_settings

logger = logging.getLogger(__name__)

#: Seconds one channel-layer call may take before it counts as failed.
LAYER_TIMEOUT: Final = 2.0


class Doorbell:
    """One stream's channel and group on the channel layer; no method raises a broker error.

    :meth:`join` names the group (and tries to join it at once);
    :meth:`receive` returns the next channel message, or ``None`` once its
    ``timeout`` passed; :meth:`leave` gives the subscription up. While the layer
    cannot be reached, :meth:`receive` waits out its timeout (the caller reads the
    log meanwhile) and tries to subscribe again every ``SOCKET_POLL_SECONDS``.
    Without a channel layer configured it only waits.
    """

    def __init__(self, alias: str = "default") -> None:
        self.layer: Any = get_channel_layer(alias)
        self.channel: str | None = None
        self.group: str | None = None
        self.joined = False
        self._pending: asyncio.Future[dict[str, Any]] | None = None
        self._retry_at = 0.0
        self._down = False

    @property
    def ready(self) -> bool:
        """Whether the channel exists and the group, if one was named, is joined."""
        return self.channel is not None and (self.group is None or self.joined)

    async def open(self) -> bool:
        """Create this stream's channel now if the layer answers; return :attr:`ready`."""
        return await self._connect()

    async def join(self, group: str) -> bool:
        """Join ``group`` (now if the layer answers, else later); return :attr:`ready`."""
        self.group = group
        self.joined = False
        return await self._connect()

    async def receive(self, timeout: float | None) -> dict[str, Any] | None:
        """Return the next message on this stream's channel, or ``None`` after ``timeout`` s.

        ``timeout=None`` waits until a message comes, however long the broker is
        away. Never raises a broker error.
        """
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                return None
            if self.layer is None:
                await asyncio.sleep(remaining if remaining is not None else 3600)
                continue
            if not self.ready:
                if loop.time() >= self._retry_at:
                    await self._connect()
                if not self.ready:
                    pause = max(self._retry_at - loop.time(), 0.05)
                    await asyncio.sleep(
                        pause if remaining is None else min(pause, remaining)
                    )
                    continue
            assert self.channel is not None
            if self._pending is None:
                # One receive for as long as it takes, never cancelled by a
                # timeout: cancelling a Redis layer's receive unsubscribes the
                # channel, and the next one subscribes it again.
                self._pending = asyncio.ensure_future(self.layer.receive(self.channel))
            pending = self._pending
            done, _ = await asyncio.wait({pending}, timeout=remaining)
            if not done:
                return None
            if self._pending is pending:
                self._pending = None
            if pending.cancelled():  # left (leave()): the stream is ending
                raise asyncio.CancelledError
            try:
                return pending.result()
            except Exception as error:  # any broker failure: the log is the truth
                self._failed("receive", error)

    async def leave(self) -> None:
        """Stop receiving and leave the group; never raises."""
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.cancel()
            with contextlib.suppress(BaseException):
                await pending
        if self.joined and self.group is not None and self.channel is not None:
            self.joined = False
            try:
                await asyncio.wait_for(
                    self.layer.group_discard(self.group, self.channel), LAYER_TIMEOUT
                )
            except Exception as error:  # the broker forgets the subscription anyway
                logger.debug("could not leave %s (%r)", self.group, error)

    async def _connect(self) -> bool:
        if self.layer is None:
            return False
        try:
            if self.channel is None:
                self.channel = await asyncio.wait_for(
                    self.layer.new_channel(), LAYER_TIMEOUT
                )
            if self.group is not None and not self.joined:
                await asyncio.wait_for(
                    self.layer.group_add(self.group, self.channel), LAYER_TIMEOUT
                )
                self.joined = True
        except Exception as error:  # any broker failure: poll the log meanwhile
            self._failed("subscribe", error)
            return False
        if self._down:
            self._down = False
            logger.info("channel layer reachable again; %s rings again", self.group)
        return True

    def _failed(self, what: str, error: Exception) -> None:
        self.joined = False
        self._retry_at = asyncio.get_running_loop().time() + float(
            countersign_settings.SOCKET_POLL_SECONDS
        )
        if not self._down:
            self._down = True
            logger.warning(
                "channel layer unreachable (%s %s: %r); following the log by polling",
                what,
                self.group,
                error,
            )
