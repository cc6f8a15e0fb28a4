"""Running background work for real: the embedded pool, or a Celery worker process.

The fixtures built on these (``executor``, ``celery_worker_factory``) live in
:mod:`tests.fixtures.services`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Every Redis key this test session uses carries its own prefix, so concurrent test
# sessions on one Redis (and pytest-xdist's workers, which inherit the controller's
# environment) never consume each other's tasks or doorbells. Child processes
# (workers, servers) inherit these variables.
SESSION_PREFIX = f"cs-test-{os.getpid()}"
os.environ["CELERY_BROKER_PREFIX"] = f"{SESSION_PREFIX}:"
os.environ["CHANNEL_LAYER_PREFIX"] = SESSION_PREFIX


def ratelimit_counters_clear() -> None:
    """Forget this session's rate-limit counters (never another session's).

    ``cache.clear()`` on a Redis cache is ``FLUSHDB``: it would wipe every other
    session's (and pytest-xdist worker's) keys in the database too.
    """
    from django.core.cache import caches
    from django.core.cache.backends.redis import RedisCache

    cache = caches["ratelimit"]
    if not isinstance(cache, RedisCache):
        cache.clear()
        return
    client = cache._cache.get_client(write=True)
    for key in client.scan_iter(match=f"{cache.key_prefix}:*"):
        client.delete(key)


def session_prefixes_apply(settings: Any) -> None:
    """Give the settings loaded before this module (pytest-django loads them first) the session's prefixes.

    ``settings`` is ``django.conf.settings``. With ``REDIS_URL`` set for the test
    process (as CI does) the Redis channel layer and Celery's transport options were
    built with the prefixes of the environment the session started with.
    """
    from channels.layers import channel_layers

    layers = settings.CHANNEL_LAYERS
    default = layers.get("default", {})
    if "prefix" in default.get("CONFIG", {}):
        default["CONFIG"]["prefix"] = os.environ["CHANNEL_LAYER_PREFIX"]
        channel_layers.backends = {}
    ratelimit = settings.CACHES.get("ratelimit", {})
    if "KEY_PREFIX" in ratelimit:
        from django.core.cache import caches

        # The same dict as caches.settings'; a connection made before keeps its
        # prefix, so it is dropped.
        ratelimit["KEY_PREFIX"] = f"{os.environ['CHANNEL_LAYER_PREFIX']}-ratelimit"
        with contextlib.suppress(AttributeError):
            del caches["ratelimit"]
    options = getattr(settings, "CELERY_BROKER_TRANSPORT_OPTIONS", None)
    if isinstance(options, dict):
        options["global_keyprefix"] = os.environ["CELERY_BROKER_PREFIX"]


def database_url_for_subprocess() -> str:
    """Return a DATABASE_URL pointing a child process at the current test database."""
    from django.db import connection

    data = connection.settings_dict
    if data["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{data['NAME']}"
    user = data.get("USER") or ""
    password = f":{data['PASSWORD']}" if data.get("PASSWORD") else ""
    auth = f"{user}{password}@" if user else ""
    return f"postgres://{auth}{data.get('HOST') or '127.0.0.1'}:{data.get('PORT') or 5432}/{data['NAME']}"


@dataclass
class WorkerProcess:
    """A Celery worker process started for the tests."""

    broker_url: str
    env: dict[str, str]
    log_path: Path
    process: subprocess.Popen[bytes] | None = None
    extra_env: dict[str, str] = field(default_factory=dict)
    #: ``threads`` (fast to start) or ``prefork`` (production's pool: child processes).
    pool: str = "threads"

    def start(self, **extra_env: str) -> None:
        """Start the worker (``extra_env`` adds variables, e.g. test hooks) and wait until ready.

        The session's warm worker (:class:`WarmWorker`) is stopped first unless it is
        this one: it consumes the same queues, so it would take this worker's tasks
        with another environment (no gateway agents, no crash hooks).
        """
        warm_stop_except(self)
        self.extra_env = extra_env
        log = open(self.log_path, "ab")  # noqa: SIM115 - closed with the process
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "config",
                "worker",
                f"--pool={self.pool}",
                "--concurrency=4" if self.pool == "threads" else "--concurrency=2",
                "-Q",
                "runs,tools,countersign",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "-I",
                "tests.crashpoints",
                "-l",
                "info",
                "-n",
                f"test-{os.getpid()}-{time.monotonic_ns()}@%h",
            ],
            cwd=ROOT,
            env={**self.env, **extra_env},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        # A cold worker imports Django, the providers' SDKs and the app; on a machine
        # shared with other suites that has taken more than 30 s.
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if b"ready." in self.log_path.read_bytes():
                return
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"celery worker exited: {self.log_path.read_text()[-3000:]}"
                )
            time.sleep(0.1)
        raise RuntimeError(
            f"celery worker not ready: {self.log_path.read_text()[-3000:]}"
        )

    def fits(self, env: dict[str, str]) -> bool:
        """Say whether this running worker, started without hooks, serves a test wanting ``env``."""

        def stable(values: dict[str, str]) -> dict[str, str]:
            return {k: v for k, v in values.items() if k not in VOLATILE_ENV}

        return (
            self.process is not None
            and self.process.poll() is None
            and not self.extra_env
            and stable(self.env) == stable(env)
        )

    def pid(self) -> int | None:
        """Return the running process's id (``None`` when stopped)."""
        return self.process.pid if self.process is not None else None

    def kill(self) -> None:
        """SIGKILL the worker process (no cleanup, as a crash would)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        """Stop the worker gracefully (SIGTERM), or kill it after 15 s."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()
        self.process = None

    def restart(self, **extra_env: str) -> None:
        """Stop and start again (same broker; redelivered messages are received)."""
        self.stop()
        self.start(**extra_env)


def flush_broker(url: str) -> None:
    """Delete this session's leftover broker keys (never another session's)."""
    import redis

    client = redis.Redis.from_url(url)
    for key in client.scan_iter(match=f"{os.environ['CELERY_BROKER_PREFIX']}*"):
        client.delete(key)


def broker_idle(url: str, *, timeout: float) -> bool:
    """Wait up to ``timeout`` seconds until this session's broker holds no task; say if it did.

    With late acknowledgement a task's message stays in the transport's ``unacked``
    hash until the task returns (also while it waits for its ETA), and a task sends
    the messages it starts before it returns: so no queued message and nothing
    unacknowledged, seen once, means the worker runs nothing and will run nothing.
    Only kombu's own bookkeeping (``_kombu.*``: the queue bindings) may remain.
    """
    import redis

    prefix = os.environ["CELERY_BROKER_PREFIX"]
    client = redis.Redis.from_url(url)
    deadline = time.monotonic() + timeout
    while True:
        busy = [
            key
            for key in client.scan_iter(match=f"{prefix}*")
            if not key.decode()
            .removeprefix(prefix)
            .startswith(("_kombu.", "unacked_mutex"))
        ]
        if not busy:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)


#: The session's warm worker slots (one per session in practice).
_WARM_SLOTS: list[WarmWorker] = []


def warm_stop_except(worker: WorkerProcess) -> None:
    """Stop every warm worker of this session other than ``worker``.

    Two workers on one broker split its tasks; a test that starts a worker of its
    own must be the only consumer.
    """
    for slot in _WARM_SLOTS:
        if slot.worker is not None and slot.worker is not worker:
            slot.worker.stop()
            slot.worker = None


#: Variables that differ from test to test without changing what a worker does.
VOLATILE_ENV = frozenset({"PYTEST_CURRENT_TEST"})


@dataclass
class WarmWorker:
    """One Celery worker kept running between the tests whose environment it matches.

    Starting and stopping a worker costs seconds; a test using the ``celery``
    executor gets the warm worker when the environment it would start one with is
    the same (a test that sets ``COUNTERSIGN_AGENTS_JSON`` or a crash hook gets its
    own), and gives it back only when the broker shows it idle, so no task of one
    test runs in the next. A worker that was killed, restarted with hooks, or is
    still busy is stopped instead.
    """

    factory: Callable[[], WorkerProcess]
    broker_url: str
    worker: WorkerProcess | None = None
    #: The process id and environment of the worker lent to the running test.
    _lent: tuple[int | None, dict[str, str]] = (None, {})

    def __post_init__(self) -> None:
        _WARM_SLOTS.append(self)

    def acquire(self) -> WorkerProcess:
        """Return a started worker for this test: the warm one if it fits, else a new one."""
        fresh = self.factory()
        warm = self.worker
        if warm is not None and warm.fits(fresh.env):
            self._lent = (warm.pid(), dict(warm.env))
            return warm
        if warm is not None:
            warm.stop()
        self.worker = None
        flush_broker(self.broker_url)
        fresh.start()
        self.worker = fresh
        self._lent = (fresh.pid(), dict(fresh.env))
        return fresh

    def release(self, worker: WorkerProcess) -> None:
        """Keep ``worker`` warm if it is unchanged and idle; otherwise stop it.

        Unchanged: the process lent (not one the test restarted, which may still be
        running its startup sweep while the test database is flushed) with the
        environment it was lent with.
        """
        if (
            worker is self.worker
            and (worker.pid(), dict(worker.env)) == self._lent
            and worker.fits(worker.env)
            and broker_idle(self.broker_url, timeout=10)
        ):
            return
        worker.stop()
        if worker is self.worker:
            self.worker = None


def use_redis(settings: Any, url: str) -> None:
    """Point Django, Celery and Channels at Redis ``url`` for this test."""
    from channels.layers import channel_layers

    from config.celery import app

    settings.REDIS_URL = url
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [url], "prefix": os.environ["CHANNEL_LAYER_PREFIX"]},
        }
    }
    channel_layers.backends = {}
    app.conf.broker_url = url
    app.conf.broker_transport_options = {
        **(app.conf.broker_transport_options or {}),
        "global_keyprefix": os.environ["CELERY_BROKER_PREFIX"],
    }
    # A task sent earlier in this process (a test without an executor, under the
    # environment's REDIS_URL) made the app's connection and producer pools for
    # that broker; they outlive a change of broker_url, and the tasks of this test
    # would go where no worker listens.
    # (Dropped, not closed: kombu's producer registry may still hand out a pool
    # over the same connections to the next test.)
    app._pool = None
    app.amqp._producer_pool = None


def use_embedded(settings: Any) -> None:
    """Use the embedded thread pool and the in-memory channel layer for this test."""
    from channels.layers import channel_layers

    settings.REDIS_URL = ""
    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}
    }
    channel_layers.backends = {}


@dataclass
class Executor:
    """Where this test's background work runs, and how to wait for it."""

    mode: str
    worker: WorkerProcess | None = None

    def wait_for(self, predicate: Callable[[], Any], *, timeout: float = 30.0) -> Any:
        """Poll ``predicate`` until it returns a truthy value; return it or fail."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = predicate()
            if value:
                return value
            time.sleep(0.05)
        log = self.worker.log_path.read_text()[-4000:] if self.worker else ""
        pytest.fail(f"timed out after {timeout}s waiting for {predicate!r}\n{log}")

    def settle(self, thread: Any, *, timeout: float = 30.0) -> None:
        """Wait until ``thread`` has no queued/running run and no call left to dispatch or run."""
        from threads.models import Run, Thread, ToolCall

        def idle() -> bool:
            # One statement, so runs and calls are read from one snapshot: a run's
            # whole event stream may commit in one transaction that creates a call
            # and ends the run at once.
            from django.db.models import Exists, OuterRef

            busy = (
                Thread.objects.filter(pk=thread.pk)
                .annotate(
                    busy_runs=Exists(
                        Run.objects.filter(
                            thread=OuterRef("pk"), status__in=Run.ACTIVE_STATUSES
                        )
                    ),
                    busy_calls=Exists(
                        ToolCall.objects.filter(
                            thread=OuterRef("pk"),
                            state__in=[
                                "streaming",
                                "complete",
                                "pending",
                                "approved",
                                "executing",
                            ],
                        )
                    ),
                )
                .values_list("busy_runs", "busy_calls")
                .get()
            )
            return not any(busy)

        idle.__qualname__ = "settle: " + repr(thread)

        def describe() -> str:
            runs = list(
                Run.objects.filter(thread=thread).values_list("status", "error_code")
            )
            calls = list(
                ToolCall.objects.filter(thread=thread).values_list("name", "state")
            )
            return f"runs={runs} calls={calls}"

        try:
            self.wait_for(idle, timeout=timeout)
        except BaseException:
            print("settle timed out:", describe())
            raise
