"""Celery workers survive their broker: Redis restarted again and again under load.

Real prefork workers (as ``make prod-like`` runs them) against the session's private
``redis-server`` (``tests/prod/conftest.py``), which is shut down and started again
while runs stream and more are queued. Each restart is a ``SHUTDOWN SAVE``, so the
queue and the unacknowledged-message hash survive it as they do on a Redis with
persistence: every run must then finish exactly once, on the same worker
processes, without an operator (DC-04 across broker restarts).
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.prod.client import api_client, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

RESTARTS = 4
RUNS_PER_ROUND = 3
DELTAS = 30


def _start_run(api: Any) -> tuple[str, str]:
    thread = api.post("/api/threads/", json={"title": "bounce", "agent": "slow"})
    assert thread.status_code == 201, thread.text
    thread_id = thread.json()["threadId"]
    posted = api.post(
        f"/api/threads/{thread_id}/messages/",
        json={"content": f"deltas={DELTAS} delay=0.05"},
    )
    assert posted.status_code == 201, posted.text
    return thread_id, posted.json()["run"]["runId"]


def test_workers_survive_repeated_redis_restarts_and_finish_every_run_once(
    stack, operator
):
    """Redis restarted 4 times mid-run: the workers live on and each run ends once."""
    from threads.models import Event, Run

    # given two prefork workers and a web, as under make prod-like
    base = stack.web()
    workers = [stack.worker(f"worker-{i}", concurrency=2) for i in range(2)]
    pids = [w.process.pid for w in workers]  # type: ignore[union-attr]
    api = api_client(base, operator["token"])
    started: list[tuple[str, str]] = []

    # when Redis restarts while runs stream and others wait in the queue
    for _ in range(RESTARTS):
        started += [_start_run(api) for _ in range(RUNS_PER_ROUND)]
        wait_until(
            lambda: Run.objects.filter(status=Run.Status.RUNNING).exists(),
            timeout=30,
            what=f"a run streaming\n{stack.logs()}",
        )
        stack.redis.restart_keeping_data(down_for=0.5)
        time.sleep(1.0)

    # then every run finishes, once, on the very same worker processes
    run_ids = [run_id for _, run_id in started]
    wait_until(
        lambda: (
            Run.objects.filter(run_id__in=run_ids, status=Run.Status.FINISHED).count()
            == len(run_ids)
        ),
        timeout=150,
        what=(
            "every run finishing: "
            f"{list(Run.objects.filter(run_id__in=run_ids).values_list('status', 'error_code'))}"
            f"\n{stack.logs()}"
        ),
    )
    for worker, pid in zip(workers, pids, strict=True):
        assert worker.alive, worker.text()[-3000:]
        assert worker.process.pid == pid  # type: ignore[union-attr]
        assert "Unrecoverable error" not in worker.text()
    expected = "".join(f"w{i} " for i in range(DELTAS))
    for thread_id, run_id in started:
        assert Run.objects.filter(thread__client_thread_id=thread_id).count() == 1
        events = Event.objects.filter(thread__client_thread_id=thread_id).order_by(
            "seq"
        )
        types = [e.type for e in events]
        assert types.count("RUN_STARTED") == 1, (run_id, types)
        assert types.count("RUN_FINISHED") == 1, (run_id, types)
        text = "".join(e.as_wire().get("delta", "") for e in events)
        assert text == expected, (run_id, text)
