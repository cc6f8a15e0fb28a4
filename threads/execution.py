"""Where background work runs: Celery workers, or a thread pool in the server process.

With ``REDIS_URL`` set, work goes to Celery (queues ``runs`` and ``tools``). Without
it (the embedded default), the same task functions run on a thread pool inside the
process that enqueued them, so ``make run`` needs no services. Either way work is
enqueued only after the surrounding transaction commits (STYLE.md 5). Callers
pass the task object (a ``shared_task``), imported where it is sent: a task
module imports Celery, which a web process imports only once it sends work.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from importlib import import_module
from typing import Any, Protocol

from django.conf import settings
from django.db import close_old_connections, connections, transaction

from core import tracing
from core.conf import countersign_settings


class Task(Protocol):
    """What this module needs of a Celery task: its registered name and its body."""

    name: str

    def run(self, *args: Any, **kwargs: Any) -> Any:
        """Run the task's body in this thread."""

    def apply_async(self, *args: Any, **kwargs: Any) -> Any:
        """Send the task to the broker."""


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


def celery_app() -> Any:
    """Import and return the project's Celery app.

    Imported before a task is sent or run (the module named by
    ``settings.COUNTERSIGN_CELERY_APP``, ``config.celery`` here): ``config/__init__``
    does not import it (so a web process that never sends a task never imports
    Celery, bench B6), and a ``shared_task`` evaluated before the app exists would
    bind to Celery's default app. The module comes from settings, as
    ``ROOT_URLCONF`` does, so this domain package names no project module.
    """
    module = import_module(getattr(settings, "COUNTERSIGN_CELERY_APP", "config.celery"))
    return module.app


def task_named(name: str) -> Task:
    """Return the registered Celery task called ``name`` (a beat schedule's entry).

    Imports the task modules the app knows (``CELERY_IMPORTS`` and every
    installed app's ``tasks``) first, as a worker does at boot. Raises
    :class:`KeyError` for a name no task module registers.
    """
    app = celery_app()
    app.loader.import_default_modules()
    task: Task = app.tasks[name]
    return task


def _run_embedded(task: Task, kwargs: dict[str, Any]) -> None:
    celery_app()
    close_old_connections()
    try:
        task.run(**kwargs)
    except Exception:
        logger.exception("embedded task %s(%r) failed", task.name, kwargs)
    finally:
        connections.close_all()


def enqueue(task: Task, **kwargs: Any) -> None:
    """Run Celery task ``task`` with ``kwargs`` once the transaction commits.

    A broker that cannot be reached at that moment is logged, not raised: the row
    is committed ``queued`` and the janitor enqueues it again: a request never
    fails because Redis is restarting.
    """

    def send() -> None:
        if uses_celery():
            # Deferred with Celery itself (see celery_task).
            from kombu.exceptions import OperationalError

            try:
                celery_app()
                task.apply_async(kwargs=kwargs)
            except OperationalError:
                # The broker is unreachable (Redis restarting) after the row was
                # committed ``queued``: the request still succeeded, and the janitor
                # enqueues queued runs and executions again (lost_messages_requeue).
                logger.warning(
                    "broker unreachable; %s(%r) is left queued for the janitor",
                    task.name,
                    kwargs,
                )
        else:
            # The trace goes on in the pool's thread (core.tracing).
            future = _embedded_pool().submit(
                tracing.context_carry(_run_embedded), task, kwargs
            )
            _inflight.add(future)
            future.add_done_callback(_inflight.discard)

    transaction.on_commit(send, robust=False)


def enqueue_later(task: Task, *, countdown: float, **kwargs: Any) -> None:
    """Run Celery task ``task`` with ``kwargs`` after ``countdown`` seconds.

    Used outside transactions (a task rescheduling itself); with Celery the
    broker holds the message, embedded a timer thread submits it to the pool.
    """
    if uses_celery():
        celery_app()
        task.apply_async(kwargs=kwargs, countdown=countdown)
        return
    marker: Future[Any] = Future()
    _inflight.add(marker)

    def fire() -> None:
        future = _embedded_pool().submit(_run_embedded, task, kwargs)
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
    deadline = time.monotonic() + timeout
    while _inflight and time.monotonic() < deadline:
        for future in list(_inflight):
            # A task's own failure was logged by _run_embedded; only completion matters.
            with contextlib.suppress(Exception):
                future.result(timeout=max(0.0, deadline - time.monotonic()))
    if _inflight:
        raise TimeoutError(
            f"{len(_inflight)} embedded task(s) still running after {timeout}s"
        )


_beat: threading.Thread | None = None
_beat_stop = threading.Event()


def start_embedded_beat(*, interval_scale: float = 1.0) -> bool:
    """Run ``CELERY_BEAT_SCHEDULE``'s tasks on the embedded pool, in this process.

    The embedded default has no Celery beat, yet approvals must still expire and
    abandoned runs still be reaped. A daemon thread submits each scheduled task
    to the pool at its interval (times ``interval_scale``). Idempotent; returns
    whether it started a new beat (never with Celery, which has its own).
    """
    global _beat
    if uses_celery():
        return False
    with _pool_lock:
        if _beat is not None and _beat.is_alive():
            return False
        schedule = [
            (entry["task"], float(entry["schedule"]) * interval_scale)
            for entry in getattr(settings, "CELERY_BEAT_SCHEDULE", {}).values()
        ]
        _beat_stop.clear()

        def loop() -> None:
            # Beat schedules name their tasks, as Celery beat's messages do; they
            # are resolved here, not at startup, which then imports no Celery.
            tasks = {name: task_named(name) for name, _ in schedule}
            due = {name: time.monotonic() + every for name, every in schedule}
            while not _beat_stop.wait(0.1 if interval_scale < 1 else 1.0):
                now = time.monotonic()
                for name, every in schedule:
                    if now >= due[name]:
                        due[name] = now + every
                        _embedded_pool().submit(_run_embedded, tasks[name], {})

        _beat = threading.Thread(
            target=loop, name="countersign-embedded-beat", daemon=True
        )
        _beat.start()
        return True


def stop_embedded_beat() -> None:
    """Stop the embedded beat thread (tests)."""
    global _beat
    _beat_stop.set()
    if _beat is not None:
        _beat.join(timeout=5)
    _beat = None
