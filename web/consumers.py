"""WebSocket consumers: a thread's event stream, and the approval queue's changes.

``ws/threads/<threadId>/?after=<seq>`` sends the log rows after ``seq`` from the
database, then live ones, each carrying its ``seq``, with no gap and no duplicate
at the seam: the consumer joins the group before reading the log, drops anything
at or below the last ``seq`` it sent, and re-reads the log when it sees a gap or
when no doorbell rang for a while (the channel layer is at-most-once; the log is
the truth). Application notifications (a call's approval state changed) arrive as
``{"kind": "notification", ...}``; they carry no ``seq`` and are not AG-UI events.

``?preview=1`` also asks for previews (B1, "show first, persist in batches"):
``{"kind": "preview", "runId", "previews": [{"p", "event": {...}}, ...]}`` for
the events a recording worker validated but has not written yet (usually one per
frame; several when they were waiting together), and after each committed batch that
confirms some ``{"kind": "confirmed", "runId", "through": <p>}``: the previews
``p <= through`` of that run are now log rows (sent just before, with their
``seq``, or earlier). A preview is not a log row and has no ``seq``; it may be
lost, and one never confirmed (a worker died before its write) is dropped by the
client at the run's end or after 5 seconds (docs/architecture.md "Previews").
Without ``preview=1`` (or with ``preview=0``) a socket gets only log rows and
notifications. The AG-UI SSE endpoints never send previews.

``ws/approvals/`` sends ``{"kind": "snapshot", "approvals": [...]}`` (every pending
request) on connect, then ``{"kind": "notification", ...}`` for each change.

Refusals are sent as close codes after the handshake, so that browsers can read
them: 4400 bad ``after`` or ``preview``, 4401 not authenticated, 4403 not allowed, 4404 thread
unknown or not visible to the user, or no socket at that path
(:class:`NotFoundConsumer`), 4503 the live channel (Redis) is unavailable and the
socket cannot be served without it (the approval queue; reconnect later).

Frames from the client are JSON text of at most :data:`MAX_FRAME_CHARS` characters,
checked like every other input (:func:`threads.validation.parse_json`). A binary
frame, a frame that is not JSON, nests too deep or is not a known message gets an
error frame ``{"kind": "error", "type": "<code>", "detail": "<sentence>"}`` and the
socket stays open; nothing a client sends drops it abnormally.

While the channel layer is unreachable (Redis down) a thread socket is still
accepted and served from the log: without doorbells it re-reads the log every
``SOCKET_POLL_SECONDS``, and it joins its group again once Redis is back
(:mod:`web.doorbell`). Implements DC-02, SEC-06.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.exceptions import StopConsumer
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from channels.utils import await_many_dispatch

from approvals.models import ApprovalRequest
from approvals.services import APPROVALS_GROUP, approval_snapshot
from core import metrics
from core.conf import countersign_settings
from core.types import AnyUser
from threads.logreader import log_after
from threads.realtime import (
    MESSAGE_ID_KEY,
    PREVIEW_TYPE,
    register_server_loop,
    thread_group_name,
)
from threads.selectors import thread_by_agui_id
from threads.validation import JSONInputError, parse_json
from web.doorbell import Doorbell

if TYPE_CHECKING:
    from threads.models import Thread

logger = logging.getLogger(__name__)

CLOSE_BAD_REQUEST = 4400
CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404
CLOSE_UNAVAILABLE = 4503
#: Longest client frame read, in characters (client messages are a few bytes).
MAX_FRAME_CHARS: Final = 64 * 1024
APPROVAL_WATCH_PERMISSIONS = (
    "approvals.decide_approvalrequest",
    "approvals.view_approvalrequest",
)


class FrameCache:
    """The text frames encoded from recent channel messages, shared by a process's sockets.

    The channel layer hands every socket of a group its own copy of a message
    (Redis pub/sub decodes the payload once per socket, the in-memory layer copies
    it), so identity cannot tell that two sockets hold the same message; the id
    :func:`threads.realtime.message_id` adds to every message can. A frame is keyed
    by that id and a part name (``"preview"``, ``"confirmed"``, ``"row:<i>"`` for
    the i-th event...); it is the JSON text of a dict that every socket would
    build alike from that message, so each is encoded once per process instead of
    once per socket (B1: encoding was the largest cost after the socket writes).
    Which frames a socket sends (``seq`` filtering, gaps, ``preview=0``) is still
    decided per socket. The last :attr:`size` messages are kept (a message reaches
    all of a process's sockets within one pass of its loop); ``encodings`` counts
    the frames encoded.
    """

    def __init__(self, size: int = 256) -> None:
        self.size = size
        self.frames: dict[str, dict[str, str]] = {}
        self.encodings = 0

    def text(self, message: dict[str, Any], part: str, build: Callable[[], Any]) -> str:
        """Return the JSON text of ``build()`` for ``part`` of ``message``, encoded once.

        ``build`` makes the frame's object from the message; it and the encoding
        (``json.dumps``, as ``send_json``) run only the first time the part of a
        message with this id is asked for. A message without an id (not sent by
        threads.realtime) is encoded every time.
        """
        mid = message.get(MESSAGE_ID_KEY)
        if not isinstance(mid, str):
            self.encodings += 1
            return json.dumps(build())
        parts = self.frames.get(mid)
        if parts is None:
            if len(self.frames) >= self.size:
                # Oldest first (dicts keep insertion order).
                del self.frames[next(iter(self.frames))]
            parts = self.frames[mid] = {}
        text = parts.get(part)
        if text is None:
            self.encodings += 1
            text = parts[part] = json.dumps(build())
        return text


#: This process's :class:`FrameCache` (its sockets run on one event loop).
frame_cache = FrameCache()


@database_sync_to_async
def _visible_thread(user: AnyUser, thread_id: str) -> Thread | None:
    return thread_by_agui_id(user=user, agui_id=thread_id)


async def _refuse(consumer: AsyncJsonWebsocketConsumer, code: int) -> None:
    """Complete the handshake, then close with ``code`` (a browser sees the code).

    Closing before ``accept`` would make the server answer the handshake with HTTP
    403, and a browser's ``WebSocket`` cannot tell why.
    """
    await consumer.accept()
    await consumer.close(code=code)


def _query_int(scope: dict[str, Any], name: str, default: int = 0) -> int | None:
    values = parse_qs(scope.get("query_string", b"").decode("latin-1")).get(name)
    if not values:
        return default
    try:
        value = int(values[0])
    except ValueError:
        return None
    return value if value >= 0 else None


class CountersignConsumer(AsyncJsonWebsocketConsumer):
    """A JSON consumer that survives its client and its channel layer.

    - The channel layer is reached through a :class:`web.doorbell.Doorbell`: when
      it is unreachable, at the handshake or later, the socket is served from the
      log (polling) rather than failing with HTTP 500 or an ASGI exception, and
      joins its group again once the broker is back.
    - Client frames are parsed by :func:`threads.validation.parse_json`; anything
      unreadable gets an error frame (:meth:`send_error`).
    """

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        # AsyncConsumer.__call__, with the channel layer behind a Doorbell: a
        # broker that is away (at the handshake or later) is never an error.
        self.scope = scope
        self.base_send = send
        self.bell = Doorbell(self.channel_layer_alias)
        self.channel_layer = self.bell.layer
        sources = [receive]
        if self.bell.layer is not None:
            await self.bell.open()
            sources.append(self._channel_receive)
        try:
            with contextlib.suppress(StopConsumer):
                await await_many_dispatch(sources, self.dispatch)
        finally:
            if getattr(self, "counted", False):
                metrics.OPEN_STREAMS.labels("websocket").dec()

    async def accept(self, subprotocol: str | None = None, headers: Any = None) -> None:
        """Accept the handshake and count the socket as open until it ends."""
        await super().accept(subprotocol=subprotocol, headers=headers)
        if not getattr(self, "counted", False):
            self.counted = True
            metrics.OPEN_STREAMS.labels("websocket").inc()

    async def _channel_receive(self) -> dict[str, Any]:
        message = await self.bell.receive(None)
        assert message is not None  # no timeout: only a message returns
        return message

    async def join_group(self, group: str) -> bool:
        """Join ``group`` on the channel layer; return whether that worked now.

        When it did not (the broker is away) the socket joins once it is back.
        """
        joined = await self.bell.join(group)
        if not joined:
            logger.warning("socket: could not join %s yet; following the log", group)
        return joined

    async def leave_group(self) -> None:
        """Leave the group joined by :meth:`join_group`, if any; never raises."""
        await self.bell.leave()

    async def send_shared(
        self, message: dict[str, Any], part: str, build: Callable[[], Any]
    ) -> None:
        """Send the JSON frame ``build()`` makes from channel ``message``, encoded once per process.

        ``build`` must depend on the message only, never on this socket: every
        socket of the process that sends ``part`` of this message sends the same
        text (:class:`FrameCache`).
        """
        await self.send(text_data=frame_cache.text(message, part, build))

    async def send_error(self, type_: str, detail: str) -> None:
        """Send ``{"kind": "error", "type", "detail"}`` to the client."""
        await self.send_json({"kind": "error", "type": type_, "detail": detail})

    async def receive(
        self,
        text_data: str | None = None,
        bytes_data: bytes | None = None,
        **kwargs: Any,
    ) -> None:
        """Parse one client frame; answer an unreadable one with an error frame."""
        if text_data is None:
            await self.send_error(
                "binary_frame", "frames are JSON text; binary frames are not read"
            )
            return
        if len(text_data) > MAX_FRAME_CHARS:
            await self.send_error(
                "frame_too_large",
                f"frames are at most {MAX_FRAME_CHARS} characters; this one had "
                f"{len(text_data)}",
            )
            return
        try:
            content = parse_json(text_data)
        except JSONInputError as error:
            await self.send_error("invalid_json", str(error))
            return
        await self.receive_json(content, **kwargs)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        """Handle a parsed client message; by default none is known."""
        await self.send_error(
            "unknown_message", "this socket takes no messages from the client"
        )


class NotFoundConsumer(CountersignConsumer):
    """Any ``ws/`` path without a socket: accepted, then closed with 4404."""

    async def connect(self) -> None:
        await _refuse(self, CLOSE_NOT_FOUND)


class ThreadEventsConsumer(CountersignConsumer):
    """Stream one thread's AG-UI events to an operator's browser, resumable by ``seq``.

    Client messages: ``{"type": "resync", "after": <seq>}`` asks for everything
    after ``seq`` again (after a gap the client noticed).
    """

    async def connect(self) -> None:
        register_server_loop(asyncio.get_running_loop())
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await _refuse(self, CLOSE_UNAUTHENTICATED)
            return
        thread_id = self.scope["url_route"]["kwargs"]["thread_id"]
        self.thread = await _visible_thread(user, thread_id)
        if self.thread is None:
            await _refuse(self, CLOSE_NOT_FOUND)
            return
        after = _query_int(self.scope, "after")
        preview = _query_int(self.scope, "preview")
        if after is None or preview not in (0, 1):
            await _refuse(self, CLOSE_BAD_REQUEST)
            return
        self.last_seq = after
        self.preview = preview == 1
        self.lock = asyncio.Lock()
        self.last_doorbell = 0.0
        # Without the channel layer the socket still follows the log, by polling.
        await self.join_group(thread_group_name(self.thread.pk))
        await self.accept()
        await self.catch_up()
        self.poller = asyncio.create_task(self.poll())

    async def disconnect(self, code: int) -> None:
        poller = getattr(self, "poller", None)
        if poller is not None:
            poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await poller
        await self.leave_group()

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        """Handle ``{"type": "resync", "after": <seq>}``; anything else gets an error frame."""
        if not (isinstance(content, dict) and content.get("type") == "resync"):
            await self.send_error(
                "unknown_message",
                'the only message is {"type": "resync", "after": <seq>}',
            )
            return
        after = content.get("after")
        if isinstance(after, bool) or not isinstance(after, int) or after < 0:
            await self.send_error(
                "invalid_after", f"after must be a sequence number >= 0, not {after!r}"
            )
            return
        async with self.lock:
            self.last_seq = min(self.last_seq, after)
        await self.catch_up()

    async def catch_up(self) -> None:
        """Send every log row after ``last_seq``, in order."""
        async with self.lock:
            async for row in log_after(thread=self.thread, after=self.last_seq):
                await self.send_json(row.as_wire())
                self.last_seq = row.seq

    async def poll(self) -> None:
        """Re-read the log when no doorbell rang for a while: a lost one costs latency only.

        Sockets that hear doorbells skip the read, and the interval is jittered, so
        many idle sockets do not query the database in lockstep.
        """
        interval = float(countersign_settings.SOCKET_POLL_SECONDS)
        while True:
            await asyncio.sleep(interval * random.uniform(0.8, 1.2))
            if time.monotonic() - self.last_doorbell < interval:
                continue
            await self.catch_up()

    async def thread_events(self, message: dict[str, Any]) -> None:
        """Handle a doorbell carrying freshly committed events."""
        self.last_doorbell = time.monotonic()
        events = message.get("events", [])
        async with self.lock:
            gap = False
            for index, event in enumerate(events):
                seq = event.get("seq", 0)
                if seq <= self.last_seq:
                    continue
                if seq != self.last_seq + 1:
                    gap = True
                    break
                await self.send_shared(message, f"row:{index}", event.copy)
                self.last_seq = seq
        if gap:
            await self.catch_up()
        through = message.get("previewedThrough")
        if self.preview and through is not None:
            # After the rows (or the catch-up that sent them): the client drops
            # the previews they stand for.
            await self.send_shared(
                message,
                "confirmed",
                lambda: {
                    "kind": "confirmed",
                    "runId": message.get("runId"),
                    "through": through,
                },
            )

    async def dispatch(self, message: dict[str, Any]) -> None:
        """Dispatch ``message``; a preview skips channels' per-message DB cleanup.

        ``AsyncConsumer.dispatch`` closes stale database connections (a hop to a
        worker thread) before every handler; previews, one per streamed event and
        socket, touch no database, and the hop was most of their cost (B1).
        """
        if message.get("type") == PREVIEW_TYPE:
            await self.thread_preview(message)
            return
        await super().dispatch(message)

    async def thread_preview(self, message: dict[str, Any]) -> None:
        """Forward previews (events not written yet) to a socket that asked for them.

        One frame per channel message, with every preview it carries: previews
        waiting together were merged by the publisher (a backlog), and a write
        per event and socket was most of a busy server's time (B1).
        """
        if not self.preview:
            return
        await self.send_shared(
            message,
            "preview",
            lambda: {
                "kind": "preview",
                "runId": message.get("runId"),
                "previews": message.get("previews", []),
            },
        )

    async def thread_notification(self, message: dict[str, Any]) -> None:
        """Forward an application notification (not an AG-UI event; no ``seq``)."""
        await self.send_shared(
            message,
            "notification",
            lambda: {**message.get("payload", {}), "kind": "notification"},
        )


@database_sync_to_async
def _may_watch_approvals(user: AnyUser) -> bool:
    return any(user.has_perm(p) for p in APPROVAL_WATCH_PERMISSIONS)


@database_sync_to_async
def _pending_approvals() -> list[dict[str, Any]]:
    pending = (
        ApprovalRequest.objects.filter(status=ApprovalRequest.Status.PENDING)
        .select_related("tool_call", "thread", "decided_by")
        .order_by("requested_at", "id")
    )
    return [approval_snapshot(a) for a in pending]


class ApprovalsConsumer(CountersignConsumer):
    """Stream the approval queue to operators: a snapshot, then every change.

    Allowed for users holding ``approvals.decide_approvalrequest`` or
    ``approvals.view_approvalrequest`` (4403 otherwise, 4401 when anonymous). The
    consumer joins the ``approvals`` group before reading the snapshot, so no change
    falls between the two; a change may show in both, keyed by the request's ``id``.
    """

    async def connect(self) -> None:
        register_server_loop(asyncio.get_running_loop())
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await _refuse(self, CLOSE_UNAUTHENTICATED)
            return
        if not await _may_watch_approvals(user):
            await _refuse(self, CLOSE_FORBIDDEN)
            return
        joined = await self.join_group(APPROVALS_GROUP)
        await self.accept()
        await self.send_json(
            {"kind": "snapshot", "approvals": await _pending_approvals()}
        )
        if not joined:
            # No change would reach this socket: say so, so the client reconnects
            # rather than showing a queue that silently stops updating.
            await self.close(code=CLOSE_UNAVAILABLE)

    async def disconnect(self, code: int) -> None:
        await self.leave_group()

    async def approvals_changed(self, message: dict[str, Any]) -> None:
        """Forward a change of the queue as ``{"kind": "notification", ...}``."""
        await self.send_shared(
            message,
            "notification",
            lambda: {**message.get("payload", {}), "kind": "notification"},
        )
