"""MCP errors as the server meant them, against a hand-written misbehaving stdio server.

tests/mcp_misbehaving_server.py answers a JSON-RPC error ``-32000`` with its own
message, crashes mid-call, answers under a wrong id or with a bare string. Each is
answered promptly and as what it is: the server's error with its message, a lost
connection (then a reconnect at once), a protocol error.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentcore.dispatch import ToolCallRequest, ToolResult, execute_call
from agentcore.mcp import McpServerConfig, McpToolSource
from agentcore.tools import ToolContext, Toolset

SERVER = Path(__file__).resolve().parents[1] / "mcp_misbehaving_server.py"


@pytest.fixture
def source() -> Iterator[McpToolSource]:
    source = McpToolSource(
        McpServerConfig(
            name="faulty",
            command=sys.executable,
            args=(str(SERVER),),
            trusted=True,
            timeout=20,
            connect_timeout=60,
        )
    )
    yield source
    source.close()


async def call(source: McpToolSource, tool: str) -> tuple[ToolResult, float]:
    started = time.monotonic()
    result = await execute_call(
        ToolCallRequest(tool_call_id="c1", name=f"faulty__{tool}", arguments={}),
        tool=None,
        toolset=Toolset(source.tools()),
        context=ToolContext(
            thread_id="t", run_id="r", tool_call_id="c1", idempotency_key="t:c1"
        ),
    )
    return result, time.monotonic() - started


async def test_json_rpc_error_32000_is_the_servers_error_with_its_message(
    source: McpToolSource,
) -> None:
    """-32000 is the generic server-error code, not a lost connection."""
    await call(source, "ok")  # connected and listed
    result, seconds = await call(source, "server_error")
    after, _ = await call(source, "ok")

    assert result.error == "tool_error"
    assert "database is locked; try again in a minute" in result.content
    assert "outcome is unknown" not in result.content
    assert seconds < 5
    assert (after.error, after.content) == (None, "ok")


async def test_a_crash_mid_call_reconnects_at_once(source: McpToolSource) -> None:
    """The call the server died in is upstream_unavailable; the next one works
    within a second, without waiting for a keep-alive ping to notice."""
    await call(source, "ok")  # connected and listed
    crashed, _ = await call(source, "crash")
    after, seconds = await call(source, "ok")

    assert crashed.error == "upstream_unavailable"
    assert (after.error, after.content) == (None, "ok")
    assert seconds < 1.0


@pytest.mark.parametrize("tool", ["wrong_id", "bare_string"])
async def test_a_malformed_reply_is_a_protocol_error_without_waiting_for_the_timeout(
    source: McpToolSource, tool: str
) -> None:
    await call(source, "ok")  # connected and listed
    result, seconds = await call(source, tool)
    after, _ = await call(source, "ok")

    assert result.error == "tool_error"
    assert "malformed" in result.content
    assert seconds < 5
    assert (after.error, after.content) == (None, "ok")
