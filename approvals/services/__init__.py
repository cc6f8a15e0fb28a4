"""The approval workflow: from a pending call to exactly one tool message.

When a run ends with pending application calls, :func:`pending_calls_dispatch`
applies each tool's policy (:mod:`.dispatch`). Operators decide with
:func:`approval_decide` (:mod:`.decisions`); :func:`tool_call_execute` runs an
approved call exactly once (:mod:`.execution`); :func:`thread_pending_calls_cancel`
abandons a thread's calls (:mod:`.cancellation`); every step is audited
(:mod:`.audit`) and announced (:mod:`.notify`). Every answer goes through
:func:`threads.answers.tool_message_write`; when a run's calls are all answered,
:func:`threads.services.continuation_maybe_start` starts exactly one continuation.

Rows are locked in one order (:mod:`approvals.locks`); statuses move only through
:mod:`approvals.transitions`. This package's public names are re-exported here,
the app's service API (STYLE.md 1, 2).
Implements FT-03..FT-06, SEC-01, SEC-02, SEC-04, LP-01, LP-05..LP-08, DC-03, DC-04.
"""

from __future__ import annotations

from approvals.models import DECIDE_PERMISSION
from approvals.services.audit import audit_append, audit_verify
from approvals.services.cancellation import (
    client_run_cancel,
    thread_pending_calls_cancel,
)
from approvals.services.decisions import (
    Decision,
    approval_decide,
    approval_undo,
    approvals_expire,
)
from approvals.services.dispatch import (
    EXECUTE_TASK,
    call_answer_refused,
    execution_create,
    pending_calls_dispatch,
    run_tools,
)
from approvals.services.execution import execution_resolve, tool_call_execute
from approvals.services.notify import (
    APPROVALS_GROUP,
    approval_snapshot,
    notify_call_changed,
)

__all__ = [
    "APPROVALS_GROUP",
    "DECIDE_PERMISSION",
    "EXECUTE_TASK",
    "Decision",
    "approval_decide",
    "approval_snapshot",
    "approval_undo",
    "approvals_expire",
    "audit_append",
    "audit_verify",
    "call_answer_refused",
    "client_run_cancel",
    "execution_create",
    "execution_resolve",
    "notify_call_changed",
    "pending_calls_dispatch",
    "run_tools",
    "thread_pending_calls_cancel",
    "tool_call_execute",
]
