"""Named points where a worker may die, for tests that kill it there.

Production code calls :func:`crash_point` at each point; it does nothing. A test
replaces it (``monkeypatch`` in-process, or ``tests/crashpoints.py`` loaded by a
test worker process) to kill the worker exactly there, so crash recovery is tested
without a test hook in the hot path (BC32, LP-07).
"""

from __future__ import annotations

from typing import Literal

CrashPoint = Literal["after_reservation", "after_tool"]


def crash_point(name: CrashPoint) -> None:
    """Mark crash point ``name``: after the reservation commits, or after the tool ran.

    A no-op; tests patch it. Callers look it up on this module at call time
    (``crashpoints.crash_point(...)``) so a patch takes effect.
    """
