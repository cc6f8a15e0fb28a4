"""get_provider: lazy imports, environment configuration, errors; the no-real-model switch."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agentcore.providers.base import ProviderError
from agentcore.providers.registry import ProviderConfigError, get_provider
from tests.agentcore.providers.contract import collect, user_request


def test_import_agentcore_imports_no_sdk_and_no_django() -> None:
    """Importing agentcore, its history and the registry loads no provider SDK and no Django."""
    code = (
        "import sys, agentcore, agentcore.history, agentcore.providers.registry;"
        "bad=[m for m in sys.modules if m.split('.')[0] in ('openai','anthropic','google','django')];"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("name", "key_env", "url_env"),
    [
        ("openai_chat", "OPENAI_API_KEY", "OPENAI_BASE_URL"),
        ("openai_responses", "OPENAI_API_KEY", "OPENAI_BASE_URL"),
        ("anthropic", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"),
        ("gemini", "GEMINI_API_KEY", "GEMINI_BASE_URL"),
    ],
)
def test_environment_supplies_key_and_base_url(
    monkeypatch: pytest.MonkeyPatch, name: str, key_env: str, url_env: str
) -> None:
    """Keys and base URLs come from the vendor's variables when not passed."""
    monkeypatch.setenv(key_env, "sk-env")
    monkeypatch.setenv(url_env, "http://127.0.0.1:9/v1")
    provider = get_provider(name, model="m")
    assert provider.name == name
    assert provider.base_url == "http://127.0.0.1:9/v1"  # type: ignore[attr-defined]


def test_missing_key_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    """A missing key raises ProviderConfigError naming the variable to set."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ProviderConfigError, match="ANTHROPIC_API_KEY"):
        get_provider("anthropic", model="m")


def test_unknown_provider_is_a_config_error() -> None:
    """An unknown name raises ProviderConfigError (a ValueError) listing the known ones."""
    with pytest.raises(ValueError, match=r"unknown provider 'cohere'.*openai_chat"):
        get_provider("cohere", model="m")


def test_explicit_arguments_win_over_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Passed api_key/base_url and options reach the adapter."""
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1")
    provider = get_provider(
        "openai_chat",
        model="m",
        api_key="k",
        base_url="http://127.0.0.1:2/v1",
        id_style="mistral9",
    )
    assert provider.base_url == "http://127.0.0.1:2/v1"  # type: ignore[attr-defined]
    assert provider.id_style == "mistral9"  # type: ignore[attr-defined]


def test_scripted_is_built_lazily_with_options() -> None:
    """'scripted' imports agentcore.providers.scripted and passes model and options."""
    pytest.importorskip("agentcore.providers.scripted")
    provider = get_provider("scripted", model="demo", delay=0.0)
    assert (provider.name, provider.model) == ("scripted", "demo")  # type: ignore[attr-defined]


def test_agui_http_builds_a_remote_agent_and_needs_a_url() -> None:
    """'agui_http' imports agentcore.providers.agui_http and needs base_url."""
    module = pytest.importorskip("agentcore.providers.agui_http")
    agent = get_provider("agui_http", model="", base_url="http://127.0.0.1:9/agent")
    assert isinstance(agent, module.RemoteAgent)
    with pytest.raises(ProviderConfigError, match="base_url"):
        get_provider("agui_http", model="")


async def test_non_loopback_url_refused_in_tests_style16() -> None:
    """With ALLOW_MODEL_REQUESTS off (autouse fixture) a real endpoint is refused before any I/O."""
    provider = get_provider(
        "openai_chat", model="m", api_key="k", base_url="https://api.openai.com/v1"
    )
    with pytest.raises(ProviderError) as info:
        await collect(provider, user_request())
    assert info.value.code == "model_requests_disabled"
