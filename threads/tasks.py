"""Celery tasks of the threads app: thin shells around orchestration (STYLE.md 6).

Each task imports its service in its body: a worker's boot (autodiscovery imports
every task module) then imports no service stack, and a worker imports the stack
of a task kind when it first runs one (bench B6).
"""

from __future__ import annotations

from celery import shared_task


@shared_task(
    name="threads.tasks.run_agent",
    acks_late=True,
    reject_on_worker_lost=True,
    ignore_result=True,
)
def run_agent(*, run_pk: int) -> None:
    """Execute run ``run_pk`` and record its events (``orchestration.pipeline.run_execute``).

    A redelivered message finds the run claimed and finishes it with an error
    instead of running the agent twice.
    """
    from orchestration.pipeline import run_execute

    run_execute(run_pk=run_pk)
