"""The janitor: finds work a dead worker or a lost broker message left behind.

:func:`runs_reap` (Celery beat, every 30 s, task ``threads.janitor.reap_stale_runs``)
finds runs whose worker died:

- ``running`` with no heartbeat and no event for ``RUN_STALE_SECONDS``: ended with
  ``RUN_ERROR`` ``worker_lost`` through :func:`threads.services.run_fail`, so the
  thread can take a new message;
- ``queued`` runs and approved executions whose broker message was lost: enqueued
  again (:func:`lost_messages_requeue`);
- ``awaiting_tools`` with calls still ``pending`` (the worker died between the
  run's last event and dispatching its calls), no heartbeat and quiet for as long:
  dispatched now (:func:`approvals.services.pending_calls_dispatch` is idempotent).

Redis losing a heartbeat key (a restart) is repaired by the next beat, well
inside the window.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import Max
from django.db.models.functions import Coalesce
from django.utils import timezone

from approvals.models import ToolExecution
from approvals.services import EXECUTE_TASK, pending_calls_dispatch
from config.logging import log_context
from orchestration.supervision import heartbeat_alive
from threads.conf import countersign_settings
from threads.execution import enqueue
from threads.models import Run, ToolCall
from threads.services import RUN_TASK, run_fail

logger = logging.getLogger(__name__)


def stale_runs(
    *, now: Any = None, stale_seconds: float | None = None
) -> dict[str, list[int]]:
    """Return the pks of runs that look abandoned: ``{"running": [...], "undispatched": [...]}``.

    A run qualifies when it started (or was created) and last recorded an event
    more than ``stale_seconds`` ago and its heartbeat is gone.
    """
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
            enqueue(RUN_TASK, run_pk=pk)
        for pk in executions:
            logger.warning(
                "call pk=%s still queued after %ss; enqueueing it again", pk, stale
            )
            enqueue(EXECUTE_TASK, tool_call_pk=pk)
    return {"runs_requeued": len(runs), "executions_requeued": len(executions)}
