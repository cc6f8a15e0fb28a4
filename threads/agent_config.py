"""Building agents from ``settings.COUNTERSIGN_AGENTS``.

Each entry maps an agent name to::

    {
        "provider": "scripted" | "openai_chat" | "openai_responses" | "anthropic"
                    | "gemini" | "agui_http",
        "model": "gpt-4.1-mini",            # not used by scripted / agui_http
        "system_prompt": "...",
        "toolsets": ["demo.tools.DEMO_TOOLS"],  # dotted paths to iterables of Tool
        "max_iterations": 10, "deadline_seconds": 300,
        "url": "http://...",                # agui_http only
        "base_url_env": "OPENAI_BASE_URL",  # optional: env var holding a base URL
        "provider_factory": "pkg.module.make",  # optional: a callable(model=...) -> Provider
        "mcp_servers": {"files": {"url": "https://..."}},  # see threads.mcp_servers
    }

``provider_factory`` plugs in a provider of one's own (any
:class:`agentcore.providers.base.Provider`) instead of the built-in adapters.

API keys and base URLs come only from environment variables. Misconfiguration is
reported by the system check ``threads.E001``-``E003`` at start-up.
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.utils.module_loading import import_string

from threads.conf import countersign_settings
from threads.exceptions import UnknownAgent

PROVIDERS = (
    "scripted",
    "openai_chat",
    "openai_responses",
    "anthropic",
    "gemini",
    "agui_http",
)
KEY_ENV = {
    "openai_chat": "OPENAI_API_KEY",
    "openai_responses": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "gemini": "GEMINI_API_KEY",
}


def agent_settings(name: str) -> dict[str, Any]:
    """Return the configuration of agent ``name``; raise :class:`UnknownAgent` if absent."""
    agents = getattr(settings, "COUNTERSIGN_AGENTS", {})
    if name not in agents:
        raise UnknownAgent(
            f"agent {name!r} is not configured; configured agents: {sorted(agents)!r}"
        )
    return dict(agents[name])


@lru_cache(maxsize=64)
def _load_toolset(paths: tuple[str, ...]) -> Any:
    from agentcore.tools import Toolset

    return Toolset.assemble(*(import_string(path) for path in paths))


def agent_toolset(name: str) -> Any:
    """Return agent ``name``'s assembled :class:`agentcore.tools.Toolset` (RT-03)."""
    config = agent_settings(name)
    local = _load_toolset(tuple(config.get("toolsets", ())))
    if not config.get("mcp_servers"):
        return local
    from threads.mcp_servers import toolset_with_mcp

    return toolset_with_mcp(name, config, local)


def agent_application_tools(name: str) -> list[Any]:
    """Return the application-side tools agent ``name`` advertises in ``RunAgentInput.tools``."""
    return [t for t in agent_toolset(name) if t.runs_on == "application"]


def agent_build(name: str) -> Any:
    """Build the :class:`agentcore.agents.Agent` for agent ``name``.

    Raises :class:`UnknownAgent` for an unknown name and
    ``agentcore.providers.registry.ProviderConfigError`` for a bad provider entry.
    """
    config = agent_settings(name)
    provider_name = config.get("provider", "scripted")
    if provider_name == "agui_http":
        from agentcore.providers.agui_http import RemoteAgent

        return RemoteAgent(config["url"], headers=config.get("headers"))
    from agentcore.loop import LoopAgent
    from agentcore.providers.registry import get_provider

    options: dict[str, Any] = {}
    if config.get("base_url_env"):
        options["base_url"] = os.environ.get(config["base_url_env"]) or None
    if config.get("provider_factory"):
        provider = import_string(config["provider_factory"])(
            model=config.get("model", "")
        )
    else:
        provider = get_provider(provider_name, model=config.get("model", ""), **options)
    return LoopAgent(
        provider,
        toolset=agent_toolset(name),
        model=config.get("model", ""),
        system_prompt=config.get("system_prompt", ""),
        max_iterations=int(
            config.get("max_iterations", countersign_settings.MAX_ITERATIONS)
        ),
        deadline_seconds=float(
            config.get("deadline_seconds", countersign_settings.RUN_DEADLINE_SECONDS)
        ),
    )
