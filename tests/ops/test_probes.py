"""GET /readyz: database and broker reachable, for Kubernetes' readiness probe."""

from __future__ import annotations

import pytest

from tests.helpers.prod import free_port

pytestmark = pytest.mark.django_db


def test_readyz_ok_in_the_embedded_mode(client, settings):
    settings.REDIS_URL = ""
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json() == {
        "status": "ok",
        "database": "ok",
        "broker": "not configured",
    }


def test_readyz_is_503_naming_an_unreachable_broker(client, settings):
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json() == {
        "status": "error",
        "database": "ok",
        "broker": "error: ConnectionError",
        "failed": ["broker"],
    }


def test_readyz_and_metrics_are_not_redirected_to_https(client, settings):
    """Probes and scrapers speak plain HTTP inside the cluster."""
    settings.SECURE_SSL_REDIRECT = True
    settings.REDIS_URL = ""
    assert client.get("/readyz").status_code == 200
    assert client.get("/metrics").status_code == 404
    assert client.get("/api/threads/").status_code == 301
