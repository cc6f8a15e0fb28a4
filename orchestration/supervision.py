"""Supervising workers: a heartbeat while a worker executes a run, and log context.

A worker executing a run (:func:`orchestration.runs.run_execute`) tags every
log line with the run and thread (:func:`run_log_context`, ``config.logging``)
and, once it has claimed the run, with Redis configured, refreshes the key
``countersign:run-heartbeat:<pk>`` every ``RUN_HEARTBEAT_SECONDS`` from a daemon
thread (time to live: three intervals), deleting it when the run returns. The
heartbeat is what tells the janitor (:mod:`orchestration.janitor`) a live worker
with a slow tool from a dead one, and a duplicate delivery of a live run from a
redelivery after its worker died. :func:`requeue_claim` throttles the janitor's
re-enqueueing to once per window per item.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import redis
from django.conf import settings

from config.logging import log_context
from threads.conf import countersign_settings
from threads.models import Run, ToolCall

logger = logging.getLogger(__name__)

HEARTBEAT_KEY = "countersign:run-heartbeat:{pk}"

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


class _Heartbeat(threading.Thread):
    """Refresh a run's heartbeat key until stopped; Redis errors are logged and retried."""

    def __init__(self, *, run_pk: int, client: Any, interval: float) -> None:
        super().__init__(name=f"heartbeat-run-{run_pk}", daemon=True)
        self.key = HEARTBEAT_KEY.format(pk=run_pk)
        self.client = client
        self.interval = interval
        self.stopped = threading.Event()

    def beat(self) -> None:
        try:
            self.client.set(self.key, "1", px=int(self.interval * 3000))
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


def heartbeat_alive(run_pk: int) -> bool:
    """Return whether a worker refreshed run ``run_pk``'s heartbeat recently.

    ``False`` without Redis (nothing can be proven alive then).
    """
    client = _redis()
    if client is None:
        return False
    return bool(client.exists(HEARTBEAT_KEY.format(pk=run_pk)))


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
def tool_call_log_context(*, tool_call_pk: int) -> Iterator[None]:
    """Tag log lines with the call's ``toolCallId``, its run and its thread."""
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
