"""A real uvicorn server in a subprocess, against the test database, and waiting on it.

The ``live`` fixture (:mod:`tests.fixtures.live`) starts :class:`LiveServer` in the
embedded mode or with a Celery worker; the helpers here build run inputs, mint
tokens and poll the database until the background flow comes to rest.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from tests.helpers.executors import (
    ROOT,
    WorkerProcess,
)

#: Runs in the server process before the ASGI application is imported.
LAUNCHER = """
from django.conf import settings
# Plus what a test set in the environment for notifications and decisions
# (COUNTERSIGN_NOTIFICATIONS_JSON, COUNTERSIGN_NOTIFY_*, ...).
settings.COUNTERSIGN = {
    "SOCKET_POLL_SECONDS": 3600.0,
    "SSE_KEEPALIVE_SECONDS": 3600.0,
    **{
        name: value
        for name, value in settings.COUNTERSIGN.items()
        if name.startswith("NOTIF")
        or name in ("PUBLIC_URL", "DECISION_UNDO_SECONDS", "RISK_THRESHOLDS")
    },
}
import uvicorn
uvicorn.run(
    "config.asgi:application", host="127.0.0.1", port=0, log_level="info",
    access_log=False, ws_per_message_deflate=False, lifespan="off",
)
"""


READY = re.compile(rb"Uvicorn running on http://127\.0\.0\.1:(\d+)")


@dataclass
class LiveServer:
    """A uvicorn process serving Countersign, and the worker behind it (celery mode)."""

    mode: str
    process: subprocess.Popen[bytes]
    port: int
    log_path: Path
    worker: WorkerProcess | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def logs(self) -> str:
        text = self.log_path.read_text(errors="replace")[-4000:]
        if self.worker is not None:
            text += (
                "\n--- worker ---\n"
                + self.worker.log_path.read_text(errors="replace")[-4000:]
            )
        return text

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        if self.worker is not None:
            self.worker.stop()


def start_server(
    env: dict[str, str], log_path: Path
) -> tuple[subprocess.Popen[bytes], int]:
    """Start uvicorn with ``env``; return the process and its port once it listens."""
    log = open(log_path, "ab")  # noqa: SIM115 - closed with the process
    process = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = READY.search(log_path.read_bytes())
        if found:
            return process, int(found.group(1))
        if process.poll() is not None:
            raise RuntimeError(f"uvicorn exited:\n{log_path.read_text()[-3000:]}")
        time.sleep(0.05)
    process.kill()
    raise RuntimeError(f"uvicorn did not start in 30s:\n{log_path.read_text()[-3000:]}")


def token_for(user: Any) -> str:
    """Return ``user``'s API token key, creating it if needed."""
    from rest_framework.authtoken.models import Token

    return Token.objects.get_or_create(user=user)[0].key


def run_input(
    thread_id: str, run_id: str, messages: list[dict[str, Any]]
) -> dict[str, Any]:
    """Return a RunAgentInput as an AG-UI client sends it (camelCase)."""
    return {
        "threadId": thread_id,
        "runId": run_id,
        "protocolVersion": "1.0",
        "state": {},
        "messages": messages,
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }


async def wait_until(
    predicate: Callable[[], bool],
    *,
    what: str,
    server: LiveServer,
    timeout: float = 30.0,
) -> None:
    """Poll the test database until ``predicate()``; fail naming ``what`` with the server log.

    Tests wait for the background flow to come to rest before they end, so the
    database is never flushed under a worker's feet.
    """
    check = sync_to_async(predicate)
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            pytest.fail(
                f"timed out after {timeout}s waiting for {what}\n{server.logs()}"
            )
        await asyncio.sleep(0.05)


def refund_awaits_approval(thread_id: str) -> Callable[[], bool]:
    """Return a check that the refund flow reached its resting point (refund_order queued)."""
    from threads.models import ToolCall

    return lambda: ToolCall.objects.filter(
        thread__client_thread_id=thread_id,
        name="refund_order",
        state="awaiting_approval",
    ).exists()
