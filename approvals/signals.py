"""What happens to approval requests, announced to whoever subscribes (Django signals).

The services send these after their transaction commits (:func:`send_on_commit`),
so a receiver only ever sees committed state and a rolled-back decision is never
announced. Every signal has ``sender=ApprovalRequest`` and the keyword argument
``approval`` (the :class:`~approvals.models.ApprovalRequest`); ``approval_escalated``
also has ``group`` (the name of the first group the request was escalated to),
``groups`` (all the new groups' names) and ``step`` (the escalation step taken, 1-based).

- ``approval_requested``: a new request is pending (a held call, a remote agent's
  interrupt, an MCP server's input request, a re-approval).
- ``approval_decided``: a decision stands: a rejection at once, an approval once
  it can no longer be undone (at once without an undo window; else when its
  execution's window closes and a worker takes it, :mod:`approvals.services.execution`).
  A decision undone inside its window is never announced.
- ``approval_outcome``: how it ended, with ``outcome`` ``"executed"`` (the tool
  succeeded), ``"failed"`` (the tool failed or was refused at execution) or
  ``"expired"`` (nobody decided in time).
- ``approval_expiring``: it is still pending and expires within
  ``COUNTERSIGN["NOTIFY_EXPIRING_SECONDS"]`` (sent once per request by the beat task).
- ``approval_escalated``: it was escalated to ``groups`` (sent by
  :mod:`approvals.services.escalation` on the beat).
- ``approval_changed``: anything a card shows changed (a vote, the decision, a
  claim, an escalation, the expiry, the execution's outcome): sent whenever
  browsers are told (:mod:`approvals.services.notify`), so a chat message
  follows the request wherever it is decided.

Receivers are called with ``send_robust``: a failing receiver is logged and never
undoes or delays the decision. Outbound notifications (``approvals.notifications``)
subscribe here.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.dispatch import Signal

if TYPE_CHECKING:
    from approvals.models import ApprovalRequest

logger = logging.getLogger(__name__)

approval_requested = Signal()
approval_decided = Signal()
approval_expiring = Signal()
approval_escalated = Signal()
approval_changed = Signal()
approval_outcome = Signal()


def send_now(signal: Signal, approval: ApprovalRequest, **kwargs: Any) -> None:
    """Send ``signal`` for ``approval`` now, logging (not raising) receivers' errors."""
    # Deferred: approvals.models imports threads.models, not importable at app loading.
    from approvals.models import ApprovalRequest

    for receiver, result in signal.send_robust(
        sender=ApprovalRequest, approval=approval, **kwargs
    ):
        if isinstance(result, Exception):
            logger.error(
                "receiver %r of an approval signal failed for approval %s: %r",
                receiver,
                getattr(approval, "pk", None),
                result,
                exc_info=result,
            )


def send_on_commit(signal: Signal, approval: ApprovalRequest, **kwargs: Any) -> None:
    """Send ``signal`` for ``approval`` once the current transaction commits.

    Outside a transaction it is sent at once. ``kwargs`` are passed to receivers
    (``group=`` for :data:`approval_escalated`).
    """
    transaction.on_commit(lambda: send_now(signal, approval, **kwargs), robust=True)
