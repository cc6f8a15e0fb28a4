"""Verify Countersign's audit chain: the one checker, in Django and offline alike.

Standard library only, so ``manage.py audit_export`` copies this very file into
an export bundle as ``verify.py`` and an auditor runs it with any Python 3.11+,
without Django or a database::

    COUNTERSIGN_AUDIT_KEYS='2026-12:<secret>' python verify.py audit-bundle.zip

The chain (docs/audit.md): each entry's ``hash`` is an HMAC-SHA256, under the
key named by its ``key_id``, of its content and ``prev_hash`` (the previous
entry's ``hash``; 64 zeros for the first), so rewriting an entry or deleting one
in the middle breaks a link. The chain head (one row) holds the number of
entries and the last hash, with its own HMAC (``mac``), so deleting entries at
the tail is detected too. Entries written before the chain was keyed
(``key_id`` empty) carry a plain SHA-256; they are accepted only before every
keyed entry, where the first keyed entry's HMAC pins them. Implements SEC-04.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
import sys
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: ``prev_hash`` of the first entry.
GENESIS = "0" * 64
#: The environment variable holding the keys: ``id:secret,id:secret``, current first.
KEYS_ENV = "COUNTERSIGN_AUDIT_KEYS"
#: The content fields of an entry, as hashed (``created_at`` in ISO 8601).
CONTENT_FIELDS = (
    "actor",
    "action",
    "target_type",
    "target_id",
    "before",
    "after",
    "created_at",
    "prev_hash",
)


def _canonical(body: Mapping[str, Any]) -> bytes:
    return json.dumps(
        body, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    ).encode("utf-8")


def keys_parse(text: str) -> dict[str, str]:
    """Parse ``id:secret,id:secret`` into ``{id: secret}``, in order (current first).

    Raises ``ValueError`` naming the item without an id, a secret or a unique id.
    """
    keys: dict[str, str] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        key_id, sep, secret = item.partition(":")
        if not sep or not key_id.strip() or not secret:
            raise ValueError(
                f"audit key {key_id.strip() or item[:8] + '…'!r} needs the form id:secret"
            )
        if key_id.strip() in keys:
            raise ValueError(f"audit key id {key_id.strip()!r} is given twice")
        keys[key_id.strip()] = secret
    return keys


def entry_digest(
    entry: Mapping[str, Any], *, key_id: str, keys: Mapping[str, str]
) -> str:
    """Return the ``hash`` an entry (``CONTENT_FIELDS``) must carry, as 64 hex digits.

    ``key_id`` empty: the SHA-256 of the content (entries written before keying);
    otherwise the HMAC-SHA256 under ``keys[key_id]`` of the content and the key id.
    Raises ``KeyError`` for a key id not in ``keys``.
    """
    body = {name: entry[name] for name in CONTENT_FIELDS}
    if not key_id:
        return hashlib.sha256(_canonical(body)).hexdigest()
    body["key_id"] = key_id
    message = b"countersign-audit-entry\n" + _canonical(body)
    return hmac.new(keys[key_id].encode(), message, hashlib.sha256).hexdigest()


def head_digest(
    *, length: int, last_hash: str, key_id: str, keys: Mapping[str, str]
) -> str:
    """Return the chain head's ``mac``: HMAC-SHA256 of its length and last hash.

    Raises ``KeyError`` for a key id not in ``keys``.
    """
    body = {"length": length, "last_hash": last_hash, "key_id": key_id}
    message = b"countersign-audit-head\n" + _canonical(body)
    return hmac.new(keys[key_id].encode(), message, hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class BrokenLink:
    """Where the chain first fails: the entry's ``id`` (``None`` for the head),
    its 1-based ``position`` in the chain, and what is wrong (``reason``)."""

    entry_id: int | None
    position: int
    reason: str


@dataclass(frozen=True)
class Verification:
    """The outcome of :func:`chain_verify`: ``entries`` read, the first broken link."""

    entries: int
    first_broken: BrokenLink | None

    @property
    def ok(self) -> bool:
        return self.first_broken is None


def _entry_problem(
    entry: Mapping[str, Any],
    *,
    previous: str,
    keyed_seen: bool,
    keys: Mapping[str, str],
) -> str | None:
    """Return what is wrong with ``entry`` after the hash ``previous``, or ``None``."""
    key_id = str(entry.get("key_id") or "")
    if entry.get("prev_hash") != previous:
        return (
            "its prev_hash is not the previous entry's hash: an entry before "
            "it was deleted or rewritten"
        )
    if not key_id and keyed_seen:
        return "it carries no key id although earlier entries do"
    if key_id and key_id not in keys:
        return (
            f"it is signed with key {key_id!r}, which is not among the keys "
            f"given; add it to {KEYS_ENV}"
        )
    try:
        digest = entry_digest(entry, key_id=key_id, keys=keys)
    except (KeyError, TypeError, ValueError):
        return "its content is incomplete or not JSON"
    if not hmac.compare_digest(digest, str(entry.get("hash"))):
        return "its hash does not match its content: it was rewritten"
    return None


def chain_verify(
    entries: Iterable[Mapping[str, Any]],
    *,
    head: Mapping[str, Any] | None,
    keys: Mapping[str, str],
) -> Verification:
    """Check ``entries`` (chain order, each with ``id``, ``CONTENT_FIELDS``, ``key_id``,
    ``hash``) against each other and the ``head`` (``length``, ``last_hash``,
    ``key_id``, ``mac``; ``None`` when no entry was ever written).

    Returns the number of entries read and the first broken link: a ``prev_hash``
    that is not the previous hash (an entry deleted or replaced before it), a
    ``hash`` that is not the digest of the content (a rewritten entry), an unkeyed
    entry after a keyed one, a key id missing from ``keys``, or a head that does
    not match (entries deleted at the tail, or appended without the head, or a
    rewritten head). Never raises for bad data. Implements SEC-04.
    """
    previous = GENESIS
    position = 0
    keyed_seen = False
    for entry in entries:
        position += 1
        problem = _entry_problem(
            entry, previous=previous, keyed_seen=keyed_seen, keys=keys
        )
        if problem is not None:
            return Verification(
                position, BrokenLink(entry.get("id"), position, problem)
            )
        keyed_seen = keyed_seen or bool(entry.get("key_id"))
        previous = str(entry["hash"])
    if head is None or (
        not position and head.get("length") == 0 and not head.get("mac")
    ):
        # No head, or the unsigned head of a chain never written to: nothing
        # to check (an export bundle kept elsewhere is what anchors history).
        if position:
            return Verification(
                position, BrokenLink(None, position, "the chain head is missing")
            )
        return Verification(0, None)
    length, last_hash = head.get("length"), head.get("last_hash")
    head_key = str(head.get("key_id") or "")
    if head_key not in keys:
        return Verification(
            position,
            BrokenLink(
                None,
                position,
                f"the chain head is signed with key {head_key!r}, which is not "
                f"among the keys given; add it to {KEYS_ENV}",
            ),
        )
    if not isinstance(length, int) or not hmac.compare_digest(
        head_digest(
            length=length, last_hash=str(last_hash), key_id=head_key, keys=keys
        ),
        str(head.get("mac")),
    ):
        return Verification(
            position,
            BrokenLink(
                None, position, "the chain head's mac does not match: rewritten"
            ),
        )
    if position < length:
        return Verification(
            position,
            BrokenLink(
                None,
                position + 1,
                f"the head records {length} entries but the chain ends after "
                f"{position}: entries at the tail were deleted",
            ),
        )
    if position > length or last_hash != previous:
        return Verification(
            position,
            BrokenLink(
                None,
                length + 1,
                f"the head records {length} entries ending in {str(last_hash)[:12]}…, "
                f"but the chain has {position} ending in {previous[:12]}…: entries "
                "were appended or replaced without the head",
            ),
        )
    return Verification(position, None)


def bundle_read(path: Path) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """Read an ``audit_export`` bundle (a zip or its unpacked folder).

    Returns the entries (``entries.jsonl``, one JSON object a line) and the head
    (``head.json``). Raises ``OSError``/``ValueError`` for a missing or bad file.
    """
    if path.is_dir():
        entries_text = (path / "entries.jsonl").read_text("utf-8")
        head_text = (path / "head.json").read_text("utf-8")
    else:
        with zipfile.ZipFile(path) as bundle:
            entries_text = bundle.read("entries.jsonl").decode("utf-8")
            head_text = bundle.read("head.json").decode("utf-8")
    entries = [json.loads(line) for line in entries_text.splitlines() if line]
    head = json.loads(head_text)
    return entries, head


def main(argv: list[str] | None = None) -> int:
    """Verify an export bundle offline; print the result. Exit 0 intact, 1 broken, 2 bad input."""
    parser = argparse.ArgumentParser(
        description="Verify a Countersign audit export offline (no Django needed)."
    )
    parser.add_argument(
        "bundle",
        nargs="?",
        default=str(Path(__file__).resolve().parent),
        help="the bundle: its .zip or unpacked folder (default: this file's folder)",
    )
    args = parser.parse_args(argv)
    try:
        keys = keys_parse(os.environ.get(KEYS_ENV, ""))
        entries, head = bundle_read(Path(args.bundle))
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as error:
        print(f"cannot read: {error}", file=sys.stderr)
        return 2
    if not keys:
        print(f"set {KEYS_ENV}=id:secret[,id:secret…]", file=sys.stderr)
        return 2
    result = chain_verify(entries, head=head, keys=keys)
    if result.first_broken is None:
        print(f"intact: {result.entries} entries, head {head and head['last_hash']}")
        return 0
    link = result.first_broken
    where = f"entry id {link.entry_id}" if link.entry_id is not None else "chain head"
    print(f"BROKEN at position {link.position} ({where}): {link.reason}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
