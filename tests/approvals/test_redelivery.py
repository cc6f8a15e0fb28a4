"""A dead worker's execution is redelivered within a bound, even when a sweep is missed.

kombu requeues a dead worker's unacknowledged message from a sweep of Redis's
unacknowledged index: once when a worker starts, then periodically. With kombu 5.7's
defaults the periodic sweep runs every 100 s, so a message the start-up sweep missed
(here: the sweep's mutex still held, as a worker killed mid-sweep leaves it) stayed
``executing`` longer than any test or operator waits. ``config/settings.py`` sweeps
every ``min(10 s, visibility timeout)`` and lets the mutex expire after 10 s (BC32).
"""

from __future__ import annotations

import os
import time

import pytest
import redis

from approvals.models import ApprovalRequest, ToolExecution
from demo.models import Refund
from orchestration.pipeline import approval_decide

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("executor", ["celery"], indirect=True)
def test_bc32_dead_workers_call_is_redelivered_although_the_startup_sweep_missed_it(
    approver, pending_refund, executor
):
    """Worker killed after the reservation, start-up sweep blocked: done within 40 s."""
    call = pending_refund
    worker = executor.worker
    worker.stop()
    worker.env["CELERY_VISIBILITY_TIMEOUT"] = "1"
    worker.env["COUNTERSIGN_EXECUTION_LEASE_GRACE_SECONDS"] = "0"
    worker.start(COUNTERSIGN_TEST_CRASH_AT="after_reservation")
    approval_decide(
        approval=ApprovalRequest.objects.get(tool_call=call),
        decided_by=approver,
        decision="approve",
    )
    assert worker.process is not None
    worker.process.wait(30)
    assert ToolExecution.objects.get(tool_call=call).state == "reserved"

    # the sweep's mutex is held for 8 s, as a worker killed mid-sweep leaves it
    client = redis.Redis.from_url(worker.broker_url)
    mutex = f"{os.environ['CELERY_BROKER_PREFIX']}unacked_mutex"
    assert client.set(mutex, "held-by-a-dead-worker", nx=True, px=8000)
    started = time.monotonic()
    worker.start()
    executor.settle(call.thread, timeout=40)

    assert time.monotonic() - started < 40
    execution = ToolExecution.objects.get(tool_call=call)
    assert execution.state == "succeeded"
    assert execution.attempts == 2
    assert Refund.objects.count() == 1
