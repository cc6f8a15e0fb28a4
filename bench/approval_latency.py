"""B2: approval → first continuation event on an open WebSocket, vs the sum of its hops.

A real uvicorn and a real Celery worker (``-P solo``) on Redis; the demo refund flow
(lookup auto-approved, refund waiting for approval) prepared on A threads; then,
one at a time on an idle system: a WebSocket is open on the thread, the approval is
POSTed to ``/api/approvals/<id>/approve/`` with a token, and the clock stops at the
continuation run's ``RUN_STARTED`` on the socket. Segments from the rows' times:
decide → commit (``decided_at``), commit → tool task start (``started_at`` of the
execution), task start → first event. The path holds two Celery hops (execute the
call, then start the continuation run) and the tool itself.

Baseline, each measured here: a DRF view updating one row (same HTTP client and
token), a no-op Celery task's enqueue → start, a raw Redis PUBLISH → WebSocket hop.

Also printed: the SQL statements of one approval, counted in process (decide;
execution → the commit of the continuation's ``RUN_STARTED``).

    python -m bench.approval_latency     # BENCH_APPROVALS (30)
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import time
import uuid
from collections.abc import Callable
from typing import TypeVar

from bench.common import (
    PYTHON,
    REDIS_URL,
    Row,
    Server,
    bench_env,
    bench_user,
    celery_worker,
    free_port,
    pct,
    print_rows,
    save_rows,
    session_for,
    setup_django,
    spawn,
    stop_process,
    uvicorn,
    wait_port,
)

T = TypeVar("T")

APPROVALS = int(os.environ.get("BENCH_APPROVALS") or 30)


def _wait(predicate: Callable[[], T | None], timeout: float = 60) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise TimeoutError(predicate)


async def _first_run_started(
    url: str, headers: dict[str, str], origin: str, go: Callable[[], None]
) -> float:
    from websockets.asyncio.client import connect
    from websockets.typing import Origin

    async with connect(
        url, additional_headers=headers, origin=Origin(origin), compression=None
    ) as ws:
        await asyncio.sleep(0.05)
        await asyncio.get_running_loop().run_in_executor(None, go)
        while True:
            message = json.loads(await asyncio.wait_for(ws.recv(), 30))
            if message.get("type") == "RUN_STARTED":
                return time.time()


def ours(server: Server, token: str, cookie: str) -> dict[str, list[float]]:
    import httpx

    from approvals.models import ApprovalRequest, ToolExecution
    from threads.models import Run, Thread
    from threads.services import message_post, thread_create

    user = bench_user()
    threads = []
    for i in range(APPROVALS):
        thread = thread_create(owner=user, title=f"B2 {i}")
        message_post(thread=thread, content="refund order A-1001 0.01")
        threads.append(thread)

    def pending(thread: Thread) -> ApprovalRequest | None:
        return ApprovalRequest.objects.filter(thread=thread, status="pending").first()

    def settled(thread: Thread) -> bool:
        return not Run.objects.filter(
            thread=thread, status__in=["queued", "running"]
        ).exists()

    approvals = [_wait(functools.partial(pending, t)) for t in threads]
    time.sleep(1.0)  # idle system
    api = httpx.Client(
        base_url=server.base, headers={"Authorization": f"Token {token}"}
    )
    ws = server.base.replace("http://", "ws://")
    total, decide, hop, rest = [], [], [], []
    for thread, approval in zip(threads, approvals, strict=True):
        after = (
            thread.events.order_by("-seq").values_list("seq", flat=True).first() or 0
        )
        box: dict[str, float] = {}

        def go(
            approval: ApprovalRequest = approval, box: dict[str, float] = box
        ) -> None:
            box["t0"] = time.time()
            response = api.post(f"/api/approvals/{approval.pk}/approve/", json={})
            assert response.status_code == 200, response.text

        t1 = asyncio.run(
            _first_run_started(
                f"{ws}/ws/threads/{thread.thread_id}/?after={after}",
                {"Cookie": f"sessionid={cookie}"},
                server.base,
                go,
            )
        )
        approval.refresh_from_db()
        execution = ToolExecution.objects.get(tool_call_id=approval.tool_call_id)
        t0 = box["t0"]
        total.append((t1 - t0) * 1000)
        decided_at, started_at = approval.decided_at, execution.started_at
        assert decided_at is not None  # approved above
        assert started_at is not None  # executed above
        decide.append((decided_at.timestamp() - t0) * 1000)
        hop.append((started_at.timestamp() - decided_at.timestamp()) * 1000)
        rest.append((t1 - started_at.timestamp()) * 1000)
        # The continuation goes on in the (solo) worker after its first event:
        # the next approval starts on an idle worker, not queued behind it.
        _wait(functools.partial(settled, thread))
    executions = ToolExecution.objects.filter(tool_call__thread__in=threads)
    once = (
        all(e.attempts == 1 for e in executions) and executions.count() == 2 * APPROVALS
    )
    _wait(
        lambda: (
            not Run.objects.filter(
                thread__in=threads, status__in=["queued", "running"]
            ).exists()
        )
    )
    return {
        "total": total,
        "decide": decide,
        "hop": hop,
        "rest": rest,
        "once": [float(once)],
    }


def statements_per_approval() -> tuple[int, int]:
    """Count one approval's SQL statements in this process: decide, execution → RUN_STARTED.

    The demo refund flow is driven in process up to the pending approval, then
    ``approval_decide`` (the request as the REST view loads it) and the worker's
    ``tool_call_execute_supervised`` run under ``CaptureQueriesContext``; the
    second count stops at the ``COMMIT`` of the continuation's ``RUN_STARTED``
    (the event the socket receives, published on that commit). Run with no worker consuming: the broker
    messages this sends are purged afterwards.
    """
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from approvals.models import ApprovalRequest, ToolExecution
    from approvals.selectors import approval_visible_to
    from config.celery import app
    from orchestration.pipeline import (
        approval_decide,
        run_execute,
        tool_call_execute_supervised,
    )
    from threads.models import Run
    from threads.services import message_post, thread_create

    user = bench_user()
    thread = thread_create(owner=user, title="B2 statements")
    message_post(thread=thread, content="refund order A-1001 0.01")
    for _ in range(10):  # run the first run and the auto-approved lookup here
        run = Run.objects.filter(thread=thread, status="queued").first()
        execution = ToolExecution.objects.filter(
            tool_call__thread=thread, state="queued"
        ).first()
        if run is not None:
            run_execute(run_pk=run.pk)
        elif execution is not None:
            tool_call_execute_supervised(tool_call_pk=execution.tool_call_id)
        else:
            break
    pending = ApprovalRequest.objects.get(thread=thread, status="pending")
    approval = approval_visible_to(user=user).get(pk=pending.pk)
    assert approval.tool_call_id is not None  # a tool-call request
    with CaptureQueriesContext(connection) as decided:
        approval_decide(approval=approval, decided_by=user, decision="approve")
    with CaptureQueriesContext(connection) as executed:
        tool_call_execute_supervised(tool_call_pk=approval.tool_call_id)
    sql = [q["sql"] for q in executed.captured_queries]
    started = next(
        (i for i, q in enumerate(sql) if "INSERT" in q and "RUN_STARTED" in q),
        len(sql) - 1,
    )
    # The event is published when its transaction commits.
    committed = next(
        (i for i in range(started, len(sql)) if sql[i].startswith("COMMIT")),
        len(sql) - 1,
    )
    app.control.purge()
    return len(decided.captured_queries), committed + 1


def baseline_http(server: Server, token: str) -> list[float]:
    import httpx

    api = httpx.Client(
        base_url=server.base, headers={"Authorization": f"Token {token}"}
    )
    samples = []
    for _ in range(APPROVALS):
        start = time.perf_counter()
        assert api.post("/bench/touch/").status_code == 200
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def baseline_celery() -> list[float]:
    import redis

    from bench.tasks import noop

    key = f"bench:b2:{uuid.uuid4().hex}"
    client = redis.Redis.from_url(REDIS_URL)
    samples = []
    for _ in range(APPROVALS):
        noop.apply_async(kwargs={"sent": time.time(), "key": key}, queue="countersign")
        popped = client.blpop([key], timeout=30)
        if popped is None:
            raise TimeoutError(f"no answer on {key} within 30 s")
        samples.append(float(popped[1]) * 1000)
    return samples


def baseline_publish() -> list[float]:
    import redis
    from websockets.asyncio.client import connect

    port, channel = free_port(), f"b2-{uuid.uuid4().hex}"
    raw, _ = spawn(
        "b2-raw",
        [PYTHON, "-m", "bench.raw_ws_server", str(port), REDIS_URL, channel],
        bench_env(),
    )
    wait_port(port)
    client = redis.Redis.from_url(REDIS_URL)

    async def run() -> list[float]:
        samples = []
        async with connect(f"ws://127.0.0.1:{port}/", compression=None) as ws:
            await asyncio.sleep(0.2)
            for _ in range(APPROVALS):
                start = time.perf_counter()
                client.publish(channel, "{}")
                await ws.recv()
                samples.append((time.perf_counter() - start) * 1000)
        return samples

    try:
        return asyncio.run(run())
    finally:
        stop_process(raw)


def main() -> list[Row]:
    setup_django()
    from rest_framework.authtoken.models import Token

    user = bench_user()
    token = Token.objects.get_or_create(user=user)[0].key
    cookie = session_for(user)
    server = uvicorn("b2-web")
    worker = celery_worker("b2-worker")
    try:
        result = ours(server, token, cookie)
        http = baseline_http(server, token)
        celery_hop = baseline_celery()
        publish = baseline_publish()
    finally:
        server.stop()
        stop_process(worker)
    decide_statements, execute_statements = statements_per_approval()
    rows = []
    for p in (50, 90, 99):
        base = pct(http, p) + pct(celery_hop, p) + pct(publish, p)
        rows.append(
            Row(
                "B2",
                f"approve -> first continuation event, p{p}",
                pct(result["total"], p),
                base,
                "ms",
                target={50: "<= 1.5x sum, < 15 ms", 99: "<= 2x sum, < 40 ms"}.get(
                    p, ""
                ),
                note=f"sum = view {pct(http, p):.1f} + task hop {pct(celery_hop, p):.1f} "
                f"+ publish->WS {pct(publish, p):.1f}",
            )
        )
    rows.append(
        Row(
            "B2",
            "segments p50: decide->commit | commit->task | task->event",
            pct(result["decide"], 50),
            pct(result["hop"], 50),
            "ms",
            ratio=None,
            note=f"task start -> first event {pct(result['rest'], 50):.1f} ms "
            "(tool + 2nd Celery hop + run start)",
        )
    )
    rows.append(
        Row(
            "B2",
            "statements per approval: decide | execution -> RUN_STARTED commit",
            float(decide_statements),
            float(execute_statements),
            "stmts",
            ratio=None,
            note="in process (CaptureQueriesContext); the second column is the "
            "worker's, to the COMMIT of the continuation's RUN_STARTED",
        )
    )
    rows.append(
        Row(
            "B2",
            "executions per approval exactly 1 (1 = yes)",
            result["once"][0],
            1.0,
            "bool",
            note="worker kill/restart case: tests/prod",
        )
    )
    return rows


if __name__ == "__main__":
    rows = main()
    print_rows(rows)
    save_rows("approval_latency", rows)
