"""Misconfiguration stops start-up with a message naming the setting (system checks)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from threads.checks import check_agents, raise_on_configuration_errors

ROOT = Path(__file__).resolve().parents[2]


def test_default_configuration_is_clean():
    assert check_agents() == []


@pytest.mark.parametrize(
    ("agents", "code", "names"),
    [
        (
            {"x": {"provider": "nonsense"}},
            "threads.E005",
            "COUNTERSIGN_AGENTS['x']['provider']",
        ),
        (
            {"x": {"provider": "anthropic", "model": "m"}},
            "threads.E002",
            "ANTHROPIC_API_KEY",
        ),
        ({"x": {"provider": "agui_http"}}, "threads.E006", "'url'"),
        (
            {"x": {"provider": "scripted", "toolsets": ["demo.tools.NOPE"]}},
            "threads.E003",
            "demo.tools.NOPE",
        ),
        ({}, "threads.E001", "COUNTERSIGN_AGENTS"),
    ],
)
def test_misconfigured_agents_are_named(settings, monkeypatch, agents, code, names):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    settings.COUNTERSIGN_AGENTS = agents
    errors = check_agents()
    assert [e.id for e in errors] == [code]
    assert names in errors[0].msg
    with pytest.raises(ImproperlyConfigured, match=code):
        raise_on_configuration_errors()


def test_web_process_refuses_to_start_misconfigured():
    """Importing the ASGI application (what uvicorn does) fails, naming the setting."""
    env = {
        **os.environ,
        "COUNTERSIGN_AGENTS_JSON": '{"bad": {"provider": "openai_chat", "model": "gpt"}}',
        "DATABASE_URL": "sqlite:///:memory:",
    }
    env.pop("OPENAI_API_KEY", None)
    result = subprocess.run(
        [sys.executable, "-c", "import config.asgi"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "threads.E002" in result.stderr
    assert "OPENAI_API_KEY" in result.stderr
