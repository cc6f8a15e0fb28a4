"""Lazy URL conf entries (web.lazy): imported on first use, declared like the view.

A web process answers ``/healthz`` without importing the views, consumers or the MCP
gateway (B6); each lazy entry's declared async-ness and CSRF exemption match the
view it stands for, so Django treats the wrapper exactly as it would the view.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from web.lazy import LazyView, lazy_asgi, lazy_view

ROOT = Path(__file__).resolve().parents[2]


def _lazy_views(patterns: list[Any]) -> Iterator[LazyView]:
    for entry in patterns:
        if isinstance(entry, URLResolver):
            yield from _lazy_views(entry.url_patterns)
        elif isinstance(entry, URLPattern) and hasattr(entry.callback, "lazy"):
            yield entry.callback.lazy


def test_every_lazy_entry_matches_the_view_it_stands_for():
    """Each lazy view imports, and its declared async-ness and CSRF exemption hold."""
    # given the root URL conf, lazy includes walked (which imports their modules)
    lazies = list(_lazy_views(get_resolver().url_patterns))

    # when every lazy view is resolved (raises ImproperlyConfigured on a mismatch)
    resolved = {lazy.target: lazy.resolve() for lazy in lazies}

    # then the views are the real ones, flags as declared
    assert len(resolved) >= 12
    assert resolved["web.agui.agui_run"].csrf_exempt is True
    assert resolved["web.chat.slack_interactions"].csrf_exempt is True
    assert {lazy.target for lazy in lazies if lazy.is_async} == {
        "web.agui.agui_run",
        "web.agui.agui_capabilities",
        "web.agui.agui_thread_events",
    }


def test_a_wrong_declaration_names_the_flag_to_declare():
    """A lazy entry that forgets a view's CSRF exemption fails on its first call."""
    forgot_exempt = lazy_view("web.agui.agui_run", is_async=True)
    wrong_kind = lazy_view("web.health.healthz", is_async=True)

    with pytest.raises(ImproperlyConfigured) as exempt:
        forgot_exempt.lazy.resolve()  # type: ignore[attr-defined]
    with pytest.raises(ImproperlyConfigured) as kind:
        wrong_kind.lazy.resolve()  # type: ignore[attr-defined]

    assert str(exempt.value) == (
        "lazy_view('web.agui.agui_run') declares csrf_exempt=False but the view's "
        "is True; declare csrf_exempt=True"
    )
    assert str(kind.value) == (
        "lazy_view('web.health.healthz') declares is_async=True but the view is "
        "sync; declare is_async=False"
    )


async def test_an_unknown_target_names_itself():
    """A lazy ASGI entry naming nothing fails on its first connection, saying what."""
    app = lazy_asgi("web.consumers.NoSuchConsumer")

    with pytest.raises(ImproperlyConfigured) as missing:
        await app({"type": "websocket"}, _never, _ignore)

    assert str(missing.value).startswith(
        "lazy_asgi('web.consumers.NoSuchConsumer') names nothing importable: "
    )


async def _never() -> dict[str, Any]:
    raise AssertionError("the app read the socket before it existed")


async def _ignore(message: Any) -> None:
    raise AssertionError("the app wrote to the socket before it existed")


@pytest.mark.django_db
def test_a_lazy_csrf_exempt_view_stays_exempt():
    """CsrfViewMiddleware reads the wrapper: an exempt view's POST passes, others 403."""
    client = Client(enforce_csrf_checks=True)

    exempt = client.post("/agui/no/such/path")
    protected = client.post("/accounts/login/", {"username": "x", "password": "y"})

    assert exempt.status_code == 404
    assert exempt.json()["type"] == "not_found"
    assert protected.status_code == 403


def test_serving_healthz_imports_no_view_consumer_or_gateway():
    """A fresh web process's first /healthz imports none of the lazy modules (B6)."""
    candidates = (
        "mcp",
        "web.mcp_gateway",
        "web.consumers",
        "web.agui",
        "web.api.urls",
        "web.ui.approvals",
        "web.chat",
        "rest_framework.views",
        "approvals.services",
        "ag_ui.core",
    )
    probe = (
        "import config.asgi\n"
        "from django.urls import resolve\n"
        "resolve('/healthz')\n"
        "import sys\n"
        f"print(','.join(m for m in {candidates!r} if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout

    assert out.strip() == ""
