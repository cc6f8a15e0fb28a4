"""Executing an approved call as a worker does: with log context, retried while leased."""

from __future__ import annotations

from approvals.exceptions import ExecutionInProgress
from approvals.services import EXECUTE_TASK, tool_call_execute
from orchestration.runs import run_execute
from orchestration.supervision import tool_call_log_context
from threads.execution import enqueue_later, uses_celery
from threads.models import Run, ToolCall


def tool_call_execute_supervised(*, tool_call_pk: int) -> None:
    """Execute approved call ``tool_call_pk`` (``tool_call_execute``) with its log context.

    A delivery that finds another one holding the execution lease is scheduled
    again for when the lease ends, so a dead worker's call is still finished
    (BC32, LP-07). When the answer started the run's continuation, this worker
    runs it at once (:func:`continuation_run_here`).
    """
    # One read for the log context and the executor's first lock (B2).
    row = (
        ToolCall.objects.filter(pk=tool_call_pk)
        .values_list(
            "tool_call_id",
            "run__run_id",
            "thread__thread_id",
            "thread_id",
            "run__agent",
        )
        .first()
    )
    ids = (row[0], row[1], row[2]) if row is not None else None
    with tool_call_log_context(tool_call_pk=tool_call_pk, ids=ids):
        try:
            tool_call_execute(
                tool_call_pk=tool_call_pk,
                located=(row[3], row[4]) if row is not None else None,
            )
        except ExecutionInProgress as busy:
            enqueue_later(
                EXECUTE_TASK, countdown=busy.retry_after, tool_call_pk=tool_call_pk
            )
            return
    continuation_run_here(tool_call_pk=tool_call_pk)


def continuation_run_here(*, tool_call_pk: int) -> Run | None:
    """Run the queued continuation of call ``tool_call_pk``'s run in this worker; return it.

    Saves the second broker hop between an approval and the continuation's first
    event (B2): the worker that wrote the last answer claims the continuation run
    itself. Its broker message was still sent when the run was created, so the
    run keeps its at-least-once delivery: whichever delivery claims the run first
    runs it (``run_execute`` claims under the run's row lock), the other finds it
    claimed with a live heartbeat, or no longer queued, and does nothing; a
    worker that dies mid-run is handled as any run's worker is (``worker_lost``
    through the heartbeat). Only with Celery: a duplicate is harmless only where
    heartbeats prove a claimer alive (Redis), and the embedded pool has no broker
    hop to save. Returns ``None`` when no continuation is queued.
    """
    if not uses_celery():
        return None
    run_pk = (
        Run.objects.filter(
            continues__tool_calls__pk=tool_call_pk, status=Run.Status.QUEUED
        )
        .values_list("pk", flat=True)
        .first()
    )
    if run_pk is None:
        return None
    return run_execute(run_pk=run_pk)
