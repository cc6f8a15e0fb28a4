"""The production processes for real (uvicorn, Celery workers, beat) and reading their state.

:class:`Stack` starts and stops the processes of one test; the fixtures built on
it (``stack``, ``private_redis``, ``slow_agent``, ``operator``) live in
:mod:`tests.fixtures.prod`. The ``thread_start`` ... ``deltas_wait`` helpers drive
and read a running stack through its API and the test database.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.prod.client import RedisServer, wait_until

ROOT = Path(__file__).resolve().parent.parent.parent


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that is free now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Proc:
    """One process of the stack, in its own session, logging to ``log``."""

    name: str
    argv: list[str]
    env: dict[str, str]
    log: Path
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> Proc:
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                self.argv,
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        return self

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def wait_log(self, needle: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if needle in self.text():
                return
            if not self.alive:
                pytest.fail(f"{self.name} exited:\n{self.text()[-3000:]}")
            time.sleep(0.1)
        pytest.fail(
            f"{self.name}: no {needle!r} after {timeout}s:\n{self.text()[-3000:]}"
        )

    def kill(self) -> None:
        """SIGKILL the process and everything in its session (as a crash would)."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(10)

    def terminate(self, timeout: float = 30) -> int | None:
        """SIGTERM the main process; return its exit code (``None`` if it had to be killed)."""
        if self.process is None:
            return None
        if self.alive:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None
        finally:
            with contextlib.suppress(ProcessLookupError):  # leftover children, if any
                os.killpg(self.process.pid, signal.SIGKILL)


@dataclass
class Stack:
    """Processes of one test: webs, workers, beat. Everything is stopped at teardown."""

    env: dict[str, str]
    tmp: Path
    redis: RedisServer
    procs: list[Proc] = field(default_factory=list)

    def _proc(self, name: str, argv: list[str], **extra_env: str) -> Proc:
        proc = Proc(name, argv, {**self.env, **extra_env}, self.tmp / f"{name}.log")
        self.procs.append(proc)
        return proc.start()

    def web(self, name: str = "web") -> str:
        """Start uvicorn on a free port; return its base URL once /healthz answers 200."""
        port = free_port()
        proc = self._proc(
            name,
            [
                sys.executable,
                "-m",
                "uvicorn",
                "config.asgi:application",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--ws-per-message-deflate",
                "false",
                "--log-config",
                str(ROOT / "config" / "uvicorn-logging.json"),
            ],
        )
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                    return base
            except httpx.HTTPError:
                pass
            if not proc.alive:
                break
            time.sleep(0.1)
        pytest.fail(f"{name} did not become healthy:\n{proc.text()[-3000:]}")

    def worker(
        self,
        name: str,
        *,
        queues: str = "runs,tools,countersign",
        concurrency: int = 1,
        **extra_env: str,
    ) -> Proc:
        """Start a prefork Celery worker (as in production) and wait until it is ready."""
        proc = self._proc(
            name,
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "config",
                "worker",
                "-Q",
                queues,
                "--pool",
                "prefork",
                "-c",
                str(concurrency),
                "-n",
                f"{name}-{os.getpid()}@%h",
                "-l",
                "INFO",
                "--without-gossip",
                "--without-mingle",
            ],
            **extra_env,
        )
        proc.wait_log(" ready.")
        return proc

    def beat(self) -> Proc:
        proc = self._proc(
            "beat",
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "config",
                "beat",
                "-l",
                "INFO",
                "-s",
                str(self.tmp / "celerybeat-schedule"),
                "--pidfile",
                str(self.tmp / "celerybeat.pid"),
            ],
        )
        proc.wait_log("beat: Starting")
        return proc

    def logs(self) -> str:
        return "\n".join(f"==== {p.name}\n{p.text()[-2500:]}" for p in self.procs)

    def stop(self) -> None:
        for proc in self.procs:
            if proc.alive:
                proc.process.send_signal(signal.SIGTERM)  # type: ignore[union-attr]
        for proc in self.procs:
            proc.terminate(timeout=10)


def thread_start(api: Any, agent: str) -> str:
    """Create a thread for ``agent`` over the REST API; return its id."""
    response = api.post(
        "/api/threads/", json={"title": f"prod {agent}", "agent": agent}
    )
    assert response.status_code == 201, response.text
    return response.json()["threadId"]


def message_send(api: Any, thread_id: str, content: str) -> dict[str, Any]:
    """Post ``content`` to thread ``thread_id`` over the REST API; return the message."""
    response = api.post(
        f"/api/threads/{thread_id}/messages/", json={"content": content}
    )
    assert response.status_code == 201, response.text
    return response.json()


def event_log(thread_id: str) -> list[dict[str, Any]]:
    """Return thread ``thread_id``'s event log as the wire shows it, in order."""
    from threads.models import Event

    return [
        e.as_wire()
        for e in Event.objects.filter(thread__client_thread_id=thread_id).order_by(
            "seq"
        )
    ]


def pending_approval_find(api: Any, thread_id: str) -> dict[str, Any] | None:
    """Return thread ``thread_id``'s first pending approval over the REST API, or ``None``."""
    page = api.get("/api/approvals/", params={"thread": thread_id, "status": "pending"})
    assert page.status_code == 200, page.text
    results = page.json()["results"]
    return results[0] if results else None


def delta_count(run_id: str) -> int:
    """Return how many text deltas run ``run_id`` has recorded."""
    from threads.models import Event

    return Event.objects.filter(run__run_id=run_id, type="TEXT_MESSAGE_CONTENT").count()


def deltas_wait(run_id: str, count: int, *, what: str) -> None:
    """Wait until run ``run_id`` has recorded ``count`` text deltas."""
    wait_until(lambda: delta_count(run_id) >= count, timeout=20, what=what)
