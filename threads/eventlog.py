"""The one writer of a thread's event log: every ``Event`` row is appended here.

Agent events (validated, coalesced and projected by :mod:`threads.recording`)
and the facts Countersign writes itself (the client-visible run's boundaries and
the results of calls it answered, :mod:`threads.wire`) are appended by
:func:`log_append` alike: the ``seq`` range is taken under the thread's row lock,
the rows are inserted in one statement, and they are published to the thread's
channel group after the transaction commits. ``tests/test_architecture.py``
asserts that no other module inserts ``Event`` rows. Implements DC-01, DC-02.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import transaction

from threads.locks import thread_seq_advance, thread_seq_lock
from threads.models import Event, Run
from threads.realtime import publish_events


def log_append(
    *,
    thread_pk: int,
    run: Run | None,
    payloads: Sequence[dict[str, Any]],
    publish: bool = True,
    run_id: str | None = None,
    previewed_through: int | None = None,
) -> list[Event]:
    """Append ``payloads`` to thread ``thread_pk``'s log for ``run``; return the rows.

    ``payloads`` are storable AG-UI event objects (camelCase JSON, each with its
    ``type``), in order; they take the next gapless ``seq`` values of the thread
    (DC-01). The thread's row lock is taken unless this transaction holds it
    already (:func:`threads.locks.thread_seq_lock`), and its ``next_seq`` is
    advanced even when ``payloads`` is empty, so an append always touches the
    thread. With ``publish`` the rows ring the thread group's doorbell once the
    transaction commits (:func:`threads.realtime.publish_events`, with ``run_id``
    and ``previewed_through`` confirming that recorder's previews). Runs in the
    caller's transaction when there is one, without a savepoint of its own:
    nothing catches a failed append to go on with that transaction. Raises
    ``Thread.DoesNotExist`` and the database's ``IntegrityError``.
    """
    with transaction.atomic(savepoint=False):
        first = thread_seq_lock(thread_pk=thread_pk)
        rows = [
            Event(
                thread_id=thread_pk,
                run=run,
                seq=first + offset,
                type=str(payload["type"]),
                payload=payload,
            )
            for offset, payload in enumerate(payloads)
        ]
        thread_seq_advance(thread_pk=thread_pk, next_seq=first + len(rows))
        Event.objects.bulk_create(rows)
        if publish and rows:
            transaction.on_commit(
                lambda: publish_events(
                    thread_pk=thread_pk,
                    events=rows,
                    run_id=run_id,
                    previewed_through=previewed_through,
                ),
                robust=True,
            )
    return rows
