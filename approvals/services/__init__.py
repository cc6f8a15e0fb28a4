"""The approval workflow: from a pending call to exactly one tool message.

Each service does one step of a call's life and returns what happened; the
steps are put in order, and the run continued, by :mod:`orchestration.pipeline`.
When a run ends with pending application calls, :func:`pending_calls_route`
applies each tool's policy (:mod:`.dispatch`). Operators decide through
:func:`approval_decision_record` (:mod:`.decisions`); an approved call's execution
is reserved and its outcome recorded exactly once (:mod:`.execution`);
:func:`thread_pending_calls_cancel` abandons a thread's calls
(:mod:`.cancellation`); every step is audited (:mod:`.audit`) and announced
(:mod:`.notify`). Every answer goes through
:func:`threads.answers.tool_message_write`.

Rows are locked in one order (:mod:`approvals.locks`); statuses move only through
:mod:`approvals.transitions`. This package's public names are re-exported here,
the app's service API (STYLE.md 1, 2).
Implements FT-03..FT-06, SEC-01, SEC-02, SEC-04, LP-01, LP-05..LP-08, DC-03, DC-04.
"""

from __future__ import annotations

from approvals.models import DECIDE_PERMISSION
from approvals.services.audit import (
    audit_append,
    audit_batch,
    audit_export,
    audit_keys,
    audit_verify,
)
from approvals.services.cancellation import (
    call_pending_cancel,
    client_run_cancel,
    thread_pending_calls_cancel,
)
from approvals.services.decisions import (
    Decided,
    Decision,
    approval_decision_record,
    approval_expire,
    approval_undo,
)
from approvals.services.dispatch import (
    Dispatched,
    QueuedExecution,
    call_answer_refused,
    execution_create,
    pending_calls_route,
    run_tools,
)
from approvals.services.execution import (
    Reserved,
    Settled,
    execution_outcome_record,
    execution_outcome_resolve,
    execution_reserve,
)
from approvals.services.notify import (
    APPROVALS_GROUP,
    approval_snapshot,
    notify_call_changed,
)
from approvals.services.remote_outcomes import (
    ArgumentsMismatch,
    interrupt_arguments_check,
)

__all__ = [
    "APPROVALS_GROUP",
    "DECIDE_PERMISSION",
    "ArgumentsMismatch",
    "Decided",
    "Decision",
    "Dispatched",
    "QueuedExecution",
    "Reserved",
    "Settled",
    "approval_decision_record",
    "approval_expire",
    "approval_snapshot",
    "approval_undo",
    "audit_append",
    "audit_batch",
    "audit_export",
    "audit_keys",
    "audit_verify",
    "call_answer_refused",
    "call_pending_cancel",
    "client_run_cancel",
    "execution_create",
    "execution_outcome_record",
    "execution_outcome_resolve",
    "execution_reserve",
    "interrupt_arguments_check",
    "notify_call_changed",
    "pending_calls_route",
    "run_tools",
    "thread_pending_calls_cancel",
]
