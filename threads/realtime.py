"""Sending to the channel layer from synchronous code, after commit.

The channel layer is a doorbell (at-most-once); failures are logged and swallowed,
because every consumer can catch up from the database log (STYLE.md 7).

Where a send runs matters:

- In a server process, consumers wait on the server's event loop. The in-memory
  layer's queues belong to that loop and are not thread-safe, so a send from a
  worker thread (the embedded pool) must run *on* that loop, or the waiting
  consumer is not woken until something else wakes the loop (its poll timer).
  Consumers and SSE streams register the loop with :func:`register_server_loop`;
  sends are then handed to it with ``call_soon_threadsafe`` and never waited for.
- Elsewhere (a Celery worker, a management command) sends go to one long-lived
  publisher thread with its own loop, so the Redis layer keeps one connection per
  process instead of opening one per send.

Either way sends leave in the order they were made (each loop runs them FIFO, one
at a time), so clients normally see ``seq`` in order; a client that sees a gap
re-reads the log.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import threading
import time
import uuid
from collections.abc import Coroutine, Sequence
from typing import Any

from channels.layers import get_channel_layer

from threads.models import Event

logger = logging.getLogger(__name__)

#: Sends waiting for the publisher thread beyond this are dropped (logged).
MAX_PENDING = 10_000
#: Most queued sends the publisher takes in one pass (consecutive previews merge).
MAX_BATCH = 500
#: Seconds the publisher waits after a preview for more to merge with it, while
#: a stream is in progress (:data:`PREVIEW_STREAM_GAP_SECONDS`).
PREVIEW_LINGER_SECONDS = 0.003
#: A preview following the previous one sent by less than this is part of a
#: stream and lingers; a lone one (the first of a stream, or after a pause) is
#: sent at once, since nothing is likely to come to merge with it.
PREVIEW_STREAM_GAP_SECONDS = 0.010
#: The channel-layer message type of previews (:func:`publish_preview`).
PREVIEW_TYPE = "thread.preview"
#: The key of the id every channel message sent from here carries (:func:`message_id`).
MESSAGE_ID_KEY = "mid"

_server_loop: asyncio.AbstractEventLoop | None = None


def register_server_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Remember the ASGI server's event loop, for sends from worker threads."""
    global _server_loop
    _server_loop = loop


def server_loop() -> asyncio.AbstractEventLoop | None:
    """Return the registered server loop while it is running, else ``None``."""
    loop = _server_loop
    if loop is not None and loop.is_running() and not loop.is_closed():
        return loop
    return None


class _Publisher:
    """One daemon thread running an event loop that performs sends in order."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.loop = asyncio.new_event_loop()
        self.queue: asyncio.Queue[tuple[str, dict[str, Any]]] | None = None
        self.ready = threading.Event()
        self.pending = 0
        self.lock = threading.Lock()
        self.thread = threading.Thread(
            target=self._main, name="countersign-publisher", daemon=True
        )
        self.thread.start()
        self.ready.wait(5)

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.queue = asyncio.Queue()
        self.loop.call_soon(self.ready.set)
        self.loop.run_until_complete(self._drain())

    async def _drain(self) -> None:
        assert self.queue is not None
        last_preview = -1e9
        while True:
            batch = [await self.queue.get()]
            if batch[0][1].get("type") == PREVIEW_TYPE:
                now = time.monotonic()
                linger = preview_linger(now - last_preview)
                last_preview = now
                if linger:
                    await asyncio.sleep(linger)
            # Whatever else is waiting goes in the same pass, consecutive previews
            # merged: sends cost a broker round trip each, so a backlog (a fast
            # stream) is cleared in few sends.
            while len(batch) < MAX_BATCH and not self.queue.empty():
                batch.append(self.queue.get_nowait())
            with self.lock:
                self.pending -= len(batch)
            for group, message in coalesce_previews(batch):
                await _send(group, message)

    def submit(self, group: str, message: dict[str, Any]) -> None:
        with self.lock:
            if self.pending >= MAX_PENDING:
                logger.warning("publisher backlog full; doorbell for %s dropped", group)
                return
            self.pending += 1
        assert self.queue is not None
        self.loop.call_soon_threadsafe(self.queue.put_nowait, (group, message))


def preview_linger(since_previous: float) -> float:
    """Return the seconds a preview waits for more to merge with it (0: none).

    ``since_previous`` is the seconds since the previous preview this publisher
    took. In a stream (closer than :data:`PREVIEW_STREAM_GAP_SECONDS`) the next
    event is usually a millisecond away: waiting :data:`PREVIEW_LINGER_SECONDS`
    lets one send, and one frame per socket, carry several (every send and frame
    costs the server a write; without it B1's paced p99 nearly doubled). A lone
    preview (a stream's first, or after a pause) has nothing to wait for and
    leaves at once.
    """
    if since_previous < PREVIEW_STREAM_GAP_SECONDS:
        return PREVIEW_LINGER_SECONDS
    return 0.0


def coalesce_previews(
    batch: list[tuple[str, dict[str, Any]]],
) -> list[tuple[str, dict[str, Any]]]:
    """Return ``batch`` in order with consecutive previews of one group and run merged.

    A merged preview message carries the ``previews`` lists of its parts, in order;
    anything else (a doorbell, a notification) is a boundary nothing crosses.
    """
    out: list[tuple[str, dict[str, Any]]] = []
    for group, message in batch:
        if message.get("type") != PREVIEW_TYPE:
            out.append((group, message))
            continue
        if out:
            last_group, last = out[-1]
            if (
                last_group == group
                and last.get("type") == PREVIEW_TYPE
                and last.get("runId") == message.get("runId")
            ):
                last["previews"].extend(message["previews"])
                continue
        # A copy with its own list: merging extends it in place (one copy per
        # merged message, not one per preview), never the caller's message.
        out.append((group, {**message, "previews": list(message["previews"])}))
    return out


_publisher: _Publisher | None = None
_publisher_lock = threading.Lock()


def _get_publisher() -> _Publisher:
    global _publisher
    with _publisher_lock:
        if _publisher is None or _publisher.pid != os.getpid():
            _publisher = _Publisher()
        return _publisher


_id_pid = -1
_id_prefix = ""
_id_counter = itertools.count(1)


def message_id() -> str:
    """Return an id no other channel message sent by any process carries.

    ``"<random per-process token>.<counter>"``: every socket of a server process
    that receives one message sees the same id, so a consumer can encode the
    message's frames once for all of them (web.consumers ``FrameCache``).
    A forked process draws its own token.
    """
    global _id_pid, _id_prefix
    if _id_pid != os.getpid():
        _id_pid, _id_prefix = os.getpid(), uuid.uuid4().hex[:16]
    return f"{_id_prefix}.{next(_id_counter)}"


async def _send(group: str, message: dict[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        await layer.group_send(group, {**message, MESSAGE_ID_KEY: message_id()})
    except Exception:
        logger.warning(
            "group_send to %s failed; clients will catch up from the log",
            group,
            exc_info=True,
        )


_tasks: set[asyncio.Task[None]] = set()


def _spawn(
    loop: asyncio.AbstractEventLoop, coroutine: Coroutine[Any, Any, None]
) -> None:
    """Start ``coroutine`` on ``loop`` (called on that loop), keeping it referenced."""
    task = loop.create_task(coroutine)
    _tasks.add(task)
    task.add_done_callback(_tasks.discard)


def group_send(group: str, message: dict[str, Any]) -> None:
    """Send ``message`` to ``group`` without waiting; never raises (the log is the truth)."""
    if get_channel_layer() is None:
        return
    try:
        loop = server_loop()
        if loop is not None:
            try:
                running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if running is loop:
                _spawn(loop, _send(group, message))
            else:
                loop.call_soon_threadsafe(_spawn, loop, _send(group, message))
            return
        _get_publisher().submit(group, message)
    except Exception:
        logger.warning(
            "group_send to %s failed; clients will catch up from the log",
            group,
            exc_info=True,
        )


# -- groups and what is published to them ----------------------------------------


def thread_group_name(thread_pk: int) -> str:
    """Return the Channels group that carries thread ``thread_pk``'s events."""
    return f"thread.{thread_pk}"


def publish_events(
    *,
    thread_pk: int,
    events: Sequence[Event],
    run_id: str | None = None,
    previewed_through: int | None = None,
) -> None:
    """Ring the thread group's doorbell with ``events`` (at-most-once; the log is the truth).

    ``previewed_through`` (with the ``run_id`` of the recorder that sent the
    previews) confirms that the previews ``p <= previewed_through`` of that run
    are in the log now, in ``events`` or before (:func:`publish_preview`).
    """
    if not events:
        return
    message: dict[str, Any] = {
        "type": "thread.events",
        "events": [e.as_wire() for e in events],
    }
    if previewed_through is not None:
        message["runId"] = run_id
        message["previewedThrough"] = previewed_through
    group_send(thread_group_name(thread_pk), message)


def publish_preview(
    *, thread_pk: int, run_id: str, p: int, event: dict[str, Any]
) -> None:
    """Send ``event`` to thread ``thread_pk``'s group before it is written (a preview).

    ``event`` is a validated AG-UI event object that the recorder of run
    ``run_id`` will write in its next flush; ``p`` numbers that recorder's
    previews from 1. The message is ``{"type": "thread.preview", "runId",
    "previews": [{"p", "event"}, ...]}``: the publisher thread merges previews
    waiting together into one message (:func:`coalesce_previews`). A preview is
    not a log row and carries no ``seq``: the flush's :func:`publish_events`
    confirms it (``previewedThrough``), and a reader drops what is never
    confirmed (docs/architecture.md "Previews"). Sent in the same FIFO as the
    doorbells, so a worker's previews precede the doorbell that confirms them.
    """
    group_send(
        thread_group_name(thread_pk),
        {"type": PREVIEW_TYPE, "runId": run_id, "previews": [{"p": p, "event": event}]},
    )


def publish_notification(*, thread_pk: int, payload: dict[str, Any]) -> None:
    """Send an application notification (not an AG-UI event) to thread ``thread_pk``'s group."""
    group_send(
        thread_group_name(thread_pk),
        {"type": "thread.notification", "payload": payload},
    )
