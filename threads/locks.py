"""Row locks of the threads app, taken in the one order every service follows.

**Lock order: thread → tool call(s) → approval → execution.** A service that
needs several rows locks them through these helpers (and
:mod:`approvals.locks` for the last two), so two transactions never wait on each
other in opposite orders. Each helper must be called inside
``transaction.atomic()``, returns the freshly read rows, and the caller re-checks
state after locking (STYLE.md 9): what was true before the lock may not be now.
A run's row is locked right after its thread's (thread → run → call).
"""

from __future__ import annotations

from typing import Any

from django.db import connection
from django.db.models import QuerySet
from django.utils import timezone

from core.types import AnyUser
from threads.models import Run, Thread, ToolCall
from threads.selectors import thread_by_agui_id

#: Connection attribute holding what this transaction locked: key -> (marker, value).
_HELD = "_countersign_held"
#: Memos kept per connection before those of ended transactions are dropped.
_HELD_MAX = 64
#: Memo key of a thread this transaction locked; the value is its ``next_seq``.
_NEXT_SEQ = "thread-next-seq"


def transaction_memo_get(key: Any) -> Any | None:
    """Return what :func:`transaction_memo_set` stored under ``key`` in this transaction.

    ``None`` outside a transaction, after the transaction that stored it ended,
    or when the savepoint it was stored in was rolled back (PostgreSQL then
    released the row locks taken after that savepoint too). Lets a service skip
    reading a row again that the same transaction already locked (B2).
    """
    if not connection.in_atomic_block:
        return None
    held = getattr(connection, _HELD, None)
    if not held or key not in held:
        return None
    marker, value = held[key]
    # Django drops a savepoint's on-commit callbacks when it is rolled back and
    # all of them when the transaction ends: the marker's presence is the proof
    # that the memo's transaction (and savepoint) is still the current one.
    if any(entry[1] is marker for entry in connection.run_on_commit):
        return value
    del held[key]
    return None


def transaction_memo_set(key: Any, value: Any) -> None:
    """Remember ``value`` under ``key`` until this transaction (or savepoint) ends.

    Must be called inside ``transaction.atomic()``; see :func:`transaction_memo_get`.
    """

    def marker() -> None:
        """Nothing to do on commit; the marker only proves the memo's transaction."""

    held = getattr(connection, _HELD, None)
    if held is None:
        held = {}
        setattr(connection, _HELD, held)
    elif len(held) >= _HELD_MAX:
        # Memos of ended transactions are dropped, so a long-lived connection
        # does not keep one per row it ever locked.
        live = {id(entry[1]) for entry in connection.run_on_commit}
        for stale in [k for k, (m, _) in held.items() if id(m) not in live]:
            del held[stale]
    connection.on_commit(marker)
    held[key] = (marker, value)


def thread_lock(*, thread_pk: int) -> Thread:
    """Lock and return thread ``thread_pk``. Raises ``Thread.DoesNotExist``."""
    thread = Thread.objects.select_for_update().get(pk=thread_pk)
    transaction_memo_set((_NEXT_SEQ, thread_pk), thread.next_seq)
    return thread


def thread_seq_lock(*, thread_pk: int) -> int:
    """Lock thread ``thread_pk`` and return its ``next_seq`` (the next event's ``seq``).

    A thread this transaction locked already is not read again: its ``next_seq``
    is the one read under that lock or last written by :func:`thread_seq_advance`,
    the only writer of ``next_seq``. Raises ``Thread.DoesNotExist``.
    """
    held = transaction_memo_get((_NEXT_SEQ, thread_pk))
    if held is not None:
        return int(held)
    return thread_lock(thread_pk=thread_pk).next_seq


def thread_seq_advance(*, thread_pk: int, next_seq: int) -> None:
    """Write ``next_seq`` of thread ``thread_pk``, locked by this transaction (events appended)."""
    Thread.objects.filter(pk=thread_pk).update(
        next_seq=next_seq, updated_at=timezone.now()
    )
    transaction_memo_set((_NEXT_SEQ, thread_pk), next_seq)


def thread_lock_by_agui_id(*, user: AnyUser, agui_id: str) -> Thread | None:
    """Lock and return the thread AG-UI ``threadId`` ``agui_id`` names for ``user``.

    ``None`` when :func:`threads.selectors.thread_by_agui_id` finds none (unknown,
    or another user's that ``user`` may not see).
    """
    found = thread_by_agui_id(user=user, agui_id=agui_id)
    return thread_lock(thread_pk=found.pk) if found is not None else None


def run_lock(*, run_pk: int, thread_pk: int | None = None) -> Run:
    """Lock and return run ``run_pk``, locking thread ``thread_pk`` first when given.

    The run comes with its thread and its wire run (``outer``, not locked) loaded.
    Raises ``DoesNotExist``. A thread this
    transaction locked already is not read again (the lock is all that is taken).
    """
    if thread_pk is not None and transaction_memo_get((_NEXT_SEQ, thread_pk)) is None:
        thread_lock(thread_pk=thread_pk)
    return (
        Run.objects.select_for_update(of=("self",))
        .select_related("thread", "outer")
        .get(pk=run_pk)
    )


def tool_call_lock(*, thread_pk: int, tool_call_pk: int) -> tuple[Thread, ToolCall]:
    """Lock thread ``thread_pk`` then call ``tool_call_pk``; return both.

    The call comes with its thread (and owner) and run loaded. Raises ``DoesNotExist``.
    """
    thread = thread_lock(thread_pk=thread_pk)
    call = (
        ToolCall.objects.select_for_update(of=("self",))
        .select_related("thread__owner", "run")
        .get(pk=tool_call_pk)
    )
    return thread, call


def tool_calls_lock(
    *, thread_pk: int, calls: QuerySet[ToolCall]
) -> tuple[Thread, list[ToolCall]]:
    """Lock thread ``thread_pk`` then every call of ``calls``, in position order."""
    thread = thread_lock(thread_pk=thread_pk)
    return thread, calls_lock(calls=calls)


def calls_lock(*, calls: QuerySet[ToolCall]) -> list[ToolCall]:
    """Lock every call of ``calls`` in position order; their thread must be locked already."""
    return list(calls.select_for_update().order_by("position", "id"))
