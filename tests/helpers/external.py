"""External agents for the approval API's tests, and a declaration helper."""

from __future__ import annotations

from typing import Any, Final

#: ``billing`` is strict (only the tools its policies name); ``helper`` is not.
EXTERNAL_AGENTS: Final[dict[str, Any]] = {
    "billing": {
        "provider": "external",
        "strict": True,
        "policies": {
            "refund": {"action": "require_approval"},
            "lookup": "auto",
            "wipe": "deny",
        },
    },
    "helper": {"provider": "external"},
}

REFUND_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "order_id": {"type": "string"},
        "amount": {"type": "number", "exclusiveMinimum": 0},
    },
    "required": ["order_id", "amount"],
    "additionalProperties": False,
}


def declare(client: Any, **change: Any) -> Any:
    """POST a refund declaration of the ``billing`` agent, with ``change`` applied."""
    body: dict[str, Any] = {
        "agent": "billing",
        "tool": "refund",
        "arguments": {"order_id": "A-1", "amount": 25},
        "inputSchema": REFUND_SCHEMA,
        **change,
    }
    if change.get("tool") not in (None, "refund") and "inputSchema" not in change:
        del body["inputSchema"]
    return client.post("/api/external/tool-calls/", body, format="json")
