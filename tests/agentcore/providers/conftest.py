"""Fixtures for provider adapter tests: a local scripted HTTP server, no real models."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agentcore.providers import registry
from tests.agentcore.providers.server import ScriptServer


@pytest.fixture(autouse=True)
def _no_model_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    """Refuse any non-loopback base URL during these tests (STYLE 16)."""
    monkeypatch.setattr(registry, "ALLOW_MODEL_REQUESTS", False)


@pytest.fixture
def server() -> Iterator[ScriptServer]:
    """Yield a started :class:`ScriptServer` on 127.0.0.1 with an ephemeral port."""
    srv = ScriptServer().start()
    try:
        yield srv
    finally:
        srv.stop()
