"""``GET /metrics``: Prometheus metrics, behind a bearer token.

The scraper sends ``Authorization: Bearer <COUNTERSIGN_METRICS_TOKEN>``; no token
configured answers 404 (the endpoint is off), a missing or wrong one 401. The
text is every process's counters (:mod:`core.metrics`, multiprocess mode under
``PROMETHEUS_MULTIPROC_DIR``) plus the approval queue read at scrape time.
docs/observability.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

import redis
from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from approvals.selectors import approvals_pending_summary
from core import metrics
from core.conf import countersign_settings


class ApprovalQueueCollector(Collector):
    """The pending approvals by group and risk, and the oldest one's age, read per scrape."""

    def collect(self) -> Iterator[Metric]:
        counts, oldest = approvals_pending_summary()
        pending = GaugeMetricFamily(
            "countersign_approvals_pending",
            "Pending approval requests, by approver group ('' = any decider) and risk level.",
            labels=["group", "risk"],
        )
        for (group, risk), count in sorted(counts.items()):
            pending.add_metric([group, risk], count)
        yield pending
        age = (timezone.now() - oldest).total_seconds() if oldest else 0.0
        yield GaugeMetricFamily(
            "countersign_approval_oldest_pending_age_seconds",
            "Seconds the oldest pending approval request has waited (0: none pending).",
            value=max(age, 0.0),
        )


#: The Celery queues (config/settings.py CELERY_TASK_ROUTES) and kombu's Redis
#: priority lists: a queue ``q`` is the list ``q`` plus ``q\x06\x16<n>`` per priority.
QUEUES: Final = ("runs", "tools", "countersign")
_PRIORITY_SUFFIXES: Final = ("", "\x06\x163", "\x06\x166", "\x06\x169")


class QueueDepthCollector(Collector):
    """Messages waiting in each Celery queue (Redis list lengths), for autoscaling workers.

    Nothing when Redis is not configured (the embedded mode); an unreachable
    Redis leaves the metric out of the scrape (``countersign_queue_depth_up`` 0)
    rather than failing it.
    """

    def collect(self) -> Iterator[Metric]:
        url = str(getattr(settings, "REDIS_URL", "") or "")
        if not url:
            return
        prefix = str(
            settings.CELERY_BROKER_TRANSPORT_OPTIONS.get("global_keyprefix", "")
        )
        client = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
        try:
            pipe = client.pipeline(transaction=False)
            for queue in QUEUES:
                for suffix in _PRIORITY_SUFFIXES:
                    pipe.llen(f"{prefix}{queue}{suffix}")
            lengths = pipe.execute()
        except redis.RedisError:
            yield GaugeMetricFamily(
                "countersign_queue_depth_up",
                "Whether the broker answered the queue-depth read (1) or not (0).",
                value=0,
            )
            return
        finally:
            client.close()
        depth = GaugeMetricFamily(
            "countersign_queue_depth",
            "Messages waiting in each Celery queue (not yet taken by a worker).",
            labels=["queue"],
        )
        step = len(_PRIORITY_SUFFIXES)
        for index, queue in enumerate(QUEUES):
            depth.add_metric([queue], sum(lengths[index * step : (index + 1) * step]))
        yield depth
        yield GaugeMetricFamily(
            "countersign_queue_depth_up",
            "Whether the broker answered the queue-depth read (1) or not (0).",
            value=1,
        )


@never_cache
@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    """Return the metrics as Prometheus text (200), or a JSON 404/401 naming what is missing."""
    token = str(countersign_settings.METRICS_TOKEN or "")
    if not token:
        return JsonResponse(
            {
                "type": "not_found",
                "detail": "Metrics are off: set COUNTERSIGN_METRICS_TOKEN and scrape "
                "with Authorization: Bearer <token>.",
            },
            status=404,
        )
    if not metrics.metrics_authorized(
        authorization=request.headers.get("Authorization", ""), token=token
    ):
        response = JsonResponse(
            {
                "type": "not_authenticated",
                "detail": "Send Authorization: Bearer <COUNTERSIGN_METRICS_TOKEN>.",
            },
            status=401,
        )
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    body = metrics.metrics_exposition(
        collectors=[ApprovalQueueCollector(), QueueDepthCollector()]
    )
    return HttpResponse(body, content_type=metrics.CONTENT_TYPE)
