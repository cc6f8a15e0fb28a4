"""Sending an approved call back to a person when it changed after approval.

At execution time a call whose arguments no longer match the approved hash, or
whose tool's input schema changed since the approval (an MCP server changed it),
is not run and not refused: it becomes a new pending approval request showing the
approved and the current version. The earlier request keeps its decision and
points to its successor (``superseded_by``); both steps are audited. A call that
keeps changing is answered with an error after :data:`MAX_REAPPROVALS` rounds.
The executor runs only what was approved. Implements SEC-02, SEC-04.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from agentcore.arguments import (
    ValidatedArguments,
    canonical_sha256,
    parse_arguments,
    tool_schema_sha256,
)
from agentcore.tools import Tool
from approvals.models import ApprovalRequest, ToolExecution
from approvals.services.dispatch import approval_request_open
from approvals.transitions import AuditFact, call_transition
from threads.mcp_servers import advertised_parameters
from threads.models import ToolCall

#: How many times one call may go back to an operator before it is answered with
#: an error instead (a tool whose schema keeps changing must not loop forever).
MAX_REAPPROVALS: Final = 3


@dataclass(frozen=True)
class CallChange:
    """Why an approved call must be approved again, and what the operator sees."""

    reapproval: str  #: an ``ApprovalRequest.Reapproval`` value
    detail: str  #: one sentence for the card, the audit trail and a refusal
    schema_hash: str  #: the tool's current schema (what the new request covers)
    previous_schema_hash: str  #: the schema the approval covered
    schema_valid: bool  #: whether the current arguments validate against it
    schema_errors: str


def schema_hashes(
    *, call: ToolCall, tool: Tool, approval: ApprovalRequest | None
) -> tuple[str, str]:
    """Return ``(covered, current)``: hashes of the schema ``approval`` covered and the tool's now.

    A re-approval records the schema it was made against; a first request covers
    the schema the run advertised (an unadvertised schema counts as unchanged).
    Equal hashes mean the stored arguments were validated against the schema the
    tool has now, so they need no validation again.
    """
    current = tool_schema_sha256(tool)
    if approval is not None and approval.schema_hash:
        return approval.schema_hash, current
    found, parameters = advertised_parameters(run_input=call.run.input, name=tool.name)
    return (canonical_sha256(parameters) if found else current), current


def execution_arguments(
    *, execution: ToolExecution, tool: Tool
) -> ValidatedArguments | None:
    """Return the validated value ``execution`` stores, or ``None`` when it changed since.

    The stored params must still hash to the stored ``arguments_hash`` (they were
    validated when the record was written); nothing is validated or decoded again.
    The caller compares the schema hashes (:func:`schema_hashes`).
    """
    return ValidatedArguments.restore(
        params=execution.arguments,
        sha256=execution.arguments_hash,
        schema_sha256=tool_schema_sha256(tool),
    )


def _arguments_check(*, arguments: object, tool: Tool) -> tuple[bool, str]:
    """Validate changed ``arguments`` against ``tool``'s current schema: ``(valid, errors)``.

    Only a change (a new schema, or arguments that are not the approved ones) is
    validated; the object goes to the ladder as it is, never through text.
    """
    if not isinstance(arguments, dict):
        return False, "the arguments are not a JSON object"
    parsed = parse_arguments(arguments, tool=tool)
    valid = bool(parsed.ok and parsed.params == arguments)
    return valid, "" if valid else (parsed.error or "").split(" Expected parameters:")[
        0
    ]


def call_change(
    *,
    call: ToolCall,
    execution: ToolExecution,
    tool: Tool,
    approval: ApprovalRequest,
) -> CallChange | None:
    """Return how ``execution`` differs from what ``approval`` approved, or ``None``.

    A change is an input schema other than the one the approval covered, or
    arguments whose hash is not the approved one. ``None`` also when the call is
    unchanged but invalid: that is refused by the executor, not re-approved.
    """
    covered, current = schema_hashes(call=call, tool=tool, approval=approval)
    if covered != current:
        valid, errors = _arguments_check(arguments=execution.arguments, tool=tool)
        return CallChange(
            reapproval=ApprovalRequest.Reapproval.SCHEMA_CHANGED,
            detail=(
                f"the input schema of {tool.name!r} changed since the approval "
                f"(schema {covered[:12]} → {current[:12]})"
            ),
            schema_hash=current,
            previous_schema_hash=covered,
            schema_valid=valid,
            schema_errors=errors,
        )
    if (
        approval.approved_arguments_hash != execution.arguments_hash
        or execution_arguments(execution=execution, tool=tool) is None
    ):
        valid, errors = _arguments_check(arguments=execution.arguments, tool=tool)
        return CallChange(
            reapproval=ApprovalRequest.Reapproval.ARGUMENTS_CHANGED,
            detail="the arguments differ from the ones an operator approved",
            schema_hash=current,
            previous_schema_hash=covered,
            schema_valid=valid,
            schema_errors=errors,
        )
    return None


def approval_reopen(
    *,
    call: ToolCall,
    approval: ApprovalRequest,
    execution: ToolExecution,
    tool: Tool,
    change: CallChange,
) -> ApprovalRequest:
    """Supersede the approved ``approval`` with a new pending request for ``call``; return it.

    The new request proposes the execution's current arguments (the approved
    ones stay on the earlier request, shown as ``previousArguments``); the call
    goes back to ``awaiting_approval``; the execution record stays ``queued`` and
    is enqueued again only when the new request is approved. Must run holding the
    thread, call, approval and execution locks, with ``approval`` approved and
    ``execution`` queued. Implements SEC-04.
    """
    # The call's one open request is ``call.approval``: the earlier one lets go of
    # the call (it is reached through ``superseded_by``) before the new one takes it.
    approval.tool_call = None
    approval.save(update_fields=["tool_call"])
    reopened = approval_request_open(
        call=call,
        tool=tool,
        arguments=execution.arguments,
        reapproval=change.reapproval,
        reapproval_count=approval.reapproval_count + 1,
        schema_hash=change.schema_hash,
        previous_schema_hash=change.previous_schema_hash,
        schema_valid=change.schema_valid,
        schema_errors=change.schema_errors,
    )
    approval.superseded_by = reopened
    approval.save(update_fields=["superseded_by"])
    call_transition(
        call=call,
        to=ToolCall.State.AWAITING_APPROVAL,
        audit=(
            AuditFact(
                action="approval.superseded",
                target=approval,
                before={"status": approval.status},
                after={
                    "superseded_by": reopened.pk,
                    "reapproval": change.reapproval,
                    "detail": change.detail,
                },
            ),
            AuditFact(
                action="approval.requested",
                target=reopened,
                after={
                    "arguments": reopened.proposed_arguments,
                    "previous_arguments": approval.approved_arguments,
                    "supersedes": approval.pk,
                    "reapproval": change.reapproval,
                    "schema_hash": change.schema_hash,
                    "previous_schema_hash": change.previous_schema_hash,
                    "tool": tool.name,
                },
            ),
        ),
        notify=True,
        approval=reopened,
    )
    return reopened
