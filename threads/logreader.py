"""Reading a thread's event log after a ``seq``, for the two followers of a thread.

The SSE stream (:func:`web.sse.follow_log`) and the WebSocket consumer
(:class:`web.consumers.ThreadEventsConsumer`) both catch up from the database
the same way: :func:`log_after`, page by page until caught up. The channel
layer only wakes them up (STYLE.md 7). Implements DC-02.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Final

from channels.db import database_sync_to_async

from threads.models import Event, Thread
from threads.selectors import thread_events_after

#: Log rows read per query while catching up.
LOG_PAGE: Final = 500

_read = database_sync_to_async(thread_events_after)


async def log_after(*, thread: Thread, after: int) -> AsyncIterator[Event]:
    """Yield ``thread``'s log rows with ``seq > after``, in order, until caught up.

    Reads :data:`LOG_PAGE` rows per query from an async context (the sync ORM runs
    in a worker thread, STYLE.md 21); stops after the first short page.
    """
    last = after
    while True:
        rows = await _read(thread=thread, after=last, limit=LOG_PAGE)
        for row in rows:
            last = row.seq
            yield row
        if len(rows) < LOG_PAGE:
            return
