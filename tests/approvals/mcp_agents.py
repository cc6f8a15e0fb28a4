"""Test providers for agents whose tools come from an MCP server.

Plugged in through ``COUNTERSIGN_AGENTS[...]["provider_factory"]``, so a Celery
worker process builds the same agent from ``COUNTERSIGN_AGENTS_JSON``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from agentcore.providers.base import (
    ModelEvent,
    ModelRequest,
    Provider,
    TextDelta,
    ToolCallBegin,
    ToolCallDelta,
    TurnEnd,
)


class McpCallProvider(Provider):
    """Call one tool on the first turn; then answer with the tool message's content."""

    name = "mcp-test"

    def __init__(self, tool: str, arguments: dict[str, Any]) -> None:
        self.tool = tool
        self.arguments = arguments

    async def stream_turn(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        answers = [m for m in request.messages if getattr(m, "role", "") == "tool"]
        if not answers:
            yield ToolCallBegin(call_id="call_mcp_1", name=self.tool)
            yield ToolCallDelta(call_id="call_mcp_1", delta=json.dumps(self.arguments))
            yield TurnEnd(stop_reason="tool_use")
            return
        yield TextDelta(text=f"Result: {answers[-1].content}")
        yield TurnEnd(stop_reason="end_turn")


def delete_provider(*, model: str) -> Provider:
    """Propose ``files__delete_file`` (destructive: needs approval)."""
    return McpCallProvider("files__delete_file", {"path": "/srv/report.txt"})


def read_provider(*, model: str) -> Provider:
    """Propose ``docs__read_file`` (read-only, on a trusted server: runs at once)."""
    return McpCallProvider("docs__read_file", {"path": "/srv/readme.md"})


def untrusted_read_provider(*, model: str) -> Provider:
    """Propose ``files__read_file`` on an untrusted server (needs approval)."""
    return McpCallProvider("files__read_file", {"path": "/srv/notes.md"})


def ask_provider(*, model: str) -> Provider:
    """Propose ``docs__ask_name`` (read-only, trusted: runs at once, then asks for input)."""
    return McpCallProvider("docs__ask_name", {})
