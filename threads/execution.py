"""Where background work runs: Celery workers, or a thread pool in the server process.

With ``REDIS_URL`` set, work goes to Celery (queues ``runs`` and ``tools``). Without
it (the embedded default), the same task functions run on a thread pool inside the
process that enqueued them, so ``make run`` needs no services. Either way work is
enqueued only after the surrounding transaction commits (STYLE.md 5).
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connections, transaction
from django.utils.module_loading import import_string

from threads.conf import countersign_settings

logger = logging.getLogger(__name__)

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()
_inflight: set[Future[Any]] = set()


def uses_celery() -> bool:
    """Return whether background work goes to Celery workers (``REDIS_URL`` is set)."""
    return bool(getattr(settings, "REDIS_URL", ""))


def _embedded_pool() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(
                max_workers=int(countersign_settings.EMBEDDED_WORKERS),
                thread_name_prefix="countersign-worker",
            )
        return _pool


def _run_embedded(task_path: str, kwargs: dict[str, Any]) -> None:
    task = import_string(task_path)
    close_old_connections()
    try:
        task.run(**kwargs) if hasattr(task, "run") else task(**kwargs)
    except Exception:
        logger.exception("embedded task %s(%r) failed", task_path, kwargs)
    finally:
        connections.close_all()


def enqueue(task_path: str, **kwargs: Any) -> None:
    """Run the Celery task at ``task_path`` with ``kwargs`` once the transaction commits."""

    def send() -> None:
        if uses_celery():
            import_string(task_path).apply_async(kwargs=kwargs)
        else:
            future = _embedded_pool().submit(_run_embedded, task_path, kwargs)
            _inflight.add(future)
            future.add_done_callback(_inflight.discard)

    transaction.on_commit(send, robust=False)


def enqueue_later(task_path: str, *, countdown: float, **kwargs: Any) -> None:
    """Run the task at ``task_path`` with ``kwargs`` after ``countdown`` seconds.

    Used outside transactions (a task rescheduling itself); with Celery the
    broker holds the message, embedded a timer thread submits it to the pool.
    """
    if uses_celery():
        import_string(task_path).apply_async(kwargs=kwargs, countdown=countdown)
        return
    marker: Future[Any] = Future()
    _inflight.add(marker)

    def fire() -> None:
        future = _embedded_pool().submit(_run_embedded, task_path, kwargs)
        _inflight.add(future)
        future.add_done_callback(_inflight.discard)
        _inflight.discard(marker)
        marker.set_result(None)

    timer = threading.Timer(countdown, fire)
    timer.daemon = True
    timer.start()


def wait_embedded(timeout: float = 30.0) -> None:
    """Block until embedded work submitted so far (and work it enqueues) is done.

    For tests and management commands in the embedded mode; a no-op with Celery.
    """
    import time

    deadline = time.monotonic() + timeout
    while _inflight and time.monotonic() < deadline:
        for future in list(_inflight):
            try:
                future.result(timeout=max(0.0, deadline - time.monotonic()))
            except Exception:  # noqa: BLE001 - logged by _run_embedded
                pass
    if _inflight:
        raise TimeoutError(f"{len(_inflight)} embedded task(s) still running after {timeout}s")
