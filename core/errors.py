"""The base of every Countersign domain error.

Each domain error has a stable, machine-readable ``code`` and the HTTP ``status``
the web layer answers it with; the one exception handler
(:mod:`web.exception_handler`) maps them (STYLE.md 20).
"""

from __future__ import annotations


class CountersignError(Exception):
    """Base class; ``code`` is stable and machine-readable, ``status`` the HTTP status."""

    code = "countersign_error"
    status = 400
