"""Supervising workers: a heartbeat while a worker executes a run, and log context.

A worker executing a run (:func:`orchestration.pipeline.run_execute`) tags every
log line with the run and thread (:func:`run_log_context`, ``core.logging``)
and, once it has claimed the run, with Redis configured, refreshes the key
``countersign:run-heartbeat:<pk>`` every ``RUN_HEARTBEAT_SECONDS`` (H) from a
daemon thread, deleting it when the run returns. The heartbeat is what tells the
janitor (:mod:`orchestration.janitor`) a live worker with a slow tool from a dead
one, and a duplicate delivery of a live run from a redelivery after its worker
died.

Each refresh writes the key with a long time to live (4 H +
``RUN_STALE_SECONDS``), so a dead worker's key *lingers*: its remaining time to live, read
on Redis's own clock (no clock skew between hosts), tells how long ago the last
refresh was (:func:`heartbeat_read`). The heartbeat is *fresh* for three
intervals (its time to live, 3 H) and the run's worker is proven *dead* once
the last refresh is older than that plus one more interval (4 H), while Redis
has been up at least as long (:func:`redis_uptime_seconds`). A live worker
refreshes every H, so neither a Redis restart that loses the key (the janitor
judges no run by a missing key until Redis has been up 4 H, and then falls back
to ``RUN_STALE_SECONDS``) nor one that restores it from disk (staler by the
downtime) reaps a live run: the next refresh re-creates the key first. :func:`requeue_claim` throttles the janitor's
re-enqueueing to once per window per item.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import redis
from django.conf import settings

from core.conf import countersign_settings
from core.logging import log_context
from threads.models import Run, ToolCall

logger = logging.getLogger(__name__)

HEARTBEAT_KEY = "countersign:run-heartbeat:{pk}"
#: A heartbeat's value: this format's tag, the refresh interval and the key's
#: time to live at each refresh, both in milliseconds.
_HEARTBEAT_VALUE = "hb2:{interval_ms}:{linger_ms}"
#: A heartbeat is fresh for this many refresh intervals (its time to live).
HEARTBEAT_TTL_INTERVALS = 3
#: The run's worker is dead once its last refresh is this many intervals old:
#: the time to live plus one more refresh a live worker would have written.
HEARTBEAT_DEAD_INTERVALS = HEARTBEAT_TTL_INTERVALS + 1

_clients: dict[str, Any] = {}
_clients_lock = threading.Lock()


def _redis() -> Any | None:
    """Return a shared redis-py client for ``settings.REDIS_URL``, or ``None`` without it."""
    url = getattr(settings, "REDIS_URL", "")
    if not url:
        return None
    with _clients_lock:
        client = _clients.get(url)
        if client is None:
            client = redis.Redis.from_url(
                url, socket_timeout=2, socket_connect_timeout=2
            )
            _clients[url] = client
        return client


def _linger_seconds(interval: float) -> float:
    """How long a heartbeat key outlives its last refresh: ``RUN_STALE_SECONDS`` past the death's proof."""
    return float(countersign_settings.RUN_STALE_SECONDS) + (
        HEARTBEAT_DEAD_INTERVALS * interval
    )


class _Heartbeat(threading.Thread):
    """Refresh a run's heartbeat key until stopped; Redis errors are logged and retried."""

    def __init__(self, *, run_pk: int, client: Any, interval: float) -> None:
        super().__init__(name=f"heartbeat-run-{run_pk}", daemon=True)
        self.key = HEARTBEAT_KEY.format(pk=run_pk)
        self.client = client
        self.interval = interval
        self.linger_ms = int(_linger_seconds(interval) * 1000)
        self.stopped = threading.Event()

    def beat(self) -> None:
        value = _HEARTBEAT_VALUE.format(
            interval_ms=int(self.interval * 1000), linger_ms=self.linger_ms
        )
        try:
            self.client.set(self.key, value, px=self.linger_ms)
        except Exception:
            logger.warning("heartbeat %s could not be written", self.key, exc_info=True)

    def run(self) -> None:
        while not self.stopped.wait(self.interval):
            self.beat()

    def stop(self) -> None:
        self.stopped.set()
        self.join(timeout=5)
        try:
            self.client.delete(self.key)
        except Exception:
            logger.warning("heartbeat %s could not be deleted", self.key, exc_info=True)


@dataclass(frozen=True)
class HeartbeatReading:
    """What a run's heartbeat key says, on Redis's clock.

    ``age_seconds``: since the last refresh; ``interval_seconds``: the worker's
    refresh interval; ``redis_uptime_seconds``: how long Redis has been up.
    """

    age_seconds: float
    interval_seconds: float
    redis_uptime_seconds: float

    @property
    def fresh(self) -> bool:
        """Refreshed within its time to live (three intervals)."""
        return self.age_seconds <= HEARTBEAT_TTL_INTERVALS * self.interval_seconds

    @property
    def dead(self) -> bool:
        """No refresh for the time to live plus one interval, with Redis up all along.

        A live worker refreshes every interval while Redis is up, so this proves
        its death (or its losing Redis that long). A key restored from disk by a
        restarted Redis is staler by the downtime: not trusted until Redis has
        been up for the same span, by when a live worker has refreshed it.
        """
        window = HEARTBEAT_DEAD_INTERVALS * self.interval_seconds
        return self.age_seconds > window and self.redis_uptime_seconds > window


def heartbeat_read(run_pk: int) -> HeartbeatReading | None:
    """Return what run ``run_pk``'s heartbeat says, or ``None`` when it has none.

    ``None`` without Redis, or when the key is absent (never written: an
    embedded run; or lost: Redis restarted or flushed, or the run returned). A
    key in an older format counts as just refreshed. Redis errors propagate (a
    sweep that cannot read heartbeats proves nothing). Implements FT-06.
    """
    client = _redis()
    if client is None:
        return None
    pipe = client.pipeline(transaction=False)
    pipe.get(HEARTBEAT_KEY.format(pk=run_pk))
    pipe.pttl(HEARTBEAT_KEY.format(pk=run_pk))
    pipe.info("server")
    value, pttl, info = pipe.execute()
    if value is None or pttl is None or pttl < 0:
        return None
    uptime = float(info.get("uptime_in_seconds", 0))
    parts = value.decode(errors="replace").split(":")
    if len(parts) != 3 or parts[0] != "hb2" or not all(p.isdigit() for p in parts[1:]):
        # Written by a worker of an earlier version (time to live 3 H): it is
        # present, so it is fresh.
        return HeartbeatReading(
            age_seconds=0.0, interval_seconds=1.0, redis_uptime_seconds=uptime
        )
    interval_ms, linger_ms = int(parts[1]), int(parts[2])
    return HeartbeatReading(
        age_seconds=max(0, linger_ms - pttl) / 1000,
        interval_seconds=max(1, interval_ms) / 1000,
        redis_uptime_seconds=uptime,
    )


def redis_uptime_seconds() -> float | None:
    """Return how long Redis has been up (s), or ``None`` without Redis.

    Redis errors propagate. A Redis up for less than four heartbeat intervals
    may have lost keys (restarted empty) that live workers have not re-created
    yet: the janitor proves nothing by a key's absence until then.
    """
    client = _redis()
    if client is None:
        return None
    return float(client.info("server").get("uptime_in_seconds", 0))


def heartbeat_alive(run_pk: int) -> bool:
    """Return whether run ``run_pk``'s heartbeat does not prove its worker dead.

    ``True`` while the key is present and not yet :attr:`HeartbeatReading.dead`
    (a duplicate delivery leaves such a run to its worker, or to the janitor
    once the death is proven); ``False`` without Redis or without the key
    (nothing can be proven alive then).
    """
    reading = heartbeat_read(run_pk)
    return reading is not None and not reading.dead


REQUEUE_KEY = "countersign:janitor-requeued:{kind}:{pk}"


def requeue_claim(kind: str, pk: int, *, seconds: float) -> bool:
    """Return whether the janitor may enqueue item ``kind``/``pk`` again now.

    With Redis, ``True`` at most once per ``seconds`` per item (a key with that
    time to live), so a long outage does not pile up one duplicate message per
    sweep; a Redis error or a lost key (a restart) allows it. ``True`` without
    Redis (the embedded pool loses nothing while its process lives).
    """
    client = _redis()
    if client is None:
        return True
    # Deployments (or test sessions) sharing one Redis keep apart by the broker's
    # key prefix, as their queues do.
    options = getattr(settings, "CELERY_BROKER_TRANSPORT_OPTIONS", None) or {}
    prefix = str(options.get("global_keyprefix", ""))
    try:
        return bool(
            client.set(
                prefix + REQUEUE_KEY.format(kind=kind, pk=pk),
                "1",
                nx=True,
                px=max(1, int(seconds * 1000)),
            )
        )
    except Exception:
        logger.warning("janitor could not throttle %s %s", kind, pk, exc_info=True)
        return True


def heartbeat_touch(run_pk: int) -> None:
    """Write run ``run_pk``'s heartbeat once (its claim, before the claim commits).

    A no-op without Redis; a Redis error is logged (the beat thread retries).
    """
    client = _redis()
    if client is not None:
        _Heartbeat(
            run_pk=run_pk,
            client=client,
            interval=float(countersign_settings.RUN_HEARTBEAT_SECONDS),
        ).beat()


@contextmanager
def run_heartbeat(*, run_pk: int) -> Iterator[None]:
    """Keep run ``run_pk``'s heartbeat fresh while the block runs (a no-op without Redis)."""
    client = _redis()
    if client is None:
        yield
        return
    beat = _Heartbeat(
        run_pk=run_pk,
        client=client,
        interval=float(countersign_settings.RUN_HEARTBEAT_SECONDS),
    )
    beat.beat()
    beat.start()
    try:
        yield
    finally:
        beat.stop()


@contextmanager
def run_log_context(*, run_pk: int) -> Iterator[None]:
    """Tag log lines with run ``run_pk`` and its thread."""
    ids = (
        Run.objects.filter(pk=run_pk).values_list("run_id", "thread__thread_id").first()
    )
    run_id, thread_id = ids if ids is not None else (None, None)
    with log_context(run=run_id, thread=thread_id):
        yield


@contextmanager
def tool_call_log_context(
    *, tool_call_pk: int, ids: tuple[str, str, str] | None = None
) -> Iterator[None]:
    """Tag log lines with the call's ``toolCallId``, its run and its thread.

    ``ids`` is ``(toolCallId, runId, threadId)`` when the caller read them
    already; else they are read here.
    """
    if ids is None:
        ids = (
            ToolCall.objects.filter(pk=tool_call_pk)
            .values_list("tool_call_id", "run__run_id", "thread__thread_id")
            .first()
        )
    if ids is None:
        yield
        return
    call_id, run_id, thread_id = ids
    with log_context(run=run_id, thread=thread_id, toolCallId=call_id):
        yield
