"""Without chromium the browser tests skip (or fail in CI); the suite installs nothing."""

from __future__ import annotations

import pytest

import tests.helpers.services
from tests.helpers.ui import require_chromium

MISSING = "/nonexistent/chromium"


def test_missing_chromium_skips_with_how_to_install_it(monkeypatch):
    monkeypatch.setattr(tests.helpers.services, "REQUIRE_SERVICES", False)
    with pytest.raises(pytest.skip.Exception) as skipped:
        require_chromium(MISSING)
    assert str(skipped.value) == (
        "chromium for the browser tests: /nonexistent/chromium is missing "
        "(install it with `apt-get install chromium`)"
    )


def test_missing_chromium_fails_when_services_are_required(monkeypatch):
    monkeypatch.setattr(tests.helpers.services, "REQUIRE_SERVICES", True)
    with pytest.raises(pytest.fail.Exception) as failed:
        require_chromium(MISSING)
    assert "apt-get install chromium" in str(failed.value)
    assert str(failed.value).startswith("required service missing: ")
