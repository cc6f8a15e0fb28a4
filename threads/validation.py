"""Checks on untrusted JSON before it reaches the database.

PostgreSQL cannot store the NUL character in text or ``jsonb``; input carrying one
is refused with a clear error, and model or tool output carrying one is stored with
each NUL replaced by U+FFFD (logged), so a worker never fails on it.
"""

from __future__ import annotations

import logging
import re
from typing import Any, Final

logger = logging.getLogger(__name__)

#: Thread and run ids: URL-safe, as they appear in URLs of the UI and the APIs.
PUBLIC_ID: Final = re.compile(r"^[A-Za-z0-9._~:@+-]{1,200}$")
#: Longest message or tool-call id stored.
MAX_ID_LENGTH: Final = 200


def find_nul(value: Any, path: str = "") -> str | None:
    """Return the JSON path of the first string (or key) holding NUL in ``value``, or ``None``."""
    if isinstance(value, str):
        return path or "$" if "\x00" in value else None
    if isinstance(value, dict):
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            if "\x00" in str(key):
                return where
            found = find_nul(item, where)
            if found is not None:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found = find_nul(item, f"{path}.{index}" if path else str(index))
            if found is not None:
                return found
    return None


def replace_nul(value: Any) -> Any:
    """Return ``value`` with every NUL in its strings (and keys) replaced by U+FFFD."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {replace_nul(k): replace_nul(v) for k, v in value.items()}
    if isinstance(value, list):
        return [replace_nul(item) for item in value]
    return value


def storable(value: Any, *, what: str) -> Any:
    """Return ``value`` safe to store: unchanged, or with NULs replaced (and logged)."""
    where = find_nul(value)
    if where is None:
        return value
    logger.warning("%s held a NUL character at %s; stored as U+FFFD", what, where)
    return replace_nul(value)
