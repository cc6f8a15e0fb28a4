"""Suite-wide configuration: fixture plugins, fast settings, markers derived from fixtures.

Fixtures live in :mod:`tests.fixtures` (one definition each) and helpers in
:mod:`tests.helpers`; a directory's ``conftest.py`` holds only that directory's
autouse configuration.

The markers ``integration``, ``worker``, ``browser`` and ``postgres`` (declared in
``pyproject.toml``) are given to a test by the fixtures it uses, at collection,
so they cannot drift from what the test needs: ``pytest -m "not integration"``
runs the fast set, which needs no service and starts no worker, server or
browser. Integration fixtures (Redis, a Celery worker process, a
live ASGI server, a browser) skip when their service is missing, unless
``COUNTERSIGN_REQUIRE_SERVICES=1`` (set by ``.ci/run``), in which case they fail:
CI never passes with integration tests skipped.
"""

from __future__ import annotations

import os
from typing import Final

# Imported while the session starts, on the main thread: pytest rewrites the asserts
# of llmock (a pytest plugin) from source on its first import, and a first import
# late in a full run (from the llmock_server fixture) failed every time in that
# process with CPython 3.11's "SystemError: AST constructor recursion depth
# mismatch" in ast.parse, erroring all 60 tests that use the fake LLM server.
import llmock.main  # noqa: F401
import pytest

#: Fixtures that mark every test using them, directly or through another fixture.
FIXTURE_MARKS: Final[dict[str, tuple[str, ...]]] = {
    "redis_url": ("integration",),
    "celery_worker_factory": ("integration", "worker"),
    "chromium_path": ("integration", "browser"),
    "ui_server_factory": ("integration",),
    "live": ("integration",),
    "stack": ("integration", "worker", "postgres"),
    "private_redis": ("integration",),
    "slow_agent": ("integration",),
    # MCP test servers (tests/mcp_servers.py) and node's @ag-ui/client run as processes.
    "files_server": ("integration",),
    "gateway_upstream": ("integration",),
    "gateway_live": ("integration",),
    "gateway_live_celery": ("integration", "worker"),
    "http_server": ("integration",),
    "make_source": ("integration",),
    "agui_client_js": ("integration",),
}
#: Parametrized fixtures whose value marks the test: ``(fixture, param) -> marks``.
PARAM_MARKS: Final[dict[tuple[str, str], tuple[str, ...]]] = {
    ("executor", "celery"): ("integration", "worker"),
    ("live", "celery"): ("integration", "worker"),
}
#: Markers that each imply ``integration``.
SERVICE_MARKS: Final = ("worker", "browser", "postgres")

pytest_plugins = [
    "tests.fixtures.services",
    "tests.fixtures.users",
    "tests.fixtures.clients",
    "tests.fixtures.approvals",
    "tests.fixtures.browser",
    "tests.fixtures.live",
    "tests.fixtures.mcp",
    "tests.fixtures.prod",
    "tests.fixtures.providers",
]

# The demo agent streams at a human pace for `make run`; tests (and the workers and
# servers they start, which inherit this) want it instant.
os.environ["COUNTERSIGN_DEMO_PACE"] = "0"
# A fast password hasher for this process and every worker or server it starts.
os.environ["COUNTERSIGN_FAST_PASSWORD_HASHER"] = "1"


#: Test folders whose tests share one pytest-xdist worker, in order, instead of a file
#: each: the fault trials each start a production-like stack of several processes.
XDIST_GROUPS: Final = {"tests/prod/": "prod"}


def pytest_configure(config: pytest.Config) -> None:
    """Make settings loaded before this file (by pytest-django) fit the test session.

    The demo agent instant and a fast hasher in this process too, and the session's
    own Redis prefixes (:func:`tests.helpers.executors.session_prefixes_apply`).
    """
    from django.conf import settings

    from tests.helpers.executors import session_prefixes_apply

    settings.COUNTERSIGN_DEMO_PACE = 0.0
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    session_prefixes_apply(settings)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(
    config: pytest.Config, items: list[pytest.Item]
) -> None:
    """Mark each test by what its fixtures start or need (before ``-m`` selects)."""
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        callspec = getattr(item, "callspec", None)
        params = callspec.params if callspec is not None else {}
        marks: set[str] = set()
        for fixture in fixtures & FIXTURE_MARKS.keys():
            marks.update(FIXTURE_MARKS[fixture])
        for (fixture, value), implied in PARAM_MARKS.items():
            if params.get(fixture) == value:
                marks.update(implied)
        if marks or any(item.get_closest_marker(m) for m in SERVICE_MARKS):
            marks.add("integration")
        for name in sorted(marks):
            if item.get_closest_marker(name) is None:
                item.add_marker(name)
        if item.get_closest_marker("xdist_group") is None:
            # `make test` runs pytest-xdist with --dist loadgroup: a file's tests stay
            # on one worker, so its module-scoped servers start once.
            path = item.nodeid.split("::", 1)[0]
            group = next(
                (g for prefix, g in XDIST_GROUPS.items() if path.startswith(prefix)),
                path,
            )
            item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture(autouse=True)
def _rate_limits_reset() -> None:
    """Start each test with no request counted (``web.ratelimit``'s counters outlive tests)."""
    from tests.helpers.executors import ratelimit_counters_clear

    ratelimit_counters_clear()
