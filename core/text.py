"""Composing sentences for people from parts written elsewhere (reasons, errors, answers)."""

from __future__ import annotations

import re

#: A sentence's end: a full stop, ``!``, ``?`` or an ellipsis, then any closing quotes
#: or brackets ("… “refunded already.”").
_ENDED = re.compile("[.!?\u2026][\"'\u201d\u2019)\\]\u00bb]*$")


def sentence(text: str) -> str:
    """Return ``text`` ending as one sentence: a full stop added only when it has none.

    ``sentence("Rejected: “too much”")`` is ``"Rejected: “too much”."``;
    ``sentence("Rejected: “too much.”")`` stays as it is, so a reason that ends
    in its own full stop never gives "..". Trailing spaces are dropped; ``""``
    stays ``""``. Every sentence composed around a person's or an exception's
    words ends through here (the pages' ``sentence`` in ``static/ui/common.js``
    is the same rule).
    """
    text = text.rstrip()
    if not text or _ENDED.search(text):
        return text
    return text + "."
