"""The janitor's Celery beat task, kept under the name beat schedules and workers know.

The janitor itself is :mod:`orchestration.janitor`; this module exists so the task
name (and the embedded beat's import path) ``threads.janitor.reap_stale_runs``
keeps working for running workers and beat schedules.
"""

from __future__ import annotations

from celery import shared_task


@shared_task(name="threads.janitor.reap_stale_runs", ignore_result=True)
def reap_stale_runs() -> dict[str, int]:
    """Celery beat entry point of :func:`orchestration.janitor.runs_reap`."""
    # In the body, as in threads.tasks: a worker's boot imports no service stack.
    from orchestration.janitor import runs_reap

    return runs_reap()
