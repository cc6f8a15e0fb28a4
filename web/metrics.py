"""``GET /metrics``: Prometheus metrics, behind a bearer token.

The scraper sends ``Authorization: Bearer <COUNTERSIGN_METRICS_TOKEN>``; no token
configured answers 404 (the endpoint is off), a missing or wrong one 401. The
text is every process's counters (:mod:`core.metrics`, multiprocess mode under
``PROMETHEUS_MULTIPROC_DIR``) plus the approval queue read at scrape time.
docs/observability.md.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterator

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


def _bearer(request: HttpRequest) -> str:
    scheme, _, credentials = request.headers.get("Authorization", "").partition(" ")
    return credentials.strip() if scheme.lower() == "bearer" else ""


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
    given = _bearer(request)
    if not given or not hmac.compare_digest(given.encode(), token.encode()):
        response = JsonResponse(
            {
                "type": "not_authenticated",
                "detail": "Send Authorization: Bearer <COUNTERSIGN_METRICS_TOKEN>.",
            },
            status=401,
        )
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    body = metrics.metrics_exposition(collectors=[ApprovalQueueCollector()])
    return HttpResponse(body, content_type=metrics.CONTENT_TYPE)
