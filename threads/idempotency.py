"""``Idempotency-Key`` handling for API writes: replay the stored response on retry.

A key is scoped to its user. The first request with a key runs the operation and
stores its response in the same transaction; a retry with the same key and the
same operation and body gets that response back and runs nothing; the same key
with a different operation or body raises :class:`IdempotencyKeyReused` (HTTP 422).
A failed operation stores nothing, so the client may retry with the same key.
Under concurrency the unique (user, key) constraint lets one request win; the
loser's work is rolled back and it answers with the winner's response.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction

from core.types import JSONValue, User
from threads.exceptions import IdempotencyKeyReused
from threads.models import IdempotencyKey

#: Longest accepted key, in characters.
MAX_KEY_LENGTH = 255


@dataclass(frozen=True)
class StoredResponse:
    """A response produced (or replayed) under an idempotency key."""

    status: int
    body: JSONValue
    replayed: bool


def request_fingerprint(*, operation: str, body: JSONValue) -> str:
    """Return the SHA-256 of ``operation`` and ``body`` in canonical JSON."""
    canonical = json.dumps(
        {"operation": operation, "body": body},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        default=str,
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _replay(row: IdempotencyKey, fingerprint: str) -> StoredResponse:
    if row.request_hash != fingerprint:
        raise IdempotencyKeyReused(
            f"Idempotency-Key {row.key!r} was already used for a different request; "
            "send a new key for a new request, or resend the original body to get "
            "its response"
        )
    return StoredResponse(
        status=row.response_status, body=row.response_body, replayed=True
    )


def idempotent_response(
    *,
    user: User,
    key: str,
    operation: str,
    body: JSONValue,
    produce: Callable[[], tuple[int, Any]],
) -> StoredResponse:
    """Run ``produce`` once per (``user``, ``key``); return its (status, body) or the stored one.

    ``operation`` names what is being done (e.g. ``"message_post:<thread id>"``);
    together with ``body`` it must match on a retry. Raises
    :class:`IdempotencyKeyReused` when it does not, and whatever ``produce`` raises.
    """
    fingerprint = request_fingerprint(operation=operation, body=body)
    existing = IdempotencyKey.objects.filter(user=user, key=key).first()
    if existing is not None:
        return _replay(existing, fingerprint)
    try:
        with transaction.atomic():
            status, response_body = produce()
            IdempotencyKey.objects.create(
                user=user,
                key=key,
                request_hash=fingerprint,
                response_status=status,
                response_body=response_body,
            )
    except IntegrityError:
        winner = IdempotencyKey.objects.filter(user=user, key=key).first()
        if winner is None:
            raise
        return _replay(winner, fingerprint)
    return StoredResponse(status=status, body=response_body, replayed=False)
