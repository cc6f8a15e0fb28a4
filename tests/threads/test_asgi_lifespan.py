"""Importing ``config.asgi`` starts no background work; serving it starts the embedded beat."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from threads.execution import stop_embedded_beat

BEAT = "countersign-embedded-beat"
ROOT = Path(__file__).resolve().parents[2]


def _beat_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name == BEAT and t.is_alive()]


def test_importing_the_asgi_module_starts_no_beat():
    # A fresh interpreter: in this one another test may have imported it already.
    probe = (
        "import threading, config.asgi\n"
        "from threads import execution\n"
        "print(sorted(t.name for t in threading.enumerate()), execution._beat)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        # The embedded default (no REDIS_URL): the mode in which a beat would start.
        env={k: v for k, v in os.environ.items() if k != "REDIS_URL"},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert done.stdout.strip() == "['MainThread'] None"


@pytest.mark.parametrize("executor", ["embedded"], indirect=True)
def test_lifespan_startup_starts_the_beat_and_shutdown_stops_it(executor):
    from config.asgi import application

    stop_embedded_beat()
    started: list[list[str]] = []

    async def serve() -> list[dict[str, Any]]:
        inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        sent: list[dict[str, Any]] = []

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)
            if message["type"] == "lifespan.startup.complete":
                started.append(_beat_threads())
                inbox.put_nowait({"type": "lifespan.shutdown"})

        inbox.put_nowait({"type": "lifespan.startup"})
        await application(
            {"type": "lifespan", "asgi": {"version": "3.0"}}, inbox.get, send
        )
        return sent

    try:
        sent = asyncio.run(serve())
    finally:
        stop_embedded_beat()
    assert [m["type"] for m in sent] == [
        "lifespan.startup.complete",
        "lifespan.shutdown.complete",
    ]
    assert started == [[BEAT]]
    assert _beat_threads() == []
