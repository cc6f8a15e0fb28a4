"""Celery tasks of the pipeline: thin shells around :mod:`orchestration` (STYLE.md 6).

Each keeps the name it was first registered under (messages already in a broker
and beat schedules name tasks, not modules). Each imports its step in its body:
a worker's boot (``CELERY_IMPORTS``) then imports no service stack, and a worker
imports the stack of a task kind when it first runs one (bench B6). Call sites
import the task object where they send it (:func:`threads.execution.enqueue`).
"""

from __future__ import annotations

from celery import shared_task


@shared_task(
    name="approvals.tasks.execute_tool_call",
    acks_late=True,
    reject_on_worker_lost=True,
    ignore_result=True,
)
def execute_tool_call(*, tool_call_pk: int) -> None:
    """Execute approved call ``tool_call_pk`` exactly once (``pipeline.tool_call_execute``).

    A delivery that finds another one holding the execution lease is scheduled
    again for when the lease ends, so a dead worker's call is still finished.
    """
    from orchestration.pipeline import tool_call_execute_supervised

    tool_call_execute_supervised(tool_call_pk=tool_call_pk)


@shared_task(name="approvals.tasks.expire_approvals", ignore_result=True)
def expire_approvals() -> int:
    """Escalate requests past their step's time, then expire those past their final deadline.

    Run by Celery beat (or the embedded beat); returns how many expired.
    """
    from approvals.services.escalation import approvals_escalate
    from orchestration.pipeline import approvals_expire

    approvals_escalate()
    return approvals_expire()


@shared_task(name="threads.janitor.reap_stale_runs", ignore_result=True)
def reap_stale_runs() -> dict[str, int]:
    """Celery beat entry point of :func:`orchestration.janitor.runs_reap`."""
    from orchestration.janitor import runs_reap

    return runs_reap()
