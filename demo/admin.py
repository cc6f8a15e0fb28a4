"""Admin for the demo refund ledger (read-only: refunds are made by the tool)."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from demo.models import Refund


@admin.register(Refund)
class RefundAdmin(admin.ModelAdmin):
    """List refunds; nobody adds, edits or deletes one by hand."""

    list_display = ("order_id", "amount", "reason", "idempotency_key", "created_at")
    list_filter = ("created_at",)
    search_fields = ("order_id", "idempotency_key")
    readonly_fields = ("order_id", "amount", "reason", "idempotency_key", "created_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        """Refuse manual refunds; they go through the tool and its approval."""
        return False

    def has_change_permission(
        self, request: HttpRequest, obj: Refund | None = None
    ) -> bool:
        """Refuse edits; the ledger is append-only."""
        return False

    def has_delete_permission(
        self, request: HttpRequest, obj: Refund | None = None
    ) -> bool:
        """Refuse deletes: a refund is the audit record of a call that ran."""
        return False
