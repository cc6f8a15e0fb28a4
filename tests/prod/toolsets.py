"""A test toolset with a side effect that must never happen twice.

``refund_order`` here needs an operator's approval like the demo's, but is NOT
idempotent, and appends one line per execution to the file named by
``COUNTERSIGN_TEST_LEDGER``: the test counts lines to prove a call ran at most once.
"""

from __future__ import annotations

import json
import os
from typing import Any, Final

from agentcore.tools import Tool, ToolContext, ToolOutput, define_tool
from demo.tools import lookup_order
from demo.tools import refund_order as demo_refund_order


def _refund(params: dict[str, Any], context: ToolContext) -> ToolOutput:
    path = os.environ.get("COUNTERSIGN_TEST_LEDGER")
    if path:
        with open(path, "a") as ledger:
            ledger.write(json.dumps({"call": context.tool_call_id, **params}) + "\n")
    return ToolOutput(content=f"refunded {params['amount']} on {params['order_id']}")


fragile_refund: Final[Tool] = define_tool(
    name="refund_order",
    description="Refund an order (test tool: not idempotent).",
    parameters=demo_refund_order.parameters,
    execute=_refund,
    runs_on="application",
    policy="require_approval",
    idempotent=False,
    timeout=2.0,
)

FRAGILE_TOOLS: Final = (lookup_order, fragile_refund)
