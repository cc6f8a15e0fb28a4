"""The one place that frames AG-UI events for Server-Sent Events (STYLE.md 12).

Frames come from the official :class:`ag_ui.encoder.EventEncoder` (``data: <json>``,
LF line endings); the log's ``seq`` goes on an ``id:`` line, which AG-UI consumers
ignore and ``EventSource`` uses for ``Last-Event-ID``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime
from typing import Any

from asgiref.sync import sync_to_async

from agentcore.events import EventEncoder, event_from_dict
from core import metrics
from core.conf import countersign_settings
from threads.logreader import log_after
from threads.models import Run, Thread
from threads.realtime import register_server_loop, thread_group_name
from web.doorbell import Doorbell

logger = logging.getLogger(__name__)

_encoder = EventEncoder()
KEEPALIVE = ": keep-alive\n\n"


def sse_frame(
    payload: dict[str, Any],
    *,
    seq: int | None = None,
    logged_at: datetime | None = None,
) -> str:
    """Return one SSE frame for the AG-UI event ``payload`` (a stored log payload).

    ``logged_at`` (the row's ``created_at``) becomes AG-UI's optional
    ``timestamp`` (ms since the epoch) when the producer did not stamp the event,
    so every event a client is streamed carries one (ag-ui-validate AGUI902).
    """
    if logged_at is not None and "timestamp" not in payload:
        payload = {**payload, "timestamp": int(logged_at.timestamp() * 1000)}
    frame = _encoder.encode(event_from_dict(payload))
    return f"id: {seq}\n{frame}" if seq is not None else frame


async def _wire_runs(run: Run) -> set[int]:
    """Return the pks of ``run`` and of the segments streamed inside it."""

    def read() -> set[int]:
        return {run.pk, *Run.objects.filter(outer=run).values_list("pk", flat=True)}

    return await sync_to_async(read)()


async def _doorbell(bell: Doorbell, wait: float) -> bool:
    """Wait up to ``wait`` seconds for a doorbell; return whether one rang.

    Previews (``thread.preview``, events not written yet) are not doorbells: AG-UI
    clients get only log rows, so they are skipped without a read of the log.
    While the broker is away no doorbell rings and the caller re-reads the log.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    while True:
        message = await bell.receive(max(deadline - loop.time(), 0.0))
        if message is None:
            return False
        if message.get("type") != "thread.preview":
            return True


async def follow_log(
    *,
    thread: Thread,
    after: int,
    run: Run | None = None,
    keepalive: float | None = None,
) -> AsyncIterator[str]:
    """Yield SSE frames for ``thread``'s log rows after ``after``, following live.

    With ``run`` (a client-visible run), the stream ends after that run's
    terminal event (``RUN_FINISHED`` or ``RUN_ERROR``, written by it or by one of
    its segments, :mod:`threads.wire`); without it the stream
    follows the thread across runs until the client goes away. A keep-alive
    comment opens the stream (so proxies pass the response on at once) and is sent
    again every ``keepalive`` seconds of silence; AG-UI consumers ignore comment
    lines (AGUI-1.0.md §2.5). The channel layer only wakes the loop up; every frame
    is read from the database, and the log is re-read every
    ``SOCKET_POLL_SECONDS`` when no doorbell rang (a lost doorbell costs latency,
    never events).
    """
    register_server_loop(asyncio.get_running_loop())
    interval = (
        keepalive
        if keepalive is not None
        else countersign_settings.SSE_KEEPALIVE_SECONDS
    )
    poll = float(countersign_settings.SOCKET_POLL_SECONDS)
    bell = Doorbell()
    await bell.join(thread_group_name(thread.pk))
    last = after
    mine: set[int] = {run.pk} if run is not None else set()
    silent_for = 0.0
    metrics.OPEN_STREAMS.labels("sse").inc()
    try:
        yield KEEPALIVE
        while True:
            async for row in log_after(thread=thread, after=last):
                last = row.seq
                if run is not None and row.run_id not in mine:
                    mine = await _wire_runs(run)
                    if row.run_id not in mine:
                        continue
                yield sse_frame(row.payload, seq=row.seq, logged_at=row.created_at)
                silent_for = 0.0
                if run is not None and row.type in ("RUN_FINISHED", "RUN_ERROR"):
                    return
            wait = min(poll, interval)
            if await _doorbell(bell, wait):
                continue
            silent_for += wait
            if silent_for >= interval:
                silent_for = 0.0
                yield KEEPALIVE
    finally:
        metrics.OPEN_STREAMS.labels("sse").dec()
        await bell.leave()


def json_sse_frame(event: str, data: dict[str, Any], *, seq: int) -> str:
    """Return one SSE frame of a non-AG-UI stream: ``event``, ``id`` and JSON ``data``.

    For the approval API's stream of a declared call's state
    (``web.api.external``); AG-UI streams use :func:`sse_frame`.
    """
    body = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f"id: {seq}\nevent: {event}\ndata: {body}\n\n"


async def state_follow(
    *,
    thread_pk: int,
    read: Callable[[], Awaitable[dict[str, Any]]],
    done: Callable[[dict[str, Any]], bool],
    timeout: float | None,
) -> AsyncIterator[dict[str, Any]]:
    """Yield ``read()`` at once and again each time it changes, until ``done`` or ``timeout``.

    Woken by thread ``thread_pk``'s doorbell (any change on the thread), and
    reads again every ``SOCKET_POLL_SECONDS`` when none rang (a lost doorbell
    costs latency, never a state). ``timeout`` in seconds (``None``: until
    ``done``). Used by the approval API's long-poll and its SSE stream.
    """
    register_server_loop(asyncio.get_running_loop())
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout
    poll = float(countersign_settings.SOCKET_POLL_SECONDS)
    bell = Doorbell()
    await bell.join(thread_group_name(thread_pk))
    last: dict[str, Any] | None = None
    try:
        while True:
            value = await read()
            if value != last:
                last = value
                yield value
            if done(value):
                return
            wait = poll
            if deadline is not None:
                wait = min(wait, deadline - loop.time())
                if wait <= 0:
                    return
            await _doorbell(bell, wait)
    finally:
        await bell.leave()
