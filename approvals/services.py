"""The approval workflow: from a pending call to exactly one tool message.

When a run ends with pending application calls, :func:`pending_calls_dispatch`
applies each tool's policy (``auto`` → executed at once, ``require_approval`` → an
:class:`ApprovalRequest`, ``deny`` → an error tool message, unadvertised name →
an error tool message, never executed). Operators decide with
:func:`approval_decide`; :func:`tool_call_execute` runs an approved call exactly
once; every answer goes through :func:`tool_message_write` (one per call, enforced
by a unique constraint); when a run's calls are all answered,
:func:`continuation_maybe_start` starts exactly one continuation run.

Rows are locked in one order: thread, then tool call, then approval/execution.
Implements FT-03..FT-06, SEC-01, SEC-02, SEC-04, LP-01, LP-05..LP-08, DC-03, DC-04.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from datetime import timedelta
from typing import Any, Literal

from django.db import IntegrityError, transaction
from django.utils import timezone

from approvals.exceptions import (
    ApprovalAlreadyDecided,
    ApprovalExpired,
    ApprovalPermissionDenied,
    ExecutionInProgress,
    InvalidEditedArguments,
    ReasonRequired,
)
from approvals.models import (
    ApprovalRequest,
    AuditChainHead,
    AuditEntry,
    ToolExecution,
    arguments_hash,
)
from threads.conf import countersign_settings
from threads.models import Message, Run, Thread, ToolCall
from threads.services import APPLICATION_SOURCE
from threads.validation import storable

logger = logging.getLogger(__name__)

Decision = Literal["approve", "reject"]
DECIDE_PERMISSION = "approvals.decide_approvalrequest"
APPROVALS_GROUP = "approvals"


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# -- audit ---------------------------------------------------------------------


def audit_append(
    *,
    actor: Any,
    action: str,
    target: Any,
    before: Any = None,
    after: Any = None,
) -> AuditEntry:
    """Append an audit entry chained to the previous one; return it.

    ``actor`` is a user or ``None`` (the system); ``target`` a model instance.
    Appends are serialized by locking the chain head row.
    """
    with transaction.atomic():
        head, _ = AuditChainHead.objects.select_for_update().get_or_create(pk=1)
        entry = AuditEntry(
            actor=actor if getattr(actor, "pk", None) else None,
            actor_label=getattr(actor, "username", None) or "system",
            action=action,
            target_type=target._meta.label_lower,
            target_id=str(target.pk),
            before=before,
            after=after,
            created_at=timezone.now(),
            prev_hash=head.last_hash,
        )
        entry.hash = entry.compute_hash()
        entry.save()
        head.last_hash = entry.hash
        head.save(update_fields=["last_hash"])
    return entry


def audit_verify() -> list[int]:
    """Return the ids of audit entries whose hash or chain link does not match (empty = intact)."""
    broken: list[int] = []
    previous = "0" * 64
    for entry in AuditEntry.objects.order_by("id"):
        if entry.prev_hash != previous or entry.compute_hash() != entry.hash:
            broken.append(entry.pk)
        previous = entry.hash
    return broken


# -- notifications ---------------------------------------------------------------


def approval_snapshot(approval: ApprovalRequest) -> dict[str, Any]:
    """Return the JSON shape of ``approval`` sent to browsers and the REST API."""
    from approvals.labels import approval_label

    return {
        "id": approval.pk,
        "toolCallId": approval.tool_call.tool_call_id,
        "threadId": approval.thread.thread_id,
        "tool": approval.tool_name,
        "label": approval_label(approval),
        "status": approval.status,
        "isDestructive": approval.is_destructive,
        "proposedArguments": approval.proposed_arguments,
        "editedArguments": approval.edited_arguments,
        "schemaValid": approval.schema_valid,
        "schemaErrors": approval.schema_errors,
        "requestedAt": approval.requested_at.isoformat()
        if approval.requested_at
        else None,
        "expiresAt": approval.expires_at.isoformat(),
        "decidedBy": getattr(approval.decided_by, "username", None),
        "decidedAt": approval.decided_at.isoformat() if approval.decided_at else None,
        "reason": approval.reason,
    }


def notify_call_changed(
    call: ToolCall, *, approval: ApprovalRequest | None = None
) -> None:
    """After commit, tell browsers watching the call's thread and the queue what changed.

    These are application notifications (``{"kind": "notification", ...}``), kept
    apart from the thread's AG-UI event log.
    """
    from threads.realtime import group_send
    from threads.services import thread_group_name

    payload = {
        "kind": "notification",
        "type": "tool_call.state",
        "toolCallId": call.tool_call_id,
        "state": call.state,
        "approval": approval_snapshot(approval) if approval is not None else None,
    }
    thread_pk = call.thread_id

    def send() -> None:
        group_send(
            thread_group_name(thread_pk),
            {"type": "thread.notification", "payload": payload},
        )
        if approval is not None:
            group_send(
                APPROVALS_GROUP, {"type": "approvals.changed", "payload": payload}
            )

    transaction.on_commit(send, robust=True)


# -- answering calls ---------------------------------------------------------------


def tool_message_write(
    *,
    call: ToolCall,
    content: str | list[dict[str, Any]],
    error: str | None,
    state: str,
) -> Message | None:
    """Write the one tool message answering ``call``; return it, or ``None`` if answered.

    The unique constraint on (thread, toolCallId) for tool messages makes a second
    answer impossible, whatever the timing (DC-04, FT-06). Sets the call's state.
    Must run inside a transaction holding the call's row lock.
    """
    if Message.objects.filter(
        thread_id=call.thread_id, role=Message.Role.TOOL, tool_call_id=call.tool_call_id
    ).exists():
        return None
    thread = Thread.objects.get(pk=call.thread_id)
    try:
        with transaction.atomic():
            message = Message.objects.create(
                thread=thread,
                message_id=f"result-{call.tool_call_id}",
                role=Message.Role.TOOL,
                content=storable(content, what=f"result of {call.tool_call_id}"),
                metadata={"source": APPLICATION_SOURCE},
                tool_call_id=call.tool_call_id,
                error=error,
                run=None,
                position=thread.next_seq,
            )
    except IntegrityError:
        return None
    call.state = state
    call.save(update_fields=["state", "updated_at"])
    return message


def _answer_refused(
    *, call: ToolCall, status: str, reason: str, error: str, state: str
) -> None:
    content = _compact({"status": status, "reason": reason, "executed": False})
    if (
        tool_message_write(call=call, content=content, error=error, state=state)
        is not None
    ):
        audit_append(
            actor=None,
            action=f"tool_call.{status}",
            target=call,
            after={"reason": reason},
        )


def _run_tools(run: Run) -> tuple[Any, set[str]]:
    """Return the agent's toolset and the names advertised in ``run``'s input (FT-01)."""
    from threads.agent_config import agent_toolset

    toolset = agent_toolset(run.agent)
    advertised = {
        t.get("name") for t in (run.input or {}).get("tools", []) if isinstance(t, dict)
    }
    return toolset, advertised


def pending_calls_dispatch(*, run: Run) -> None:
    """Apply each pending call's policy after ``run`` finished with calls pending.

    ``auto`` → queued for execution; ``require_approval`` → an approval request
    expiring after the tool's (or the default) approval timeout; ``deny`` → an
    error tool message; a name that was not advertised for the run, arguments
    that do not validate, or a call cut off by the token limit → an error tool
    message, never executed. Policies that depend on the arguments are evaluated
    on the validated arguments. Implements FT-06, SEC-01, SEC-04, LP-01.
    """
    from agentcore.arguments import parse_arguments

    toolset, advertised = _run_tools(run)
    with transaction.atomic():
        Thread.objects.select_for_update().get(pk=run.thread_id)
        for call_id in run.pending_tool_call_ids:
            call = ToolCall.objects.select_for_update().get(
                thread_id=run.thread_id, tool_call_id=call_id
            )
            if call.state != ToolCall.State.PENDING:
                continue
            resolved = toolset.resolve(call.name)
            if resolved is None and call.name in advertised:
                # An AG-UI client's own frontend tool: the client answers it with a
                # tool message in its next input (FT-02, FT-06). Left pending.
                continue
            tool = (
                resolved
                if resolved is not None and resolved.name in advertised
                else None
            )
            if tool is None or tool.runs_on != "application":
                available = sorted(advertised)
                _answer_refused(
                    call=call,
                    status="refused",
                    reason=f"tool {call.name!r} was not offered in this run; "
                    f"available tools: {available}",
                    error="unknown_tool",
                    state=ToolCall.State.FAILED,
                )
                notify_call_changed(call)
                continue
            truncated = bool((call.metadata or {}).get("truncated"))
            parsed = parse_arguments(
                call.arguments_text, tool=tool, truncated=truncated
            )
            if not parsed.ok:
                content = _compact({"error": parsed.error_type, "detail": parsed.error})
                tool_message_write(
                    call=call,
                    content=content,
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
                continue
            policy = tool.policy_for(parsed.params or {})
            if policy == "deny":
                _answer_refused(
                    call=call,
                    status="denied",
                    reason=f"policy refuses {tool.name!r} calls; do not retry it",
                    error="policy_denied",
                    state=ToolCall.State.DECLINED,
                )
                notify_call_changed(call)
            elif policy == "auto":
                _execution_create(
                    call=call, arguments=parsed.params or {}, authorized_by="policy"
                )
                call.state = ToolCall.State.APPROVED
                call.save(update_fields=["state", "updated_at"])
                audit_append(
                    actor=None,
                    action="tool_call.auto_approved",
                    target=call,
                    after={"arguments": parsed.params},
                )
                notify_call_changed(call)
            else:
                timeout = getattr(tool, "approval_timeout", None) or float(
                    countersign_settings.APPROVAL_TIMEOUT_SECONDS
                )
                approval = ApprovalRequest.objects.create(
                    tool_call=call,
                    thread_id=call.thread_id,
                    run=run,
                    tool_name=tool.name,
                    is_destructive=bool(tool.is_destructive),
                    requested_by=run.thread.owner,
                    expires_at=timezone.now() + timedelta(seconds=timeout),
                    proposed_arguments=parsed.params or {},
                    schema_valid=True,
                )
                call.state = ToolCall.State.AWAITING_APPROVAL
                call.save(update_fields=["state", "updated_at"])
                audit_append(
                    actor=None,
                    action="approval.requested",
                    target=approval,
                    after={"arguments": parsed.params, "tool": tool.name},
                )
                notify_call_changed(call, approval=approval)
        continuation_maybe_start(run=run)


def _execution_create(
    *, call: ToolCall, arguments: dict[str, Any], authorized_by: str
) -> None:
    from threads.execution import enqueue

    execution, created = ToolExecution.objects.get_or_create(
        tool_call=call,
        defaults={
            "authorized_by": authorized_by,
            "arguments": arguments,
            "arguments_hash": arguments_hash(arguments),
            "idempotency_key": f"{call.thread.thread_id}:{call.tool_call_id}",
        },
    )
    if created:
        enqueue("approvals.tasks.execute_tool_call", tool_call_pk=call.pk)


# -- deciding ------------------------------------------------------------------


def approval_decide(
    *,
    approval: ApprovalRequest,
    decided_by: Any,
    decision: Decision,
    reason: str = "",
    edited_arguments: dict[str, Any] | None = None,
) -> ApprovalRequest:
    """Record an operator's decision on ``approval`` and act on it; return the request.

    Approve: the arguments (edited ones re-validated against the schema, SEC-02)
    are hashed and the call queued for execution after commit. Reject: the call is
    answered with a tool message saying an operator declined it and why. A repeated
    identical decision returns the request unchanged and enqueues nothing (BC34).

    Raises :class:`ApprovalPermissionDenied` without ``approvals.decide_approvalrequest``,
    :class:`ApprovalAlreadyDecided` when decided otherwise, :class:`ApprovalExpired`
    when it expired (it is answered as expired), :class:`ReasonRequired` for a
    rejection without a reason, :class:`InvalidEditedArguments` for edits that fail
    the schema. Implements SEC-02, DC-03, DC-04, FT-06.
    """
    if not getattr(decided_by, "is_active", False) or not decided_by.has_perm(
        DECIDE_PERMISSION
    ):
        raise ApprovalPermissionDenied(
            f"user {getattr(decided_by, 'username', None)!r} may not decide tool calls; "
            f"ask an administrator for the {DECIDE_PERMISSION!r} permission"
        )
    if decision == "reject" and not reason.strip():
        raise ReasonRequired(
            "give a reason when rejecting a call; it is sent to the agent"
        )
    expired = False
    with transaction.atomic():
        Thread.objects.select_for_update().get(pk=approval.thread_id)
        call = ToolCall.objects.select_for_update().get(pk=approval.tool_call_id)
        locked = ApprovalRequest.objects.select_for_update().get(pk=approval.pk)
        target_status = (
            ApprovalRequest.Status.APPROVED
            if decision == "approve"
            else ApprovalRequest.Status.REJECTED
        )
        if locked.status != ApprovalRequest.Status.PENDING:
            if locked.status == target_status and (
                edited_arguments is None or edited_arguments == locked.edited_arguments
            ):
                return locked
            raise ApprovalAlreadyDecided(
                f"approval {locked.pk!r} was already {locked.status!r}"
                + (f" by {locked.decided_by.username!r}" if locked.decided_by else "")
                + "; reload the queue"
            )
        if locked.expires_at <= timezone.now():
            _expire_locked(locked, call)
            expired = True
        else:
            before = {"status": locked.status}
            if decision == "approve":
                arguments = locked.proposed_arguments
                if edited_arguments is not None:
                    arguments = _validate_edit(
                        call=call, run=locked.run, edited=edited_arguments
                    )
                    if arguments != locked.proposed_arguments:
                        locked.edited_arguments = arguments
                locked.approved_arguments_hash = arguments_hash(arguments)
                locked.status = ApprovalRequest.Status.APPROVED
                locked.reason = reason
                call.state = ToolCall.State.APPROVED
                call.save(update_fields=["state", "updated_at"])
                _execution_create(
                    call=call, arguments=arguments, authorized_by="approval"
                )
            else:
                locked.status = ApprovalRequest.Status.REJECTED
                locked.reason = reason
                _answer_refused(
                    call=call,
                    status="rejected",
                    reason=reason,
                    error="declined_by_operator",
                    state=ToolCall.State.DECLINED,
                )
            locked.decided_by = decided_by
            locked.decided_at = timezone.now()
            locked.save()
            audit_append(
                actor=decided_by,
                action=f"approval.{locked.status}",
                target=locked,
                before=before,
                after={
                    "status": locked.status,
                    "reason": reason,
                    "proposed_arguments": locked.proposed_arguments,
                    "edited_arguments": locked.edited_arguments,
                    "approved_arguments_hash": locked.approved_arguments_hash,
                },
            )
        notify_call_changed(call, approval=locked)
        if expired or decision == "reject":
            continuation_maybe_start(run=locked.run)
    if expired:
        raise ApprovalExpired(
            f"approval {locked.pk!r} expired at {locked.expires_at.isoformat()}; "
            "the agent was told it expired"
        )
    return locked


def _validate_edit(*, call: ToolCall, run: Run, edited: Any) -> dict[str, Any]:
    from agentcore.arguments import parse_arguments

    if not isinstance(edited, dict):
        raise InvalidEditedArguments(
            f"edited arguments must be a JSON object, not {type(edited).__name__}"
        )
    toolset, _ = _run_tools(run)
    tool = toolset.resolve(call.name)
    if tool is None:
        raise InvalidEditedArguments(f"tool {call.name!r} is no longer configured")
    parsed = parse_arguments(json.dumps(edited), tool=tool)
    if not parsed.ok or parsed.repair:
        # The validator's message is written for the model; an operator needs only
        # what is wrong, not the advice to "call the tool again".
        detail = (parsed.error or "").split(" Expected parameters:")[0]
        raise InvalidEditedArguments(f"edited arguments are invalid: {detail}")
    return parsed.params or {}


def _expire_locked(approval: ApprovalRequest, call: ToolCall) -> None:
    approval.status = ApprovalRequest.Status.EXPIRED
    approval.decided_at = timezone.now()
    approval.save(update_fields=["status", "decided_at"])
    _answer_refused(
        call=call,
        status="expired",
        reason=f"no operator decided before {approval.expires_at.isoformat()}",
        error="approval_expired",
        state=ToolCall.State.EXPIRED,
    )
    audit_append(
        actor=None,
        action="approval.expired",
        target=approval,
        before={"status": "pending"},
        after={"status": "expired"},
    )
    notify_call_changed(call, approval=approval)


def approvals_expire(*, now: Any = None) -> int:
    """Expire every pending request past its ``expires_at``; return how many expired.

    Each expired call is answered with an error tool message so its thread can
    continue. Called periodically by Celery beat; expiry is checked again at
    decision time.
    """
    now = now or timezone.now()
    count = 0
    for pk in list(
        ApprovalRequest.objects.filter(
            status=ApprovalRequest.Status.PENDING, expires_at__lte=now
        ).values_list("pk", flat=True)
    ):
        with transaction.atomic():
            approval = ApprovalRequest.objects.select_related("run").get(pk=pk)
            Thread.objects.select_for_update().get(pk=approval.thread_id)
            call = ToolCall.objects.select_for_update().get(pk=approval.tool_call_id)
            approval = ApprovalRequest.objects.select_for_update().get(pk=pk)
            if approval.status == ApprovalRequest.Status.PENDING:
                _expire_locked(approval, call)
                count += 1
                continuation_maybe_start(run=approval.run)
    return count


# -- executing -------------------------------------------------------------------


class _CrashForTest(BaseException):
    """Raised only under COUNTERSIGN_TEST_CRASH_AFTER_RESERVATION (a test hook)."""


def tool_call_execute(*, tool_call_pk: int) -> ToolExecution | None:
    """Execute an approved (or auto-approved) application call exactly once.

    Under the call's row lock: refuse anything not approved or already answered,
    check that the arguments are exactly those approved (hash) and re-validate
    them, check the permission the tool requires, and commit a reservation before
    the side effect. Then run the tool with its timeout and an idempotency key
    derived from thread and ``toolCallId`` (handed to the tool, never to the
    model), record the outcome and write the one tool message. A reservation
    found by a later delivery means a worker died mid-call: idempotent tools run
    again with the same key; others become ``outcome_unknown`` for an operator.
    Implements DC-04, LP-01, LP-05, LP-07, LP-08, BC32, BC34.
    """
    from threads.janitor import tool_call_log_context

    with tool_call_log_context(tool_call_pk=tool_call_pk):
        return _tool_call_execute(tool_call_pk=tool_call_pk)


def _tool_call_execute(*, tool_call_pk: int) -> ToolExecution | None:
    from agentcore.dispatch import ToolCallRequest, execute_call
    from agentcore.tools import ToolContext

    thread_pk = ToolCall.objects.values_list("thread_id", flat=True).get(
        pk=tool_call_pk
    )
    with transaction.atomic():
        Thread.objects.select_for_update().get(pk=thread_pk)
        call = (
            ToolCall.objects.select_for_update()
            .select_related("thread", "run")
            .get(pk=tool_call_pk)
        )
        execution = (
            ToolExecution.objects.select_for_update().filter(tool_call=call).first()
        )
        if execution is None:
            logger.warning(
                "call %s has no execution record; refusing", call.tool_call_id
            )
            return None
        answered = Message.objects.filter(
            thread_id=call.thread_id,
            role=Message.Role.TOOL,
            tool_call_id=call.tool_call_id,
        ).exists()
        if answered or execution.state in (
            ToolExecution.State.SUCCEEDED,
            ToolExecution.State.FAILED,
            ToolExecution.State.OUTCOME_UNKNOWN,
            ToolExecution.State.RESOLVED,
        ):
            return execution
        toolset, _ = _run_tools(call.run)
        tool = toolset.resolve(call.name)
        if execution.state == ToolExecution.State.RESERVED:
            now = timezone.now()
            if (
                execution.lease_expires_at is not None
                and now < execution.lease_expires_at
            ):
                raise ExecutionInProgress(
                    f"call {call.tool_call_id!r} is being executed by another delivery",
                    retry_after=min(
                        (execution.lease_expires_at - now).total_seconds(), 5.0
                    )
                    + 0.1,
                )
        if execution.state == ToolExecution.State.RESERVED and not (
            tool and tool.idempotent
        ):
            execution.state = ToolExecution.State.OUTCOME_UNKNOWN
            execution.save(update_fields=["state"])
            call.state = ToolCall.State.OUTCOME_UNKNOWN
            call.save(update_fields=["state", "updated_at"])
            audit_append(
                actor=None,
                action="execution.outcome_unknown",
                target=execution,
                after={"attempts": execution.attempts},
            )
            notify_call_changed(call, approval=getattr(call, "approval", None))
            return execution
        refusal = _execution_refusal(call=call, execution=execution, tool=tool)
        if refusal is not None:
            execution.state = ToolExecution.State.FAILED
            execution.error = "refused"
            execution.save(update_fields=["state", "error"])
            tool_message_write(
                call=call,
                content=_compact({"error": "refused", "detail": refusal}),
                error="refused",
                state=ToolCall.State.FAILED,
            )
            audit_append(
                actor=None,
                action="execution.refused",
                target=execution,
                after={"detail": refusal},
            )
            notify_call_changed(call)
            continuation_maybe_start(run=call.run)
            return execution
        execution.state = ToolExecution.State.RESERVED
        execution.attempts += 1
        execution.started_at = timezone.now()
        execution.lease_expires_at = execution.started_at + timedelta(
            seconds=float(tool.timeout or 60)
            + float(countersign_settings.EXECUTION_LEASE_GRACE_SECONDS)
        )
        execution.save(
            update_fields=["state", "attempts", "started_at", "lease_expires_at"]
        )
        call.state = ToolCall.State.EXECUTING
        call.save(update_fields=["state", "updated_at"])
        audit_append(
            actor=None,
            action="execution.reserved",
            target=execution,
            after={"attempt": execution.attempts},
        )
        notify_call_changed(call)
    crash_hook = os.environ.get("COUNTERSIGN_TEST_CRASH_AFTER_RESERVATION")
    if crash_hook == "1":
        os._exit(17)  # test hook: a worker killed between reservation and the tool

    # The tool's permission was checked above, against whoever authorized the call;
    # the runtime gets no user object (its ORM is not usable from the tool's loop).
    owner = call.thread.owner
    context = ToolContext(
        thread_id=call.thread.thread_id,
        run_id=call.run.run_id,
        tool_call_id=call.tool_call_id,
        idempotency_key=execution.idempotency_key,
        user=None,
        extras={
            "owner": getattr(owner, "username", None),
            "authorized_by": execution.authorized_by,
        },
    )
    request = ToolCallRequest(
        tool_call_id=call.tool_call_id, name=call.name, arguments=execution.arguments
    )
    result = asyncio.run(
        execute_call(request, tool=tool, toolset=toolset, context=context)
    )
    if crash_hook == "after_tool":
        os._exit(
            17
        )  # test hook: a worker killed between the side effect and the outcome

    with transaction.atomic():
        Thread.objects.select_for_update().get(pk=thread_pk)
        call = ToolCall.objects.select_for_update().get(pk=tool_call_pk)
        execution = ToolExecution.objects.select_for_update().get(pk=execution.pk)
        if execution.state not in (
            ToolExecution.State.RESERVED,
            ToolExecution.State.OUTCOME_UNKNOWN,
        ):
            return execution  # a late duplicate: the outcome was already recorded
        # OUTCOME_UNKNOWN here means a redelivery gave up on this (slow, not dead)
        # execution meanwhile: the outcome is known now, so it is recorded.
        execution.state = (
            ToolExecution.State.SUCCEEDED
            if result.error is None
            else ToolExecution.State.FAILED
        )
        execution.error = result.error or ""
        execution.details = result.details
        execution.finished_at = timezone.now()
        execution.save(update_fields=["state", "error", "details", "finished_at"])
        tool_message_write(
            call=call,
            content=result.content,
            error=result.error,
            state=ToolCall.State.SUCCEEDED
            if result.error is None
            else ToolCall.State.FAILED,
        )
        audit_append(
            actor=None,
            action=f"execution.{execution.state}",
            target=execution,
            after={"error": result.error, "details": result.details},
        )
        notify_call_changed(call, approval=getattr(call, "approval", None))
        continuation_maybe_start(run=call.run)
    return execution


def _execution_refusal(
    *, call: ToolCall, execution: ToolExecution, tool: Any
) -> str | None:
    """Return why ``execution`` must not run, or ``None`` when it may (SEC-02, LP-01)."""
    if tool is None:
        return f"tool {call.name!r} is no longer configured"
    from threads.mcp_servers import schema_change_refusal

    changed = schema_change_refusal(run_input=call.run.input, tool=tool)
    if changed is not None:
        return changed
    if execution.authorized_by == "approval":
        approval = ApprovalRequest.objects.filter(tool_call=call).first()
        if approval is None or approval.status != ApprovalRequest.Status.APPROVED:
            return "the call was not approved"
        if (
            approval.approved_arguments_hash != execution.arguments_hash
            or arguments_hash(execution.arguments) != execution.arguments_hash
        ):
            return "the arguments differ from the ones an operator approved"
    elif execution.authorized_by == "policy":
        if tool.policy_for(execution.arguments) != "auto":
            return "the tool's policy requires approval for these arguments"
    else:
        return f"unknown authorization {execution.authorized_by!r}"
    from agentcore.arguments import parse_arguments

    parsed = parse_arguments(json.dumps(execution.arguments), tool=tool)
    if not parsed.ok or parsed.params != execution.arguments:
        return f"the arguments no longer validate: {parsed.error}"
    permission = getattr(tool, "permission", None)
    if permission:
        # The person who authorized the side effect must hold the tool's permission:
        # the approver for approved calls, the thread's owner for auto-approved ones.
        if execution.authorized_by == "approval":
            who = ApprovalRequest.objects.get(tool_call=call).decided_by
            role = "approver"
        else:
            who = call.thread.owner
            role = "thread's owner"
        if who is None or not who.has_perm(permission):
            return f"the {role} lacks the permission {permission!r} this tool requires"
    return None


def execution_resolve(
    *, tool_call: ToolCall, resolved_by: Any, succeeded: bool, content: str, reason: str
) -> ToolExecution:
    """Answer an ``outcome_unknown`` call as an operator determined it; return the execution.

    Raises :class:`ApprovalPermissionDenied` without the decide permission and
    :class:`ApprovalAlreadyDecided` when the call is not ``outcome_unknown``.
    """
    if not resolved_by.has_perm(DECIDE_PERMISSION):
        raise ApprovalPermissionDenied(
            "resolving an execution needs the decide permission"
        )
    with transaction.atomic():
        Thread.objects.select_for_update().get(pk=tool_call.thread_id)
        call = ToolCall.objects.select_for_update().get(pk=tool_call.pk)
        execution = (
            ToolExecution.objects.select_for_update().filter(tool_call=call).first()
        )
        if execution is None or execution.state != ToolExecution.State.OUTCOME_UNKNOWN:
            found = execution.state if execution is not None else "not executed"
            raise ApprovalAlreadyDecided(
                f"call {call.tool_call_id!r} is {found!r}, not outcome_unknown; "
                "only a call whose execution outcome is unknown can be resolved"
            )
        execution.state = ToolExecution.State.RESOLVED
        execution.save(update_fields=["state"])
        tool_message_write(
            call=call,
            content=content,
            error=None if succeeded else "outcome_unknown",
            state=ToolCall.State.SUCCEEDED if succeeded else ToolCall.State.FAILED,
        )
        audit_append(
            actor=resolved_by,
            action="execution.resolved",
            target=execution,
            after={"succeeded": succeeded, "content": content, "reason": reason},
        )
        notify_call_changed(call)
        continuation_maybe_start(run=call.run)
    return execution


def thread_pending_calls_cancel(
    *, thread: Thread, cancelled_by: Any, reason: str
) -> list[str]:
    """Abandon every unanswered call of ``thread``'s last run; return their ``toolCallId`` values.

    Each call is answered with a tool message saying it was cancelled and why
    (FT-06: the next run still gets one tool message per call); pending approval
    requests become ``cancelled``; calls already executing are left to finish.
    No continuation run starts: the user moves on with a new message. The thread's
    owner, staff, or a holder of the decide permission may do this; others get
    :class:`ApprovalPermissionDenied`. Implements FT-06, BC20, BC21.
    """
    allowed = (
        getattr(cancelled_by, "is_staff", False)
        or cancelled_by.has_perm(DECIDE_PERMISSION)
        or thread.owner_id == getattr(cancelled_by, "pk", None)
    )
    if not allowed:
        raise ApprovalPermissionDenied(
            "only the thread's owner or an operator may cancel its calls"
        )
    cancelled: list[str] = []
    with transaction.atomic():
        locked_thread = Thread.objects.select_for_update().get(pk=thread.pk)
        run = locked_thread.runs.order_by("-created_at", "-id").first()
        if run is None or run.status != Run.Status.AWAITING_TOOLS:
            return []
        for call in (
            ToolCall.objects.select_for_update()
            .filter(thread=locked_thread, tool_call_id__in=run.pending_tool_call_ids)
            .order_by("position")
        ):
            if call.state in (
                ToolCall.State.APPROVED,
                ToolCall.State.EXECUTING,
                ToolCall.State.OUTCOME_UNKNOWN,
            ):
                continue
            approval = (
                ApprovalRequest.objects.select_for_update()
                .filter(tool_call=call)
                .first()
            )
            if (
                approval is not None
                and approval.status == ApprovalRequest.Status.PENDING
            ):
                approval.status = ApprovalRequest.Status.CANCELLED
                approval.decided_by = cancelled_by
                approval.decided_at = timezone.now()
                approval.reason = reason
                approval.save(
                    update_fields=["status", "decided_by", "decided_at", "reason"]
                )
            content = _compact(
                {"status": "cancelled", "reason": reason, "executed": False}
            )
            if (
                tool_message_write(
                    call=call,
                    content=content,
                    error="cancelled",
                    state=ToolCall.State.CANCELLED,
                )
                is not None
            ):
                cancelled.append(call.tool_call_id)
                audit_append(
                    actor=cancelled_by,
                    action="tool_call.cancelled",
                    target=call,
                    after={"reason": reason},
                )
                notify_call_changed(call, approval=approval)
        answered = set(
            Message.objects.filter(
                thread=locked_thread,
                role=Message.Role.TOOL,
                tool_call_id__in=run.pending_tool_call_ids,
            ).values_list("tool_call_id", flat=True)
        )
        if answered == set(run.pending_tool_call_ids):
            Run.objects.filter(pk=run.pk).update(status=Run.Status.FINISHED)
    return cancelled


# -- continuation ------------------------------------------------------------------


def continuation_maybe_start(*, run: Run) -> Run | None:
    """Start the one continuation run once every pending call of ``run`` is answered.

    Returns the new run, or ``None`` when calls are still unanswered or a
    continuation already exists (the one-to-one ``Run.continues`` makes a second
    one impossible). Its ``RunAgentInput.messages`` carry one tool message per
    call (FT-06). Implements FT-06, DC-04.
    """
    from threads.services import run_create

    with transaction.atomic():
        thread = Thread.objects.select_for_update().get(pk=run.thread_id)
        locked = Run.objects.select_for_update().get(pk=run.pk)
        if locked.status != Run.Status.AWAITING_TOOLS:
            return None
        if Run.objects.filter(continues=locked).exists():
            return None
        answered = set(
            Message.objects.filter(
                thread=thread,
                role=Message.Role.TOOL,
                tool_call_id__in=locked.pending_tool_call_ids,
            ).values_list("tool_call_id", flat=True)
        )
        if answered != set(locked.pending_tool_call_ids):
            return None
        locked.status = Run.Status.FINISHED
        locked.save(update_fields=["status"])
        return run_create(thread=thread, continues=locked)
