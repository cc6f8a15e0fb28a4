"""Agents built from ``COUNTERSIGN_AGENTS``: every adapter option settable, every key checked."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from agentcore.loop import LoopAgent
from agentcore.providers.agui_http import RemoteAgent
from agentcore.providers.anthropic import AnthropicProvider
from agentcore.providers.gemini import GeminiProvider
from agentcore.providers.openai_chat import OpenAIChatProvider
from agentcore.providers.openai_responses import OpenAIResponsesProvider
from threads.agent_config import agent_build
from threads.checks import check_agents, raise_on_configuration_errors

KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY")


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in KEYS:
        monkeypatch.setenv(key, "sk-test")


def configure(settings, **agents):
    settings.COUNTERSIGN_AGENTS = {**settings.COUNTERSIGN_AGENTS, **agents}


def test_openai_chat_options_reach_the_adapter(settings, keys) -> None:
    """id_style, parallel tool calls, timeout, retries and headers are all settable."""
    configure(
        settings,
        mistral={
            "provider": "openai_chat",
            "model": "mistral-large",
            "options": {
                "id_style": "mistral9",
                "developer_role": "system",
                "max_tokens_param": "max_tokens",
                "parallel_tool_calls": False,
                "timeout": 42,
                "max_retries": 1,
                "headers": {"X-Route": "eu"},
            },
            "max_output_tokens": 512,
            "model_retries": 4,
            "retry_backoff": 0.25,
            "retry_max_delay": 9,
        },
    )
    assert check_agents() == []
    agent = agent_build("mistral")
    assert isinstance(agent, LoopAgent)
    provider = agent.provider
    assert isinstance(provider, OpenAIChatProvider)
    assert provider.id_style == "mistral9"
    assert provider.developer_role == "system"
    assert provider.max_tokens_param == "max_tokens"
    assert provider.parallel_tool_calls is False
    assert provider._client.timeout == 42
    assert provider._client.max_retries == 1
    assert provider._client.default_headers["X-Route"] == "eu"
    assert (agent.max_output_tokens, agent.model_retries) == (512, 4)
    assert agent.owns_provider, "built for one run: the loop closes the client"
    assert (agent.retry_backoff, agent.retry_max_delay) == (0.25, 9)


def test_every_model_adapter_takes_timeout_retries_and_headers(settings, keys) -> None:
    """The client options common to the four adapters build without error."""
    common = {"timeout": 5, "max_retries": 0, "headers": {"X-A": "1"}}
    configure(
        settings,
        r={"provider": "openai_responses", "options": {**common, "store": True}},
        a={"provider": "anthropic", "options": {**common, "default_max_tokens": 99}},
        g={"provider": "gemini", "options": {**common, "api_version": "v1beta"}},
    )
    assert check_agents() == []
    responses, anthropic, gemini = (agent_build(n).provider for n in "rag")
    assert isinstance(responses, OpenAIResponsesProvider)
    assert responses.store is True
    assert isinstance(anthropic, AnthropicProvider)
    assert anthropic.default_max_tokens == 99
    assert anthropic._client.default_headers["X-A"] == "1"
    assert isinstance(gemini, GeminiProvider)


def test_agui_http_options_and_legacy_headers(settings) -> None:
    """A remote agent takes RemoteAgent's options; a top-level ``headers`` still works."""
    configure(
        settings,
        remote={
            "provider": "agui_http",
            "url": "http://127.0.0.1:9/agent",
            "headers": {"Authorization": "Bearer x"},
            "options": {"timeout": 7, "max_retries": 5, "retry_max_delay": 2},
        },
    )
    assert check_agents() == []
    agent = agent_build("remote")
    assert isinstance(agent, RemoteAgent)
    assert agent.headers == {"Authorization": "Bearer x"}
    assert (agent.timeout, agent.max_retries, agent.retry_max_delay) == (7, 5, 2)


@pytest.mark.parametrize(
    ("entry", "names"),
    [
        (
            {"provider": "openai_chat", "options": {"id_styel": "mistral9"}},
            ["'id_styel'", "'x'", "id_style"],
        ),
        ({"provider": "scripted", "max_iteration": 3}, ["'max_iteration'", "'x'"]),
        (
            {
                "provider": "agui_http",
                "url": "http://127.0.0.1:9/",
                "system_prompt": "",
            },
            ["'system_prompt'", "'x'", "'agui_http'"],
        ),
        ({"provider": "gemini", "options": {"store": True}}, ["'store'", "'x'"]),
    ],
)
def test_unknown_key_is_an_error_naming_key_and_agent(
    settings, keys, entry, names
) -> None:
    """An unknown key, top-level or in ``options``, is threads.E020 naming both."""
    settings.COUNTERSIGN_AGENTS = {"x": entry}
    errors = check_agents()
    assert [e.id for e in errors] == ["threads.E020"]
    text = f"{errors[0].msg} {errors[0].hint}"
    for name in names:
        assert name in text
    with pytest.raises(ImproperlyConfigured, match=r"threads\.E020"):
        raise_on_configuration_errors()


@pytest.mark.parametrize(
    ("entry", "names"),
    [
        ({"provider": "openai_chat", "options": {"id_style": "short"}}, "'id_style'"),
        ({"provider": "anthropic", "options": {"timeout": "slow"}}, "'timeout'"),
        ({"provider": "scripted", "model_retries": "2"}, "'model_retries'"),
        ({"provider": "scripted", "options": ["delay"]}, "'options'"),
    ],
)
def test_ill_typed_value_is_an_error_naming_it(settings, keys, entry, names) -> None:
    """A value of the wrong type is threads.E021, naming the agent and the key."""
    settings.COUNTERSIGN_AGENTS = {"x": entry}
    errors = check_agents()
    assert [e.id for e in errors] == ["threads.E021"]
    assert names in errors[0].msg
    assert "COUNTERSIGN_AGENTS['x']" in errors[0].msg


def test_provider_factory_options_follow_its_signature(settings) -> None:
    """With ``provider_factory``, options are checked against the factory's parameters."""
    settings.COUNTERSIGN_AGENTS = {
        "x": {
            "provider": "scripted",
            "provider_factory": "tests.threads.test_agent_config.factory",
            "options": {"speed": 2.0, "colour": "red"},
        }
    }
    errors = check_agents()
    assert [e.id for e in errors] == ["threads.E020"]
    assert "'colour'" in errors[0].msg
    settings.COUNTERSIGN_AGENTS["x"]["options"] = {"speed": 2.0}
    assert check_agents() == []
    agent = agent_build("x")
    assert agent.provider.delay == 2.0


def factory(*, model: str, speed: float = 1.0):
    """A provider factory with one option of its own (for the test above)."""
    from agentcore.providers.scripted import ScriptedProvider

    return ScriptedProvider(model=model or "scripted", delay=speed)


def test_demo_pace_reaches_the_scripted_agent(settings) -> None:
    """COUNTERSIGN_DEMO_PACE paces the demo agent (instant in tests); an agent's own
    ``pace`` option wins."""
    assert settings.COUNTERSIGN_DEMO_PACE == 0.0  # tests/conftest.py: never slowed
    assert agent_build("demo").provider.pace == 0.0
    settings.COUNTERSIGN_DEMO_PACE = 60.0
    assert agent_build("demo").provider.pace == 60.0
    configure(settings, quick={"provider": "scripted", "options": {"pace": 0}})
    assert check_agents() == []
    assert agent_build("quick").provider.pace == 0.0
