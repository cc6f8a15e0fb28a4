"""The demo refund ledger (:class:`demo.models.Refund`) as operators manage it."""

from __future__ import annotations

from django.db import transaction

from demo.models import Refund


def ledger_reset(*, order_id: str | None = None) -> int:
    """Delete the demo's refunds (of ``order_id`` only, when given); return how many.

    Each order's whole total can be refunded again afterwards. Executions already
    recorded are not replayed (their outcome lives on the tool execution), so a
    reset never refunds an old call twice. Raises nothing. Supports LP-07's demo.
    """
    with transaction.atomic():
        refunds = Refund.objects.all()
        if order_id is not None:
            refunds = refunds.filter(order_id=order_id)
        deleted, _ = refunds.delete()
    return deleted
