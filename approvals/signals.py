"""Signals of the approval workflow, for outbound notifications (issue 15, issue 16).

Each is sent with ``sender=ApprovalRequest`` and the keyword arguments
``approval`` (the :class:`approvals.models.ApprovalRequest`) and ``group`` (the
name of the Django group the request is now routed to, or ``None``), after the
transaction that made the change commits. ``approval_escalated`` also carries
``groups`` (all the new groups' names) and ``step`` (the escalation step taken,
1-based). Receivers must not raise; a failing receiver is logged and skipped.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.dispatch import Signal

logger = logging.getLogger(__name__)

#: A request was queued for an operator.
approval_requested = Signal()
#: A request was approved, rejected, expired or cancelled.
approval_decided = Signal()
#: A request is about to expire.
approval_expiring = Signal()
#: A request was not decided within its escalation step and moved to the next
#: group(s) (issue 16 item 4).
approval_escalated = Signal()


def approval_signal_send(signal: Signal, approval: Any, **kwargs: Any) -> None:
    """Send ``signal`` for ``approval`` once the current transaction commits.

    ``group`` defaults to the first of ``kwargs["groups"]``. Receivers' errors are
    logged, never raised into the workflow (``send_robust``).
    """
    from approvals.models import ApprovalRequest

    groups = list(kwargs.get("groups") or [])
    kwargs.setdefault("group", groups[0] if groups else None)

    def send() -> None:
        for receiver, result in signal.send_robust(
            sender=ApprovalRequest, approval=approval, **kwargs
        ):
            if isinstance(result, Exception):
                logger.error(
                    "receiver %r of an approval signal failed: %r", receiver, result
                )

    transaction.on_commit(send)
