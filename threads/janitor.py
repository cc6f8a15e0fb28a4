"""Run supervision: a heartbeat while a worker executes a run, and the janitor.

A worker executing a run (``threads.services.run_execute``) holds
:func:`run_supervision`: it tags every log line with the run and thread
(``config.logging``) and, with Redis configured, refreshes the key
``countersign:run-heartbeat:<pk>`` every ``RUN_HEARTBEAT_SECONDS`` from a daemon
thread (time to live: three intervals), deleting it when the run returns.

:func:`reap_stale_runs` (Celery beat, every 30 s) finds runs whose worker died:

- ``running`` with no heartbeat and no event for ``RUN_STALE_SECONDS``: ended with
  ``RUN_ERROR`` ``worker_lost`` through :func:`threads.services.run_fail`, so the
  thread can take a new message;
- ``queued`` runs and approved executions whose broker message was lost: enqueued
  again (:func:`lost_messages_requeue`);
- ``awaiting_tools`` with calls still ``pending`` (the worker died between the
  run's last event and dispatching its calls), no heartbeat and quiet for as long:
  dispatched now (:func:`approvals.services.pending_calls_dispatch` is idempotent).

The heartbeat is what tells a live worker with a slow tool from a dead one; Redis
losing the key (a restart) is repaired by the next beat, well inside the window.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from celery import shared_task
from django.conf import settings
from django.db.models import Max
from django.db.models.functions import Coalesce
from django.utils import timezone

from config.logging import log_context
from threads.conf import countersign_settings

logger = logging.getLogger(__name__)

HEARTBEAT_KEY = "countersign:run-heartbeat:{pk}"

_clients: dict[str, Any] = {}
_clients_lock = threading.Lock()


def _redis() -> Any | None:
    """Return a shared redis-py client for ``settings.REDIS_URL``, or ``None`` without it."""
    url = getattr(settings, "REDIS_URL", "")
    if not url:
        return None
    with _clients_lock:
        client = _clients.get(url)
        if client is None:
            import redis

            client = redis.Redis.from_url(
                url, socket_timeout=2, socket_connect_timeout=2
            )
            _clients[url] = client
        return client


class _Heartbeat(threading.Thread):
    """Refresh a run's heartbeat key until stopped; Redis errors are logged and retried."""

    def __init__(self, *, run_pk: int, client: Any, interval: float) -> None:
        super().__init__(name=f"heartbeat-run-{run_pk}", daemon=True)
        self.key = HEARTBEAT_KEY.format(pk=run_pk)
        self.client = client
        self.interval = interval
        self.stopped = threading.Event()

    def beat(self) -> None:
        try:
            self.client.set(self.key, "1", px=int(self.interval * 3000))
        except Exception:
            logger.warning("heartbeat %s could not be written", self.key, exc_info=True)

    def run(self) -> None:
        while not self.stopped.wait(self.interval):
            self.beat()

    def stop(self) -> None:
        self.stopped.set()
        self.join(timeout=5)
        try:
            self.client.delete(self.key)
        except Exception:
            logger.warning("heartbeat %s could not be deleted", self.key, exc_info=True)


def heartbeat_alive(run_pk: int) -> bool:
    """Return whether a worker refreshed run ``run_pk``'s heartbeat recently.

    ``False`` without Redis (nothing can be proven alive then).
    """
    client = _redis()
    if client is None:
        return False
    return bool(client.exists(HEARTBEAT_KEY.format(pk=run_pk)))


@contextmanager
def run_heartbeat(*, run_pk: int) -> Iterator[None]:
    """Keep run ``run_pk``'s heartbeat fresh while the block runs (a no-op without Redis)."""
    client = _redis()
    if client is None:
        yield
        return
    beat = _Heartbeat(
        run_pk=run_pk,
        client=client,
        interval=float(countersign_settings.RUN_HEARTBEAT_SECONDS),
    )
    beat.beat()
    beat.start()
    try:
        yield
    finally:
        beat.stop()


@contextmanager
def run_supervision(*, run_pk: int) -> Iterator[None]:
    """Tag log lines with run ``run_pk`` and its thread, and keep its heartbeat fresh."""
    from threads.models import Run

    ids = (
        Run.objects.filter(pk=run_pk).values_list("run_id", "thread__thread_id").first()
    )
    run_id, thread_id = ids if ids is not None else (None, None)
    with log_context(run=run_id, thread=thread_id), run_heartbeat(run_pk=run_pk):
        yield


@contextmanager
def tool_call_log_context(*, tool_call_pk: int) -> Iterator[None]:
    """Tag log lines with the call's ``toolCallId``, its run and its thread."""
    from threads.models import ToolCall

    ids = (
        ToolCall.objects.filter(pk=tool_call_pk)
        .values_list("tool_call_id", "run__run_id", "thread__thread_id")
        .first()
    )
    if ids is None:
        yield
        return
    call_id, run_id, thread_id = ids
    with log_context(run=run_id, thread=thread_id, toolCallId=call_id):
        yield


def stale_runs(
    *, now: Any = None, stale_seconds: float | None = None
) -> dict[str, list[int]]:
    """Return the pks of runs that look abandoned: ``{"running": [...], "undispatched": [...]}``.

    A run qualifies when it started (or was created) and last recorded an event
    more than ``stale_seconds`` ago and its heartbeat is gone.
    """
    from threads.models import Run, ToolCall

    now = now or timezone.now()
    window = float(
        countersign_settings.RUN_STALE_SECONDS
        if stale_seconds is None
        else stale_seconds
    )
    cutoff = now - timedelta(seconds=window)
    found: dict[str, list[int]] = {"running": [], "undispatched": []}
    candidates = (
        Run.objects.filter(status__in=[Run.Status.RUNNING, Run.Status.AWAITING_TOOLS])
        .annotate(
            since=Coalesce("started_at", "created_at"),
            last_event=Max("events__created_at"),
        )
        .filter(since__lt=cutoff)
        .values_list("pk", "status", "last_event")
    )
    for pk, status, last_event in candidates:
        if last_event is not None and last_event >= cutoff:
            continue
        if status == Run.Status.AWAITING_TOOLS:
            pending = ToolCall.objects.filter(
                run_id=pk, state=ToolCall.State.PENDING
            ).exists()
            if not pending:
                continue
        if heartbeat_alive(pk):
            continue
        found["running" if status == Run.Status.RUNNING else "undispatched"].append(pk)
    return found


def runs_reap(*, now: Any = None, stale_seconds: float | None = None) -> dict[str, int]:
    """End abandoned ``running`` runs with ``worker_lost`` and dispatch forgotten calls.

    Returns how many runs of each kind were handled. Re-checks each run's status
    just before acting, so a run that moved on meanwhile is left alone.
    """
    from approvals.services import pending_calls_dispatch
    from threads.models import Run
    from threads.services import run_fail

    found = stale_runs(now=now, stale_seconds=stale_seconds)
    done = {"worker_lost": 0, "dispatched": 0}
    for pk in found["running"]:
        run = Run.objects.select_related("thread").get(pk=pk)
        if run.status != Run.Status.RUNNING:
            continue
        with log_context(run=run.run_id, thread=run.thread.thread_id):
            logger.warning(
                "run %s: no heartbeat and no event; ending it as worker_lost",
                run.run_id,
            )
            run_fail(
                run=run,
                code="worker_lost",
                message="The worker executing this run stopped before it finished; "
                "post the message again to retry.",
            )
        done["worker_lost"] += 1
    for pk in found["undispatched"]:
        run = Run.objects.select_related("thread").get(pk=pk)
        if run.status != Run.Status.AWAITING_TOOLS:
            continue
        with log_context(run=run.run_id, thread=run.thread.thread_id):
            logger.warning(
                "run %s: pending calls were never dispatched; dispatching", run.run_id
            )
            pending_calls_dispatch(run=run)
        done["dispatched"] += 1
    done.update(lost_messages_requeue(now=now, stale_seconds=stale_seconds))
    return done


def lost_messages_requeue(
    *, now: Any = None, stale_seconds: float | None = None
) -> dict[str, int]:
    """Enqueue again runs and approved executions still ``queued`` after ``stale_seconds``.

    A broker message can be lost (Redis restarted without persistence). Both tasks
    are idempotent — a run is claimed only while ``queued``, an execution runs at
    most once under its row lock and lease — so a duplicate delivery is harmless.
    Returns ``{"runs_requeued": n, "executions_requeued": m}``.
    """
    from django.db import transaction

    from approvals.models import ToolExecution
    from threads.execution import enqueue
    from threads.models import Run

    now = now or timezone.now()
    stale = float(
        stale_seconds
        if stale_seconds is not None
        else countersign_settings.RUN_STALE_SECONDS
    )
    cutoff = now - timedelta(seconds=stale)
    runs = list(
        Run.objects.filter(status=Run.Status.QUEUED, created_at__lt=cutoff).values_list(
            "pk", flat=True
        )
    )
    executions = list(
        ToolExecution.objects.filter(
            state=ToolExecution.State.QUEUED, created_at__lt=cutoff
        ).values_list("tool_call_id", flat=True)
    )
    with transaction.atomic():
        for pk in runs:
            logger.warning(
                "run pk=%s still queued after %ss; enqueueing it again", pk, stale
            )
            enqueue("threads.tasks.run_agent", run_pk=pk)
        for pk in executions:
            logger.warning(
                "call pk=%s still queued after %ss; enqueueing it again", pk, stale
            )
            enqueue("approvals.tasks.execute_tool_call", tool_call_pk=pk)
    return {"runs_requeued": len(runs), "executions_requeued": len(executions)}


@shared_task(name="threads.janitor.reap_stale_runs", ignore_result=True)
def reap_stale_runs() -> dict[str, int]:
    """Celery beat entry point of :func:`runs_reap`."""
    return runs_reap()
