"""Suite-wide configuration: fixture plugins, fast settings, markers derived from fixtures.

Fixtures live in :mod:`tests.fixtures` (one definition each) and helpers in
:mod:`tests.helpers`; a directory's ``conftest.py`` holds only that directory's
autouse configuration. Integration fixtures (Redis, a Celery worker process, a
live ASGI server, a browser) skip when their service is missing, unless
``COUNTERSIGN_REQUIRE_SERVICES=1`` (set by ``.ci/run``), in which case they fail:
CI never passes with integration tests skipped.
"""

from __future__ import annotations

import os

# Imported while the session starts, on the main thread: pytest rewrites the asserts
# of llmock (a pytest plugin) from source on its first import, and a first import
# late in a full run (from the llmock_server fixture) failed every time in that
# process with CPython 3.11's "SystemError: AST constructor recursion depth
# mismatch" in ast.parse, erroring all 60 tests that use the fake LLM server.
import llmock.main  # noqa: F401
import pytest

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


def pytest_configure(config: pytest.Config) -> None:
    """Make the demo agent instant in this process too (settings may be loaded already)."""
    from django.conf import settings

    settings.COUNTERSIGN_DEMO_PACE = 0.0
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
