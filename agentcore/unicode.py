"""Unicode for text that arrives in pieces: join deltas as text, never let a lone surrogate out.

Providers stream argument and message text in deltas. A JSON decoder in an SDK turns
an escaped astral character split across two chunks (``"\\ud83d"`` then
``"\\ude00"``) into two lone surrogates; Python's ``"".join`` keeps them as two
unpaired code points, which no UTF-8 encoder accepts. :func:`join_text` joins deltas
and pairs such halves into the character they spell; :func:`hold_back` keeps a
trailing high surrogate of a delta for the next one, so streamed events carry whole
characters; :func:`scrub` replaces whatever stays unpaired with U+FFFD for text that
must be stored or sent. Implements LP-04, TC-03 (deltas are text, joined before use).

This module never imports Django.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

__all__ = [
    "REPLACEMENT",
    "has_lone_surrogate",
    "hold_back",
    "join_text",
    "scrub",
]

#: What an unpaired surrogate becomes in text that must be encodable.
REPLACEMENT: Final = "\ufffd"
_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def join_text(parts: Iterable[str]) -> str:
    """Return ``parts`` joined, with each high+low surrogate pair made the one character it spells.

    Surrogates left unpaired stay in the result (see :func:`has_lone_surrogate`),
    so a caller can refuse the text rather than change it. Raises nothing.
    """
    text = "".join(parts)
    if _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode(
        "utf-16-le", "surrogatepass"
    )


def has_lone_surrogate(text: str) -> bool:
    """Return whether ``text`` holds a surrogate code point (after :func:`join_text`, an unpaired one)."""
    return _SURROGATE.search(text) is not None


def hold_back(pending: str, delta: str) -> tuple[str, str]:
    """Return ``(text to emit now, text to hold)`` for ``delta`` after the held ``pending``.

    A trailing high surrogate is held until the next delta can complete it, so the
    emitted pieces concatenate to whole characters. Raises nothing.
    """
    if not pending and _SURROGATE.search(delta) is None:
        return delta, ""  # the common case: no surrogate to pair or hold
    text = join_text([pending, delta])
    if text and "\ud800" <= text[-1] <= "\udbff":
        return text[:-1], text[-1]
    return text, ""


def scrub(text: str) -> str:
    """Return ``text`` with every unpaired surrogate replaced by U+FFFD (pairs joined first)."""
    if _SURROGATE.search(text) is None:
        return text
    joined = join_text([text])
    if _SURROGATE.search(joined) is None:
        return joined
    return _SURROGATE.sub(REPLACEMENT, joined)
