"""The audit chain: every decision and execution step, hash-chained (SEC-04)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from django.db import transaction
from django.db.models import Model
from django.utils import timezone

from approvals.locks import audit_head_lock
from approvals.models import AuditChainHead, AuditEntry
from core.types import JSONValue, User
from threads.locks import transaction_memo_get, transaction_memo_set

_HEAD = "audit-chain-head"
_BATCH = "audit-batch"


@dataclass
class _Batch:
    """Entries appended in :func:`audit_batch`, in order, not yet chained nor written."""

    entries: list[AuditEntry] = field(default_factory=list)


def _kept_key(entry: AuditEntry) -> tuple[str, int]:
    return ("audit-batch-entry", id(entry))


def _flush(batch: _Batch) -> None:
    """Chain ``batch``'s surviving entries to the head and write them in one INSERT.

    An entry appended in a savepoint that was rolled back since is dropped (its
    memo is gone with the savepoint), and the chain is made over the others.
    """
    kept = [e for e in batch.entries if transaction_memo_get(_kept_key(e))]
    batch.entries = []
    if not kept:
        return
    # A head locked in a savepoint that was rolled back is unlocked: taken again.
    head: AuditChainHead | None = transaction_memo_get(_HEAD)
    if head is None:
        head = audit_head_lock()
    for entry in kept:
        entry.prev_hash = head.last_hash
        entry.hash = entry.compute_hash()
        head.last_hash = entry.hash
    AuditEntry.objects.bulk_create(kept)
    head.save(update_fields=["last_hash"])
    transaction_memo_set(_HEAD, head)


@contextmanager
def audit_batch() -> Iterator[None]:
    """Write the audit entries appended inside as one INSERT and one head update.

    Opens (or joins) a transaction. The chain head is locked at the first
    append, as :func:`audit_append` always locks it; the entries are chained and
    written when the block ends without an error, in the same transaction (an
    error rolls everything back). An entry appended in a savepoint of the block
    that was rolled back is left out of the chain, as it would have been rolled
    back with it. A batch inside a batch is the outer one. For service calls
    that audit several steps (a decision: its vote, then the approval), B2.
    """
    with transaction.atomic(savepoint=False):
        if transaction_memo_get(_BATCH) is not None:
            yield
            return
        batch = _Batch()
        transaction_memo_set(_BATCH, batch)
        try:
            yield
            _flush(batch)
        finally:
            # Even after an error: a later append in this transaction must not
            # join a batch that will never be written.
            transaction_memo_set(_BATCH, None)


def audit_append(
    *,
    actor: User | None,
    action: str,
    target: Model,
    before: JSONValue = None,
    after: JSONValue = None,
) -> AuditEntry:
    """Append an audit entry chained to the previous one; return it.

    ``actor`` is a user or ``None`` (the system); ``target`` a model instance.
    Appends are serialized by locking the chain head row (taken last, after any
    thread/call/approval/execution lock). The head is locked and read once per
    transaction: a later append in the same transaction chains to the hash this
    transaction last wrote (the lock is still held). Inside :func:`audit_batch`
    the entry is chained and written when the batch ends (its ``pk`` and
    ``hash`` are unset until then).
    No savepoint of its own: a
    failed append fails the whole transaction, which is what a broken chain
    must do. Implements SEC-04.
    """
    with transaction.atomic(savepoint=False):
        head: AuditChainHead | None = transaction_memo_get(_HEAD)
        locked_now = head is None
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
        batch: _Batch | None = transaction_memo_get(_BATCH)
        if batch is not None:
            # Chained when the batch is written (the head is not changed until
            # then); the memo, set in whatever savepoint is current, tells
            # whether that savepoint survived.
            if locked_now:
                transaction_memo_set(_HEAD, head)
            transaction_memo_set(_kept_key(entry), True)
            batch.entries.append(entry)
            return entry
        entry.hash = entry.compute_hash()
        entry.save()
        head.last_hash = entry.hash
        head.save(update_fields=["last_hash"])
        # Set again here: in a savepoint, rolling it back forgets this hash.
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
