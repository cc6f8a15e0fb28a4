"""The one owner of ``ApprovalRequest.status`` and ``ToolExecution.state``.

Transition tables and the functions that perform a move (STYLE.md 8), in the
manner of :mod:`threads.transitions` (same rules: a move the table does not list
raises :class:`threads.exceptions.IllegalTransition` naming both states; staying
put is a no-op). ``tests/test_architecture.py`` asserts that no other module
assigns these fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from approvals.models import ApprovalRequest, NotificationDelivery, ToolExecution
from threads.transitions import apply_transition

_A = ApprovalRequest.Status
_E = ToolExecution.State
_D = NotificationDelivery.Status

APPROVAL_TRANSITIONS: Final[Mapping[str, frozenset[str]]] = {
    # an operator decides, the deadline passes, or the call is cancelled (FT-06)
    _A.PENDING: frozenset({_A.APPROVED, _A.REJECTED, _A.EXPIRED, _A.CANCELLED}),
    # undone inside the undo window, before its execution was claimed
    _A.APPROVED: frozenset({_A.PENDING}),
    _A.REJECTED: frozenset(),
    _A.EXPIRED: frozenset(),
    _A.CANCELLED: frozenset(),
}

EXECUTION_TRANSITIONS: Final[Mapping[str, frozenset[str]]] = {
    # reserved before the side effect, or refused at execution time (SEC-02)
    _E.QUEUED: frozenset({_E.RESERVED, _E.FAILED}),
    # the outcome; a redelivery finding a dead worker's reservation (BC32) makes a
    # non-idempotent call outcome_unknown, an idempotent one is reserved again
    _E.RESERVED: frozenset({_E.SUCCEEDED, _E.FAILED, _E.OUTCOME_UNKNOWN}),
    # a slow (not dead) worker's late outcome, or an operator's resolution
    _E.OUTCOME_UNKNOWN: frozenset({_E.SUCCEEDED, _E.FAILED, _E.RESOLVED}),
    _E.SUCCEEDED: frozenset(),
    _E.FAILED: frozenset(),
    _E.RESOLVED: frozenset(),
}

DELIVERY_TRANSITIONS: Final[Mapping[str, frozenset[str]]] = {
    # a worker takes it, or it is given up unsent (its target left the settings)
    _D.QUEUED: frozenset({_D.SENDING, _D.FAILED}),
    # the attempt's outcome: sent, to be retried, or out of attempts
    _D.SENDING: frozenset({_D.DELIVERED, _D.RETRYING, _D.FAILED}),
    _D.RETRYING: frozenset({_D.SENDING, _D.FAILED}),
    _D.DELIVERED: frozenset(),
    _D.FAILED: frozenset(),
}


def approval_transition(
    *, approval: ApprovalRequest, to: str, save: bool = True
) -> bool:
    """Move ``approval`` to status ``to`` (saved unless ``save`` is false); return whether it changed.

    ``save=False`` lets a decision write the status with the decider, time and
    reason in one UPDATE. Raises :class:`threads.exceptions.IllegalTransition`
    for a move ``APPROVAL_TRANSITIONS`` does not allow. Implements STYLE.md 8.
    """
    return apply_transition(
        instance=approval,
        field="status",
        table=APPROVAL_TRANSITIONS,
        what=f"approval {approval.pk!r}",
        to=to,
        save=save,
    )


def execution_transition(
    *, execution: ToolExecution, to: str, save: bool = True
) -> bool:
    """Move ``execution`` to state ``to`` (saved unless ``save`` is false); return whether it changed.

    Raises :class:`threads.exceptions.IllegalTransition` for a move
    ``EXECUTION_TRANSITIONS`` does not allow. Implements STYLE.md 8.
    """
    return apply_transition(
        instance=execution,
        field="state",
        table=EXECUTION_TRANSITIONS,
        what=f"execution of call {execution.tool_call_id!r}",
        to=to,
        save=save,
    )


def delivery_transition(
    *, delivery: NotificationDelivery, to: str, save: bool = True
) -> bool:
    """Move notification ``delivery`` to status ``to``; return whether it changed.

    Raises :class:`threads.exceptions.IllegalTransition` for a move
    ``DELIVERY_TRANSITIONS`` does not allow. Implements STYLE.md 8.
    """
    return apply_transition(
        instance=delivery,
        field="status",
        table=DELIVERY_TRANSITIONS,
        what=f"notification delivery {delivery.pk!r}",
        to=to,
        save=save,
    )
