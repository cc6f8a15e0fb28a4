"""WebSocket consumers: a thread's event stream, and the approval queue's changes.

``ws/threads/<threadId>/?after=<seq>`` sends the log rows after ``seq`` from the
database, then live ones, each carrying its ``seq``, with no gap and no duplicate
at the seam: the consumer joins the group before reading the log, drops anything
at or below the last ``seq`` it sent, and re-reads the log when it sees a gap or
when no doorbell rang for a while (the channel layer is at-most-once; the log is
the truth). Application notifications (a call's approval state changed) arrive as
``{"kind": "notification", ...}``; they carry no ``seq`` and are not AG-UI events.

``ws/approvals/`` sends ``{"kind": "snapshot", "approvals": [...]}`` (every pending
request) on connect, then ``{"kind": "notification", ...}`` for each change.

Refusals are sent as close codes after the handshake, so that browsers can read
them: 4400 bad ``after``, 4401 not authenticated, 4403 not allowed, 4404 thread
unknown or not visible to the user. Implements DC-02.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from approvals.models import ApprovalRequest
from approvals.services import APPROVALS_GROUP, approval_snapshot
from threads.conf import countersign_settings
from threads.logreader import log_after
from threads.realtime import register_server_loop, thread_group_name
from threads.selectors import thread_visible_to

CLOSE_BAD_REQUEST = 4400
CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404
APPROVAL_WATCH_PERMISSIONS = (
    "approvals.decide_approvalrequest",
    "approvals.view_approvalrequest",
)


@database_sync_to_async
def _visible_thread(user: Any, thread_id: str) -> Any:
    return thread_visible_to(user=user).filter(thread_id=thread_id).first()


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


class ThreadEventsConsumer(AsyncJsonWebsocketConsumer):
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
        if after is None:
            await _refuse(self, CLOSE_BAD_REQUEST)
            return
        self.last_seq = after
        self.lock = asyncio.Lock()
        self.last_doorbell = 0.0
        self.group = thread_group_name(self.thread.pk)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        await self.catch_up()
        self.poller = asyncio.create_task(self.poll())

    async def disconnect(self, code: int) -> None:
        poller = getattr(self, "poller", None)
        if poller is not None:
            poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await poller
        group = getattr(self, "group", None)
        if group is not None:
            await self.channel_layer.group_discard(group, self.channel_name)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if isinstance(content, dict) and content.get("type") == "resync":
            after = content.get("after")
            if isinstance(after, int) and after >= 0:
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
            for event in events:
                seq = event.get("seq", 0)
                if seq <= self.last_seq:
                    continue
                if seq != self.last_seq + 1:
                    gap = True
                    break
                await self.send_json(event)
                self.last_seq = seq
        if gap:
            await self.catch_up()

    async def thread_notification(self, message: dict[str, Any]) -> None:
        """Forward an application notification (not an AG-UI event; no ``seq``)."""
        await self.send_json({**message.get("payload", {}), "kind": "notification"})


@database_sync_to_async
def _may_watch_approvals(user: Any) -> bool:
    return any(user.has_perm(p) for p in APPROVAL_WATCH_PERMISSIONS)


@database_sync_to_async
def _pending_approvals() -> list[dict[str, Any]]:
    pending = (
        ApprovalRequest.objects.filter(status=ApprovalRequest.Status.PENDING)
        .select_related("tool_call", "thread", "decided_by")
        .order_by("requested_at", "id")
    )
    return [approval_snapshot(a) for a in pending]


class ApprovalsConsumer(AsyncJsonWebsocketConsumer):
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
        self.group = APPROVALS_GROUP
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        await self.send_json(
            {"kind": "snapshot", "approvals": await _pending_approvals()}
        )

    async def disconnect(self, code: int) -> None:
        group = getattr(self, "group", None)
        if group is not None:
            await self.channel_layer.group_discard(group, self.channel_name)

    async def approvals_changed(self, message: dict[str, Any]) -> None:
        """Forward a change of the queue as ``{"kind": "notification", ...}``."""
        await self.send_json({**message.get("payload", {}), "kind": "notification"})
