"""Shared helpers: Django setup against the bench database, processes, statistics."""

from __future__ import annotations

import json
import os
import resource
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
DATABASE_URL = os.environ.get("BENCH_DATABASE_URL") or (
    "postgres://postgres@127.0.0.1:5432/countersign_bench"
)
REDIS_URL = os.environ.get("BENCH_REDIS_URL") or "redis://127.0.0.1:6379/12"
LOG_DIR = Path(os.environ.get("BENCH_LOG_DIR") or "/tmp/countersign-bench")


def bench_env(**extra: str) -> dict[str, str]:
    """Return the environment of the processes a benchmark starts (production settings)."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "bench.settings",
        "DATABASE_URL": DATABASE_URL,
        "REDIS_URL": REDIS_URL,
        # Pub/Sub ignores Redis database numbers: benches run side by side by
        # different people need their own prefix (BENCH_CHANNEL_LAYER_PREFIX).
        "CHANNEL_LAYER_PREFIX": os.environ.get("BENCH_CHANNEL_LAYER_PREFIX") or "bench",
        "DEBUG": "0",
        "SECRET_KEY": "bench-" + "k" * 50,
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "SECURE_SSL_REDIRECT": "0",
        "SESSION_COOKIE_SECURE": "0",
        "CSRF_COOKIE_SECURE": "0",
        "SECURE_HSTS_SECONDS": "0",
        "LOG_FORMAT": "json",
        "LOG_LEVEL": "WARNING",
        "PYTHONUNBUFFERED": "1",
        # The demo agent streams at a human pace by default (60 tokens/s, issue
        # 15); a benchmark measures Countersign, not the demo's theatre.
        "COUNTERSIGN_DEMO_PACE": "0",
    }
    env.update(extra)
    return env


_SETUP = False


def setup_django(*, migrate: bool = True) -> None:
    """Configure Django in this process for the bench database (created and migrated)."""
    global _SETUP
    if _SETUP:
        return
    env = bench_env()
    for key in (
        "DJANGO_SETTINGS_MODULE",
        "DATABASE_URL",
        "REDIS_URL",
        "DEBUG",
        "SECRET_KEY",
        "CHANNEL_LAYER_PREFIX",
        "ALLOWED_HOSTS",
        "LOG_LEVEL",
        "COUNTERSIGN_DEMO_PACE",
    ):
        os.environ[key] = env[key]
    ensure_database(DATABASE_URL)
    import django

    django.setup()
    if migrate:
        from django.core.management import call_command

        call_command("migrate", verbosity=0, interactive=False)
    _SETUP = True


def ensure_database(url: str) -> None:
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    admin = urlunsplit(parts._replace(scheme="postgresql", path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        if not conn.execute(
            "SELECT 1 FROM pg_database WHERE datname=%s", (name,)
        ).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def bench_user(username: str = "bench") -> Any:
    """Return a superuser for the benchmarks (created once)."""
    from django.contrib.auth import get_user_model

    users = get_user_model()
    user, created = users.objects.get_or_create(
        username=username, defaults={"is_staff": True, "is_superuser": True}
    )
    if created:
        user.set_password("bench-password-1")
        user.save()
    return user


def session_for(user: Any) -> str:
    """Return a session key logged in as ``user`` (for the WebSocket cookie)."""
    from django.conf import settings
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.sessions.backends.db import SessionStore

    session = SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = settings.AUTHENTICATION_BACKENDS[0]
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.create()
    assert session.session_key is not None  # create() always sets it
    return session.session_key


def raise_nofile(limit: int = 65536) -> None:
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(limit, hard), hard))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    log: Path
    base: str

    def rss_kb(self) -> int:
        return rss_kb(self.process.pid)

    def stop(self) -> None:
        stop_process(self.process)


def stop_process(process: subprocess.Popen[bytes], timeout: float = 10) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        with suppress(subprocess.TimeoutExpired):
            process.wait(timeout)
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(5)


def spawn(
    name: str, argv: Sequence[str], env: dict[str, str]
) -> tuple[subprocess.Popen[bytes], Path]:
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    log_path = LOG_DIR / f"{name}.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            list(argv),
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    return process, log_path


def wait_http(url: str, timeout: float = 30, process: Any = None) -> float:
    """Poll ``url`` until it answers 200; return the monotonic time it did."""
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return time.monotonic()
        except httpx.HTTPError:
            pass
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"server exited before answering {url}")
        time.sleep(0.005)
    raise TimeoutError(url)


def wait_port(port: int, timeout: float = 30) -> None:
    """Wait until something accepts TCP connections on 127.0.0.1:``port``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            return
        time.sleep(0.02)
    raise TimeoutError(f"nothing listens on port {port}")


def celery_worker(name: str, *, hostname: str | None = None) -> subprocess.Popen[bytes]:
    """Start a ``-P solo`` Countersign worker on all its queues; return once it is ready."""
    argv = [PYTHON, "-m", "celery", "-A", "config", "worker", "-Q"]
    argv += ["runs,tools,countersign", "--pool", "solo"]
    argv += ["--without-gossip", "--without-mingle", "-l", "INFO"]
    if hostname is not None:
        argv += ["-n", hostname]
    process, log = spawn(name, argv, bench_env(LOG_LEVEL="INFO"))
    deadline = time.monotonic() + 60
    while b" ready." not in log.read_bytes():
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"worker {name} did not start; see {log}")
        time.sleep(0.05)
    return process


def uvicorn(name: str, app: str = "config.asgi:application", **env: str) -> Server:
    """Start uvicorn like production (no permessage-deflate) and wait for /healthz."""
    port = free_port()
    process, log = spawn(
        name,
        [
            PYTHON,
            "-m",
            "uvicorn",
            app,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--ws-per-message-deflate",
            "false",
            "--no-access-log",
            "--log-level",
            "warning",
            "--backlog",
            "4096",
        ],
        bench_env(**env),
    )
    base = f"http://127.0.0.1:{port}"
    wait_http(f"{base}/healthz", process=process)
    return Server(process, log, base)


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def pct(values: Sequence[float], p: float) -> float:
    """Return the ``p``-th percentile (0-100) by nearest rank."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(p / 100 * len(ordered) + 0.5) - 1))
    return ordered[index]


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


@dataclass
class Row:
    """One line of the results table."""

    bench: str
    metric: str
    ours: float
    baseline: float
    unit: str
    ratio: float | None = None
    target: str = ""
    note: str = ""

    def __post_init__(self) -> None:
        if self.ratio is None and self.baseline:
            self.ratio = self.ours / self.baseline


def fmt(value: float) -> str:
    if value != value:  # nan
        return "n/a"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}"


def print_rows(rows: Sequence[Row]) -> None:
    print(
        f"{'bench':<5} {'metric':<44} {'ours':>10} {'baseline':>10} {'unit':<9} "
        f"{'ratio':>6}  target / note"
    )
    for r in rows:
        ratio = f"{r.ratio:.2f}" if r.ratio is not None else "-"
        tail = "; ".join(x for x in (r.target, r.note) if x)
        print(
            f"{r.bench:<5} {r.metric:<44} {fmt(r.ours):>10} {fmt(r.baseline):>10} "
            f"{r.unit:<9} {ratio:>6}  {tail}"
        )


def save_rows(name: str, rows: Sequence[Row]) -> None:
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    (LOG_DIR / f"{name}.json").write_text(
        json.dumps([r.__dict__ for r in rows], indent=1)
    )


@contextmanager
def timed() -> Iterator[list[float]]:
    box: list[float] = []
    start = time.perf_counter()
    try:
        yield box
    finally:
        box.append(time.perf_counter() - start)
