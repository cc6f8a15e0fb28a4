"""Executing an approved call as a worker does: with log context, retried while leased."""

from __future__ import annotations

from approvals.exceptions import ExecutionInProgress
from approvals.services import EXECUTE_TASK, tool_call_execute
from orchestration.supervision import tool_call_log_context
from threads.execution import enqueue_later


def tool_call_execute_supervised(*, tool_call_pk: int) -> None:
    """Execute approved call ``tool_call_pk`` (``tool_call_execute``) with its log context.

    A delivery that finds another one holding the execution lease is scheduled
    again for when the lease ends, so a dead worker's call is still finished
    (BC32, LP-07).
    """
    with tool_call_log_context(tool_call_pk=tool_call_pk):
        try:
            tool_call_execute(tool_call_pk=tool_call_pk)
        except ExecutionInProgress as busy:
            enqueue_later(
                EXECUTE_TASK, countdown=busy.retry_after, tool_call_pk=tool_call_pk
            )
