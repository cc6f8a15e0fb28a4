"""``COUNTERSIGN_AGENTS[...]["mcp_servers"]``: the system check and the turn's tool list.

Rules: RT-03, RT-10, SEC-05.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from agentcore.tools import ToolOutput, define_tool
from tests.mcp_servers import stdio_command
from threads.checks import raise_on_configuration_errors
from threads.mcp_servers import (
    advertised_parameters,
    check_mcp_servers,
    close_sources,
    current_parameters,
)


def _agent(servers: Any) -> dict[str, Any]:
    return {"x": {"provider": "scripted", "toolsets": [], "mcp_servers": servers}}


def test_valid_configuration_passes(settings: Any, monkeypatch: Any) -> None:
    monkeypatch.setenv("FILES_TOKEN", "Bearer t")
    settings.COUNTERSIGN_AGENTS = _agent(
        {
            "files": {
                "url": "https://files.example.test/mcp",
                "headers_env": {"Authorization": "FILES_TOKEN"},
                "trusted": True,
                "timeout": 5,
                "tools": {"delete_file": {"policy": "deny"}},
            },
            "calc": {"command": "python", "args": ["-m", "calc"]},
        }
    )

    assert check_mcp_servers() == []


@pytest.mark.parametrize(
    ("servers", "fragment"),
    [
        ({"files": {}}, "give exactly one of 'url' (streamable HTTP) or 'command'"),
        ({"files": {"url": "ftp://x/mcp"}}, "'url' must be an http:// or https:// URL"),
        ({"a__b": {"url": "http://x/mcp"}}, "the server name must be 1-30 letters"),
        (
            {
                "files": {
                    "url": "http://x/mcp",
                    "headers_env": {"Authorization": "NOPE_1"},
                }
            },
            "names the environment variable 'NOPE_1', which is not set",
        ),
        (
            {"files": {"url": "http://x/mcp", "tools": {"t": {"policy": "sometimes"}}}},
            "tools['t'].policy must be one of ['auto', 'deny', 'require_approval']",
        ),
        ({"files": {"url": "http://x/mcp", "bogus": 1}}, "unknown key(s) ['bogus']"),
        (
            {"files": {"url": "http://x/mcp", "tools": {"t": {"timeout": 0}}}},
            "tools['t'].timeout must be a positive number of seconds",
        ),
        (
            {"files": {"url": "http://x/mcp", "permission": "nodot"}},
            "'permission' must be a Django permission string",
        ),
        (["files"], "must map server names to dicts"),
        (
            {"files": {"command": "python", "args": "-m calc"}},
            "['args'] must be a list of strings",
        ),
        (
            {"files": {"url": "http://x/mcp", "timeout": -1}},
            "'timeout' must be a positive",
        ),
    ],
)
def test_misconfigured_servers_are_named(
    settings: Any, monkeypatch: Any, servers: Any, fragment: str
) -> None:
    """Every malformed entry is one ``threads.E060`` error naming the setting."""
    monkeypatch.delenv("NOPE_1", raising=False)
    settings.COUNTERSIGN_AGENTS = _agent(servers)

    errors = check_mcp_servers()

    assert [e.id for e in errors] == ["threads.E060"]
    assert fragment in errors[0].msg
    assert "COUNTERSIGN_AGENTS['x']['mcp_servers']" in errors[0].msg
    with pytest.raises(ImproperlyConfigured, match=r"threads\.E060"):
        raise_on_configuration_errors()


def _local_read_file(params: dict[str, Any], context: Any) -> ToolOutput:
    return ToolOutput(content="local")


LOCAL_TOOLS = (
    define_tool(
        name="files__read_file",
        description="A local tool that happens to use an MCP-looking name.",
        parameters=None,
        execute=_local_read_file,
    ),
)


def test_mcp_tools_follow_local_tools_and_never_replace_them(
    settings: Any, tmp_path: Path
) -> None:
    """The turn's list is local toolsets then MCP tools; a local name wins (RT-03, SEC-05)."""
    from threads.agent_config import agent_toolset

    settings.COUNTERSIGN_AGENTS = {
        "x": {
            "provider": "scripted",
            "toolsets": ["tests.threads.test_mcp_servers.LOCAL_TOOLS"],
            "mcp_servers": {
                "files": {
                    **stdio_command(tmp_path / "log.jsonl"),
                    "connect_timeout": 60,
                }
            },
        }
    }
    try:
        toolset = agent_toolset("x")
    finally:
        close_sources()

    assert toolset.names[0] == "files__read_file"
    assert toolset.get("files__read_file") is LOCAL_TOOLS[0]
    assert "files__delete_file" in toolset.names
    assert toolset.names.count("files__read_file") == 1


def test_advertised_parameters_are_compared_in_the_stored_form() -> None:
    """The schema a run advertised is found by name and compared as runs store it."""
    tool = define_tool(
        name="t",
        description="d",
        parameters={"type": "object", "properties": {"a": {"type": "string"}}},
        execute=_local_read_file,
    )
    same = {"tools": [{"name": "t", "parameters": tool.parameters}]}
    older = {"tools": [{"name": "t", "parameters": {"type": "object"}}]}

    assert advertised_parameters(run_input=same, name="t") == (True, tool.parameters)
    assert current_parameters(tool) == tool.parameters
    assert advertised_parameters(run_input=older, name="t") == (
        True,
        {"type": "object"},
    )
    assert advertised_parameters(run_input={"tools": []}, name="t") == (False, None)
    assert advertised_parameters(run_input={"tools": [{"name": "t"}]}, name="t") == (
        False,
        None,
    )
