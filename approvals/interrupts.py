"""An approval request as an AG-UI interrupt: one function, :func:`interrupt_for`.

The interrupt is the approval request: ``id`` is ``"cs-approval-<pk>"``, namespaced so
it never equals a ``toolCallId`` or message id a client or remote agent sends, and
``metadata.approvalId`` is the integer pk of ``/api/approvals/<pk>/``;
``reason`` ``"tool_call"``, ``toolCallId`` the call it holds, ``message`` what will
happen (the tool's activity label) and why a person must approve it,
``expiresAt`` the request's real expiry, ``responseSchema`` the answer a resume
carries (``approved``, ``editedArgs`` validated against the tool's parameters,
``reason``), and ``metadata`` the hash of the arguments the approval binds to and
the call's risk. Implements IR-02, IR-03, IR-05.
"""

from __future__ import annotations

from datetime import UTC
from typing import Any

from django.db.models import F, Q

from agentcore.arguments import canonical_sha256
from agentcore.interrupts import edited_args_schema
from approvals.facts import approval_facts
from approvals.interrupt_ids import (
    INTERRUPT_ID_PREFIX as INTERRUPT_ID_PREFIX,
)
from approvals.interrupt_ids import (
    interrupt_approval_pk as interrupt_approval_pk,
)
from approvals.interrupt_ids import (
    interrupt_id as interrupt_id,
)
from approvals.labels import approval_label
from approvals.models import ApprovalRequest
from approvals.selectors import approval_risk
from approvals.services.votes import approvals_progress
from threads.agent_config import run_toolset
from threads.models import Run

#: ``Interrupt.reason`` of a held tool call (IR-03).
TOOL_CALL_REASON = "tool_call"


def _tool(approval: ApprovalRequest) -> Any:
    try:
        return run_toolset(approval.run).resolve(approval.tool_name)
    except Exception:
        return None


def response_schema(approval: ApprovalRequest) -> dict[str, Any]:
    """Return the JSON Schema of the payload answering ``approval`` (IR-05, IR-09, IR-11).

    ``approved`` (required), ``editedArgs`` (a full replacement of the arguments,
    validated against the tool's parameter schema) and ``reason`` (required by
    Countersign when rejecting: it is sent to the agent).
    """
    tool = _tool(approval)
    edited: dict[str, Any] = {
        "description": "The arguments to run instead, replacing them whole; "
        "validated against the tool's parameters and its policy again.",
    }
    parameters = getattr(tool, "parameters", None)
    if approval.kind == ApprovalRequest.Kind.INTERRUPT:
        # The remote runs its tool: its own declared arguments, not a tool of ours
        # that may share the name (IR-11, IR-18).
        parameters = edited_args_schema(approval.response_schema)
    edited.update(parameters if isinstance(parameters, dict) else {"type": "object"})
    return {
        "type": "object",
        "properties": {
            "approved": {"type": "boolean"},
            "editedArgs": edited,
            "reason": {"type": "string", "maxLength": 2000},
        },
        "required": ["approved"],
        "additionalProperties": False,
    }


def interrupt_message(approval: ApprovalRequest) -> str:
    """Return what the held call will do, from the tool's activity label, and why it waits."""
    label = approval_label(approval) or f"Call {approval.tool_name}"
    why = (
        "it is destructive and its policy requires a person's approval"
        if approval.is_destructive
        else "its policy requires a person's approval"
    )
    return f"{label}: {approval.tool_name} waits because {why}."


def interrupt_for(approval: ApprovalRequest) -> dict[str, Any]:
    """Return ``approval`` as one AG-UI ``Interrupt`` JSON object (camelCase).

    Shape: ``{"id", "reason": "tool_call", "toolCallId", "message", "expiresAt",
    "responseSchema", "metadata": {"approvalId", "tool", "argumentsHash", "risk",
    "approvals", "approverGroups", "facts"}}`` (``facts``:
    :func:`approvals.facts.approval_facts` without a viewer).
    Implements IR-02, IR-03, IR-05.
    """
    call = approval.call
    progress = approvals_progress(approval)
    if call is None:
        # A remote agent's question or an MCP server's input request (IR-18): its
        # own message and schema, no call to hold.
        # A remote agent's own reason is kept (dispatch stores it as the request's
        # tool_name); an MCP input request's is its kind (IR-03: open strings).
        remote = approval.kind == ApprovalRequest.Kind.INTERRUPT and approval.tool_name
        return {
            "id": interrupt_id(approval),
            "reason": approval.tool_name if remote else approval.kind,
            "message": approval.message,
            "expiresAt": approval.expires_at.astimezone(UTC)
            .isoformat()
            .replace("+00:00", "Z"),
            "responseSchema": approval.response_schema or {"type": "object"},
            "metadata": {"approvalId": approval.pk, "kind": approval.kind},
        }
    return {
        "id": interrupt_id(approval),
        "reason": TOOL_CALL_REASON,
        "toolCallId": call.tool_call_id,
        "message": interrupt_message(approval),
        "expiresAt": approval.expires_at.astimezone(UTC)
        .isoformat()
        .replace("+00:00", "Z"),
        "responseSchema": response_schema(approval),
        "metadata": {
            "approvalId": approval.pk,
            "tool": approval.tool_name,
            "argumentsHash": canonical_sha256(approval.proposed_arguments),
            # The same {level, reasons} the REST API, queue and admin show.
            "risk": approval_risk(approval),
            # Governance (votes, groups): the same state the REST API shows.
            "approvals": {
                key: progress[key] for key in ("required", "given", "by", "reset")
            },
            "approverGroups": sorted(g.name for g in approval.approver_groups.all()),
            # The facts every surface shows (votes, arguments, headline), no viewer.
            "facts": approval_facts(approval),
        },
    }


def run_interrupts(run: Run) -> list[dict[str, Any]]:
    """Return the open interrupts of ``run``: its pending approval requests, in call order.

    The requests holding its pending calls, and those Countersign queued for the
    interrupts a remote agent ended ``run`` with (kind ``interrupt``, bound to a
    call or not, IR-18): the client sees every one under Countersign's own id
    and resumes it like any other. Registered with
    :func:`threads.interrupt_sources.interrupt_source_register` (approvals.apps), so the wire
    run of an ``awaiting_tools`` run ends with them (IR-01, IR-17).
    """
    pending = (
        ApprovalRequest.objects.filter(status=ApprovalRequest.Status.PENDING)
        .filter(
            Q(
                tool_call__thread_id=run.thread_id,
                tool_call__tool_call_id__in=run.pending_tool_call_ids,
            )
            | Q(run=run, kind=ApprovalRequest.Kind.INTERRUPT)
        )
        .select_related("tool_call", "run")
        .order_by(F("tool_call__position").asc(nulls_last=True), "requested_at", "id")
    )
    return [interrupt_for(a) for a in pending]
