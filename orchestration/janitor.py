"""The janitor: finds work a dead worker or a lost broker message left behind.

:func:`runs_reap` is one sweep (Celery beat or the embedded beat, every
``JANITOR_INTERVAL_SECONDS``, task ``threads.janitor.reap_stale_runs``). It
recovers, in this order:

- ``running`` runs whose worker, child or master, died: ended with
  ``RUN_ERROR`` ``worker_lost`` naming the phase the run was in, and a
  continuation started again with bounded attempts and backoff, through
  :func:`orchestration.pipeline.run_worker_lost` (``worker_lost``; its entry
  carries ``phase`` and, when retried, ``retry``);
- ``awaiting_tools`` runs with calls still ``pending`` (the worker died between
  the run's last event and dispatching its calls): dispatched now,
  idempotently (``dispatched``);
- ``queued`` runs and executions older than ``QUEUED_STALE_SECONDS`` (their
  broker message was lost: Redis restarted without persistence, or a worker
  master died holding it unacknowledged): enqueued again (``runs_requeued``,
  ``executions_requeued``);
- ``reserved`` executions whose lease has ended (the worker died between the
  reservation and the outcome, and its message waits in Redis's unacknowledged
  hash for the visibility timeout): enqueued again, and the delivery either runs
  an idempotent tool again under the same key or records ``outcome_unknown`` for
  an operator (``leases_expired``).

A run's worker is taken for dead (the ``reason`` of its recovery) when:

- ``heartbeat_stale``: its heartbeat key (a worker with Redis) says the last
  refresh is older than the heartbeat's time to live plus one interval, four
  ``RUN_HEARTBEAT_SECONDS``, with Redis up as long
  (:attr:`orchestration.supervision.HeartbeatReading.dead`); or
- ``no_heartbeat``: it has no heartbeat key (an embedded run; or Redis lost the
  key and no refresh re-created it in four ``RUN_HEARTBEAT_SECONDS`` of Redis
  being up) and neither started nor recorded an event for
  ``RUN_STALE_SECONDS``.

Every task it enqueues is idempotent, so a duplicate delivery is harmless; with
Redis, one item is enqueued again at most once per ``QUEUED_STALE_SECONDS``. Each
recovery is logged as one line (``janitor`` = the kind, the ids, ``age_seconds``)
and each sweep that recovered something is kept as a
:class:`approvals.models.JanitorSweep` (admin: "Janitor sweeps"). The bounds are
in docs/recovery.md. Implements FT-06, DC-04.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Exists, Max, OuterRef, Q, QuerySet
from django.db.models.functions import Coalesce
from django.utils import timezone

from approvals.models import JanitorSweep, ToolExecution
from core import metrics
from core.conf import countersign_settings
from core.logging import log_context
from orchestration.pipeline import pending_calls_dispatch, run_worker_lost
from orchestration.supervision import (
    HEARTBEAT_DEAD_INTERVALS,
    heartbeat_read,
    redis_uptime_seconds,
    requeue_claim,
)
from threads.agent_config import external_agent_names
from threads.execution import enqueue
from threads.models import Run, ToolCall

logger = logging.getLogger(__name__)

#: The kinds of recovery, in the order a sweep performs them.
KINDS = (
    "worker_lost",
    "dispatched",
    "runs_requeued",
    "executions_requeued",
    "leases_expired",
)


@dataclass
class _Sweep:
    """What one sweep recovered: counts per kind and one entry per item."""

    now: datetime
    started: float = field(default_factory=time.monotonic)
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    recovered: list[dict[str, Any]] = field(default_factory=list)

    def note(
        self,
        kind: str,
        since: datetime | None,
        message: str,
        reason: str | None = None,
        **ids: Any,
    ) -> None:
        """Count one recovery of ``kind`` and log it with its ids, age and reason."""
        age = round((self.now - since).total_seconds(), 3) if since else None
        entry = {"kind": kind, **ids, "age_seconds": age}
        if reason is not None:
            entry["reason"] = reason
        self.counts[kind] += 1
        self.recovered.append(entry)
        # The ids go through the log context: LogRecord already has a ``thread``.
        with log_context(**ids):
            logger.warning(
                "janitor %s: %s",
                kind,
                message,
                extra={
                    "janitor": kind,
                    "age_seconds": age,
                    **({"reason": reason} if reason else {}),
                },
            )

    def record(self) -> None:
        """Keep this sweep if it recovered something; drop sweeps past retention."""
        if not self.recovered:
            return
        JanitorSweep.objects.create(
            started_at=self.now,
            duration_ms=int((time.monotonic() - self.started) * 1000),
            total=len(self.recovered),
            counts=self.counts,
            recovered=self.recovered,
        )
        keep = float(countersign_settings.JANITOR_SWEEP_RETENTION_SECONDS)
        JanitorSweep.objects.filter(
            started_at__lt=self.now - timedelta(seconds=keep)
        ).delete()


#: Why the janitor took a run's worker for dead (``reason`` of its recovery).
REASON_HEARTBEAT_STALE = "heartbeat_stale"
REASON_NO_HEARTBEAT = "no_heartbeat"


def stale_runs(
    *, now: datetime | None = None, stale_seconds: float | None = None
) -> dict[str, dict[int, str]]:
    """Return the runs that look abandoned, each with its reason.

    Shape: ``{"running": {pk: reason}, "undispatched": {pk: reason}}``, reasons
    :data:`REASON_HEARTBEAT_STALE` or :data:`REASON_NO_HEARTBEAT` (module
    docstring). A run with a heartbeat key is judged by it alone, so a slow
    tool on a live worker is never reaped; a run without one by
    ``stale_seconds`` (default ``RUN_STALE_SECONDS``) of silence. Implements
    FT-06.
    """
    now = now or timezone.now()
    window = float(
        countersign_settings.RUN_STALE_SECONDS
        if stale_seconds is None
        else stale_seconds
    )
    cutoff = now - timedelta(seconds=window)
    found: dict[str, dict[int, str]] = {"running": {}, "undispatched": {}}
    pending = ToolCall.objects.filter(run=OuterRef("pk"), state=ToolCall.State.PENDING)
    candidates = (
        Run.objects.annotate(has_pending=Exists(pending))
        .filter(
            Q(status=Run.Status.RUNNING)
            | Q(status=Run.Status.AWAITING_TOOLS, has_pending=True)
        )
        .annotate(
            since=Coalesce("started_at", "created_at"),
            last_event=Max("events__created_at"),
        )
        .values_list("pk", "status", "since", "last_event")
    )
    # Redis restarted empty a moment ago: live workers' keys may not be
    # re-created yet, so a missing key proves nothing (supervision).
    uptime = redis_uptime_seconds()
    keys_trusted = uptime is None or uptime > HEARTBEAT_DEAD_INTERVALS * float(
        countersign_settings.RUN_HEARTBEAT_SECONDS
    )
    for pk, status, since, last_event in candidates:
        reading = heartbeat_read(pk)
        if reading is not None:
            if not reading.dead:
                continue
            reason = REASON_HEARTBEAT_STALE
        elif not keys_trusted:
            continue
        elif since < cutoff and (last_event is None or last_event < cutoff):
            reason = REASON_NO_HEARTBEAT
        else:
            continue
        found["running" if status == Run.Status.RUNNING else "undispatched"][pk] = (
            reason
        )
    return found


def runs_reap(
    *,
    now: datetime | None = None,
    stale_seconds: float | None = None,
    queued_seconds: float | None = None,
) -> dict[str, int]:
    """Run one janitor sweep; return how many items of each kind (:data:`KINDS`) it recovered.

    ``stale_seconds`` overrides ``RUN_STALE_SECONDS`` and ``queued_seconds``
    ``QUEUED_STALE_SECONDS`` (tests). Re-checks each run's status just before
    acting, so a run that moved on meanwhile is left alone. Logs one line per
    recovery and keeps the sweep as a ``JanitorSweep`` when it recovered
    anything. Implements FT-06.
    """
    sweep = _Sweep(now=now or timezone.now())
    found = stale_runs(now=sweep.now, stale_seconds=stale_seconds)
    for pk, reason in found["running"].items():
        run = Run.objects.select_related("thread").get(pk=pk)
        if run.status != Run.Status.RUNNING:
            continue
        with log_context(run=run.run_id, thread=run.thread.thread_id):
            since = _last_activity(run)
            lost = run_worker_lost(run=run)
            retry = {"retry": lost.retry.run_id} if lost.retry is not None else {}
            sweep.note(
                "worker_lost",
                since,
                f"run {run.run_id}'s worker is gone ({reason}, {lost.phase}); "
                + (
                    f"ended it, retrying as run {lost.retry.run_id}"
                    if lost.retry is not None
                    else "ended it"
                ),
                reason=reason,
                run=run.run_id,
                thread=run.thread.thread_id,
                phase=lost.phase,
                **retry,
            )
    for pk, reason in found["undispatched"].items():
        run = Run.objects.select_related("thread").get(pk=pk)
        if run.status != Run.Status.AWAITING_TOOLS:
            continue
        with log_context(run=run.run_id, thread=run.thread.thread_id):
            sweep.note(
                "dispatched",
                _last_activity(run),
                f"run {run.run_id}'s pending calls were never dispatched ({reason}); "
                "dispatching",
                reason=reason,
                run=run.run_id,
                thread=run.thread.thread_id,
            )
            pending_calls_dispatch(run=run)
    _lost_messages(sweep, queued_seconds=queued_seconds)
    _expired_leases(sweep)
    sweep.record()
    for kind, recovered in sweep.counts.items():
        if recovered:
            metrics.JANITOR_RECOVERIES.labels(kind).inc(recovered)
    return dict(sweep.counts)


def lost_messages_requeue(
    *, now: datetime | None = None, stale_seconds: float | None = None
) -> dict[str, int]:
    """Enqueue again runs and executions still ``queued`` after ``stale_seconds``.

    ``stale_seconds`` defaults to ``QUEUED_STALE_SECONDS``. A broker message can
    be lost (Redis restarted without persistence). Both tasks are idempotent — a
    run is claimed only while ``queued``, an execution runs at most once under
    its row lock and lease — so a duplicate delivery is harmless. Returns
    ``{"runs_requeued": n, "executions_requeued": m}`` (part of a sweep: use
    :func:`runs_reap` to have it logged and kept).
    """
    sweep = _Sweep(now=now or timezone.now())
    _lost_messages(sweep, queued_seconds=stale_seconds)
    return {k: sweep.counts[k] for k in ("runs_requeued", "executions_requeued")}


def _last_activity(run: Run) -> Any:
    last = run.events.aggregate(last=Max("created_at"))["last"]
    return last or run.started_at or run.created_at


def _lost_messages(sweep: _Sweep, *, queued_seconds: float | None) -> None:
    # Imported here: a task module imports Celery (bench B6).
    from threads.tasks import run_agent

    window = float(
        queued_seconds
        if queued_seconds is not None
        else countersign_settings.QUEUED_STALE_SECONDS
    )
    cutoff = sweep.now - timedelta(seconds=window)
    runs = list(
        Run.objects.filter(status=Run.Status.QUEUED, created_at__lt=cutoff).values_list(
            "pk", "run_id", "thread__thread_id", "created_at"
        )
    )
    with transaction.atomic():
        for pk, run_id, thread_id, created_at in runs:
            if not requeue_claim("runs_requeued", pk, seconds=window):
                continue
            sweep.note(
                "runs_requeued",
                created_at,
                f"run {run_id} still queued after {window}s; enqueueing it again",
                run=run_id,
                thread=thread_id,
            )
            enqueue(run_agent, run_pk=pk)
    _executions_requeue(
        sweep,
        kind="executions_requeued",
        # A call sent back to an operator after approval keeps its
        # queued execution until the new request is decided: not a lost message.
        # One deferred by its decision's undo window (``not_before``) is counted
        # from the end of the window, not from its creation: it is not lost.
        executions=ToolExecution.objects.filter(
            state=ToolExecution.State.QUEUED, created_at__lt=cutoff
        )
        .filter(Q(not_before__isnull=True) | Q(not_before__lt=cutoff))
        .exclude(tool_call__state=ToolCall.State.AWAITING_APPROVAL)
        # An external agent's approved call waits for its caller's claim, not
        # for a worker: no message of it was lost.
        .exclude(tool_call__run__agent__in=external_agent_names()),
        since_field="created_at",
        why=f"execution still queued after {window}s; enqueueing it again",
    )


def _expired_leases(sweep: _Sweep) -> None:
    """Hand each reservation whose lease ended to a worker again (BC32).

    The worker that reserved it is dead (a live one finishes within the lease:
    the tool's timeout plus the grace). ``tool_call_execute`` then runs an
    idempotent tool again with the same key or records ``outcome_unknown``.
    """
    _executions_requeue(
        sweep,
        kind="leases_expired",
        executions=ToolExecution.objects.filter(
            state=ToolExecution.State.RESERVED, lease_expires_at__lt=sweep.now
        ),
        since_field="lease_expires_at",
        why="execution lease ended without an outcome; handing it to a worker again",
    )


def _executions_requeue(
    sweep: _Sweep,
    *,
    kind: str,
    executions: QuerySet[ToolExecution],
    since_field: str,
    why: str,
) -> None:
    """Enqueue the execution task again for each of ``executions``, noted as ``kind``."""
    from orchestration.tasks import execute_tool_call

    rows = list(
        executions.values_list(
            "tool_call_id",
            "tool_call__tool_call_id",
            "tool_call__thread__thread_id",
            since_field,
        )
    )
    window = float(countersign_settings.QUEUED_STALE_SECONDS)
    with transaction.atomic():
        for pk, call_id, thread_id, since in rows:
            if not requeue_claim(kind, pk, seconds=window):
                continue
            sweep.note(
                kind,
                since,
                f"call {call_id}: {why}",
                toolCallId=call_id,
                thread=thread_id,
            )
            enqueue(execute_tool_call, tool_call_pk=pk)
