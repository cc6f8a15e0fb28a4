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

from django.db.models import QuerySet

from threads.models import Run, Thread, ToolCall


def thread_lock(*, thread_pk: int) -> Thread:
    """Lock and return thread ``thread_pk``. Raises ``Thread.DoesNotExist``."""
    return Thread.objects.select_for_update().get(pk=thread_pk)


def thread_lock_by_id(*, thread_id: str) -> Thread | None:
    """Lock and return the thread whose public id is ``thread_id``, or ``None``."""
    return Thread.objects.select_for_update().filter(thread_id=thread_id).first()


def run_lock(*, run_pk: int, thread_pk: int | None = None) -> Run:
    """Lock and return run ``run_pk``, locking thread ``thread_pk`` first when given.

    The run comes with its thread loaded. Raises ``DoesNotExist``.
    """
    if thread_pk is not None:
        thread_lock(thread_pk=thread_pk)
    return (
        Run.objects.select_for_update(of=("self",))
        .select_related("thread")
        .get(pk=run_pk)
    )


def tool_call_lock(*, thread_pk: int, tool_call_pk: int) -> tuple[Thread, ToolCall]:
    """Lock thread ``thread_pk`` then call ``tool_call_pk``; return both.

    The call comes with its thread and run loaded. Raises ``DoesNotExist``.
    """
    thread = thread_lock(thread_pk=thread_pk)
    call = (
        ToolCall.objects.select_for_update(of=("self",))
        .select_related("thread", "run")
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
