"""What a remote agent ran after its interrupt was approved, checked against the approval.

A remote AG-UI agent runs its own tool once an operator approved its interrupt
(IR-18): Countersign cannot hold the arguments, only compare what the remote
reports it ran (its ``MESSAGES_SNAPSHOT`` after the resume, or the call streamed
again) with what was approved. :func:`interrupt_arguments_check` records a
mismatch on the call (``ToolCall.metadata["argumentsMismatch"]``, shown to
operators with the approval), audits it (``approval.arguments_mismatch``) and
tells browsers. Implements IR-18, SEC-02, SEC-04.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from agentcore.arguments import canonical_sha256
from approvals.models import ApprovalRequest
from approvals.services.audit import audit_append
from approvals.services.notify import notify_approval_changed
from threads.locks import tool_calls_lock
from threads.models import Run, ToolCall
from threads.selectors import run_reported_arguments

logger = logging.getLogger(__name__)

#: ``ToolCall.metadata`` key of a recorded mismatch.
MISMATCH_KEY = "argumentsMismatch"


@dataclass(frozen=True)
class ArgumentsMismatch:
    """One approved remote call whose reported arguments are not the approved ones."""

    approval_pk: int
    tool_call_pk: int
    tool_call_id: str
    approved_hash: str
    reported_hash: str
    reported: Any


def interrupt_arguments_check(*, run: Run) -> list[ArgumentsMismatch]:
    """Compare what ``run``'s remote reported running with the approvals it resumed.

    ``run`` continues an interrupted run; for each approved interrupt of that
    run bound to a call, every set of arguments ``run`` reports for the call
    (:func:`threads.selectors.run_reported_arguments`) is hashed
    (:func:`agentcore.arguments.canonical_sha256`) and compared with the hash of
    the approved arguments (the edit, else the proposal). A report equal to the
    proposal after an edit was approved is a stale view, not a run (Agent
    Framework's snapshot keeps showing the proposal), and is not flagged. Each
    mismatch is written once to the call's ``metadata["argumentsMismatch"]``
    (``{"approvalId", "approvedHash", "reportedHash", "reportedArguments"}``),
    audited as ``approval.arguments_mismatch`` and announced. Returns the
    mismatches found now. Implements IR-18, SEC-02, SEC-04.
    """
    if run.continues_id is None:
        return []
    approvals = list(
        ApprovalRequest.objects.filter(
            run_id=run.continues_id,
            kind=ApprovalRequest.Kind.INTERRUPT,
            status=ApprovalRequest.Status.APPROVED,
            tool_call__isnull=False,
        ).select_related("tool_call")
    )
    if not approvals:
        return []
    by_call = {a.tool_call.tool_call_id: a for a in approvals if a.tool_call}
    by_pk = {a.tool_call.tool_call_id: a.tool_call.pk for a in approvals if a.tool_call}
    reported = run_reported_arguments(run=run, tool_call_ids=set(by_call))
    found: list[ArgumentsMismatch] = []
    for call_id, values in reported.items():
        approval = by_call[call_id]
        approved = (
            approval.edited_arguments
            if approval.edited_arguments is not None
            else approval.proposed_arguments
        )
        approved_hash = canonical_sha256(approved)
        stale = (
            canonical_sha256(approval.proposed_arguments)
            if approval.edited_arguments is not None
            else None
        )
        for value in values:
            reported_hash = canonical_sha256(value)
            if reported_hash not in (approved_hash, stale):
                found.append(
                    ArgumentsMismatch(
                        approval_pk=approval.pk,
                        tool_call_pk=by_pk[call_id],
                        tool_call_id=call_id,
                        approved_hash=approved_hash,
                        reported_hash=reported_hash,
                        reported=value,
                    )
                )
                break
    for mismatch in found:
        _mismatch_record(
            run=run, mismatch=mismatch, approval=by_call[mismatch.tool_call_id]
        )
    return found


def _mismatch_record(
    *, run: Run, mismatch: ArgumentsMismatch, approval: ApprovalRequest
) -> None:
    with transaction.atomic():
        _, calls = tool_calls_lock(
            thread_pk=run.thread_id,
            calls=ToolCall.objects.filter(pk=mismatch.tool_call_pk),
        )
        call = calls[0]
        if MISMATCH_KEY in (call.metadata or {}):
            return
        record = {
            "approvalId": approval.pk,
            "approvedHash": mismatch.approved_hash,
            "reportedHash": mismatch.reported_hash,
            "reportedArguments": mismatch.reported,
        }
        call.metadata = {**(call.metadata or {}), MISMATCH_KEY: record}
        call.save(update_fields=["metadata", "updated_at"])
        logger.warning(
            "run %s: remote agent reported running %s with arguments %s, not the "
            "approved %s",
            run.run_id,
            call.tool_call_id,
            mismatch.reported_hash,
            mismatch.approved_hash,
        )
        audit_append(
            actor=None,
            action="approval.arguments_mismatch",
            target=approval,
            before={"approvedHash": mismatch.approved_hash},
            after=record,
        )
        notify_approval_changed(approval, call=call)
