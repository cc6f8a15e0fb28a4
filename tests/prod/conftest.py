"""Fixtures that run the production processes for real: uvicorn, Celery workers, beat.

Every process gets the pytest test database (PostgreSQL only: several processes
write at once), a private ``redis-server`` started for this session on a free port
(so restarting it never touches the machine's Redis), ``DEBUG=0`` and
``tests.prod.settings`` (production settings plus test agents and short janitor
windows). Processes run in their own sessions and are killed, with their
children, in the fixtures' finalizers. Without PostgreSQL or ``redis-server`` the
tests skip locally and fail in CI (``tests.conftest.service_missing``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import service_missing
from tests.executors import database_url_for_subprocess
from tests.prod.client import RedisServer

ROOT = Path(__file__).resolve().parent.parent.parent


def free_port() -> int:
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


@pytest.fixture(scope="session")
def private_redis(tmp_path_factory: Any) -> Iterator[RedisServer]:
    """Start a redis-server of this session's own on a free port."""
    if shutil.which("redis-server") is None or shutil.which("redis-cli") is None:
        service_missing("redis-server/redis-cli are not installed")
    server = RedisServer(port=free_port(), workdir=tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def slow_agent(tmp_path_factory: Any) -> Iterator[str]:
    """Serve tests.prod.slow_agent (a remote AG-UI agent streaming slowly); return its URL."""
    port = free_port()
    proc = Proc(
        name="slow-agent",
        argv=[
            sys.executable,
            "-m",
            "uvicorn",
            "tests.prod.slow_agent:app",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        env={**os.environ},
        log=tmp_path_factory.mktemp("slow-agent") / "slow-agent.log",
    ).start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    yield url
    proc.terminate(5)


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


@pytest.fixture
def stack(
    transactional_db: Any, private_redis: RedisServer, slow_agent: str, tmp_path: Path
) -> Iterator[Stack]:
    """Return a :class:`Stack` bound to the test database and the private Redis."""
    from django.db import connection

    if connection.vendor != "postgresql":
        service_missing(
            "PostgreSQL (DATABASE_URL=postgres://...) is required for tests/prod"
        )
    private_redis.flush()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.prod.settings",
        "DATABASE_URL": database_url_for_subprocess(),
        "REDIS_URL": private_redis.url,
        "DEBUG": "0",
        "SECRET_KEY": "tests-prod-" + "x" * 50,
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "SECURE_SSL_REDIRECT": "0",
        "SESSION_COOKIE_SECURE": "0",
        "CSRF_COOKIE_SECURE": "0",
        "SECURE_HSTS_SECONDS": "0",
        "LOG_FORMAT": "json",
        "LOG_LEVEL": "INFO",
        "SLOW_AGENT_URL": slow_agent,
        "COUNTERSIGN_TEST_LEDGER": str(tmp_path / "ledger.jsonl"),
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("COUNTERSIGN_TEST_CRASH_AT", None)
    env.pop("COUNTERSIGN_TEST_HANG_AT", None)
    running = Stack(env=env, tmp=tmp_path, redis=private_redis)
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def operator(transactional_db: Any, django_user_model: Any) -> dict[str, str]:
    """Create a superuser with an API token; return username, password and token."""
    from rest_framework.authtoken.models import Token

    user = django_user_model.objects.create_superuser(
        username="operator", password="pw-operator-123", email=""
    )
    token = Token.objects.create(user=user)
    return {"username": "operator", "password": "pw-operator-123", "token": token.key}
