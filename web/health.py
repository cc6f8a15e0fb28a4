"""``GET /healthz`` and ``GET /readyz``: can this process serve (database and Redis reachable)?

Answers ``200 {"status": "ok", "database": "ok", "redis": "ok"}`` (``"redis":
"not configured"`` in the embedded mode without ``REDIS_URL``), or ``503`` with
``"status": "error"``, each failed dependency's value naming the exception class
(never a host, URL or password) and ``"failed"`` listing them. No authentication,
no session, no redirect to HTTPS (``SECURE_REDIRECT_EXEMPT``): it is for load
balancers, container health checks and ``make prod-like``.
"""

from __future__ import annotations

import logging

import redis
from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

logger = logging.getLogger(__name__)

REDIS_TIMEOUT_SECONDS = 2.0


def _check_database() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as error:
        logger.warning("healthz: database check failed: %s", type(error).__name__)
        return f"error: {type(error).__name__}"
    return "ok"


def _check_redis() -> str:
    url = getattr(settings, "REDIS_URL", "")
    if not url:
        return "not configured"

    client = redis.Redis.from_url(
        url,
        socket_timeout=REDIS_TIMEOUT_SECONDS,
        socket_connect_timeout=REDIS_TIMEOUT_SECONDS,
    )
    try:
        client.ping()
    except Exception as error:
        logger.warning("healthz: redis check failed: %s", type(error).__name__)
        return f"error: {type(error).__name__}"
    finally:
        client.close()
    return "ok"


def _report(checks: dict[str, str]) -> JsonResponse:
    failed = [name for name, value in checks.items() if value.startswith("error")]
    body: dict[str, object] = {"status": "error" if failed else "ok", **checks}
    if failed:
        body["failed"] = failed
    return JsonResponse(body, status=503 if failed else 200)


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """Return the health of the database and Redis as JSON (200 or 503)."""
    return _report({"database": _check_database(), "redis": _check_redis()})


@never_cache
@require_GET
def readyz(request: HttpRequest) -> JsonResponse:
    """Return whether this process may take traffic: database and broker reachable (200 or 503).

    ``{"status": "ok", "database": "ok", "broker": "ok"}`` (``"broker": "not
    configured"`` in the embedded mode), or 503 naming the failed dependency's
    exception class, as :func:`healthz`. Kubernetes' readiness probe
    (docs/deploy.md): a pod that cannot reach them gets no requests until it can.
    """
    return _report({"database": _check_database(), "broker": _check_redis()})
