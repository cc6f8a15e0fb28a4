"""The demo refund ledger: one row per refund actually made."""

from __future__ import annotations

from django.db import models


class Refund(models.Model):
    """A refund made by the ``refund_order`` demo tool.

    ``idempotency_key`` is the tool call's idempotency key; the unique constraint
    guarantees that a retried or redelivered call refunds at most once. Implements LP-07.
    """

    idempotency_key = models.CharField(max_length=200)
    order_id = models.CharField(max_length=64, db_index=True)
    amount = models.DecimalField(max_digits=12, decimal_places=2)
    reason = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["idempotency_key"], name="uniq_refund_idempotency_key"
            ),
            models.CheckConstraint(
                condition=models.Q(amount__gt=0), name="refund_amount_positive"
            ),
        ]

    def __str__(self) -> str:
        """Return ``"refund 12.50 on A-1001"``."""
        return f"refund {self.amount} on {self.order_id}"
