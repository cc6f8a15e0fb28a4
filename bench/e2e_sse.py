"""B1, SSE variant: events/s and latency to one ``GET /agui/threads/<id>/events`` client.

Ours: B1's in-process agent (``bench.e2e_stream.PlanAgent``: E stamped AG-UI
events, ~81% deltas) through ``drive_agent`` → ``RunRecorder`` (coalesced writes to
PostgreSQL) → the PubSub channel layer's doorbell → uvicorn + ``follow_log``, which
reads every frame from the log → one SSE client. SSE clients get only logged
events (no previews), so latency includes the coalescing (the pause flush and a
commit). Baseline: the same frames PUBLISHed one by one with redis-py to a raw
ASGI app on the same uvicorn command (``bench.raw_sse_app``) that streams its
Pub/Sub channel as SSE frames. The client runs in its own process (``python -m
bench.e2e_sse client URL HEADERS``), so it shares no interpreter lock with the
recorder. Throughput = E / (first yield → the client has RUN_FINISHED); a paced
variant at 1,000 events/s gives latency. Target (docs/benchmarks.md, B1): SSE
throughput >= 0.6x raw ASGI.

    python -m bench.e2e_sse      # BENCH_E (10000)
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import uuid
from typing import Any

from bench.common import (
    PYTHON,
    ROOT,
    Row,
    bench_env,
    bench_user,
    pct,
    print_rows,
    save_rows,
    setup_django,
    uvicorn,
)
from bench.e2e_stream import (
    PACED_RATE,
    PACED_SECONDS,
    E,
    drive_plan,
    event_plan,
    publish_plan,
)
from bench.ws_clients import now_us


async def _client(url: str, headers: dict[str, str]) -> dict[str, Any]:
    """Read one SSE stream until RUN_FINISHED; print ``ready`` once it has begun."""
    import httpx

    latencies: list[float] = []
    frames = 0
    buffer = ""
    async with (
        httpx.AsyncClient(timeout=httpx.Timeout(180, connect=10)) as http,
        http.stream("GET", url, headers=headers) as response,
    ):
        if response.status_code != 200:
            raise RuntimeError(f"{url}: {response.status_code}")
        ready = False
        async for chunk in response.aiter_text():
            arrived = now_us()
            if not ready:
                print("ready", flush=True)
                ready = True
            buffer += chunk
            *complete, buffer = buffer.split("\n\n")
            for frame in complete:
                data = [
                    line[6:] for line in frame.split("\n") if line.startswith("data: ")
                ]
                if not data:
                    continue
                event = json.loads(data[0])
                frames += 1
                stamp = event.get("timestamp")
                if stamp:
                    latencies.append((arrived - stamp) / 1000)
                if event.get("type") == "RUN_FINISHED":
                    return {
                        "latencies": latencies,
                        "frames": frames,
                        "finished": time.time(),
                    }
    raise RuntimeError("the stream ended before RUN_FINISHED")


class Client:
    """One SSE client in its own process; :meth:`result` waits for its figures."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [PYTHON, "-m", "bench.e2e_sse", "client", url, json.dumps(headers)],
            cwd=ROOT,
            env=bench_env(),
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline().strip()
        if line != "ready":
            self.process.kill()
            raise RuntimeError(f"SSE client did not start: {line!r}")

    def result(self) -> dict[str, Any]:
        out, _ = self.process.communicate(timeout=200)
        if self.process.returncode:
            raise RuntimeError(f"SSE client failed ({self.process.returncode})")
        result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
        return result


def _figures(result: dict[str, Any], started: float, count: int) -> dict[str, float]:
    return {
        "rate": count / (result["finished"] - started),
        "p50": pct(result["latencies"], 50),
        "p99": pct(result["latencies"], 99),
        "frames": result["frames"],
    }


def run_ours(
    server: Any, token: str, plan: list[dict[str, Any]], rate: float | None
) -> dict[str, float]:
    from threads.models import Run
    from threads.services import thread_create

    thread = thread_create(owner=bench_user(), title="B1 SSE")
    run = Run.objects.create(thread=thread, status=Run.Status.RUNNING)
    client = Client(
        f"{server.base}/agui/threads/{thread.thread_id}/events?after=0",
        {"Authorization": f"Token {token}", "Accept": "text/event-stream"},
    )
    started = drive_plan(run, plan, rate)
    return _figures(client.result(), started, len(plan) + 2)


def run_raw(
    server: Any, plan: list[dict[str, Any]], rate: float | None
) -> dict[str, float]:

    channel = f"bench-sse-{uuid.uuid4().hex}"
    client = Client(f"{server.base}/events?channel={channel}", {})
    started, count = publish_plan(channel, plan, rate)
    return _figures(client.result(), started, count)


def main() -> list[Row]:
    setup_django()
    from rest_framework.authtoken.models import Token

    token = Token.objects.get_or_create(user=bench_user())[0].key
    server = uvicorn("b1-sse-web")
    raw = uvicorn("b1-sse-raw", app="bench.raw_sse_app:app")
    try:
        plan = event_plan(E)
        ours = run_ours(server, token, plan, None)
        base = run_raw(raw, plan, None)
        paced_plan = event_plan(PACED_RATE * PACED_SECONDS)
        ours_paced = run_ours(server, token, paced_plan, PACED_RATE)
        base_paced = run_raw(raw, paced_plan, PACED_RATE)
    finally:
        server.stop()
        raw.stop()
    return [
        Row(
            "B1",
            f"SSE events/s to 1 client, E={len(plan) + 2}",
            ours["rate"],
            base["rate"],
            "events/s",
            target=">= 0.6x raw ASGI",
            note=f"ours sends {ours['frames']:.0f} coalesced frames; baseline: "
            "redis PUBLISH + a raw ASGI SSE app",
        ),
        Row(
            "B1",
            f"SSE p99 latency at {PACED_RATE} events/s, 1 client",
            ours_paced["p99"],
            base_paced["p99"],
            "ms",
            note=f"p50 {ours_paced['p50']:.1f} vs {base_paced['p50']:.1f} ms; logged "
            "events only (SSE gets no previews)",
        ),
    ]


if __name__ == "__main__":
    if sys.argv[1:2] == ["client"]:
        figures = asyncio.run(_client(sys.argv[2], json.loads(sys.argv[3])))
        print(json.dumps(figures), flush=True)
    else:
        result = main()
        print_rows(result)
        save_rows("e2e_sse", result)
