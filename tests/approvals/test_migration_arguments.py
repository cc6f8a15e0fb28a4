"""The migration that drops the repeated argument columns keeps existing rows working.

Rows written before it (a vote with its copy of the edited arguments, a request
with its stored approved hash) are read after it with the same meaning: the
request's approved hash is the one it stored, the execution still matches it,
and undo keeps the arguments the remaining approvals cover. Runs on SQLite and
on PostgreSQL (``DATABASE_URL``).
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from approvals.models import ApprovalRequest, ApprovalVote, ToolExecution
from orchestration.pipeline import approval_decide
from threads.models import ToolCall

BEFORE = [("approvals", "0008_merge_20261201_2137")]


def _latest() -> list[tuple[str, str]]:
    """The approvals app's newest migration: the schema the models describe."""
    return MigrationExecutor(connection).loader.graph.leaf_nodes("approvals")


def _migrate(targets: list[tuple[str, str]]) -> Any:
    """Migrate to ``targets`` and return the historical apps there."""
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    executor.loader.build_graph()
    return executor.loader.project_state(targets).apps


@pytest.mark.parametrize("executor", ["embedded"], indirect=True)
def test_rows_written_before_keep_their_meaning(
    approver: Any, pending_refund: ToolCall, executor: Any
) -> None:
    """The stored approved hash equals the derived one; the execution still matches it."""
    # given a refund approved with an edit and executed
    call = pending_refund
    approval = ApprovalRequest.objects.get(tool_call=call)
    edited = {**approval.proposed_arguments, "amount": 20.0}
    approval_decide(
        approval=approval,
        decided_by=approver,
        decision="approve",
        edited_arguments=edited,
    )
    executor.settle(call.thread)
    approval.refresh_from_db()
    stored_hash = approval.approved_arguments_hash
    execution = ToolExecution.objects.get(tool_call=call)
    assert stored_hash == execution.arguments_hash != ""
    try:
        # and the rows as the schema before the migration held them
        old = _migrate(BEFORE)
        old.get_model("approvals", "ApprovalRequest").objects.filter(
            pk=approval.pk
        ).update(approved_arguments_hash=stored_hash)
        old.get_model("approvals", "ApprovalVote").objects.filter(
            approval_id=approval.pk
        ).update(edited_arguments=edited)
    finally:
        # when the migration (and every later one) runs
        _migrate(_latest())
    # then the request derives the hash it had stored, and the vote still covers it
    approval = ApprovalRequest.objects.get(pk=approval.pk)
    assert approval.approved_arguments_hash == stored_hash
    vote = ApprovalVote.objects.get(approval=approval)
    assert vote.arguments_hash == stored_hash
    assert ToolExecution.objects.get(tool_call=call).arguments == edited
