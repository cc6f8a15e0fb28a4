"""Checks and decisions specific to calls declared by external agents (approval API).

An external agent's call goes through the same dispatch, decisions and
execution ledger as any call; what is its own is checked here before anything is
recorded (:func:`external_call_check`: the agent, the tool under a strict policy,
the input schema, the arguments) and the caller's expiry, which may only shorten
the policy's (:func:`approval_expiry_shorten`). Implements SEC-01, LP-01, DC-03.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from agentcore.arguments import ValidatedArguments, parse_arguments
from agentcore.tools import NAME_PATTERN, ToolDefinitionError
from approvals.exceptions import ExternalCallInvalid
from approvals.governance import policy_declared
from approvals.locks import approval_lock
from approvals.models import ApprovalRequest
from threads.agent_config import agent_is_external, agent_settings, external_tool


def external_call_check(
    *, agent: str, tool: Mapping[str, Any], arguments: Any
) -> ValidatedArguments:
    """Check a declared call before it is recorded; return its validated arguments.

    ``tool`` is the AG-UI ``Tool`` JSON the caller declared (``name``,
    ``description``, ``parameters``: the input schema, or any object). Raises
    :class:`ExternalCallInvalid` naming the field: ``agent`` when it is not an
    external agent in ``COUNTERSIGN_AGENTS``; ``tool`` when the agent is
    ``strict`` and no policy (settings or admin) names the tool, or the name is
    one providers refuse; ``inputSchema`` when the schema is not a JSON Schema
    object; ``arguments`` when they are not an object or fail the schema (the
    message gives the schema's errors). Nothing is written. Implements SEC-01,
    RT-05.
    """
    if not agent_is_external(agent):
        raise ExternalCallInvalid(
            f"agent {agent!r} is not an external agent; configure it in "
            'COUNTERSIGN_AGENTS with "provider": "external" (docs/integrations.md)',
            field="agent",
            code="unknown_agent",
        )
    name = str(tool.get("name") or "")
    if not NAME_PATTERN.fullmatch(name):
        raise ExternalCallInvalid(
            f"tool {name!r} is not a tool name providers accept; use 1-64 "
            "characters from a-z, A-Z, 0-9, '_' and '-'",
            field="tool",
            code="invalid_tool",
        )
    if agent_settings(agent).get("strict") and not policy_declared(
        agent=agent, tool_name=name
    ):
        raise ExternalCallInvalid(
            f"tool {name!r} has no policy for the strict external agent {agent!r}; "
            "ask an administrator to add it to the agent's policies",
            field="tool",
            code="unknown_tool",
        )
    try:
        built = external_tool(tool)
    except ToolDefinitionError as error:
        raise ExternalCallInvalid(
            f"{error}; send a JSON Schema object as inputSchema",
            field="inputSchema",
            code="invalid_input_schema",
        ) from error
    if not isinstance(arguments, dict):
        raise ExternalCallInvalid(
            f"arguments must be a JSON object, not {type(arguments).__name__}; "
            'send e.g. {"order_id": "A-1"}',
            field="arguments",
            code="invalid_arguments",
        )
    parsed = parse_arguments(arguments, tool=built)
    if parsed.value is None:
        raise ExternalCallInvalid(
            f"arguments do not satisfy the tool's inputSchema: {parsed.error}",
            field="arguments",
            code="invalid_arguments",
        )
    return parsed.value


def approval_expiry_shorten(*, approval: ApprovalRequest, expires_at: datetime) -> bool:
    """Bring ``approval``'s expiry forward to ``expires_at`` when that is earlier.

    The caller's own deadline for a declared call: it may end the wait sooner
    than the policy's expiry, never later. Returns whether the expiry changed.
    Must run inside ``transaction.atomic()``.
    """
    _, _, locked = approval_lock(approval=approval)
    if (
        locked.status != ApprovalRequest.Status.PENDING
        or locked.expires_at <= expires_at
    ):
        return False
    locked.expires_at = expires_at
    locked.save(update_fields=["expires_at"])
    return True
