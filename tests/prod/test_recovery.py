"""Bounded recovery from every crash, on real processes.

A worker *master* SIGKILLed while its child holds a step, and Redis restarted
without persistence while a message waits in a queue: in each case the
janitor's sweep (beat every second under ``tests.prod.settings``) recovers the
thread, which is answered exactly once (one execution, one tool message, one
ledger line) or left ``outcome_unknown`` for an operator and then continues.
Recovery through the janitor is asserted from its :class:`JanitorSweep`
records and its JSON log lines, not from wall-clock timing.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.prod import (
    delta_count,
    deltas_wait,
    event_log,
    message_send,
    pending_approval_find,
    thread_start,
)
from tests.prod.client import api_client, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(150)]


def _sweeps_of(kind: str, **ids: str) -> list[dict[str, Any]]:
    """Return the janitor's recorded recoveries of ``kind`` matching ``ids``."""
    from approvals.models import JanitorSweep

    return [
        entry
        for sweep in JanitorSweep.objects.all()
        for entry in sweep.recovered
        if entry["kind"] == kind and all(entry.get(k) == v for k, v in ids.items())
    ]


def _janitor_lines(stack: Any, kind: str) -> list[dict[str, Any]]:
    """Return the JSON log lines of the janitor's recoveries of ``kind``, from any process."""
    return [
        record
        for proc in stack.procs
        for line in proc.text().splitlines()
        if line.startswith("{")
        for record in [json.loads(line)]
        if record.get("janitor") == kind
    ]


def _kill_master(proc: Any) -> None:
    """SIGKILL only the worker's main process; its prefork children are orphaned."""
    os.kill(proc.process.pid, signal.SIGKILL)
    proc.process.wait(10)


def _refund_awaiting_approval(stack: Any, api: Any) -> tuple[str, dict[str, Any]]:
    """Ask the fragile agent for a refund; return the thread id and its pending approval."""
    thread_id = thread_start(api, "fragile")
    message_send(api, thread_id, "refund order A-1001 2.50")
    approval = wait_until(
        lambda: pending_approval_find(api, thread_id),
        timeout=30,
        what=f"the refund's approval request\n{stack.logs()}",
    )
    return thread_id, approval


def _finished_runs(thread_id: str) -> int:
    from threads.models import Run

    return Run.objects.filter(
        thread__client_thread_id=thread_id, status="finished"
    ).count()


def _ledger_lines(tmp_path: Path) -> list[str]:
    ledger = tmp_path / "ledger.jsonl"
    return ledger.read_text().splitlines() if ledger.exists() else []


def test_master_killed_after_reservation_janitor_hands_expired_lease_to_outcome_unknown(
    stack, operator, tmp_path: Path
):
    """Master SIGKILLed while its child holds a reservation: outcome_unknown, then the thread continues."""
    from approvals.models import ToolExecution
    from threads.models import ToolCall

    # given the non-idempotent refund approved, its tools worker frozen right
    # after committing the reservation
    base = stack.web()
    stack.worker("janitor-worker", queues="countersign")
    stack.worker("runs-worker", queues="runs")
    stack.beat()
    tools = stack.worker("tools-worker", queues="tools")
    api = api_client(base, operator["token"])
    thread_id, approval = _refund_awaiting_approval(stack, api)
    tools.terminate()
    doomed = stack.worker(
        "tools-worker-hanging",
        queues="tools",
        COUNTERSIGN_TEST_HANG_AT="after_reservation",
    )
    assert (
        api.post(f"/api/approvals/{approval['id']}/approve/", json={}).status_code
        == 200
    )
    call = ToolCall.objects.get(thread__client_thread_id=thread_id, name="refund_order")
    wait_until(
        lambda: "crash point after_reservation: hanging" in doomed.text(),
        timeout=30,
        what=f"the reservation\n{stack.logs()}",
    )
    assert ToolExecution.objects.get(tool_call=call).state == "reserved"

    # when its master dies (the message stays unacknowledged in Redis for the
    # visibility timeout) and a tools worker comes back
    _kill_master(doomed)
    stack.worker("tools-worker-2", queues="tools")

    # then the janitor hands the expired lease to the new worker: outcome_unknown
    call = wait_until(
        lambda: ToolCall.objects.filter(pk=call.pk, state="outcome_unknown").first(),
        timeout=40,
        what=f"outcome_unknown\n{stack.logs()}",
    )
    execution = ToolExecution.objects.get(tool_call=call)
    assert (execution.state, execution.attempts) == ("outcome_unknown", 1)
    assert _ledger_lines(tmp_path) == []
    assert _sweeps_of("leases_expired", toolCallId=call.tool_call_id)
    lines = _janitor_lines(stack, "leases_expired")
    assert any(line["toolCallId"] == call.tool_call_id for line in lines), lines
    assert all(line["age_seconds"] >= 0 for line in lines)

    # and once an operator resolves it the thread continues and finishes
    resolved = api.post(
        f"/api/approvals/{approval['id']}/resolve/",
        json={"succeeded": False, "content": "not refunded", "reason": "checked"},
    )
    assert resolved.status_code == 200, resolved.text
    wait_until(
        lambda: _finished_runs(thread_id) == 3,
        timeout=30,
        what=f"the continuation finishing\n{stack.logs()}",
    )
    log = event_log(thread_id)
    tool_results = [e for e in log if e["type"] == "TOOL_CALL_RESULT"]
    assert [e["toolCallId"] for e in tool_results].count(call.tool_call_id) == 1
    assert _ledger_lines(tmp_path) == []


def test_master_killed_before_dispatch_janitor_dispatches_and_refund_runs_once(
    stack, operator, tmp_path: Path
):
    """Worker (master and child) killed between a run's events and its dispatch: dispatched once."""
    from approvals.models import ToolExecution
    from threads.models import Run, ToolCall

    # given a runs worker that freezes after recording the run, before dispatch
    base = stack.web()
    stack.worker("janitor-worker", queues="countersign")
    stack.worker("tools-worker", queues="tools")
    stack.beat()
    doomed = stack.worker(
        "runs-worker", queues="runs", COUNTERSIGN_TEST_HANG_AT="after_run_recorded"
    )
    api = api_client(base, operator["token"])
    thread_id = thread_start(api, "fragile")
    run_id = message_send(api, thread_id, "refund order A-1001 2.50")["run"]["runId"]
    wait_until(
        lambda: "crash point after_run_recorded: hanging" in doomed.text(),
        timeout=30,
        what=f"the run recorded\n{stack.logs()}",
    )
    run = Run.objects.get(run_id=run_id)
    assert run.status == "awaiting_tools"
    assert list(ToolCall.objects.filter(run=run).values_list("state", flat=True)) == [
        "pending"
    ]

    # when the worker dies, master and child (no heartbeat any more), and a runs
    # worker comes back
    doomed.kill()
    stack.worker("runs-worker-2", queues="runs")

    # then the janitor dispatches the call: its approval request appears
    approval = wait_until(
        lambda: pending_approval_find(api, thread_id),
        timeout=40,
        what=f"the approval request\n{stack.logs()}",
    )
    assert _sweeps_of("dispatched", run=run_id)
    assert any(line["run"] == run_id for line in _janitor_lines(stack, "dispatched"))

    # and, approved, the refund runs exactly once and the thread finishes
    assert (
        api.post(f"/api/approvals/{approval['id']}/approve/", json={}).status_code
        == 200
    )
    wait_until(
        lambda: _finished_runs(thread_id) == 3,
        timeout=40,
        what=f"the continuation finishing\n{stack.logs()}",
    )
    assert Run.objects.filter(thread__client_thread_id=thread_id).count() == 3
    calls = ToolCall.objects.filter(thread__client_thread_id=thread_id)
    assert sorted(calls.values_list("name", "state")) == [
        ("lookup_order", "succeeded"),
        ("refund_order", "succeeded"),
    ]
    call = calls.get(name="refund_order")
    execution = ToolExecution.objects.get(tool_call=call)
    assert (execution.state, execution.attempts) == ("succeeded", 1)
    assert len(_ledger_lines(tmp_path)) == 1
    results = [e for e in event_log(thread_id) if e["type"] == "TOOL_CALL_RESULT"]
    assert sorted(e["toolCallId"] for e in results) == sorted(
        calls.values_list("tool_call_id", flat=True)
    )


def test_redis_restarted_without_persistence_janitor_requeues_execution_and_continuation(
    stack, operator, tmp_path: Path
):
    """Redis loses a queued execution, then a queued continuation: each runs once, via the janitor."""
    from approvals.models import ToolExecution
    from threads.models import Run, ToolCall

    # given the refund's approval pending, and no worker for runs or tools
    base = stack.web()
    stack.worker("janitor-worker", queues="countersign")
    stack.beat()
    runs = stack.worker("runs-worker", queues="runs")
    tools = stack.worker("tools-worker", queues="tools")
    api = api_client(base, operator["token"])
    thread_id, approval = _refund_awaiting_approval(stack, api)
    runs.terminate()
    tools.terminate()

    # when the approved execution's message is lost with Redis (no persistence)
    assert (
        api.post(f"/api/approvals/{approval['id']}/approve/", json={}).status_code
        == 200
    )
    call = ToolCall.objects.get(thread__client_thread_id=thread_id, name="refund_order")
    assert ToolExecution.objects.get(tool_call=call).state == "queued"
    stack.redis.shutdown_nosave()
    stack.redis.start()
    # Frozen once the outcome (and the queued continuation) committed: the worker
    # would otherwise run the continuation itself in the same task
    # (orchestration.pipeline, one hop), and its message would not matter.
    frozen = stack.worker(
        "tools-worker-2", queues="tools", COUNTERSIGN_TEST_HANG_AT="after_outcome"
    )

    # then the janitor enqueues it again and it runs once
    wait_until(
        lambda: ToolCall.objects.filter(pk=call.pk, state="succeeded").exists(),
        timeout=40,
        what=f"the refund executing\n{stack.logs()}",
    )
    # The sweep record is written as the sweep ends, which may be after the
    # work it re-enqueued has already run.
    wait_until(
        lambda: _sweeps_of("executions_requeued", toolCallId=call.tool_call_id),
        timeout=15,
        what="the sweep's record of executions_requeued",
    )
    continuation = wait_until(
        lambda: (
            Run.objects.filter(thread__client_thread_id=thread_id, status="queued")
            .exclude(pk=call.run_id)
            .first()
        ),
        timeout=20,
        what="the continuation queued",
    )
    # The continuation's message leaves on commit, just before the crash point:
    # restarting Redis before it has would not lose it (it would be retried).
    wait_until(
        lambda: "crash point after_outcome: hanging" in frozen.text(),
        timeout=20,
        what="the frozen worker past its outcome's commit",
    )

    # when the continuation's message is lost too
    stack.redis.shutdown_nosave()
    stack.redis.start()
    stack.worker("runs-worker-2", queues="runs")

    # then the janitor enqueues the continuation again and the thread finishes
    wait_until(
        lambda: Run.objects.filter(pk=continuation.pk, status="finished").exists(),
        timeout=40,
        what=f"the continuation finishing\n{stack.logs()}",
    )
    # The sweep record is written as the sweep ends, which may be after the
    # work it re-enqueued has already run.
    wait_until(
        lambda: _sweeps_of("runs_requeued", run=continuation.run_id),
        timeout=15,
        what="the sweep's record of runs_requeued",
    )
    assert any(
        line["run"] == continuation.run_id
        for line in _janitor_lines(stack, "runs_requeued")
    )
    execution = ToolExecution.objects.get(tool_call=call)
    assert (execution.state, execution.attempts) == ("succeeded", 1)
    assert len(_ledger_lines(tmp_path)) == 1
    log = event_log(thread_id)
    assert [e["seq"] for e in log] == list(range(1, len(log) + 1))
    results = [e for e in log if e["type"] == "TOOL_CALL_RESULT"]
    assert [e["toolCallId"] for e in results].count(call.tool_call_id) == 1
    assert _finished_runs(thread_id) == 3


def test_worker_sigkilled_mid_run_is_reaped_on_its_stale_heartbeat_not_run_stale_seconds(
    stack, operator
):
    """Heartbeat rule: a killed worker's run ends long before RUN_STALE_SECONDS."""
    from threads.models import Run

    # given RUN_STALE_SECONDS far beyond the test's patience, so only the
    # heartbeat (0.5 s: dead 2 s after its last refresh) can end the run
    stack.env["COUNTERSIGN_RUN_STALE_SECONDS"] = "600"
    base = stack.web()
    doomed = stack.worker("runs-worker", queues="runs")
    stack.worker("janitor-worker", queues="tools,countersign")
    stack.beat()
    api = api_client(base, operator["token"])
    thread_id = thread_start(api, "slow")
    run_id = message_send(api, thread_id, "deltas=400 delay=0.05")["run"]["runId"]
    deltas_wait(run_id, 3, what=f"the run streaming\n{stack.logs()}")

    # when its worker, master and child, is SIGKILLed mid-run
    doomed.kill()
    assert Run.objects.get(run_id=run_id).status == Run.Status.RUNNING

    # then the janitor ends it with worker_lost, naming the stale heartbeat
    wait_until(
        lambda: _sweeps_of("worker_lost", run=run_id),
        timeout=40,
        what=f"the janitor's sweep ending run {run_id}\n{stack.logs()}",
    )
    [entry] = _sweeps_of("worker_lost", run=run_id)
    assert entry["reason"] == "heartbeat_stale"
    assert entry["thread"] == thread_id
    run = Run.objects.get(run_id=run_id)
    assert (run.status, run.error_code) == (Run.Status.ERROR, "worker_lost"), (
        [(e["type"], e.get("code"), e.get("message")) for e in event_log(thread_id)][
            -4:
        ],
        stack.logs(),
    )
    lines = [
        line
        for line in _janitor_lines(stack, "worker_lost")
        if line.get("run") == run_id
    ]
    assert [line["reason"] for line in lines] == ["heartbeat_stale"], lines
    assert event_log(thread_id)[-1]["code"] == "worker_lost"
    # and the thread takes a new message
    assert message_send(api, thread_id, "deltas=2 delay=0")["run"]["status"] == "queued"


def test_live_quiet_run_survives_redis_restarts_with_and_without_its_keys(
    stack, operator, settings
):
    """Redis restarted empty, then restored from disk after a long outage: the live run finishes."""
    import time

    from orchestration.janitor import stale_runs
    from threads.models import Run

    # The test's own sweeps judge as the stack's janitor does, at once after
    # each restart (before the worker's next refresh, as a beat could).
    settings.REDIS_URL = stack.redis.url
    settings.COUNTERSIGN = {
        **settings.COUNTERSIGN,
        "RUN_HEARTBEAT_SECONDS": 0.5,
        "RUN_STALE_SECONDS": 3.0,
    }
    nothing = {"running": {}, "undispatched": {}}

    # given a live run whose agent is silent 4 s between deltas, longer than
    # RUN_STALE_SECONDS (3 s) and the heartbeat's 2 s to prove a death
    base = stack.web()
    stack.worker("runs-worker", queues="runs")
    stack.worker("janitor-worker", queues="tools,countersign")
    stack.beat()
    api = api_client(base, operator["token"])
    thread_id = thread_start(api, "slow")
    run_id = message_send(api, thread_id, "deltas=4 delay=4")["run"]["runId"]

    deltas_wait(run_id, 1, what=f"a delta\n{stack.logs()}")

    # when Redis restarts empty (the heartbeat key lost) once the run has been
    # silent past RUN_STALE_SECONDS
    time.sleep(3.2)
    stack.redis.shutdown_nosave()
    stack.redis.start()
    assert stale_runs() == nothing
    # and then, after the next delta, restarts from disk after 3 s down (the
    # restored key staler than the heartbeat's 2 s)
    deltas_wait(run_id, 2, what=f"a delta\n{stack.logs()}")
    stack.redis.restart_keeping_data(down_for=3.0)
    assert stale_runs() == nothing

    # then the run finishes, every delta recorded, and no sweep ended it
    run = wait_until(
        lambda: Run.objects.filter(
            run_id=run_id, status__in=[Run.Status.FINISHED, Run.Status.ERROR]
        ).first(),
        timeout=60,
        what=f"the run ending\n{stack.logs()}",
    )
    assert (run.status, run.error_code) == (Run.Status.FINISHED, ""), stack.logs()
    assert delta_count(run_id) == 4
    assert _sweeps_of("worker_lost", run=run_id) == []


def test_continuation_worker_killed_after_the_tool_result_is_retried_to_the_final_answer(
    stack, operator, tmp_path: Path
):
    """Child killed claiming the continuation: worker_lost (phase named), retried, answered once."""
    from threads.models import Message, Run

    # given the non-idempotent refund waiting for approval, and a tools worker
    # that dies as it claims the continuation after recording the refund's result
    # (the worker that wrote the last answer runs the continuation itself)
    base = stack.web()
    stack.worker("janitor-worker", queues="countersign")
    runs = stack.worker("runs-worker", queues="runs")
    stack.beat()
    tools = stack.worker("tools-worker", queues="tools")
    api = api_client(base, operator["token"])
    thread_id, approval = _refund_awaiting_approval(stack, api)
    tools.terminate()
    runs.terminate()  # so the dying worker, not this one, claims the continuation
    doomed = stack.worker(
        "tools-worker-crashing",
        queues="tools",
        COUNTERSIGN_TEST_CRASH_AT="after_run_claimed",
    )

    # when the refund is approved: it runs, then the continuation's worker dies
    decided = api.post(f"/api/approvals/{approval['id']}/approve/", json={})
    assert decided.status_code == 200, decided.text
    wait_until(
        lambda: "exitcode 17" in doomed.text(),
        timeout=30,
        what=f"the continuation's worker dying\n{stack.logs()}",
    )
    assert len(_ledger_lines(tmp_path)) == 1
    stack.worker("runs-worker-2", queues="runs")

    # then the lost continuation ends worker_lost naming its phase, and its retry
    # (attempt 2) gives the agent's final answer
    retry = wait_until(
        lambda: Run.objects.filter(
            thread__client_thread_id=thread_id, attempt=2, status="finished"
        ).first(),
        timeout=60,
        what=f"the retried continuation finishing\n{stack.logs()}",
    )
    lost = Run.objects.get(pk=retry.retry_of_id)
    assert (lost.status, lost.error_code) == ("error", "worker_lost")
    assert lost.error_message == (
        "The worker executing this run stopped before it finished (before_output); "
        "Countersign starts the turn again (attempt 2 of 3)."
    )
    answer = Message.objects.filter(thread__client_thread_id=thread_id).last()
    assert answer is not None
    assert (answer.role, answer.run_id) == ("assistant", retry.pk)
    assert answer.content == "Refund done: refunded 2.5 on A-1001"
    # the refund ran exactly once, answered once, reported once
    assert len(_ledger_lines(tmp_path)) == 1
    log = event_log(thread_id)
    assert [e["seq"] for e in log] == list(range(1, len(log) + 1))
    results = [e["toolCallId"] for e in log if e["type"] == "TOOL_CALL_RESULT"]
    assert len(results) == len(set(results)) == 2
    errors = [e for e in log if e["type"] == "RUN_ERROR"]
    assert [e["code"] for e in errors] == ["worker_lost"]
    assert log[-1]["type"] == "RUN_FINISHED"
