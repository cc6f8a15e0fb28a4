"""The demo tools with a context-aware refund policy, for the governance tests.

Agent ``governed`` (see ``governed_agent`` in ``tests/approvals/test_governance.py``)
uses these tools. The refund policy looks at the arguments and the context:
an amount of 999 or more makes it raise (to prove it fails closed), 100 or more
needs two approvals from ``finance`` at high risk, anything else one approval
from ``finance``, and a refund of at most 1 asked by ``olivia`` runs at once.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from agentcore.policy import PolicyContext, PolicyDecision
from demo.tools import DEMO_TOOLS, refund_order


def refund_policy(params: dict[str, Any], context: PolicyContext) -> Any:
    """Decide a refund from its amount and who asks (see the module)."""
    amount = float(params["amount"])
    if amount >= 999:
        raise RuntimeError("the risk service is down")
    if amount <= 1 and context.user == "olivia" and context.agent == "governed":
        return "auto"
    if amount >= 100:
        return PolicyDecision(
            action="require_approval",
            groups=("finance",),
            approvals_required=2,
            risk_level="high",
            risk_reason=f"refund of {amount:g} on thread {context.thread_id}",
        )
    return {"action": "require_approval", "groups": ["finance"], "risk_level": "medium"}


GOVERNED_TOOLS = tuple(
    dataclasses.replace(t, policy=refund_policy) if t is refund_order else t
    for t in DEMO_TOOLS
)
