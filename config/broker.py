"""The Redis broker transport of the Celery workers: kombu's, made to survive a restart.

Selected by ``CELERY_BROKER_TRANSPORT`` (``config/settings.py``) when ``REDIS_URL``
is a ``redis://`` or ``rediss://`` URL. Two defects of kombu 5.7's Redis transport
kill a busy worker when its Redis restarts:

1. On a lost connection Celery's consumer calls ``Connection.collect()``, which
   tries to close the default channel (the channel's pending ``BRPOP`` read fails
   before it is marked closed) and then detaches the transport from its
   ``Connection`` (``transport.client = None``). ``Connection.close()`` closes the
   channel again; that close restores the unacknowledged messages, needs a Redis
   client, builds its parameters from ``transport.client`` and raises
   ``AttributeError: 'NoneType' object has no attribute 'hostname'``: not a
   connection error, so the worker stops ("Unrecoverable error"). The late
   acknowledgement of a task still running on the old channel fails the same way.
   :class:`Channel` keeps the connection's parameters from when it opened.
2. That restore pushes back every unacknowledged message, including those whose
   task is still executing in this worker (the pool keeps running them across a
   reconnect): another worker would then deliver a run that is still streaming,
   and ``run_execute`` would end it as ``worker_lost``. :class:`QoS` restores only
   the messages no task of this worker is executing; those are acknowledged when
   their task ends, over a new connection. If the worker dies meanwhile they stay
   in Redis's unacknowledged hash and come back after the visibility timeout.

The restore waits up to :data:`RESTORE_WAIT_SECONDS` for Redis to come back, so
the prefetched messages are queued again at once instead of after the visibility
timeout. Keeps DC-04 (exactly one execution, one tool message) across broker
restarts; proved by ``tests/prod/test_broker_restarts.py``.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import redis
from kombu.transport import redis as kombu_redis

logger = logging.getLogger(__name__)

RESTORE_WAIT_SECONDS = 15.0

# celery-types stubs kombu's Redis transport only in part (no ``_connparams``,
# ``conn_or_acquire``, ``connection_errors`` on the channel): its internals are
# used untyped here, at the one place that reaches into them.
_KombuQoS: Any = kombu_redis.QoS
_KombuChannel: Any = kombu_redis.Channel


def _executing_delivery_tags() -> set[str]:
    """Return the delivery tags of the messages whose task runs in this worker now."""
    from celery.worker import state

    tags: set[str] = set()
    for request in list(state.active_requests):
        message = getattr(request, "message", None)
        tag = getattr(message, "delivery_tag", None)
        if tag is not None:
            tags.add(str(tag))
    return tags


class QoS(_KombuQoS):
    """kombu's QoS that never requeues a message whose task is still executing here."""

    def restore_unacked(self, client: Any = None) -> None:
        """Requeue the unacknowledged messages no task is executing, waiting for Redis.

        Raises the transport's connection error when Redis is still unreachable
        after :data:`RESTORE_WAIT_SECONDS`; the messages then stay in Redis's
        unacknowledged hash, restored after the visibility timeout.
        """
        executing = _executing_delivery_tags()
        deadline = time.monotonic() + RESTORE_WAIT_SECONDS
        while True:
            try:
                with self.channel.conn_or_acquire(client) as conn:
                    for tag in list(self._delivered):
                        if str(tag) in executing:
                            continue
                        self.restore_by_tag(tag, client=conn)
                        self._delivered.pop(tag, None)
                return
            except self.channel.connection_errors:
                if time.monotonic() >= deadline:
                    raise
                logger.info("broker unreachable; retrying the restore of messages")
                time.sleep(0.5)


class Channel(_KombuChannel):
    """kombu's Redis channel that still reaches Redis after its transport is detached."""

    QoS = QoS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._opened_with = self.connection.client

    def _connparams(self, asynchronous: bool = False) -> dict[str, Any]:
        transport = self.connection
        if transport is None:
            # Closed under us (a Redis restart tore the connection down while a
            # publish was starting): a connection error, so kombu's ensure() retries
            # on a new channel, or gives up with OperationalError (found by make chaos).
            raise redis.exceptions.ConnectionError("the broker channel was closed")
        if transport.client is not None or self._opened_with is None:
            params: dict[str, Any] = super()._connparams(asynchronous=asynchronous)
            return params
        # The consumer detached the transport from its Connection; build the
        # parameters from the Connection this channel was opened with.
        transport.client = self._opened_with
        try:
            detached: dict[str, Any] = super()._connparams(asynchronous=asynchronous)
            return detached
        finally:
            transport.client = None


class Transport(kombu_redis.Transport):
    """kombu's Redis transport with :class:`Channel`."""

    Channel = Channel
