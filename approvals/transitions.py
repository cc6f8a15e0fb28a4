"""The one owner of ``ApprovalRequest.status`` and ``ToolExecution.state``.

Transition tables and the functions that perform a move (STYLE.md 8), in the
manner of :mod:`threads.transitions` (same rules: a move the table does not list
raises :class:`threads.exceptions.IllegalTransition` naming both states; staying
put is a no-op). ``tests/test_architecture.py`` asserts that no other module
assigns these fields.

A move carries its side effects, in the shape of django-oscar's ``set_status``:
given ``audit=AuditFact(...)`` the function appends that audit entry, and given
``notify=True`` it tells browsers after commit, right after the move, so a
caller does not pair them by hand. :func:`call_transition` does the same for a
tool call's state (owned by :func:`threads.transitions.tool_call_transition`).
The effects follow every move the table allows, staying put included: the
caller's step happened either way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from django.db.models import Model
from django.utils import timezone

from approvals.models import ApprovalRequest, NotificationDelivery, ToolExecution
from core import metrics, tracing
from core.types import JSONValue, User
from threads.models import ToolCall
from threads.transitions import apply_transition, tool_call_transition

_A = ApprovalRequest.Status
_E = ToolExecution.State
_D = NotificationDelivery.Status

#: Moves that end a request's wait for a person (decision latency, docs/observability.md).
_DECIDED: Final = frozenset({_A.APPROVED, _A.REJECTED, _A.RESPONDED, _A.EXPIRED})
#: An execution's outcomes (executions by outcome).
_SETTLED: Final = frozenset({_E.SUCCEEDED, _E.FAILED, _E.OUTCOME_UNKNOWN, _E.RESOLVED})

APPROVAL_TRANSITIONS: Final[Mapping[str, frozenset[str]]] = {
    # an operator decides (or answers the call with text instead of running it),
    # the deadline passes, or the call is cancelled (FT-06)
    _A.PENDING: frozenset(
        {_A.APPROVED, _A.REJECTED, _A.RESPONDED, _A.EXPIRED, _A.CANCELLED}
    ),
    # undone inside the undo window, before its execution was claimed
    _A.APPROVED: frozenset({_A.PENDING}),
    _A.REJECTED: frozenset(),
    _A.RESPONDED: frozenset(),
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


@dataclass(frozen=True)
class AuditFact:
    """The audit entry a transition appends (SEC-04).

    ``action`` names the step (``"approval.undone"``, ``"execution.reserved"``);
    ``actor`` is a user or ``None`` (the system); ``target`` is the row the entry
    is about, by default the row that moved; ``before``/``after`` are JSON values.
    """

    action: str
    actor: User | None = None
    target: Model | None = None
    before: JSONValue = None
    after: JSONValue = None


#: What a move appends to the audit chain: no entry, one, or several in order.
Audit = AuditFact | Sequence[AuditFact] | None


def _effects(
    *,
    moved: Model,
    audit: Audit,
    call: ToolCall | None = None,
    approval: ApprovalRequest | None = None,
    notify: bool = False,
) -> None:
    """Append ``audit`` (each entry about ``moved`` or its own target), then notify.

    The notification tells browsers watching ``call``'s thread and the queue
    (with ``approval``'s snapshot, taken now), or, for a request bound to no
    call, ``approval``'s thread and the queue.
    """
    # The services package imports this module: its audit and notify modules
    # are imported when a transition runs, after every module is loaded.
    from approvals.services.audit import audit_append
    from approvals.services.notify import notify_approval_changed, notify_call_changed

    facts = (audit,) if isinstance(audit, AuditFact) else audit or ()
    for fact in facts:
        audit_append(
            actor=fact.actor,
            action=fact.action,
            target=fact.target if fact.target is not None else moved,
            before=fact.before,
            after=fact.after,
        )
    if not notify:
        return
    if call is not None:
        notify_call_changed(call, approval=approval)
    elif approval is not None:
        notify_approval_changed(approval)


def approval_transition(
    *,
    approval: ApprovalRequest,
    to: str,
    save: bool = True,
    audit: Audit = None,
    notify: bool = False,
    call: ToolCall | None = None,
) -> bool:
    """Move ``approval`` to status ``to`` (saved unless ``save`` is false); return whether it changed.

    ``save=False`` lets a decision write the status with the decider, time and
    reason in one UPDATE. With ``audit`` the entry (or entries, in order) is
    appended after the move. With ``notify`` browsers are told after commit that
    ``approval`` (through ``call`` when it has one) changed; its snapshot is
    taken now, so a move whose other fields the caller sets afterwards announces
    itself once they are set. Raises
    :class:`threads.exceptions.IllegalTransition` for a move
    ``APPROVAL_TRANSITIONS`` does not allow (and nothing is audited). Implements
    STYLE.md 8, SEC-04.
    """
    changed = apply_transition(
        instance=approval,
        field="status",
        table=APPROVAL_TRANSITIONS,
        what=f"approval {approval.pk!r}",
        to=to,
        save=save,
    )
    if changed and to in _DECIDED and approval.requested_at is not None:
        now = timezone.now()
        waited = (now - approval.requested_at).total_seconds()
        metrics.count_on_commit(
            lambda: metrics.DECISION_LATENCY.labels(to).observe(max(waited, 0.0))
        )
        if tracing.tracing_active():
            call = call or approval.tool_call
            tracing.approval_wait_record(
                tool_name=approval.tool_name,
                tool_call_id=call.tool_call_id if call is not None else "",
                approval_id=approval.pk,
                decision=to,
                requested_at=approval.requested_at,
                decided_at=now,
                request_context=approval.trace_context,
            )
    _effects(moved=approval, audit=audit, call=call, approval=approval, notify=notify)
    return changed


def execution_transition(
    *,
    execution: ToolExecution,
    to: str,
    save: bool = True,
    audit: Audit = None,
) -> bool:
    """Move ``execution`` to state ``to`` (saved unless ``save`` is false); return whether it changed.

    With ``audit`` the entry (or entries, in order) is appended after the move,
    each about ``execution`` unless it names another target. Raises
    :class:`threads.exceptions.IllegalTransition` for a move
    ``EXECUTION_TRANSITIONS`` does not allow (and nothing is audited).
    Implements STYLE.md 8, SEC-04.
    """
    changed = apply_transition(
        instance=execution,
        field="state",
        table=EXECUTION_TRANSITIONS,
        what=f"execution of call {execution.tool_call_id!r}",
        to=to,
        save=save,
    )
    if changed and to in _SETTLED:
        metrics.count_on_commit(lambda: metrics.TOOL_EXECUTIONS.labels(to).inc())
    _effects(moved=execution, audit=audit)
    return changed


def call_transition(
    *,
    call: ToolCall,
    to: str,
    audit: Audit = None,
    notify: bool = False,
    approval: ApprovalRequest | None = None,
) -> bool:
    """Move ``call`` to state ``to`` and save it, with the approval workflow's side effects.

    The move is :func:`threads.transitions.tool_call_transition`'s; with
    ``audit`` the entry (or entries, in order) is appended after it, each about
    ``call`` unless it names another target (the request or execution the step
    is about); with ``notify`` browsers watching the call's thread (and, given ``approval``, the
    queue, with its snapshot taken now) are told after commit. Returns whether
    the state changed. Raises :class:`threads.exceptions.IllegalTransition`.
    Implements STYLE.md 8, SEC-04.
    """
    changed = tool_call_transition(call=call, to=to)
    _effects(moved=call, audit=audit, call=call, approval=approval, notify=notify)
    return changed


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
