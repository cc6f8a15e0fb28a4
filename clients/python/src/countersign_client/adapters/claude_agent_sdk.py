"""Claude Agent SDK: a ``can_use_tool`` callback answered by Countersign, and the outcome hook.

``can_use_tool`` receives each tool use the agent asks permission for; the
callback declares it to Countersign, waits for a person, and returns
``PermissionResultAllow`` (with ``updated_input`` when an approver edited the
arguments) or ``PermissionResultDeny`` with the reason. ``post_tool_use_hook``
reports the tool's response as the call's outcome::

    gate = Gate(client, conversation_id=session_id)
    options = ClaudeAgentOptions(
        can_use_tool=can_use_tool(gate),
        hooks={"PostToolUse": [HookMatcher(hooks=[post_tool_use_hook(gate)])]},
    )
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from claude_agent_sdk import (
    HookContext,
    PermissionResultAllow,
    PermissionResultDeny,
    ToolPermissionContext,
)
from claude_agent_sdk.types import HookInput, HookJSONOutput, PermissionResult

from countersign_client.adapters.gate import Gate

CanUseTool = Callable[
    [str, dict[str, Any], ToolPermissionContext], Awaitable[PermissionResult]
]
Hook = Callable[[HookInput, str | None, HookContext], Awaitable[HookJSONOutput]]


def can_use_tool(gate: Gate, *, tools: set[str] | None = None) -> CanUseTool:
    """Return a ``can_use_tool`` callback deciding through ``gate`` (an async client).

    ``tools`` limits it to those tool names (others are allowed as asked).
    """

    async def decide(
        tool_name: str, tool_input: dict[str, Any], context: ToolPermissionContext
    ) -> PermissionResult:
        if tools is not None and tool_name not in tools:
            return PermissionResultAllow()
        call_id = context.tool_use_id or uuid.uuid4().hex
        verdict = await gate.adecide(call_id, tool_name, tool_input)
        if verdict.approved:
            return PermissionResultAllow(
                updated_input=verdict.arguments if verdict.edited else None
            )
        return PermissionResultDeny(
            message=verdict.reason or "A person refused this call; do not retry it."
        )

    return decide


def post_tool_use_hook(gate: Gate) -> Hook:
    """Return a ``PostToolUse`` hook reporting each claimed call's ``tool_response``."""

    async def report(
        hook_input: HookInput, tool_use_id: str | None, context: HookContext
    ) -> HookJSONOutput:
        data: dict[str, Any] = dict(hook_input)
        call_id = tool_use_id or str(data.get("tool_use_id") or "")
        if call_id:
            await gate.areport(call_id, data.get("tool_response"))
        return {}

    return report
