"""The external services integration tests need, and how a missing one is reported.

Integration fixtures (Redis, a Celery worker process, a live ASGI server) skip when
their service is unreachable, unless ``COUNTERSIGN_REQUIRE_SERVICES=1`` (set by
``.ci/run``), in which case they fail: CI never passes with integration tests
skipped.
"""

from __future__ import annotations

import os
import socket
from urllib.parse import urlparse

import pytest

REQUIRE_SERVICES = os.environ.get("COUNTERSIGN_REQUIRE_SERVICES") == "1"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/15"


def service_missing(reason: str) -> None:
    """Skip (locally) or fail (in CI) because a service the test needs is missing."""
    if REQUIRE_SERVICES:
        pytest.fail(f"required service missing: {reason}", pytrace=False)
    pytest.skip(reason)


def reachable(url: str) -> bool:
    """Return whether a TCP connection to ``url``'s host and port opens within 1 s."""
    parsed = urlparse(url)
    try:
        with socket.create_connection(
            (parsed.hostname or "127.0.0.1", parsed.port or 6379), 1
        ):
            return True
    except OSError:
        return False
