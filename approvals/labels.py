"""The human label of a call awaiting approval, as its tool describes it (RT-01).

For an MCP tool the label names the server and the tool and quotes the
annotations as the server's own, unverified claims (RT-10), so the operator
deciding on the approval card sees where the tool comes from and what it claims.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from threads.agent_config import run_toolset

if TYPE_CHECKING:
    from approvals.models import ApprovalRequest

logger = logging.getLogger(__name__)


def approval_label(approval: ApprovalRequest) -> str:
    """Return the tool's ``describe_activity`` label for ``approval``'s arguments, or ``""``.

    Never raises: an unknown agent or tool, or a failing label, gives ``""``.
    """
    try:
        tool = run_toolset(approval.run).resolve(approval.tool_name)
        if tool is None:
            return ""
        arguments = approval.approved_arguments
        return str(
            tool.describe_activity(arguments if isinstance(arguments, dict) else {})
        )
    except Exception:
        logger.warning("no label for approval %s", approval.pk, exc_info=True)
        return ""
