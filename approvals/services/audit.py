"""The audit chain: every decision and execution step, hash-chained (SEC-04)."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from approvals.locks import audit_head_lock
from approvals.models import AuditChainHead, AuditEntry
from threads.locks import transaction_memo_get, transaction_memo_set

_HEAD = "audit-chain-head"


def audit_append(
    *,
    actor: Any,
    action: str,
    target: Any,
    before: Any = None,
    after: Any = None,
) -> AuditEntry:
    """Append an audit entry chained to the previous one; return it.

    ``actor`` is a user or ``None`` (the system); ``target`` a model instance.
    Appends are serialized by locking the chain head row (taken last, after any
    thread/call/approval/execution lock). The head is locked and read once per
    transaction: a later append in the same transaction chains to the hash this
    transaction last wrote (the lock is still held). No savepoint of its own: a
    failed append fails the whole transaction, which is what a broken chain
    must do. Implements SEC-04.
    """
    with transaction.atomic(savepoint=False):
        head: AuditChainHead | None = transaction_memo_get(_HEAD)
        if head is None:
            head = audit_head_lock()
        entry = AuditEntry(
            actor=actor if getattr(actor, "pk", None) else None,
            actor_label=getattr(actor, "username", None) or "system",
            action=action,
            target_type=target._meta.label_lower,
            target_id=str(target.pk),
            before=before,
            after=after,
            created_at=timezone.now(),
            prev_hash=head.last_hash,
        )
        entry.hash = entry.compute_hash()
        entry.save()
        head.last_hash = entry.hash
        head.save(update_fields=["last_hash"])
        transaction_memo_set(_HEAD, head)
    return entry


def audit_verify() -> list[int]:
    """Return the ids of audit entries whose hash or chain link does not match (empty = intact)."""
    broken: list[int] = []
    previous = "0" * 64
    for entry in AuditEntry.objects.order_by("id"):
        if entry.prev_hash != previous or entry.compute_hash() != entry.hash:
            broken.append(entry.pk)
        previous = entry.hash
    return broken
