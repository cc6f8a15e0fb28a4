"""MCP servers configured per agent: ``COUNTERSIGN_AGENTS[name]["mcp_servers"]``.

Each agent may name MCP servers whose tools join its turn's tool list after its
local toolsets (RT-03)::

    "mcp_servers": {
        "files": {                                  # prefixes tool names: files__read_file
            "url": "https://files.example.com/mcp", # streamable HTTP, or:
            # "command": "python", "args": ["-m", "files_server"], "cwd": "/srv",
            # "env_from": {"FILES_TOKEN": "FILES_MCP_TOKEN"},  # stdio child env from ours
            "headers_env": {"Authorization": "FILES_MCP_AUTHORIZATION"},
            "trusted": False,        # True: readOnlyHint tools may run without approval
            "timeout": 30, "max_result_bytes": 65536, "connect_timeout": 10,
            "permission": "demo.use_files",          # optional Django permission
            "mode": "auto",          # or "legacy": always the initialize handshake
            "tools": {"delete_file": {"policy": "deny"},
                      "read_file": {"policy": "auto", "timeout": 5, "idempotent": True}},
        },
    }

Header values and the stdio child's extra variables come only from environment
variables (named here, read when the connection is made). Misconfiguration is
reported by the system check ``threads.E060``. The protocol side is
:mod:`agentcore.mcp`; this module only reads settings and keeps one
:class:`~agentcore.mcp.McpToolSource` per agent and server in each process.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from collections.abc import Mapping
from typing import Any, Final

from django.conf import settings
from django.core import checks

from agentcore.mcp import (
    McpServerConfig,
    McpToolOverride,
    McpToolSource,
)
from agentcore.tools import Tool, ToolDefinitionError, Toolset

__all__ = [
    "CHECK_ID",
    "McpConfigError",
    "advertised_parameters",
    "agent_mcp_refresh",
    "agent_mcp_tools",
    "check_mcp_servers",
    "close_sources",
    "current_parameters",
    "server_config",
    "toolset_with_mcp",
]

logger = logging.getLogger(__name__)

CHECK_ID: Final = "threads.E060"
_SERVER_KEYS: Final = frozenset(
    {
        "url",
        "headers_env",
        "command",
        "args",
        "env_from",
        "cwd",
        "trusted",
        "timeout",
        "max_result_bytes",
        "connect_timeout",
        "permission",
        "tools",
        "mode",
    }
)
_TOOL_KEYS: Final = frozenset({"policy", "timeout", "max_result_bytes", "idempotent"})

_sources: dict[str, McpToolSource] = {}
_sources_lock = threading.Lock()


class McpConfigError(ValueError):
    """An ``mcp_servers`` entry is malformed; the message names the setting."""


def _from_env(mapping: Any, *, where: str) -> dict[str, str]:
    """Return ``{key: os.environ[ENV]}`` for ``{key: ENV}``; raise :class:`McpConfigError` when one is unset."""
    if mapping is None:
        return {}
    if not isinstance(mapping, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in mapping.items()
    ):
        raise McpConfigError(
            f"{where} must map names to environment variable names (strings)"
        )
    values: dict[str, str] = {}
    for key, env_name in mapping.items():
        value = os.environ.get(env_name)
        if not value:
            raise McpConfigError(
                f"{where}[{key!r}] names the environment variable {env_name!r}, "
                "which is not set"
            )
        values[key] = value
    return values


def server_config(
    agent: str, name: str, raw: Any, *, resolve_env: bool = True
) -> McpServerConfig:
    """Return the :class:`McpServerConfig` of ``COUNTERSIGN_AGENTS[agent]["mcp_servers"][name]``.

    With ``resolve_env`` false, environment variables are not read (their names are
    still checked). Raises :class:`McpConfigError` naming the setting.
    """
    where = f"COUNTERSIGN_AGENTS[{agent!r}]['mcp_servers'][{name!r}]"
    if not isinstance(raw, Mapping):
        raise McpConfigError(f"{where} must be a dict")
    unknown = set(raw) - _SERVER_KEYS
    if unknown:
        raise McpConfigError(
            f"{where} has unknown key(s) {sorted(unknown)}; allowed: {sorted(_SERVER_KEYS)}"
        )
    tools: dict[str, McpToolOverride] = {}
    raw_tools = raw.get("tools") or {}
    if not isinstance(raw_tools, Mapping):
        raise McpConfigError(f"{where}['tools'] must map MCP tool names to dicts")
    for tool_name, override in raw_tools.items():
        if not isinstance(override, Mapping) or set(override) - _TOOL_KEYS:
            raise McpConfigError(
                f"{where}['tools'][{tool_name!r}] must be a dict with keys from "
                f"{sorted(_TOOL_KEYS)}"
            )
        tools[str(tool_name)] = McpToolOverride(**dict(override))
    args = raw.get("args") or ()
    if isinstance(args, str) or not all(isinstance(a, str) for a in args):
        raise McpConfigError(f"{where}['args'] must be a list of strings")
    if resolve_env:
        headers = _from_env(raw.get("headers_env"), where=f"{where}['headers_env']")
        env = _from_env(raw.get("env_from"), where=f"{where}['env_from']")
    else:
        headers, env = {}, {}
        for key in ("headers_env", "env_from"):
            value = raw.get(key)
            if value is not None and not (
                isinstance(value, Mapping)
                and all(isinstance(v, str) for v in value.values())
            ):
                raise McpConfigError(
                    f"{where}[{key!r}] must map names to environment variable names"
                )
    try:
        config = McpServerConfig(
            name=name,
            url=raw.get("url"),
            headers=headers,
            command=raw.get("command"),
            args=tuple(args),
            env=env or None,
            cwd=raw.get("cwd"),
            trusted=raw.get("trusted", False) is True,
            timeout=raw.get("timeout", 30.0),
            max_result_bytes=raw.get("max_result_bytes", 64 * 1024),
            connect_timeout=raw.get("connect_timeout", 10.0),
            tools=tools,
            permission=raw.get("permission"),
            mode=raw.get("mode", "auto"),
        )
    except (ToolDefinitionError, TypeError) as error:
        raise McpConfigError(f"{where}: {error}") from error
    return config


def _servers(agent: str, config: Mapping[str, Any]) -> Mapping[str, Any]:
    servers = config.get("mcp_servers") or {}
    if not isinstance(servers, Mapping):
        raise McpConfigError(
            f"COUNTERSIGN_AGENTS[{agent!r}]['mcp_servers'] must map server names to dicts"
        )
    return servers


def _source(agent: str, name: str, raw: Any) -> McpToolSource:
    """Return this process's source for one configured server (one per distinct config)."""
    config = server_config(agent, name, raw)
    identity = json.dumps(
        [
            agent,
            name,
            raw,
            sorted(config.headers.items()),
            sorted((config.env or {}).items()),
        ],
        sort_keys=True,
        default=str,
    )
    key = hashlib.sha256(identity.encode("utf-8")).hexdigest()
    with _sources_lock:
        source = _sources.get(key)
        if source is None:
            source = McpToolSource(config)
            _sources[key] = source
        return source


def agent_mcp_tools(agent: str, config: Mapping[str, Any]) -> list[Tool]:
    """Return the tools of agent ``agent``'s MCP servers, in configuration order.

    A server that cannot be reached contributes the tools it last listed (none
    before its first answer); a malformed entry contributes nothing (the system
    check reports it). Never raises for a server's failure. Implements RT-03.
    """
    tools: list[Tool] = []
    try:
        servers = _servers(agent, config)
    except McpConfigError as error:
        logger.error("%s", error)
        return tools
    for name, raw in servers.items():
        try:
            tools.extend(_source(agent, str(name), raw).tools())
        except McpConfigError as error:
            logger.error("%s", error)
        except Exception:
            logger.exception(
                "MCP server %r of agent %r failed to list tools", name, agent
            )
    return tools


def toolset_with_mcp(agent: str, config: Mapping[str, Any], local: Toolset) -> Toolset:
    """Return ``local`` followed by agent ``agent``'s MCP tools, as one turn's toolset.

    An MCP tool whose name a local tool already uses is left out (logged), so a
    server can never replace a local tool. Implements RT-03, SEC-05.
    """
    taken = set(local.names)
    extra = []
    for tool in agent_mcp_tools(agent, config):
        if tool.name in taken:
            logger.warning(
                "MCP tool %r of agent %r is shadowed by a local tool; left out",
                tool.name,
                agent,
            )
            continue
        taken.add(tool.name)
        extra.append(tool)
    if not extra:
        return local
    return Toolset.assemble(local, extra)


def advertised_parameters(
    *, run_input: Mapping[str, Any] | None, name: str
) -> tuple[bool, Any]:
    """Return ``(found, parameters)`` of tool ``name`` as ``run_input`` advertised it.

    ``run_input`` is the run's ``RunAgentInput`` JSON, whose ``tools`` hold the
    parameter schema each application tool had when the call was proposed.
    ``found`` is false when the tool was not advertised with ``parameters``.
    """
    for advertised in (run_input or {}).get("tools", []) or []:
        if (
            isinstance(advertised, Mapping)
            and advertised.get("name") == name
            and "parameters" in advertised
        ):
            return True, advertised["parameters"]
    return False, None


def current_parameters(tool: Tool) -> Any:
    """Return ``tool``'s parameter schema in the form run inputs store it (AG-UI Tool JSON)."""
    dumped = tool.agui_tool().model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped.get("parameters")


def agent_mcp_refresh(agent: str) -> None:
    """Relist the tools of agent ``agent``'s MCP servers now (best effort, never raises).

    Called before an approved call's schema is compared, so a change the server
    made after approval is seen even if its list-changed notice has not arrived.
    """
    config = (getattr(settings, "COUNTERSIGN_AGENTS", None) or {}).get(agent)
    if not isinstance(config, Mapping) or not config.get("mcp_servers"):
        return
    try:
        servers = _servers(agent, config)
        for name, raw in servers.items():
            _source(agent, str(name), raw).refresh()
    except Exception:
        logger.warning("MCP servers of agent %r: relisting failed", agent)


def check_mcp_servers(
    app_configs: Any = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """Check every agent's ``mcp_servers`` entries (``threads.E060``); connects to nothing."""
    errors: list[checks.CheckMessage] = []
    agents = getattr(settings, "COUNTERSIGN_AGENTS", None)
    if not isinstance(agents, Mapping):
        return errors
    for agent, config in agents.items():
        if not isinstance(config, Mapping) or not config.get("mcp_servers"):
            continue
        try:
            servers = _servers(agent, config)
        except McpConfigError as error:
            errors.append(_error(str(error)))
            continue
        for name, raw in servers.items():
            try:
                server_config(agent, str(name), raw, resolve_env=False)
                server_config(agent, str(name), raw)
            except McpConfigError as error:
                errors.append(_error(str(error)))
    return errors


def _error(message: str) -> checks.CheckMessage:
    return checks.Error(
        message,
        hint=(
            "See docs/mcp.md: give 'url' or 'command', name header "
            "and environment variables that are set, and use known policies."
        ),
        id=CHECK_ID,
    )


def close_sources() -> None:
    """Disconnect every MCP server of this process (tests; settings changes)."""
    with _sources_lock:
        sources = list(_sources.values())
        _sources.clear()
    for source in sources:
        source.close()
