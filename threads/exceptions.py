"""Domain errors of the threads app, each with a stable ``code``.

The REST layer maps them to HTTP in one exception handler; messages name the bad
value and say what to do (STYLE.md 20).
"""

from __future__ import annotations

from core.errors import CountersignError


class ThreadsError(CountersignError):
    """Base class of the threads app's errors (``code`` and ``status`` as its base's)."""

    code = "threads_error"
    status = 400


class RunConflict(ThreadsError):
    """A run is active on the thread, or calls are pending; nothing was started."""

    code = "run_conflict"
    status = 409


class RecordedThread(ThreadsError):
    """The thread records calls of an agent that runs elsewhere (an MCP gateway's client,
    an external agent): no agent runs on it, so it takes no message and no run."""

    code = "recorded_thread"
    status = 409


class RunNotCancellable(ThreadsError):
    """The run already ended."""

    code = "run_not_cancellable"
    status = 409


class UnknownAgent(ThreadsError):
    """The agent name is not configured in ``COUNTERSIGN_AGENTS``."""

    code = "unknown_agent"
    status = 404


class ThreadArchived(ThreadsError):
    """The thread is archived; nothing new may start on it."""

    code = "thread_archived"
    status = 409


class IdempotencyKeyReused(ThreadsError):
    """An ``Idempotency-Key`` was sent again with a different request."""

    code = "idempotency_key_reused"
    status = 422


class IllegalTransition(ThreadsError):
    """A status change the model's transition table does not allow; nothing was written."""

    code = "illegal_transition"
    status = 409


class ThreadNotFound(ThreadsError):
    """The thread does not exist or is not visible to the user (answered as 404)."""

    code = "not_found"
    status = 404


class ThreadNotOwned(ThreadsError):
    """The user may read the thread (as an approver or staff) but not write to it (403)."""

    code = "not_thread_owner"
    status = 403
