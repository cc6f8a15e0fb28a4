"""Prometheus metrics: the counters every process updates, and the exposition.

Built on ``prometheus-client``. Under several processes (uvicorn ``--workers``,
Celery's prefork pool) set ``PROMETHEUS_MULTIPROC_DIR`` to an empty folder
shared by the processes of one host (or pod) before they start: each process
then writes its values to files there, and :func:`metrics_exposition` adds them
up (the client's multiprocess mode). Without it, the values are this process's.
docs/observability.md lists the metrics and their labels.

Counters move after the transaction that did the work commits
(:func:`count_on_commit`): a rolled-back step is not counted.
"""

from __future__ import annotations

import hmac
import os
import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any, Final
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from django.db import transaction
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.registry import Collector

#: The media type of :func:`metrics_exposition`'s text.
CONTENT_TYPE: Final = CONTENT_TYPE_LATEST

if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    # The client writes its first values as the metrics below are defined: the
    # folder (an emptyDir's subfolder, a fresh /tmp path) must exist by then.
    os.makedirs(os.environ["PROMETHEUS_MULTIPROC_DIR"], exist_ok=True)

EVENTS_APPENDED: Final = Counter(
    "countersign_events_appended",
    "AG-UI events appended to thread logs (rate() gives the append rate).",
)
TOOL_EXECUTIONS: Final = Counter(
    "countersign_tool_executions",
    "Tool executions settled, by outcome (succeeded, failed, outcome_unknown, resolved).",
    ["outcome"],
)
DECISION_LATENCY: Final = Histogram(
    "countersign_approval_decision_latency_seconds",
    "Seconds from an approval request to its decision, by decision.",
    ["decision"],
    buckets=(5, 15, 30, 60, 120, 300, 900, 1800, 3600, 4 * 3600, 24 * 3600),
)
JANITOR_RECOVERIES: Final = Counter(
    "countersign_janitor_recoveries",
    "Items the janitor recovered, by kind (worker_lost, runs_requeued, ...).",
    ["kind"],
)
NOTIFICATION_FAILURES: Final = Counter(
    "countersign_notification_failures",
    "Failed notification attempts, by target and whether retries were exhausted.",
    ["target", "final"],
)
OPEN_STREAMS: Final = Gauge(
    "countersign_open_streams",
    "Open client streams, by transport (websocket, sse).",
    ["transport"],
    multiprocess_mode="livesum",
)


def count_on_commit(update: Callable[[], object]) -> None:
    """Run the metric ``update`` once the current transaction commits (at once outside one).

    A failing update is logged by Django and never fails the caller (``robust``).
    Outside a transaction the update runs at once, without touching the
    database connection (a transition applied to an unsaved row has none).
    """
    if transaction.get_connection().in_atomic_block:
        transaction.on_commit(update, robust=True)
    else:
        update()


def multiprocess_dir() -> str | None:
    """Return ``PROMETHEUS_MULTIPROC_DIR`` when set (multiprocess mode), else ``None``."""
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None


def metrics_exposition(*, collectors: Iterable[Collector] = ()) -> bytes:
    """Return every process's metrics and ``collectors``' in the Prometheus text format.

    In multiprocess mode the values are read from ``PROMETHEUS_MULTIPROC_DIR``
    (all processes of this host, live or finished; live gauges of live ones);
    otherwise from this process. ``collectors`` (values read at scrape time,
    such as the pending approvals) are added to this scrape only.
    """
    path = multiprocess_dir()
    registry = CollectorRegistry(auto_describe=True)
    if path is not None:
        multiprocess.MultiProcessCollector(registry, path=path)
    for collector in collectors:
        registry.register(collector)
    text = generate_latest(registry)
    if path is None:
        text += generate_latest(REGISTRY)
    return text


def metrics_authorized(*, authorization: str, token: str) -> bool:
    """Return whether an ``Authorization`` header value is ``Bearer <token>`` (``token`` non-empty)."""
    scheme, _, credentials = authorization.partition(" ")
    given = credentials.strip() if scheme.lower() == "bearer" else ""
    return bool(token and given) and hmac.compare_digest(given.encode(), token.encode())


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes are not logged (one line every few seconds per scraper)."""


def metrics_server_start(*, port: int, token: str, host: str = "0.0.0.0") -> WSGIServer:
    """Serve ``GET /metrics`` (this host's processes, bearer ``token``) on a daemon thread.

    For processes without the web endpoint: a Celery worker's main process starts
    it (``COUNTERSIGN_WORKER_METRICS_PORT``, config/celery.py) and its pool's
    children's values are read from ``PROMETHEUS_MULTIPROC_DIR``. An empty
    ``token`` answers 404 (off), a wrong one 401, like the web's ``/metrics``.
    Returns the server (``server_port`` is the bound port; ``shutdown()`` stops it).
    Raises ``OSError`` when the port cannot be bound.
    """

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        if environ.get("PATH_INFO") != "/metrics" or not token:
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"not found\n"]
        if not metrics_authorized(
            authorization=str(environ.get("HTTP_AUTHORIZATION", "")), token=token
        ):
            start_response(
                "401 Unauthorized",
                [
                    ("Content-Type", "text/plain"),
                    ("WWW-Authenticate", 'Bearer realm="metrics"'),
                ],
            )
            return [b"send Authorization: Bearer <COUNTERSIGN_METRICS_TOKEN>\n"]
        start_response("200 OK", [("Content-Type", CONTENT_TYPE)])
        return [metrics_exposition()]

    server = make_server(
        host, port, app, server_class=_ThreadingServer, handler_class=_QuietHandler
    )
    threading.Thread(
        target=server.serve_forever, name="metrics-server", daemon=True
    ).start()
    return server
