"""B5: RSS per open WebSocket and a leak check, vs a bare Channels consumer and raw websockets.

C idle authenticated ``ws/threads/<id>/`` connections spread over 100 threads
(session cookie, group join, ``after=`` replay of 0 events) on one uvicorn process
(``--ws-per-message-deflate false``); RSS delta from ``/proc/<pid>/status`` divided
by C. Then CYCLES rounds of connecting and closing all C: growth over the first
plateau. Baselines in the same run, each on a fresh server: a bare
``AsyncWebsocketConsumer`` that accepts and joins one group (bench.asgi), and a raw
``websockets`` server (the floor).

    python -m bench.ws_memory      # BENCH_WS_CONNECTIONS (200), BENCH_WS_CYCLES (3)
"""

from __future__ import annotations

import asyncio
import gc
import os
import time
import uuid

from bench.common import (
    PYTHON,
    REDIS_URL,
    Row,
    bench_env,
    bench_user,
    free_port,
    print_rows,
    raise_nofile,
    rss_kb,
    save_rows,
    session_for,
    setup_django,
    spawn,
    stop_process,
    uvicorn,
)

# 200 by default, not 1,000: every idle thread socket re-reads the log once a second
# (SOCKET_POLL_SECONDS) on the one thread-sensitive DB thread, which saturates near
# 1,000 sockets per process and makes handshakes time out (docs/benchmarks.md, B5).
CONNECTIONS = int(os.environ.get("BENCH_WS_CONNECTIONS") or 200)
CYCLES = int(os.environ.get("BENCH_WS_CYCLES") or 3)
THREADS = 100


async def _open(urls: list[str], headers: dict[str, str], origin: str | None) -> list:
    from websockets.asyncio.client import connect
    from websockets.typing import Origin

    sockets = []
    for start in range(0, len(urls), 50):
        batch = urls[start : start + 50]
        sockets += await asyncio.gather(
            *(
                connect(
                    u,
                    additional_headers=headers,
                    origin=Origin(origin) if origin else None,
                    compression=None,
                    open_timeout=30,
                    ping_interval=None,
                )
                for u in batch
            )
        )
    return sockets


async def _close(sockets: list) -> None:
    await asyncio.gather(*(s.close() for s in sockets))


def measure(
    pid: int, urls: list[str], headers: dict[str, str], origin: str | None, cycles: int
) -> tuple[float, float]:
    """Return (KB per connection, growth % of the first plateau after ``cycles`` rounds)."""

    async def scenario() -> tuple[float, float]:
        await asyncio.sleep(0.5)
        before = rss_kb(pid)
        sockets = await _open(urls, headers, origin)
        await asyncio.sleep(1.5)
        plateau = rss_kb(pid)
        per_conn = (plateau - before) / len(urls)
        await _close(sockets)
        for _ in range(cycles):
            sockets = await _open(urls, headers, origin)
            await asyncio.sleep(0.3)
            await _close(sockets)
        await asyncio.sleep(1.0)
        sockets = await _open(urls, headers, origin)
        await asyncio.sleep(1.5)
        after = rss_kb(pid)
        await _close(sockets)
        return per_conn, (after - plateau) / plateau * 100

    gc.collect()
    return asyncio.run(scenario())


def main() -> list[Row]:
    raise_nofile()
    setup_django()
    from threads.services import thread_create

    user = bench_user()
    cookie = session_for(user)
    thread_ids = [
        thread_create(owner=user, title=f"B5 {i}").thread_id for i in range(THREADS)
    ]
    headers = {"Cookie": f"sessionid={cookie}"}
    rows: list[Row] = []

    ours_server = uvicorn("b5-ours", "bench.asgi:application")
    try:
        ours = measure(
            ours_server.process.pid,
            [
                f"{ours_server.base.replace('http', 'ws')}/ws/threads/"
                f"{thread_ids[i % THREADS]}/?after=0"
                for i in range(CONNECTIONS)
            ],
            headers,
            ours_server.base,
            CYCLES,
        )
    finally:
        ours_server.stop()
    bare_server = uvicorn("b5-bare", "bench.asgi:application")
    try:
        bare = measure(
            bare_server.process.pid,
            [
                f"{bare_server.base.replace('http', 'ws')}/ws/bare/{i % THREADS}/"
                for i in range(CONNECTIONS)
            ],
            headers,
            bare_server.base,
            CYCLES,
        )
    finally:
        bare_server.stop()
    port = free_port()
    raw, _ = spawn(
        "b5-raw",
        [
            PYTHON,
            "-m",
            "bench.raw_ws_server",
            str(port),
            REDIS_URL,
            f"b5-{uuid.uuid4().hex}",
        ],
        bench_env(),
    )
    time.sleep(1.0)
    try:
        floor = measure(raw.pid, [f"ws://127.0.0.1:{port}/"] * CONNECTIONS, {}, None, 0)
    finally:
        stop_process(raw)

    rows.append(
        Row(
            "B5",
            f"RSS per idle WS, {CONNECTIONS} conns / {THREADS} threads",
            ours[0],
            bare[0],
            "KB/conn",
            target="<= 1.3x bare Channels consumer",
            note=f"raw websockets floor {floor[0]:.1f} KB/conn",
        )
    )
    rows.append(
        Row(
            "B5",
            f"RSS growth after {CYCLES} connect/close cycles",
            ours[1],
            bare[1],
            "% of plateau",
            ratio=None,
            target="<= 5%",
        )
    )
    return rows


if __name__ == "__main__":
    result = main()
    print_rows(result)
    save_rows("ws_memory", result)
