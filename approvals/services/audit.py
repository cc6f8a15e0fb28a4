"""The audit chain: every decision and execution step, HMAC-chained (SEC-04).

Entries are keyed with the current audit key (``COUNTERSIGN["AUDIT_KEYS"]``,
docs/audit.md) and checked by :mod:`approvals.auditchain`, the same code an
exported bundle carries for offline verification.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.db.models import Model
from django.utils import timezone

from approvals import auditchain
from approvals.auditchain import (
    Verification,
    chain_verify,
    entry_digest,
    head_digest,
    keys_parse,
)
from approvals.locks import audit_head_lock
from approvals.models import AuditChainHead, AuditEntry
from core.conf import countersign_settings
from core.types import JSONValue, User
from threads.locks import transaction_memo_get, transaction_memo_set

_HEAD = "audit-chain-head"
_BATCH = "audit-batch"


@dataclass
class _Batch:
    """Entries appended in :func:`audit_batch`, in order, not yet chained nor written."""

    entries: list[AuditEntry] = field(default_factory=list)


#: The key id used when ``COUNTERSIGN["AUDIT_KEYS"]`` is empty: ``SECRET_KEY``.
SECRET_KEY_ID = "secret-key"


def audit_keys() -> dict[str, str]:
    """Return the audit keys ``{key id: secret}``, the current (signing) key first.

    From ``COUNTERSIGN["AUDIT_KEYS"]``: a dict, or ``"id:secret,id:secret"``
    (the ``COUNTERSIGN_AUDIT_KEYS`` variable). Empty: ``SECRET_KEY`` under the id
    ``secret-key``. Keys after the first only verify older entries (rotation,
    docs/audit.md). Raises ``ImproperlyConfigured`` naming a malformed item.
    Implements SEC-04.
    """
    configured = countersign_settings.AUDIT_KEYS
    try:
        if isinstance(configured, str):
            keys = keys_parse(configured)
        elif isinstance(configured, dict):
            keys = {str(k): str(v) for k, v in configured.items() if str(v)}
        else:
            raise ValueError(
                f"AUDIT_KEYS must be a dict or 'id:secret,...', not {type(configured).__name__}"
            )
    except ValueError as error:
        raise ImproperlyConfigured(f"COUNTERSIGN['AUDIT_KEYS']: {error}") from error
    return keys or {SECRET_KEY_ID: str(settings.SECRET_KEY)}


def _sign(entry: AuditEntry, keys: dict[str, str]) -> None:
    entry.key_id = next(iter(keys))
    entry.hash = entry_digest(entry.chain_fields(), key_id=entry.key_id, keys=keys)


def _head_advance(
    head: AuditChainHead, entry: AuditEntry, keys: dict[str, str]
) -> None:
    head.last_hash = entry.hash
    head.length += 1
    head.key_id = next(iter(keys))
    head.mac = head_digest(
        length=head.length, last_hash=head.last_hash, key_id=head.key_id, keys=keys
    )


_HEAD_FIELDS = ["last_hash", "length", "key_id", "mac"]


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
    keys = audit_keys()
    for entry in kept:
        entry.prev_hash = head.last_hash
        _sign(entry, keys)
        _head_advance(head, entry, keys)
    AuditEntry.objects.bulk_create(kept)
    head.save(update_fields=_HEAD_FIELDS)
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
        keys = audit_keys()
        _sign(entry, keys)
        entry.save()
        _head_advance(head, entry, keys)
        head.save(update_fields=_HEAD_FIELDS)
        # Set again here: in a savepoint, rolling it back forgets this hash.
        transaction_memo_set(_HEAD, head)
    return entry


def audit_verify() -> Verification:
    """Check the whole chain and its head; return the entries read and the first broken link.

    Holds the chain head's lock while it reads, so appends wait and the head
    and the entries are one consistent state. ``Verification.ok`` is true for an
    intact chain; otherwise ``first_broken`` names the entry (or the head), its
    position and what is wrong: a rewritten entry, one deleted in the middle or
    at the tail, or a key missing from ``COUNTERSIGN["AUDIT_KEYS"]``. Raises
    ``ImproperlyConfigured`` for malformed keys. Implements SEC-04.
    """
    keys = audit_keys()
    with transaction.atomic():
        head = audit_head_lock()
        entries = (
            entry.chain_fields()
            for entry in AuditEntry.objects.order_by("id").iterator(chunk_size=2000)
        )
        return chain_verify(entries, head=_head_fields(head), keys=keys)


def _head_fields(head: AuditChainHead | None) -> dict[str, JSONValue] | None:
    if head is None:
        return None
    return {
        "length": head.length,
        "last_hash": head.last_hash,
        "key_id": head.key_id,
        "mac": head.mac,
    }


_VERIFY_MD = """# Countersign audit export

- `entries.jsonl`: the audit entries in chain order, one JSON object a line.
- `head.json`: the chain head: number of entries, last hash, key id and mac.
- `verify.py`: the verifier (Python 3.11+, standard library only).

Each entry's `hash` is the HMAC-SHA256, under the key its `key_id` names, of its
content and `prev_hash` (the previous entry's `hash`); entries without a
`key_id` predate keying and carry a SHA-256. The head's `mac` covers the length
and the last hash, so deleted entries at the tail are detected too.

Verify it, with the audit keys the deployment used (`COUNTERSIGN_AUDIT_KEYS`;
`secret-key:<SECRET_KEY>` when none were set), on any machine:

    COUNTERSIGN_AUDIT_KEYS='id:secret' python verify.py this-bundle.zip

It prints `intact: N entries` (exit 0) or the first broken link (exit 1).
Keep this bundle: a later export whose chain does not start with these
entries, in this order, shows history was rewritten.
"""


def audit_export(*, output: Path) -> int:
    """Write the chain to the zip ``output`` for offline verification; return the entry count.

    The bundle holds ``entries.jsonl`` (chain order), ``head.json``, ``VERIFY.md``
    and ``verify.py`` (:mod:`approvals.auditchain`'s source). Reads under the head's
    lock, so the entries and the head are one state (appends wait). Nothing
    secret is written: the auditor brings the keys. Raises ``OSError`` when
    ``output`` cannot be written. Implements SEC-04.
    """
    count = 0
    with (
        transaction.atomic(),
        zipfile.ZipFile(output, "x", compression=zipfile.ZIP_DEFLATED) as bundle,
    ):
        head = audit_head_lock()
        with bundle.open("entries.jsonl", "w") as stream:
            for entry in AuditEntry.objects.order_by("id").iterator(chunk_size=2000):
                line = json.dumps(entry.chain_fields(), ensure_ascii=False)
                stream.write(line.encode("utf-8") + b"\n")
                count += 1
        bundle.writestr("head.json", json.dumps(_head_fields(head), indent=2))
        bundle.writestr("VERIFY.md", _VERIFY_MD)
        bundle.writestr("verify.py", Path(auditchain.__file__).read_text("utf-8"))
    return count
