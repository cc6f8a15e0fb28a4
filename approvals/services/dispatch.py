"""Policy dispatch: what happens to each pending call when a run ends (FT-06, SEC-01).

``auto`` → an execution record, queued; ``require_approval`` → an
:class:`ApprovalRequest`; ``deny`` → an error tool message; a name that was not
advertised for the run, arguments that do not validate, or a call cut off by the
token limit → an error tool message, never executed. The arguments are parsed and
validated once (:func:`threads.selectors.tool_call_arguments`) into a
:class:`agentcore.arguments.ValidatedArguments`; that value is what the policy, the
approval request and the execution record (params and hash) use.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from agentcore.arguments import ValidatedArguments
from agentcore.policy import PolicyDecision
from agentcore.tools import Tool, Toolset
from approvals.governance import approval_routing, call_policy
from approvals.locks import call_execution_lock
from approvals.models import ApprovalGrant, ApprovalRequest, ToolExecution
from approvals.services.audit import audit_append
from approvals.services.grants import grant_find
from approvals.services.notify import notify_approval_changed, notify_call_changed
from approvals.signals import approval_requested, send_on_commit
from approvals.transitions import AuditFact, call_transition, execution_transition
from core import tracing
from core.conf import countersign_settings
from core.types import User
from threads.agent_config import run_toolset
from threads.answers import error_content, refusal_content, tool_message_write
from threads.locks import tool_calls_lock
from threads.models import Run, ToolCall
from threads.selectors import tool_call_arguments
from threads.transitions import tool_call_transition


@dataclass(frozen=True)
class QueuedExecution:
    """An execution record that became ``queued``: the call to hand to a worker.

    ``not_before`` is the end of the decision's undo window (run then), or ``None``
    (run at once).
    """

    tool_call_pk: int
    not_before: datetime | None = None


@dataclass(frozen=True)
class Dispatched:
    """What :func:`pending_calls_route` did: the executions it queued, in call order."""

    queued: tuple[QueuedExecution, ...]


def run_tools(run: Run) -> tuple[Toolset, set[str]]:
    """Return the agent's toolset and the names advertised in ``run``'s input (FT-01)."""
    toolset = run_toolset(run)
    advertised = {
        str(t["name"])
        for t in (run.input or {}).get("tools", [])
        if isinstance(t, dict) and t.get("name")
    }
    return toolset, advertised


def call_answer_refused(
    *,
    call: ToolCall,
    status: str,
    reason: str,
    error: str,
    state: str,
    actor: User | None = None,
    content: str | None = None,
) -> bool:
    """Answer ``call`` as not executed (``status``, ``reason``) and audit it; return whether it was.

    The one way a call is refused, rejected, denied, expired, cancelled or
    answered by a person instead of running: the body is
    :func:`threads.answers.refusal_content`, or ``content`` when the caller
    wrote it (:func:`threads.answers.response_content`). ``False`` when the call
    was already answered. Must run holding the call's row lock.
    """
    written = tool_message_write(
        call=call,
        content=content
        if content is not None
        else refusal_content(status=status, reason=reason),
        error=error,
        state=state,
    )
    if written is None:
        return False
    audit_append(
        actor=actor, action=f"tool_call.{status}", target=call, after={"reason": reason}
    )
    # A call sent back to an operator after approval still has its (never run)
    # execution record queued; it is closed so nothing runs it.
    queued = call_execution_lock(call=call)
    if queued is not None and queued.state == ToolExecution.State.QUEUED:
        execution_transition(
            execution=queued, to=ToolExecution.State.FAILED, save=False
        )
        queued.error = error
        queued.save(update_fields=["state", "error"])
    return True


def execution_create(
    *,
    call: ToolCall,
    arguments: ValidatedArguments,
    authorized_by: str,
    reapproved: bool = False,
    grant: ApprovalGrant | None = None,
    not_before: datetime | None = None,
) -> QueuedExecution | None:
    """Create ``call``'s execution record with the validated ``arguments``; return it queued.

    The record keeps the value's params and its hash (``arguments_hash``); the
    executor runs that value after checking the hash, without validating again.

    ``authorized_by`` is ``"policy"``, ``"approval"`` or ``"grant"`` (then
    ``grant`` is the scoped grant, checked again at execution). With
    ``not_before`` the record keeps that time, and the caller hands it to a worker
    to run then (the undo window of an operator's decision); deliveries before it
    wait. Returns what the caller must enqueue, or ``None``. Idempotent: a
    second call finds the record and returns ``None`` (BC34) — except for a call
    approved again after a re-approval (``reapproved``): its record, still
    ``queued`` and never run, takes the newly approved arguments and is returned
    once more. Must run holding ``call``'s row lock (:mod:`threads.locks`).
    """
    # The caller holds the call's row lock, under which alone a call's execution
    # is created: no concurrent insert to catch, so no savepoint (B2).
    execution = ToolExecution.objects.filter(tool_call=call).first()
    if execution is None:
        ToolExecution.objects.create(
            tool_call=call,
            authorized_by=authorized_by,
            grant=grant,
            arguments=arguments.as_dict(),
            arguments_hash=arguments.sha256,
            idempotency_key=f"{call.thread.thread_id}:{call.tool_call_id}",
            not_before=not_before,
        )
        return QueuedExecution(tool_call_pk=call.pk, not_before=not_before)
    if (
        reapproved
        and execution.state == ToolExecution.State.QUEUED
        and execution.attempts == 0
    ):
        execution.arguments = arguments.as_dict()
        execution.arguments_hash = arguments.sha256
        execution.not_before = not_before
        execution.save(update_fields=["arguments", "arguments_hash", "not_before"])
        return QueuedExecution(tool_call_pk=call.pk, not_before=not_before)
    return None


def approval_request_open(
    *,
    call: ToolCall,
    tool: Tool,
    arguments: dict[str, Any],
    decision: PolicyDecision | None = None,
    **fields: Any,
) -> ApprovalRequest:
    """Create ``call``'s pending approval request for ``arguments`` and return it.

    Routed as the policy ``decision`` says (approver groups, N of M, expiry,
    escalation, risk: :func:`approvals.governance.approval_routing`); without
    one (a re-approval) the call's policy is evaluated again, and one approval
    by anyone allowed is asked when it no longer requires approval. ``fields``
    sets further columns (a re-approval's link and context). The caller moves the
    call to ``awaiting_approval`` and audits. Must run holding the call's row lock.
    """
    if decision is None or decision.action != "require_approval":
        decision = call_policy(
            thread=call.thread, agent=call.run.agent, tool=tool, arguments=arguments
        )
        if decision.action != "require_approval":
            decision = PolicyDecision(
                action="require_approval", requester_may_approve=True
            )
    routing, groups = approval_routing(decision=decision, tool=tool)
    with tracing.approval_request_span(
        tool_name=tool.name, tool_call_id=call.tool_call_id
    ) as trace_context:
        approval = ApprovalRequest.objects.create(
            tool_call=call,
            thread_id=call.thread_id,
            run=call.run,
            tool_name=tool.name,
            is_destructive=bool(tool.is_destructive),
            requested_by=call.thread.owner,
            proposed_arguments=arguments,
            trace_context=trace_context,
            **{"schema_valid": True, **routing, **fields},
        )
    approval.approver_groups.set(groups)
    send_on_commit(approval_requested, approval)
    return approval


def pending_calls_route(*, run: Run) -> Dispatched:
    """Apply each pending call's policy after ``run`` finished with calls pending.

    ``auto`` → queued for execution; ``require_approval`` → an approval request
    expiring after the tool's (or the default) approval timeout; ``deny`` → an
    error tool message; a name that was not advertised for the run, arguments
    that do not validate, or a call cut off by the token limit → an error tool
    message, never executed. Policies that depend on the arguments are evaluated
    on the validated arguments. A run whose cancellation was requested gets every
    pending call answered as cancelled instead. Idempotent (only ``pending`` calls
    are handled). Returns the executions it queued; enqueueing them and continuing
    the run are the caller's (:func:`orchestration.pipeline.pending_calls_dispatch`),
    in the same transaction.
    Implements FT-06, SEC-01, SEC-04, LP-01.
    """
    toolset, advertised = run_tools(run)
    bound = [i["toolCallId"] for i in run.interrupts or [] if i.get("toolCallId")]
    queued: list[QueuedExecution] = []
    # No savepoint of its own: the caller's transaction holds the continuation too.
    with transaction.atomic(savepoint=False):
        _, calls = tool_calls_lock(
            thread_pk=run.thread_id,
            calls=ToolCall.objects.filter(
                thread_id=run.thread_id,
                tool_call_id__in=[*run.pending_tool_call_ids, *bound],
            ),
        )
        by_id = {c.tool_call_id: c for c in calls}
        # Read under the thread's lock: a cancel takes it too (client_run_cancel).
        cancelled = Run.objects.filter(pk=run.pk, cancel_requested=True).exists()
        for call_id in run.pending_tool_call_ids:
            call = by_id.get(call_id)
            if call is None or call.state != ToolCall.State.PENDING:
                continue
            if cancelled:
                # Cancelled while its agent was finishing (client_run_cancel): the
                # calls it handed over are answered as cancelled, never run or held.
                call_answer_refused(
                    call=call,
                    status="cancelled",
                    reason="the run was cancelled before this call ran",
                    error="cancelled",
                    state=ToolCall.State.CANCELLED,
                )
                continue
            execution = _dispatch_one(
                call=call, run=run, toolset=toolset, advertised=advertised
            )
            if execution is not None:
                queued.append(execution)
        for interrupt in run.interrupts or []:
            interrupt_request_create(
                run=run,
                interrupt=interrupt,
                call=by_id.get(interrupt.get("toolCallId")),
            )
    return Dispatched(queued=tuple(queued))


def interrupt_request_create(
    *, run: Run, interrupt: dict[str, Any], call: ToolCall | None
) -> ApprovalRequest | None:
    """Queue one approval request for ``interrupt`` (AG-UI ``Interrupt`` JSON) of ``run``.

    A tool-bound interrupt (``toolCallId``, ``call`` locked by the caller) shows the
    call and its arguments and moves the call to ``awaiting_approval``; any other
    shows its ``message`` and a form from its ``responseSchema``. It expires at the
    interrupt's ``expiresAt`` or after the default approval timeout. Idempotent:
    returns ``None`` when the interrupt already has its request. Implements IR-18.
    """
    interrupt_id = str(interrupt.get("id") or "")
    if ApprovalRequest.objects.filter(run=run, interrupt_id=interrupt_id).exists():
        return None
    default_expiry = timezone.now() + timedelta(
        seconds=float(countersign_settings.APPROVAL_TIMEOUT_SECONDS)
    )
    expires_at = parse_datetime(str(interrupt.get("expiresAt") or "")) or default_expiry
    arguments = call.arguments if call is not None else None
    approval = ApprovalRequest.objects.create(
        kind=ApprovalRequest.Kind.INTERRUPT,
        tool_call=call,
        thread_id=run.thread_id,
        run=run,
        tool_name=call.name if call is not None else str(interrupt.get("reason", "")),
        interrupt_id=interrupt_id,
        message=str(interrupt.get("message") or ""),
        response_schema=interrupt.get("responseSchema"),
        requested_by=run.thread.owner,
        expires_at=expires_at,
        proposed_arguments=arguments if isinstance(arguments, dict) else {},
        schema_valid=True,
    )
    if call is not None and call.state == ToolCall.State.PENDING:
        tool_call_transition(call=call, to=ToolCall.State.AWAITING_APPROVAL)
    audit_append(
        actor=None,
        action="approval.requested",
        target=approval,
        after={"interrupt": interrupt},
    )
    notify_approval_changed(approval, call=call)
    send_on_commit(approval_requested, approval)
    return approval


def _dispatch_one(
    *, call: ToolCall, run: Run, toolset: Toolset, advertised: set[str]
) -> QueuedExecution | None:
    resolved = toolset.resolve(call.name)
    if resolved is None and call.name in advertised:
        # An AG-UI client's own frontend tool: the client answers it with a
        # tool message in its next input (FT-02, FT-06). Left pending.
        return None
    tool: Tool | None = (
        resolved if resolved is not None and resolved.name in advertised else None
    )
    if tool is None or tool.runs_on != "application":
        call_answer_refused(
            call=call,
            status="refused",
            reason=f"tool {call.name!r} was not offered in this run; "
            f"available tools: {sorted(advertised)}",
            error="unknown_tool",
            state=ToolCall.State.FAILED,
        )
        notify_call_changed(call)
        return None
    parsed = tool_call_arguments(call=call, tool=tool)
    if parsed.value is None:
        tool_message_write(
            call=call,
            content=error_content(error=parsed.error_type, detail=parsed.error),
            error=parsed.error_type,
            state=ToolCall.State.FAILED,
        )
        audit_append(
            actor=None,
            action="tool_call.invalid_arguments",
            target=call,
            after={"detail": parsed.error},
        )
        notify_call_changed(call)
        return None
    value = parsed.value
    arguments = value.as_dict()
    decision = call_policy(
        thread=call.thread, agent=run.agent, tool=tool, arguments=arguments
    )
    grant = (
        grant_find(
            tool=tool,
            agent=run.agent,
            thread=call.thread,
            arguments=arguments,
            decision=decision,
        )
        if decision.action == "require_approval"
        else None
    )
    if decision.action == "deny":
        call_answer_refused(
            call=call,
            status="denied",
            reason=decision.reason
            or f"policy refuses {tool.name!r} calls; do not retry it",
            error="policy_denied",
            state=ToolCall.State.DECLINED,
        )
        notify_call_changed(call)
        return None
    if decision.action == "auto" or grant is not None:
        queued = execution_create(
            call=call,
            arguments=value,
            authorized_by="policy" if grant is None else "grant",
            grant=grant,
        )
        call_transition(
            call=call,
            to=ToolCall.State.APPROVED,
            audit=AuditFact(
                action="tool_call.auto_approved"
                if grant is None
                else "tool_call.granted",
                after={
                    "arguments": parsed.params,
                    "policy_source": decision.source,
                    "grant": grant.pk if grant is not None else None,
                },
            ),
            notify=True,
        )
        return queued
    approval = approval_request_open(
        call=call, tool=tool, arguments=arguments, decision=decision
    )
    call_transition(
        call=call,
        to=ToolCall.State.AWAITING_APPROVAL,
        audit=AuditFact(
            action="approval.requested",
            target=approval,
            after={
                "arguments": parsed.params,
                "tool": tool.name,
                "policy_source": decision.source,
                "groups": list(decision.groups),
                "approvals_required": decision.approvals_required,
                "risk_level": decision.risk_level,
                "risk_reason": decision.risk_reason,
            },
        ),
        notify=True,
        approval=approval,
    )
    return None
