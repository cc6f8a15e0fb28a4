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
fans them out to the same N clients. Throughput = E / (first yield → last client
has everything). A paced variant at 1,000 events/s gives latency under load.

    python -m bench.e2e_stream       # BENCH_E (10000), BENCH_REPS (1), BENCH_N ("1,10")
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
import uuid
from typing import Any

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

E = int(os.environ.get("BENCH_E") or 10000)
REPS = int(os.environ.get("BENCH_REPS") or 1)
NS = tuple(int(n) for n in (os.environ.get("BENCH_N") or "1,10").split(","))
PACED_RATE = 1000
PACED_SECONDS = 3


def now_us() -> int:
    return int(time.time() * 1_000_000)


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


class PlanAgent:
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


class Clients(threading.Thread):
    """N websocket clients on their own loop; record latency per stamped message."""

    def __init__(
        self,
        urls: list[str],
        headers: dict[str, str],
        origin: str | None,
        done_type: str,
    ) -> None:
        super().__init__(daemon=True)
        self.urls, self.headers, self.origin, self.done_type = (
            urls,
            headers,
            origin,
            done_type,
        )
        self.latencies: list[float] = []
        #: Latency to the first sighting (a preview, else the committed frame).
        self.first_seen: list[float] = []
        self.received = 0
        self.finished_at: list[float] = []
        self.ready = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as error:
            self.error = error
            self.ready.set()

    async def _main(self) -> None:
        from websockets.asyncio.client import connect
        from websockets.typing import Origin

        sockets = [
            await connect(
                u,
                additional_headers=self.headers,
                origin=Origin(self.origin) if self.origin else None,
                compression=None,
                max_size=None,
                max_queue=None,
            )
            for u in self.urls
        ]
        self.ready.set()

        async def read(socket: Any) -> None:
            # Stamps already seen on this socket: a committed merged delta carries
            # its first fragment's stamp, which a preview may have shown already.
            seen: set[int] = set()
            async for raw in socket:
                message = json.loads(raw)
                kind = message.get("kind")
                if kind == "confirmed":
                    continue
                if kind == "preview":
                    arrived = now_us()
                    for item in message["previews"]:
                        stamp = item["event"].get("timestamp")
                        if stamp and stamp not in seen:
                            seen.add(stamp)
                            self.first_seen.append((arrived - stamp) / 1000)
                    continue
                stamp = message.get("timestamp")
                if stamp:
                    latency = (now_us() - stamp) / 1000
                    self.latencies.append(latency)
                    if stamp not in seen:
                        seen.add(stamp)
                        self.first_seen.append(latency)
                self.received += 1
                if message.get("type") == self.done_type:
                    self.finished_at.append(time.time())
                    return

        await asyncio.wait_for(asyncio.gather(*(read(s) for s in sockets)), timeout=180)
        for socket in sockets:
            await socket.close()


def run_ours(
    server: Any, cookie: str, n: int, plan: list[dict[str, Any]], rate: float | None
) -> dict[str, float]:
    from agentcore.events import RunAgentInput
    from orchestration.runs import drive_agent
    from threads.models import Run
    from threads.recording import RunRecorder
    from threads.services import thread_create

    user = bench_user()
    thread = thread_create(owner=user, title=f"B1 n={n}")
    run = Run.objects.create(thread=thread, status=Run.Status.RUNNING)
    ws = server.base.replace("http://", "ws://")
    clients = Clients(
        [f"{ws}/ws/threads/{thread.thread_id}/?preview=1"] * n,
        {"Cookie": f"sessionid={cookie}"},
        server.base,
        "RUN_FINISHED",
    )
    clients.start()
    clients.ready.wait(30)
    if clients.error:
        raise clients.error
    time.sleep(0.3)
    run_input = RunAgentInput.model_validate(
        {
            "threadId": thread.thread_id,
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
    clients.join(180)
    if clients.error:
        raise clients.error
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
    import redis

    clients = Clients([f"ws://127.0.0.1:{port}/"] * n, {}, None, "RUN_FINISHED")
    clients.start()
    clients.ready.wait(30)
    if clients.error:
        raise clients.error
    time.sleep(0.3)
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
    clients.join(180)
    if clients.error:
        raise clients.error
    elapsed = max(clients.finished_at) - start
    return {
        "rate": len(frames) / elapsed,
        "p50": pct(clients.first_seen, 50),
        "p99": pct(clients.first_seen, 99),
        "frames": clients.received / n,
    }


def _median_of(results: list[dict[str, float]]) -> dict[str, float]:
    return {k: median([r[k] for r in results]) for k in results[0]}


def main() -> list[Row]:
    from bench.common import raise_nofile

    raise_nofile()
    setup_django()
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
