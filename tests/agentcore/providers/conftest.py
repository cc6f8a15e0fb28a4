"""Configuration of the provider adapter tests: no request may reach a real model.

The ``server`` fixture (a local scripted HTTP server) lives in
:mod:`tests.fixtures.providers`.
"""

from __future__ import annotations

import pytest

from agentcore.providers import registry


@pytest.fixture(autouse=True)
def _no_model_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    """Refuse any non-loopback base URL during these tests (STYLE 16)."""
    monkeypatch.setattr(registry, "ALLOW_MODEL_REQUESTS", False)
