"""B8: the MCP gateway's overhead per auto-approved call.

The official ``mcp`` client calls a read-only tool of the real MCP test server
(``tests/mcp_test_server.py``, streamable HTTP) N times in one session: directly
(the baseline), and through Countersign's gateway (``/mcp/bench/``, the same
upstream marked trusted, so each call is auto-approved), with the gateway served
(a) embedded and (b) production-like (Redis, a Celery worker running). Each
gateway call takes the short path (``orchestration.gateway``): recorded,
dispatched and reserved in one transaction, executed exactly once upstream by the
web process in the request, and answered; the worker only stands by. The
statements per call are pinned in ``tests/orchestration/test_gateway_short_path.py``. Prints per-call p50 and mean (ms) and the
ratio to the direct call; target <= 1.5x (p50).

    python -m bench.mcp_gateway      # BENCH_MCP_CALLS=200 by default
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

from bench.common import (
    LOG_DIR,
    PYTHON,
    ROOT,
    Row,
    bench_user,
    celery_worker,
    free_port,
    median,
    print_rows,
    save_rows,
    setup_django,
    spawn,
    stop_process,
    uvicorn,
    wait_port,
)

CALLS = int(os.environ.get("BENCH_MCP_CALLS") or 200)
WARMUP = 10
GATEWAY = "bench"


async def _timings(url: str, token: str | None, tool: str, n: int) -> list[float]:
    """Return the seconds each of ``n`` calls of ``tool`` took, after a warm-up."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=60.0))
    times: list[float] = []
    try:
        async with Client(
            streamable_http_client(url, http_client=http), mode="legacy", cache=None
        ) as client:
            for i in range(WARMUP + n):
                start = time.perf_counter()
                result = await client.call_tool(tool, {"path": f"/bench/{i}"})
                elapsed = time.perf_counter() - start
                if result.is_error:
                    raise RuntimeError(f"{tool} failed: {result.content}")
                if i >= WARMUP:
                    times.append(elapsed)
    finally:
        await http.aclose()
    return times


def _upstream() -> tuple[Any, str]:
    """Start the MCP test server over streamable HTTP; return its process and URL."""
    port = free_port()
    log = Path(LOG_DIR) / "b8-upstream-calls.jsonl"
    process, _ = spawn(
        "b8-upstream",
        [
            PYTHON,
            str(ROOT / "tests" / "mcp_test_server.py"),
            "http",
            "--port",
            str(port),
            "--log",
            str(log),
        ],
        {**os.environ},
    )
    wait_port(port)
    return process, f"http://127.0.0.1:{port}/mcp"


def _row(metric: str, ours: list[float], direct: list[float], note: str) -> list[Row]:
    """Return the p50 and mean rows of ``ours`` against ``direct`` (ms)."""
    return [
        Row(
            "B8",
            f"{metric}, p50 per call",
            median(ours) * 1000,
            median(direct) * 1000,
            "ms",
            target="<= 1.5x",
            note=note,
        ),
        Row(
            "B8",
            f"{metric}, mean per call",
            sum(ours) / len(ours) * 1000,
            sum(direct) / len(direct) * 1000,
            "ms",
        ),
    ]


def main() -> list[Row]:
    """Measure and return B8's rows."""
    setup_django()
    from rest_framework.authtoken.models import Token

    token = Token.objects.get_or_create(user=bench_user())[0].key
    upstream, upstream_url = _upstream()
    agents = {
        GATEWAY: {
            "provider": "mcp_gateway",
            "toolsets": [],
            "mcp_servers": {"files": {"url": upstream_url, "trusted": True}},
        }
    }
    os.environ["COUNTERSIGN_AGENTS_JSON"] = json.dumps(agents)
    rows: list[Row] = []
    try:
        direct = asyncio.run(_timings(upstream_url, None, "read_file", CALLS))
        embedded = uvicorn("b8-web-embedded", REDIS_URL="")
        try:
            url = f"{embedded.base}/mcp/{GATEWAY}/"
            ours = asyncio.run(_timings(url, token, "files__read_file", CALLS))
        finally:
            embedded.stop()
        rows += _row("gateway (embedded) vs direct", ours, direct, f"{CALLS} calls")
        worker = celery_worker("b8-worker")
        web = uvicorn("b8-web")
        try:
            url = f"{web.base}/mcp/{GATEWAY}/"
            ours = asyncio.run(_timings(url, token, "files__read_file", CALLS))
        finally:
            web.stop()
            stop_process(worker)
        rows += _row("gateway (Celery) vs direct", ours, direct, f"{CALLS} calls")
    finally:
        stop_process(upstream)
    return rows


if __name__ == "__main__":
    results = main()
    print_rows(results)
    save_rows("b8", results)
