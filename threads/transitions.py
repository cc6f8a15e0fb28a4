"""The one owner of the threads' status fields: transition tables and functions.

``Run.status``, ``Run.wire_state`` and ``ToolCall.state`` move only here.
Each field's allowed moves are a table (STYLE.md 8); :func:`run_transition`,
:func:`run_wire_transition` and :func:`tool_call_transition` are the only code
that assigns the field, and they
refuse a move the table does not list with :class:`IllegalTransition` naming both
states. Staying in the same state is always allowed and changes nothing (a
redelivered task, a replayed ``RUN_STARTED``). Rows are created in their initial
state by ``objects.create``; that is not a transition.

The tables were read off the code paths that move each row (see
``docs/architecture.md`` "State tables"). ``tests/test_architecture.py`` asserts
that no other module assigns these fields.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from django.db.models import Model

from threads.exceptions import IllegalTransition
from threads.models import Run, ToolCall

_R = Run.Status
_W = Run.WireState
_C = ToolCall.State

RUN_TRANSITIONS: Final[Mapping[str, frozenset[str]]] = {
    # claimed by a worker, or recorded directly (tests, replay, cancel-while-queued)
    _R.QUEUED: frozenset({_R.RUNNING}),
    # RUN_FINISHED (success / interrupt / cancelled) or RUN_ERROR
    _R.RUNNING: frozenset({_R.AWAITING_TOOLS, _R.FINISHED, _R.ERROR, _R.CANCELLED}),
    # every pending call answered: continuation, cancel-pending, a client's answers
    _R.AWAITING_TOOLS: frozenset({_R.FINISHED}),
    _R.FINISHED: frozenset(),
    _R.ERROR: frozenset(),
    _R.CANCELLED: frozenset(),
}

#: A run is created unmanaged, open (a client-visible run, ``run_create``) or a
#: segment of an open wire run; only an unmanaged run is opened later, and an open
#: one closes once its terminal event is in the log (:mod:`threads.wire`).
RUN_WIRE_TRANSITIONS: Final[Mapping[str, frozenset[str]]] = {
    _W.UNMANAGED: frozenset({_W.OPEN}),
    _W.OPEN: frozenset({_W.CLOSED}),
    _W.CLOSED: frozenset(),
    _W.SEGMENT: frozenset(),
}

TOOL_CALL_TRANSITIONS: Final[Mapping[str, frozenset[str]]] = {
    _C.STREAMING: frozenset(
        {_C.COMPLETE, _C.PENDING, _C.CANCELLED, _C.SUCCEEDED, _C.FAILED}
    ),
    # TC-06 reopen goes back to streaming; an agent-side or client result answers it
    _C.COMPLETE: frozenset(
        {_C.STREAMING, _C.PENDING, _C.CANCELLED, _C.SUCCEEDED, _C.FAILED}
    ),
    # policy dispatch (FT-06, SEC-01, LP-01), a client's own answer, cancel-pending
    _C.PENDING: frozenset(
        {
            _C.APPROVED,
            _C.AWAITING_APPROVAL,
            _C.FAILED,
            _C.DECLINED,
            _C.CANCELLED,
            _C.SUCCEEDED,
        }
    ),
    _C.AWAITING_APPROVAL: frozenset(
        {_C.APPROVED, _C.DECLINED, _C.EXPIRED, _C.CANCELLED}
    ),
    # reserved for execution, refused at execution time (SEC-02), back to an
    # operator because its arguments or schema changed since approval,
    # or answered by a remote agent that executes an approved interrupt-bound call
    # itself (IR-18)
    _C.APPROVED: frozenset(
        {_C.EXECUTING, _C.FAILED, _C.AWAITING_APPROVAL, _C.SUCCEEDED}
    ),
    # outcome recorded, refused, or a redelivery found a dead worker's reservation
    _C.EXECUTING: frozenset({_C.SUCCEEDED, _C.FAILED, _C.OUTCOME_UNKNOWN}),
    # a slow (not dead) worker's late outcome, or an operator's resolution
    _C.OUTCOME_UNKNOWN: frozenset({_C.SUCCEEDED, _C.FAILED}),
    _C.SUCCEEDED: frozenset(),
    _C.FAILED: frozenset(),
    _C.DECLINED: frozenset(),
    _C.EXPIRED: frozenset(),
    # a run's error cancels a call with no answer yet; the dangling answer follows
    _C.CANCELLED: frozenset(),
}


def apply_transition(
    *,
    instance: Model,
    field: str,
    table: Mapping[str, Iterable[str]],
    what: str,
    to: str,
    save: bool,
    update_fields: Sequence[str] = (),
) -> bool:
    """Move ``instance.<field>`` to ``to`` if ``table`` allows it; return whether it changed.

    The one body of every ``*_transition`` function. ``what`` names the row in
    the error (e.g. ``"run 'r-1'"``). Raises :class:`IllegalTransition` naming
    both states when ``to`` is not listed for the current state; staying put
    returns ``False`` and writes nothing. When ``save`` is true the change is
    saved with ``field`` plus ``update_fields``.
    """
    # TextChoices members compare equal to their values; messages show the value.
    current, target = str(getattr(instance, field)), str(to)
    if current == target:
        return False
    if target not in table.get(current, ()):
        allowed = sorted(table.get(current, ()))
        raise IllegalTransition(
            f"{what} cannot move from {current!r} to {target!r}; "
            f"from {current!r} it may move to {allowed!r}"
        )
    setattr(instance, field, to)
    if save:
        instance.save(update_fields=[field, *update_fields])
    return True


def run_transition(*, run: Run, to: str, save: bool = True) -> bool:
    """Move ``run`` to status ``to`` (in memory, and saved unless ``save`` is false).

    Returns whether the status changed. ``save=False`` lets the projection write
    every touched field of a flush in one UPDATE. Raises
    :class:`IllegalTransition` for a move ``RUN_TRANSITIONS`` does not allow.
    Implements STYLE.md 8.
    """
    return apply_transition(
        instance=run,
        field="status",
        table=RUN_TRANSITIONS,
        what=f"run {run.run_id!r}",
        to=to,
        save=save,
    )


def run_wire_transition(*, run: Run, to: str) -> bool:
    """Move ``run``'s ``wire_state`` to ``to`` and save it; return whether it changed.

    Raises :class:`IllegalTransition` for a move ``RUN_WIRE_TRANSITIONS`` does not
    allow (a segment never becomes a client-visible run, a closed run never
    reopens). Implements STYLE.md 8 for the wire (docs/agui.md "one run per
    request").
    """
    return apply_transition(
        instance=run,
        field="wire_state",
        table=RUN_WIRE_TRANSITIONS,
        what=f"wire of run {run.run_id!r}",
        to=to,
        save=True,
    )


def tool_call_transition(*, call: ToolCall, to: str, save: bool = True) -> bool:
    """Move ``call`` to state ``to`` (in memory, and saved unless ``save`` is false).

    Returns whether the state changed. Raises :class:`IllegalTransition` for a
    move ``TOOL_CALL_TRANSITIONS`` does not allow. Implements STYLE.md 8.
    """
    return apply_transition(
        instance=call,
        field="state",
        table=TOOL_CALL_TRANSITIONS,
        what=f"tool call {call.tool_call_id!r}",
        to=to,
        save=save,
        update_fields=("updated_at",),
    )
