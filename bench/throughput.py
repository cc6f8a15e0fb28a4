"""B7: the main job's throughput, and how it scales from 1 web + 1 worker to 2 + 2.

One job is the demo refund flow on a new thread: ``POST /api/threads/<id>/messages/``
(the user message) → the run calls ``lookup_order`` (auto-approved, executed by a
worker) → its continuation calls ``refund_order``, which waits for approval → the
approval is POSTed to ``/api/approvals/<id>/approve/`` → a worker executes it → the
continuation ends the thread with its final text. ``BENCH_B7_JOBS`` jobs run with
``BENCH_B7_CONCURRENCY`` in flight at once, spread round-robin over the web
processes; the workers are ``celery -P solo`` processes on the same Redis and
PostgreSQL. Jobs/s = jobs / (first POST → last job done).

Segments per job, from the clock and the rows: message (POST answered) →
approval request created; the approve POST; approval decided → execution started;
execution started → the thread's last run finished (the final text).

Baseline in the same run: the raw hops of B2 (a DRF view updating one row, a no-op
Celery task's enqueue → start, a Redis PUBLISH → WebSocket hop) on the 1 + 1 stack,
and the 1 + 1 figure for the scaling ratio. All processes, the client, Redis and
PostgreSQL share the machine's cores: on 2 vCPUs the second worker pair competes
with the first for the same cores, which caps the ratio well below 2.

    python -m bench.throughput     # BENCH_B7_JOBS (40), BENCH_B7_CONCURRENCY (10)
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from bench.common import (
    Row,
    bench_user,
    celery_worker,
    pct,
    print_rows,
    save_rows,
    setup_django,
    stop_process,
    uvicorn,
)

JOBS = int(os.environ.get("BENCH_B7_JOBS") or 40)
CONCURRENCY = int(os.environ.get("BENCH_B7_CONCURRENCY") or 10)
POLL = 0.02
TIMEOUT = 120.0


def _workers(count: int) -> list[Any]:
    return [
        celery_worker(f"b7-worker-{i}", hostname=f"b7-{i}@%h") for i in range(count)
    ]


def _stack(count: int) -> tuple[list[Any], list[Any]]:
    servers = [
        uvicorn(f"b7-web-{i}", API_MESSAGE_RATE="100000/min") for i in range(count)
    ]
    return servers, _workers(count)


async def _until(predicate: Any) -> Any:
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        value = await asyncio.to_thread(predicate)
        if value:
            return value
        await asyncio.sleep(POLL)
    raise TimeoutError(predicate)


def _pending_approval(thread: Any) -> Any:
    from approvals.models import ApprovalRequest

    return ApprovalRequest.objects.filter(thread=thread, status="pending").first()


def _job_is_complete(thread: Any) -> Any:
    """Return when the job's final text ended its run, once the refund succeeded."""
    from threads.models import Run, ToolCall

    if not ToolCall.objects.filter(
        thread=thread, name="refund_order", state="succeeded"
    ).exists():
        return None
    if Run.objects.filter(
        thread=thread, status__in=["queued", "running", "awaiting_tools"]
    ).exists():
        return None
    return (
        Run.objects.filter(thread=thread, finished_at__isnull=False)
        .order_by("-finished_at")
        .values_list("finished_at", flat=True)
        .first()
    )


async def _drive(servers: list[Any], token: str) -> dict[str, Any]:
    import httpx

    from approvals.models import ToolExecution
    from bench.common import bench_user
    from threads.services import thread_create

    user = await asyncio.to_thread(bench_user)
    threads = [
        await asyncio.to_thread(thread_create, owner=user, title=f"B7 {i}")
        for i in range(JOBS)
    ]
    clients = [
        httpx.AsyncClient(
            base_url=s.base, headers={"Authorization": f"Token {token}"}, timeout=60
        )
        for s in servers
    ]
    gate = asyncio.Semaphore(CONCURRENCY)
    segments: dict[str, list[float]] = {
        "message": [],
        "approve": [],
        "execute": [],
        "final": [],
        "job": [],
    }
    ends: list[float] = []

    async def job(index: int, thread: Any) -> None:
        api = clients[index % len(clients)]
        async with gate:
            t0 = time.time()
            posted = await api.post(
                f"/api/threads/{thread.thread_id}/messages/",
                json={"content": "refund order A-1001 0.01"},
            )
            assert posted.status_code == 201, posted.text
            approval = await _until(lambda: _pending_approval(thread))
            segments["message"].append((approval.requested_at.timestamp() - t0) * 1000)
            t1 = time.time()
            decided = await api.post(f"/api/approvals/{approval.pk}/approve/", json={})
            assert decided.status_code == 200, decided.text
            segments["approve"].append((time.time() - t1) * 1000)
            done = await _until(lambda: _job_is_complete(thread))
            ends.append(done.timestamp())
            execution = await asyncio.to_thread(
                ToolExecution.objects.get, tool_call_id=approval.tool_call_id
            )
            await asyncio.to_thread(approval.refresh_from_db)
            assert execution.started_at is not None  # the job completed
            started = execution.started_at.timestamp()
            segments["execute"].append(
                (started - approval.decided_at.timestamp()) * 1000
            )
            segments["final"].append((done.timestamp() - started) * 1000)
            segments["job"].append((done.timestamp() - t0) * 1000)

    start = time.time()
    try:
        await asyncio.gather(*(job(i, t) for i, t in enumerate(threads)))
    finally:
        for client in clients:
            await client.aclose()
    executions = await asyncio.to_thread(
        lambda: list(
            ToolExecution.objects.filter(tool_call__thread__in=threads).values_list(
                "attempts", flat=True
            )
        )
    )
    return {
        "rate": JOBS / (max(ends) - start),
        "segments": segments,
        "once": len(executions) == 2 * JOBS and all(a == 1 for a in executions),
    }


def measure(count: int, token: str) -> dict[str, Any]:
    servers, workers = _stack(count)
    try:
        return asyncio.run(_drive(servers, token))
    finally:
        for server in servers:
            server.stop()
        for worker in workers:
            stop_process(worker)


def raw_hops(token: str) -> dict[str, list[float]]:
    from bench.approval_latency import (
        baseline_celery,
        baseline_http,
        baseline_publish,
    )

    servers, workers = _stack(1)
    try:
        return {
            "http": baseline_http(servers[0], token),
            "celery": baseline_celery(),
            "publish": baseline_publish(),
        }
    finally:
        servers[0].stop()
        for worker in workers:
            stop_process(worker)


def main() -> list[Row]:
    setup_django()
    from rest_framework.authtoken.models import Token

    token = Token.objects.get_or_create(user=bench_user())[0].key
    one = measure(1, token)
    two = measure(2, token)
    raw = raw_hops(token)
    hop = {p: pct(raw["celery"], p) for p in (50, 99)}
    view = {p: pct(raw["http"], p) for p in (50, 99)}
    rows = [
        Row(
            "B7",
            f"jobs/s, 1 web + 1 worker ({CONCURRENCY} in flight)",
            one["rate"],
            float("nan"),
            "jobs/s",
            ratio=None,
            note=f"{JOBS} jobs; executions exactly once: {one['once']}",
        ),
        Row(
            "B7",
            "jobs/s, 2 web + 2 workers (scaling ratio)",
            two["rate"],
            one["rate"],
            "jobs/s",
            target=">= 1.6x (2 vCPU shared with client, Redis, PostgreSQL)",
            note=f"executions exactly once: {two['once']}",
        ),
    ]
    labels = {
        "message": ("message POST -> approval request", hop),
        "approve": ("approve POST answered", view),
        "execute": ("decided -> execution started", hop),
        "final": ("execution started -> final text", hop),
        "job": ("whole job", hop),
    }
    for name, result in (("1+1", one), ("2+2", two)):
        for key, (label, raw_hop) in labels.items():
            values = result["segments"][key]
            rows.append(
                Row(
                    "B7",
                    f"{name} p99 {label}",
                    pct(values, 99),
                    raw_hop[99],
                    "ms",
                    target="<= 3x raw hop" if key in ("approve", "execute") else "",
                    note=f"p50 {pct(values, 50):.1f} ms; raw hop = "
                    + ("DRF view" if raw_hop is view else "Celery no-op task"),
                )
            )
    rows.append(
        Row(
            "B7",
            "raw PUBLISH -> WS hop p99",
            pct(raw["publish"], 99),
            pct(raw["publish"], 99),
            "ms",
            note=f"p50 {pct(raw['publish'], 50):.2f} ms; view p50 {view[50]:.1f}, "
            f"Celery hop p50 {hop[50]:.1f} ms",
        )
    )
    return rows


if __name__ == "__main__":
    result = main()
    print_rows(result)
    save_rows("throughput", result)
