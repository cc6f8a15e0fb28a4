"""B1: end-to-end events/s and latency to N WebSocket clients vs raw Pub/Sub + raw WS.

Ours: an in-process agent yields E AG-UI events (~81% ``TEXT_MESSAGE_CONTENT`` /
``TOOL_CALL_ARGS`` deltas, the rest start/end/result frames), each stamped with a
wall-clock ``timestamp`` (microseconds) when yielded; ``drive_agent`` feeds them
through ``agentcore.stream`` → ``RunRecorder`` (coalesced writes to PostgreSQL) →
projection → the PubSub channel layer → uvicorn + the Channels consumer on
``ws/threads/<id>/`` → N ``websockets`` clients. Latency = client receipt -
timestamp. Our clients connect with ``?preview=1`` ("show first, persist in
batches"): an event's latency is its first sighting, in a preview (sent before
its row is written) or, when no preview came, in the committed frame; a second
row gives the latency to the logged event (a coalesced delta carries its first
fragment's stamp, so the coalescing window is inside that figure). Baseline: the same frames PUBLISHed one
by one with redis-py to a raw ``websockets`` server (bench.raw_ws_server) that
fans them out to the same N clients. The clients run in a process of their own
(bench.ws_clients), for ours and the baseline alike. Throughput = E / (first yield → last client
has everything). A paced variant at 1,000 events/s gives latency under load.

    python -m bench.e2e_stream       # BENCH_E (10000), BENCH_REPS (1), BENCH_N ("1,10")

BENCH_PREVIEW_LINGER_MS and BENCH_PREVIEW_STREAM_GAP_MS override the publisher's
merge rule (threads.realtime) for comparisons.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from typing import Any

from agentcore.agents import Agent
from bench.common import (
    PYTHON,
    REDIS_URL,
    Row,
    bench_env,
    bench_user,
    free_port,
    median,
    pct,
    print_rows,
    save_rows,
    session_for,
    setup_django,
    spawn,
    stop_process,
    uvicorn,
)
from bench.ws_clients import ClientsProcess, now_us

E = int(os.environ.get("BENCH_E") or 10000)
REPS = int(os.environ.get("BENCH_REPS") or 1)
NS = tuple(int(n) for n in (os.environ.get("BENCH_N") or "1,10").split(","))
PACED_RATE = 1000
PACED_SECONDS = 3


def event_plan(count: int) -> list[dict[str, Any]]:
    """Return ``count``-ish event dicts (without stamps): text and tool-call items, 10 deltas each."""
    plan: list[dict[str, Any]] = []
    item = 0
    while len(plan) < count - 2:
        item += 1
        if item % 2:
            mid = f"m{item}"
            plan.append(
                {"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant"}
            )
            plan += [
                {"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": f"tok{i} "}
                for i in range(10)
            ]
            plan.append({"type": "TEXT_MESSAGE_END", "messageId": mid})
        else:
            cid = f"c{item}"
            plan.append(
                {"type": "TOOL_CALL_START", "toolCallId": cid, "toolCallName": "probe"}
            )
            args = json.dumps({"q": "x" * 40})
            plan += [
                {
                    "type": "TOOL_CALL_ARGS",
                    "toolCallId": cid,
                    "delta": args[i * 5 : (i + 1) * 5],
                }
                for i in range(-(-len(args) // 5))
            ][:10]
            plan.append({"type": "TOOL_CALL_END", "toolCallId": cid})
            plan.append(
                {
                    "type": "TOOL_CALL_RESULT",
                    "messageId": f"r{item}",
                    "toolCallId": cid,
                    "content": "ok",
                    "role": "tool",
                }
            )
    return plan


class PlanAgent(Agent):
    """An agent yielding the plan, stamped, optionally paced (events/s)."""

    def __init__(self, plan: list[dict[str, Any]], rate: float | None) -> None:
        self.plan = plan
        self.rate = rate

    async def run(self, run_input: Any, *, cancel: Any = None) -> Any:
        from agentcore.events import event_from_dict

        yield event_from_dict(
            {
                "type": "RUN_STARTED",
                "threadId": run_input.thread_id,
                "runId": run_input.run_id,
                "timestamp": now_us(),
            }
        )
        start = time.monotonic()
        for index, item in enumerate(self.plan):
            if self.rate:
                delay = start + index / self.rate - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
            yield event_from_dict({**item, "timestamp": now_us()})
        yield event_from_dict(
            {
                "type": "RUN_FINISHED",
                "threadId": run_input.thread_id,
                "runId": run_input.run_id,
                "timestamp": now_us(),
            }
        )


def drive_plan(run: Any, plan: list[dict[str, Any]], rate: float | None) -> float:
    """Record :class:`PlanAgent`'s run of ``plan`` as ``run`` (``drive_agent``, this process).

    Returns the wall-clock time (``time.time()``) the drive began, the start of every
    client's latency and throughput figure.
    """
    from agentcore.events import RunAgentInput
    from orchestration.runs import drive_agent
    from threads.recording import RunRecorder

    run_input = RunAgentInput.model_validate(
        {
            "threadId": run.thread.thread_id,
            "runId": run.run_id,
            "state": {},
            "messages": [],
            "tools": [],
            "context": [],
            "forwardedProps": {},
        }
    )
    start = time.time()
    drive_agent(
        agent=PlanAgent(plan, rate), run_input=run_input, recorder=RunRecorder(run)
    )
    return start


def publish_plan(
    channel: str, plan: list[dict[str, Any]], rate: float | None
) -> tuple[float, int]:
    """PUBLISH RUN_STARTED, ``plan`` and RUN_FINISHED to ``channel``, stamped, paced at ``rate``/s.

    The raw baselines' source (redis-py, one PUBLISH per frame, each carrying its
    ``seq``). Returns the wall-clock start (``time.time()``) and the frame count.
    """
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    frames = [{"type": "RUN_STARTED"}, *plan, {"type": "RUN_FINISHED"}]
    start = time.time()
    t0 = time.monotonic()
    for seq, frame in enumerate(frames, 1):
        if rate:
            delay = t0 + seq / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        client.publish(
            channel, json.dumps({"seq": seq, **frame, "timestamp": now_us()})
        )
    return start, len(frames)


def run_ours(
    server: Any, cookie: str, n: int, plan: list[dict[str, Any]], rate: float | None
) -> dict[str, float]:
    from threads.models import Run
    from threads.services import thread_create

    user = bench_user()
    thread = thread_create(owner=user, title=f"B1 n={n}")
    run = Run.objects.create(thread=thread, status=Run.Status.RUNNING)
    ws = server.base.replace("http://", "ws://")
    clients = ClientsProcess(
        [f"{ws}/ws/threads/{thread.thread_id}/?preview=1"] * n,
        {"Cookie": f"sessionid={cookie}"},
        server.base,
        "RUN_FINISHED",
    )
    time.sleep(0.3)
    start = drive_plan(run, plan, rate)
    clients.join(200)
    elapsed = max(clients.finished_at) - start
    return {
        "rate": (len(plan) + 2) / elapsed,
        "p50": pct(clients.first_seen, 50),
        "p99": pct(clients.first_seen, 99),
        "logged_p50": pct(clients.latencies, 50),
        "logged_p99": pct(clients.latencies, 99),
        "frames": clients.received / n,
    }


def run_raw(
    port: int, n: int, plan: list[dict[str, Any]], rate: float | None, channel: str
) -> dict[str, float]:

    clients = ClientsProcess([f"ws://127.0.0.1:{port}/"] * n, {}, None, "RUN_FINISHED")
    time.sleep(0.3)
    start, count = publish_plan(channel, plan, rate)
    clients.join(200)
    elapsed = max(clients.finished_at) - start
    return {
        "rate": count / elapsed,
        "p50": pct(clients.first_seen, 50),
        "p99": pct(clients.first_seen, 99),
        "frames": clients.received / n,
    }


def _median_of(results: list[dict[str, float]]) -> dict[str, float]:
    return {k: median([r[k] for r in results]) for k in results[0]}


def _tune_publisher() -> None:
    """Apply BENCH_PREVIEW_LINGER_MS / BENCH_PREVIEW_STREAM_GAP_MS to this process's publisher.

    The recorder, hence the publisher thread, runs in the bench process; the two
    knobs compare merge rules (a gap of 0 lingers never, a huge one always).
    """
    from threads import realtime

    linger = os.environ.get("BENCH_PREVIEW_LINGER_MS")
    gap = os.environ.get("BENCH_PREVIEW_STREAM_GAP_MS")
    if linger:
        realtime.PREVIEW_LINGER_SECONDS = float(linger) / 1000
    if gap:
        realtime.PREVIEW_STREAM_GAP_SECONDS = float(gap) / 1000


def main() -> list[Row]:
    from bench.common import raise_nofile

    raise_nofile()
    setup_django()
    _tune_publisher()
    cookie = session_for(bench_user())
    server = uvicorn("b1-web")
    port = free_port()
    channel = f"bench-raw-{uuid.uuid4().hex}"
    raw, _ = spawn(
        "b1-raw",
        [PYTHON, "-m", "bench.raw_ws_server", str(port), REDIS_URL, channel],
        bench_env(),
    )
    time.sleep(1.0)
    rows: list[Row] = []
    try:
        plan = event_plan(E)
        deltas = sum(
            1 for p in plan if p["type"] in ("TEXT_MESSAGE_CONTENT", "TOOL_CALL_ARGS")
        )
        for n in NS:
            ours = _median_of(
                [run_ours(server, cookie, n, plan, None) for _ in range(REPS)]
            )
            base = _median_of(
                [run_raw(port, n, plan, None, channel) for _ in range(REPS)]
            )
            rows.append(
                Row(
                    "B1",
                    f"events/s to {n} WS client(s), E={len(plan) + 2}",
                    ours["rate"],
                    base["rate"],
                    "events/s",
                    target=">= 0.4x baseline at N=10" if n == 10 else "",
                    note=f"{deltas / len(plan):.0%} deltas; ours sends "
                    f"{ours['frames']:.0f} coalesced frames",
                )
            )
            rows.append(
                Row(
                    "B1",
                    f"p99 latency, unpaced, N={n}",
                    ours["p99"],
                    base["p99"],
                    "ms",
                    note=f"p50 {ours['p50']:.1f} vs {base['p50']:.1f} ms (backlog)",
                )
            )
        paced_plan = event_plan(PACED_RATE * PACED_SECONDS)
        n = max(NS)
        ours = run_ours(server, cookie, n, paced_plan, PACED_RATE)
        base = run_raw(port, n, paced_plan, PACED_RATE, channel)
        rows.append(
            Row(
                "B1",
                f"p99 latency at {PACED_RATE} events/s, N={n}",
                ours["p99"],
                base["p99"],
                "ms",
                target="<= 3x baseline and <= 50 ms",
                note=f"p50 {ours['p50']:.1f} vs {base['p50']:.1f} ms; first sighting "
                "(a preview, sent before the row is written)",
            )
        )
        rows.append(
            Row(
                "B1",
                f"p99 to the logged event at {PACED_RATE} events/s, N={n}",
                ours["logged_p99"],
                base["p99"],
                "ms",
                note=f"p50 {ours['logged_p50']:.1f} vs {base['p50']:.1f} ms; the "
                "committed frame (flush on pause <= 1 per 10 ms, 50 ms window)",
            )
        )
    finally:
        server.stop()
        stop_process(raw)
    return rows


if __name__ == "__main__":
    result = main()
    print_rows(result)
    save_rows("e2e_stream", result)
