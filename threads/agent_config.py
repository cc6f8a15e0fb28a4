"""Building agents from ``settings.COUNTERSIGN_AGENTS``.

Each entry maps an agent name to::

    {
        "provider": "scripted" | "openai_chat" | "openai_responses" | "anthropic"
                    | "gemini" | "agui_http" | "mcp_gateway",
        "model": "gpt-4.1-mini",            # not used by scripted / agui_http
        "system_prompt": "...",
        "toolsets": ["demo.tools.DEMO_TOOLS"],  # dotted paths to iterables of Tool
        "max_iterations": 10, "deadline_seconds": 300,
        "max_output_tokens": 2048,          # the model's output cap per turn
        "model_retries": 2, "retry_backoff": 0.5, "retry_max_delay": 30,
        "options": {"id_style": "mistral9", "timeout": 60, "headers": {...}},
        "url": "http://...",                # agui_http only
        "base_url_env": "OPENAI_BASE_URL",  # optional: env var holding a base URL
        "provider_factory": "pkg.module.make",  # optional: a callable(model=...) -> Provider
        "mcp_servers": {"files": {"url": "https://..."}},  # see threads.mcp_servers
        "policies": {"refund_order": {"action": "require_approval",
                     "groups": ["finance"], "approvals_required": 2}},
    }

An ``mcp_gateway`` entry runs no model: it is served to MCP clients at
``/mcp/<name>/`` (``web.mcp_gateway``) with its toolsets, MCP servers and policies,
plus ``hold_seconds``, ``progress_seconds`` and ``description`` (docs/mcp.md).

``options`` are the adapter's own constructor options (:func:`provider_options`:
``id_style``, ``timeout``, ``max_retries``, ``headers``, ``parallel_tool_calls``...;
for ``agui_http`` the :class:`RemoteAgent` options), passed to the
``provider_factory`` instead when one is given. ``provider_factory`` plugs in a
provider of one's own (any :class:`agentcore.providers.base.Provider`) instead of
the built-in adapters.

API keys and base URLs come only from environment variables. Misconfiguration is
reported by the system checks at start-up (``threads.checks``): an unknown key,
top-level or in ``options``, names the key and the agent (:func:`config_problems`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Final, Literal

from django.conf import settings
from django.utils.module_loading import import_string

from core.conf import countersign_settings
from threads.exceptions import UnknownAgent
from threads.mcp_servers import toolset_with_mcp

if TYPE_CHECKING:
    from agentcore.agents import Agent
    from agentcore.tools import Tool, Toolset
    from threads.models import Run

#: The provider of an MCP gateway: an entry served at ``/mcp/<name>/`` whose calls come
#: from MCP clients; no model runs, and its runs are never continued (docs/mcp.md).
GATEWAY_PROVIDER: Final = "mcp_gateway"

PROVIDERS = (
    "scripted",
    "openai_chat",
    "openai_responses",
    "anthropic",
    "gemini",
    "agui_http",
    GATEWAY_PROVIDER,
    "external",
)
KEY_ENV = {
    "openai_chat": "OPENAI_API_KEY",
    "openai_responses": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "gemini": "GEMINI_API_KEY",
}

#: Keys every agent may have, with their types.
_COMMON_KEYS: Final[dict[str, Any]] = {
    "provider": str,
    "model": str,
    "toolsets": list[str],
    "options": dict[str, Any],
    # Checked in depth by threads.mcp_servers.check_mcp_servers (threads.E060).
    "mcp_servers": dict[str, Any],
    # Static policies per tool, {tool: declaration} (agentcore.policy); checked in
    # depth by approvals.checks (threads.E070, threads.E071).
    "policies": dict[str, Any],
}
#: Keys of an agent run by the built-in loop (every provider but ``agui_http``).
_LOOP_KEYS: Final[dict[str, Any]] = {
    "system_prompt": str,
    "max_iterations": int,
    "deadline_seconds": float,
    "max_output_tokens": int | None,
    "model_retries": int,
    "retry_backoff": float,
    "retry_max_delay": float,
    "base_url_env": str,
    "provider_factory": str,
}
#: Keys of a remote AG-UI agent; a top-level ``headers`` predates ``options``.
_REMOTE_KEYS: Final[dict[str, Any]] = {"url": str, "headers": dict[str, str]}
#: Keys of an MCP gateway (docs/mcp.md "Countersign as an MCP gateway").
_GATEWAY_KEYS: Final[dict[str, Any]] = {
    "description": str,
    "hold_seconds": float,
    "progress_seconds": float,
}
#: Keys of an external agent: one that runs elsewhere and declares its calls
#: through the approval API (docs/integrations.md). ``strict`` refuses a tool
#: its ``policies`` do not name.
_EXTERNAL_KEYS: Final[dict[str, Any]] = {
    "strict": bool,
    "description": str,
    # {"url", "secret"}: the caller's signed callback (approvals.notifications).
    "webhook": dict[str, str],
}


_HINT: Final = "Give a value of the type docs/configuration.md names."


@dataclass(frozen=True, slots=True)
class ConfigProblem:
    """One problem in an agent's entry: ``kind`` picks the system check id."""

    kind: Literal["unknown_key", "invalid_value"]
    message: str
    hint: str


def agent_settings(name: str) -> dict[str, Any]:
    """Return the configuration of agent ``name``; raise :class:`UnknownAgent` if absent."""
    agents = getattr(settings, "COUNTERSIGN_AGENTS", {})
    if name not in agents:
        raise UnknownAgent(
            f"agent {name!r} is not configured; configured agents: {sorted(agents)!r}"
        )
    return dict(agents[name])


@lru_cache(maxsize=64)
def toolset_load(paths: tuple[str, ...]) -> Toolset:
    """Return the :class:`agentcore.tools.Toolset` assembled from dotted ``paths``, cached.

    The application tools a configuration names, without any MCP server's tools
    (:func:`agent_toolset` adds those). Raises ``ImportError`` for a bad path.
    Implements RT-03.
    """
    # Deferred: agentcore's protocol models cost a few hundred ms to import (B6), and
    # the web process's settings/checks path must not pay it before it serves.
    from agentcore.tools import Toolset

    return Toolset.assemble(*(import_string(path) for path in paths))


def agent_toolset(name: str) -> Toolset:
    """Return agent ``name``'s assembled :class:`agentcore.tools.Toolset` (RT-03)."""
    config = agent_settings(name)
    local = toolset_load(tuple(config.get("toolsets", ())))
    if not config.get("mcp_servers"):
        return local
    return toolset_with_mcp(name, config, local)


#: The schema of a declared tool that gave none: any JSON object.
ANY_OBJECT: Final[dict[str, Any]] = {"type": "object"}


class CallerExecutes(RuntimeError):
    """Raised if a worker ever tried to run an external agent's tool itself."""


def _runs_at_caller(params: dict[str, Any], context: Any) -> None:
    raise CallerExecutes(
        "an external agent's tool runs at its caller, which claims the call and "
        "reports its outcome; Countersign never runs it"
    )


def external_tool(declared: Mapping[str, Any], *, summary: str = "") -> Tool:
    """Return the :class:`agentcore.tools.Tool` for a declared tool (AG-UI ``Tool`` JSON).

    ``summary`` is the caller's sentence for the approver: the call's label (what
    the queue and the thread say it does), instead of "Running <name>".

    ``declared`` is ``{"name", "description"?, "parameters"?, "annotations"?}``;
    ``annotations`` are MCP's tool hints (``readOnlyHint``, ``destructiveHint``,
    ``idempotentHint``). The tool is an application tool whose default policy is
    ``require_approval``: an external agent's tool without a configured policy
    always goes to a person, whatever its hints say (hints never lower a policy).
    It is never idempotent to Countersign: a claim whose lease lapsed becomes
    ``outcome_unknown``. Raises :class:`agentcore.tools.ToolDefinitionError` for a
    name or schema providers would refuse.
    """
    from agentcore.tools import Tool

    annotations = declared.get("annotations") or {}
    name = str(declared.get("name") or "")
    parameters = declared.get("parameters", ANY_OBJECT)
    return Tool(
        name=name,
        description=str(declared.get("description") or "")
        or f"{name}, declared by an external agent",
        # Anything but an object is passed on for the Tool to refuse, naming it.
        parameters=dict(parameters) if isinstance(parameters, Mapping) else parameters,
        execute=_runs_at_caller,
        activity=(lambda _params: summary) if summary else None,
        runs_on="application",
        # Destructive wins over read-only when a caller sends both.
        is_read_only=bool(annotations.get("readOnlyHint", False))
        and not annotations.get("destructiveHint", False),
        is_destructive=bool(annotations.get("destructiveHint", False)),
        policy="require_approval",
        idempotent=False,
    )


def external_tools(*, run_input: Mapping[str, Any] | None) -> Toolset:
    """Return the toolset of the tools declared in an external run's ``run_input``."""
    from agentcore.tools import Toolset

    external = (run_input or {}).get("external")
    summary = (
        str(external.get("summary") or "") if isinstance(external, Mapping) else ""
    )
    return Toolset.assemble(
        [
            external_tool(declared, summary=summary)
            for declared in (run_input or {}).get("tools", []) or []
            if isinstance(declared, Mapping)
        ]
    )


def run_toolset(run: Run) -> Toolset:
    """Return the toolset ``run``'s calls resolve against.

    The agent's configured toolset (:func:`agent_toolset`), except for an
    external agent (:func:`agent_is_external`), whose tools are the ones its
    caller declared with the call, kept in the run's input
    (:func:`external_tools`). Raises :class:`UnknownAgent` for an
    agent that is not configured. Implements RT-03.
    """
    if agent_is_external(run.agent):
        return external_tools(run_input=run.input)
    return agent_toolset(run.agent)


def agent_application_tools(name: str) -> list[Tool]:
    """Return the application-side tools agent ``name`` advertises in ``RunAgentInput.tools``."""
    return [t for t in agent_toolset(name) if t.runs_on == "application"]


def agent_keys(provider: str) -> dict[str, Any]:
    """Return the top-level keys an agent of ``provider`` may have, with their types."""
    if provider == GATEWAY_PROVIDER:
        return {
            **{k: v for k, v in _COMMON_KEYS.items() if k != "options"},
            **_GATEWAY_KEYS,
        }
    if provider == "external":
        return {"provider": str, "policies": dict[str, Any], **_EXTERNAL_KEYS}
    extra = _REMOTE_KEYS if provider == "agui_http" else _LOOP_KEYS
    return {**_COMMON_KEYS, **extra}


def external_agent_names() -> list[str]:
    """Return the names of the agents configured with ``"provider": "external"``."""
    agents = getattr(settings, "COUNTERSIGN_AGENTS", {})
    return sorted(name for name in agents if agent_is_external(name))


def agent_is_external(name: str) -> bool:
    """Return whether agent ``name`` is configured with ``"provider": "external"``.

    An external agent runs elsewhere: it declares each call through the approval
    API, and its caller (not a Countersign worker) executes an approved call and
    reports the outcome. Countersign never runs it, so an answered call has no
    continuation run. An unknown name is not external.
    """
    agents = getattr(settings, "COUNTERSIGN_AGENTS", {})
    config = agents.get(name)
    return isinstance(config, dict) and config.get("provider") == "external"


def agent_options(config: dict[str, Any]) -> dict[str, Any]:
    """Return the ``options`` an agent entry may set: ``{option: type annotation}``.

    The options of ``provider_factory`` when one is given (its keyword parameters
    but ``model``), else of the built-in adapter (:func:`provider_options`). A key
    ``"**"`` means anything is accepted. Raises ``ImportError`` when the factory
    does not import, ``ProviderConfigError`` for an unknown provider.
    """
    # Deferred like the toolset import above: the registry pulls in the adapters.
    from agentcore.providers.registry import callable_options, provider_options

    factory = config.get("provider_factory")
    if factory and config.get("provider") != "agui_http":
        return callable_options(import_string(factory))
    return provider_options(config.get("provider", "scripted"))


def config_problems(name: str, config: dict[str, Any]) -> list[ConfigProblem]:
    """Return the unknown keys and ill-typed values of agent ``name``'s entry.

    Checks the top-level keys against :func:`agent_keys` and ``options`` against
    :func:`agent_options`; each message names the agent and the key, each hint
    lists what is accepted. A ``provider_factory`` that does not import yields no
    problem about ``options`` (the agent fails to build, naming it). Raises nothing.
    """
    provider = config.get("provider", "scripted")
    where = f"COUNTERSIGN_AGENTS[{name!r}]"
    problems: list[ConfigProblem] = []
    keys = agent_keys(provider)
    for key, value in config.items():
        if key not in keys:
            problems.append(
                ConfigProblem(
                    "unknown_key",
                    f"{where} has the unknown key {key!r} (provider {provider!r})",
                    f"Use only {', '.join(sorted(keys))}; adapter settings go in "
                    "'options'.",
                )
            )
        elif (error := _type_error(keys[key], value)) is not None:
            problems.append(
                ConfigProblem(
                    "invalid_value", f"{where}[{key!r}] is invalid: {error}", _HINT
                )
            )
    options = config.get("options")
    if not isinstance(options, dict) or not options:
        return problems
    try:
        accepted = agent_options(config)
    except ImportError:
        return problems
    for key, value in options.items():
        if key not in accepted and "**" not in accepted:
            problems.append(
                ConfigProblem(
                    "unknown_key",
                    f"{where}['options'] has the unknown key {key!r} "
                    f"(provider {provider!r})",
                    f"{provider!r} accepts the options "
                    f"{', '.join(sorted(k for k in accepted if k != '**')) or 'none'}.",
                )
            )
        elif (error := _type_error(accepted.get(key, Any), value)) is not None:
            problems.append(
                ConfigProblem(
                    "invalid_value",
                    f"{where}['options'][{key!r}] is invalid: {error}",
                    _HINT,
                )
            )
    return problems


def _type_error(annotation: Any, value: Any) -> str | None:
    """Return why ``value`` does not fit ``annotation`` (one line), or ``None``."""
    if annotation is Any:
        return None
    # Deferred: only an option with a declared type needs pydantic; a process's
    # startup checks over options without one do not pay for its import.
    from pydantic import TypeAdapter, ValidationError

    try:
        TypeAdapter(annotation).validate_python(value, strict=True)
    except ValidationError as error:
        first = error.errors()[0]
        return f"{first['msg']} (got {value!r:.60})"
    return None


def agent_is_gateway(name: str) -> bool:
    """Return whether ``name`` is configured as an MCP gateway (provider ``mcp_gateway``).

    ``False`` for an unknown name. A gateway's calls come from MCP clients, so its
    runs are never continued by a model (``threads.services.continuation_maybe_start``).
    """
    agents = getattr(settings, "COUNTERSIGN_AGENTS", {})
    entry = agents.get(name)
    return isinstance(entry, dict) and entry.get("provider") == GATEWAY_PROVIDER


def agent_build(name: str) -> Agent:
    """Build the :class:`agentcore.agents.Agent` for agent ``name``.

    ``options`` go to the adapter (or ``provider_factory``, or ``RemoteAgent``); the
    loop's limits and retry settings to :class:`agentcore.loop.LoopAgent`. Raises
    :class:`UnknownAgent` for an unknown name,
    ``agentcore.providers.registry.ProviderConfigError`` for a bad provider entry
    and ``TypeError`` / ``ValueError`` for an option the adapter refuses (the system
    checks report those at start-up).
    """
    config = agent_settings(name)
    provider_name = config.get("provider", "scripted")
    if provider_name == GATEWAY_PROVIDER:
        raise UnknownAgent(
            f"{name!r} is an MCP gateway, not an agent: its calls come from MCP "
            f"clients at /mcp/{name}/; talk to another agent"
        )
    options: dict[str, Any] = dict(config.get("options") or {})
    if provider_name == "external":
        raise UnknownAgent(
            f"agent {name!r} is external: it runs elsewhere and declares its calls "
            "through POST /api/external/tool-calls/; Countersign cannot run it"
        )
    if provider_name == "agui_http":
        # Deferred: only the process that runs an agent imports its adapter (B6).
        from agentcore.providers.agui_http import RemoteAgent

        if config.get("headers") is not None:
            options.setdefault("headers", config["headers"])
        return RemoteAgent(config["url"], **options)
    # Deferred: the loop and the provider SDKs load only where a run executes (B6).
    from agentcore.loop import LoopAgent
    from agentcore.providers.registry import get_provider

    if config.get("provider_factory"):
        provider = import_string(config["provider_factory"])(
            model=config.get("model", ""), **options
        )
    else:
        if config.get("base_url_env"):
            options["base_url"] = os.environ.get(config["base_url_env"]) or None
        if provider_name == "scripted":
            # The demo streams at a human pace (settings.COUNTERSIGN_DEMO_PACE,
            # characters per second; 0 in the tests) unless the agent sets its own.
            options.setdefault(
                "pace", float(getattr(settings, "COUNTERSIGN_DEMO_PACE", 0))
            )
        provider = get_provider(provider_name, model=config.get("model", ""), **options)
    loop_options = {
        key: config[key]
        for key in (
            "max_output_tokens",
            "model_retries",
            "retry_backoff",
            "retry_max_delay",
        )
        if key in config
    }
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
        # built for this one run: the loop closes its HTTP client when the run ends
        owns_provider=True,
        **loop_options,
    )
