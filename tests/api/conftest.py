"""Configuration of the REST API tests: fresh rate-limit counters for every test.

The API's fixtures (clients, tokens, approvers) live in :mod:`tests.fixtures`.
"""

from __future__ import annotations

import pytest
from django.core.cache import cache


@pytest.fixture(autouse=True)
def _fresh_throttle_counters() -> None:
    """Start every test with empty rate-limit counters (they live in the cache)."""
    cache.clear()
