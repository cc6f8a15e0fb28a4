"""The audit chain: every decision and execution step, hash-chained (SEC-04)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from approvals.locks import audit_head_lock
from approvals.models import AuditChainHead, AuditEntry
from threads.locks import transaction_memo_get, transaction_memo_set

_HEAD = "audit-chain-head"
_BATCH = "audit-batch"


@dataclass
class _Batch:
    """Entries appended in :func:`audit_batch`, not yet written, and where they were made."""

    savepoints: tuple[str, ...]
    entries: list[AuditEntry] = field(default_factory=list)


def _savepoints() -> tuple[str, ...]:
    # ``atomic(savepoint=False)`` pushes ``None``: only real savepoints can roll back.
    return tuple(sid for sid in connection.savepoint_ids if sid)


def _flush(batch: _Batch, head: AuditChainHead | None) -> None:
    """Write ``batch``'s entries in one INSERT and the chain head once."""
    if not batch.entries or head is None:
        return
    AuditEntry.objects.bulk_create(batch.entries)
    batch.entries = []
    head.save(update_fields=["last_hash"])


@contextmanager
def audit_batch() -> Iterator[None]:
    """Write the audit entries appended inside as one INSERT and one head update.

    Opens (or joins) a transaction; the entries are chained as
    :func:`audit_append` always chains them, and written when the block ends
    without an error, in the same transaction (an error rolls everything back,
    so nothing is lost that was kept). An append inside a savepoint of the block
    is written at once, after the entries before it, so rolling that savepoint
    back cannot take a buffered entry with it nor keep one it should drop. A
    batch inside a batch is the outer one. For service calls that audit several
    steps (a decision: its vote, then the approval), B2.
    """
    with transaction.atomic(savepoint=False):
        if transaction_memo_get(_BATCH) is not None:
            yield
            return
        batch = _Batch(savepoints=_savepoints())
        transaction_memo_set(_BATCH, batch)
        yield
        _flush(batch, transaction_memo_get(_HEAD))
        transaction_memo_set(_BATCH, None)


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
    transaction last wrote (the lock is still held). Inside :func:`audit_batch`
    the entry is written when the batch ends (its ``pk`` is unset until then).
    No savepoint of its own: a
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
        batch: _Batch | None = transaction_memo_get(_BATCH)
        if batch is not None and batch.savepoints == _savepoints():
            batch.entries.append(entry)
            head.last_hash = entry.hash
            transaction_memo_set(_HEAD, head)
            return entry
        if batch is not None:
            # Inside a savepoint of the batch: what came before is written first.
            _flush(batch, head)
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
