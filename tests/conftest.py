"""Shared fixtures.

Integration fixtures (Redis, a Celery worker process, a live ASGI server) skip when
their service is unreachable, unless ``COUNTERSIGN_REQUIRE_SERVICES=1`` (set by
``.ci/run``), in which case they fail: CI never passes with integration tests
skipped.
"""

from __future__ import annotations

import os
import socket
from urllib.parse import urlparse

# Imported while the session starts, on the main thread: pytest rewrites the asserts
# of llmock (a pytest plugin) from source on its first import, and a first import
# late in a full run (from the llmock_server fixture) failed every time in that
# process with CPython 3.11's "SystemError: AST constructor recursion depth
# mismatch" in ast.parse, erroring all 60 tests that use the fake LLM server.
import llmock.main  # noqa: F401
import pytest

pytest_plugins = ["tests.executors"]

# The demo agent streams at a human pace for `make run`; tests (and the workers and
# servers they start, which inherit this) want it instant.
os.environ["COUNTERSIGN_DEMO_PACE"] = "0"
# A fast password hasher for this process and every worker or server it starts.
os.environ["COUNTERSIGN_FAST_PASSWORD_HASHER"] = "1"


def pytest_configure(config: pytest.Config) -> None:
    """Make the demo agent instant in this process too (settings may be loaded already)."""
    from django.conf import settings

    settings.COUNTERSIGN_DEMO_PACE = 0.0
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


REQUIRE_SERVICES = os.environ.get("COUNTERSIGN_REQUIRE_SERVICES") == "1"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/15"


def service_missing(reason: str) -> None:
    """Skip (locally) or fail (in CI) because a service the test needs is missing."""
    if REQUIRE_SERVICES:
        pytest.fail(f"required service missing: {reason}", pytrace=False)
    pytest.skip(reason)


def _reachable(url: str) -> bool:
    parsed = urlparse(url)
    try:
        with socket.create_connection(
            (parsed.hostname or "127.0.0.1", parsed.port or 6379), 1
        ):
            return True
    except OSError:
        return False


@pytest.fixture(scope="session")
def redis_url() -> str:
    """Return a reachable Redis URL (``TEST_REDIS_URL`` or db 15 on localhost)."""
    url = (
        os.environ.get("TEST_REDIS_URL")
        or os.environ.get("REDIS_URL")
        or DEFAULT_REDIS_URL
    )
    if not _reachable(url):
        service_missing(f"Redis is not reachable at {url}")
    return url


@pytest.fixture
def user(django_user_model):
    """Return an ordinary user (no staff, no decide permission)."""
    return django_user_model.objects.create_user(
        username="olivia", password="pw-olivia-1"
    )


@pytest.fixture
def other_user(django_user_model):
    """Return a second ordinary user."""
    return django_user_model.objects.create_user(
        username="mallory", password="pw-mallory-1"
    )


@pytest.fixture
def staff_user(django_user_model):
    """Return a staff user without the decide permission."""
    return django_user_model.objects.create_user(
        username="sam", password="pw-sam-1", is_staff=True
    )
