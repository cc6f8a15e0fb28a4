"""Named points where a worker may die, for tests that kill it there.

Production code calls :func:`crash_point` at each point; it does nothing. A test
replaces it (``monkeypatch`` in-process, or ``tests/crashpoints.py`` loaded by a
test worker process) to kill the worker exactly there, so crash recovery is tested
without a test hook in the hot path (BC32, LP-07).
"""

from __future__ import annotations

from typing import Literal, get_args

#: Every step boundary of a run and of an execution, in order. A worker killed at
#: any of them is recovered (docs/recovery.md):
#:
#: - ``after_run_claimed``: the run is ``running``, no agent event yet;
#: - ``after_run_recorded``: the run's events are recorded (``awaiting_tools``
#:   with calls ``pending``), its calls not yet dispatched;
#: - ``after_dispatch``: calls dispatched (approval requests, queued executions,
#:   or the continuation queued), the task not yet acknowledged;
#: - ``after_reservation``: the execution's reservation committed, tool not run;
#: - ``after_tool``: the tool ran, its outcome not yet recorded;
#: - ``after_outcome``: outcome, tool message and continuation committed, the task
#:   not yet acknowledged.
CrashPoint = Literal[
    "after_run_claimed",
    "after_run_recorded",
    "after_dispatch",
    "after_reservation",
    "after_tool",
    "after_outcome",
]
CRASH_POINTS: tuple[CrashPoint, ...] = get_args(CrashPoint)


def crash_point(name: CrashPoint) -> None:
    """Mark crash point ``name`` (one of :data:`CRASH_POINTS`).

    A no-op; tests patch it. Callers look it up on this module at call time
    (``crashpoints.crash_point(...)``) so a patch takes effect.
    """
