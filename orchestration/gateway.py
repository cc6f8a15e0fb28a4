"""Countersign as an MCP gateway: an MCP client's ``tools/call`` through the approval pipeline.

The steps the MCP shell (``web.mcp_gateway``) calls, one per request it serves:

1. :func:`gateway_tools`: the tools a gateway offers (its toolsets and the
   namespaced tools of its upstream MCP servers, ``threads.mcp_servers``).
2. :func:`gateway_call_start`: check the call (known tool, arguments that pass the
   tool's schema: refused input records nothing), record it as a run of the
   client's session thread (``threads.gateway``) and dispatch it like any pending
   call (``approvals.services.pending_calls_route``: policy, grant, approval
   request, execution queued). A retry of a call already recorded (same request
   in the session, or the same idempotency key) records nothing and refers to
   the kept call.
   **The short path:** a call that may run at once (policy ``auto``, or a grant)
   is reserved in that same transaction (``execution_reserve``) instead of being
   handed to a worker; :func:`gateway_call_execute` runs it in the MCP request
   that recorded it, on the process's upstream connection, and
   :func:`gateway_call_finish` records the outcome in one more transaction. The reservation commits before the upstream
   call, so a request that dies in between leaves a leased execution the janitor
   hands to a worker once the lease ends, as it does a dead worker's.
3. :func:`gateway_call_outcome`: the call's answer once it has one (executed,
   rejected, expired, denied, failed), as an MCP result; ``None`` while it waits.
4. :func:`gateway_call_cancel`: the client gave up: a call still waiting for a
   person is cancelled; one already approved or running is left to finish and
   recorded as cancelled after start (its result is kept, never sent).

Implements FT-06, DC-04, SEC-01, LP-01, LP-05.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from typing import Any, Final, Literal

from django.db import transaction

from agentcore.arguments import ValidatedArguments, canonical_sha256, parse_arguments
from agentcore.dispatch import ToolResult
from agentcore.mcp import mcp_blocks_from_content
from agentcore.tools import Tool
from approvals import crashpoints
from approvals.models import ApprovalRequest
from approvals.services import (
    Reserved,
    audit_batch,
    call_pending_cancel,
    execution_outcome_record,
    execution_reserve,
    pending_calls_route,
)
from core.errors import CountersignError
from core.types import User
from orchestration.pipeline import (
    ToolRun,
    executions_enqueue,
    run_continue,
    tool_run_async,
    tool_run_prepare,
)
from threads.agent_config import agent_application_tools, agent_is_gateway
from threads.gateway import (
    GatewayCall,
    gateway_call_record,
    gateway_thread_forget,
    gateway_thread_pk,
)
from threads.mcp_servers import agent_mcp_refresh
from threads.models import Message, Thread, ToolCall

#: The ``_meta`` key a client sets to name one logical call across retries.
IDEMPOTENCY_META_KEY: Final = "io.countersign/idempotencyKey"

#: The tool a gateway adds so a model can ask again about a call that was pending.
STATUS_TOOL: Final = "countersign__status"

GatewayErrorCode = Literal[
    "unknown_gateway", "unknown_tool", "invalid_arguments", "conflict", "not_found"
]


class GatewayRefused(CountersignError):
    """A gateway request refused before anything was recorded; ``code`` says why."""

    def __init__(self, code: GatewayErrorCode, message: str) -> None:
        super().__init__(message)
        self.code: GatewayErrorCode = code


@dataclass(frozen=True, slots=True)
class GatewayStarted:
    """What :func:`gateway_call_start` did: the call's row and public id, and whether it is new.

    ``run_here``: the call was reserved in the recording transaction (the short
    path): the caller runs it now (:func:`gateway_call_execute`, then
    :func:`gateway_call_finish`); ``None`` when it
    waits for a person, went to a worker, or was already answered.
    """

    tool_call_pk: int
    tool_call_id: str
    created: bool
    run_here: ToolRun | None = None


@dataclass(frozen=True, slots=True)
class GatewayOutcome:
    """A call's answer as an MCP ``CallToolResult``'s parts.

    ``content``: MCP content blocks (JSON); ``is_error``: the call did not succeed
    (rejected, expired, denied, cancelled, failed upstream); ``status``: the call's
    final state (``succeeded``, ``declined``, ``expired``...); ``edited``: a sentence
    saying how an approver changed the arguments, or ``None``.
    """

    content: list[dict[str, Any]]
    is_error: bool
    status: str
    edited: str | None


def gateway_tools(*, gateway: str) -> list[Tool]:
    """Return the tools gateway ``gateway`` offers, in order (its ``tools/list``).

    Application tools of its toolsets, then its upstream MCP servers' tools as
    ``<server>__<tool>``. Raises :class:`GatewayRefused` (``unknown_gateway``) when
    ``gateway`` is not configured with provider ``mcp_gateway``.
    """
    gateway_check(gateway=gateway)
    return agent_application_tools(gateway)


def gateway_check(*, gateway: str) -> None:
    """Raise :class:`GatewayRefused` (``unknown_gateway``) unless ``gateway`` is a gateway."""
    if not agent_is_gateway(gateway):
        raise GatewayRefused(
            "unknown_gateway",
            f"no MCP gateway is named {gateway!r}; ask an operator for the gateway's URL",
        )


def gateway_tool_call_id(
    *,
    gateway: str,
    user_pk: int,
    session: str | None,
    request_id: str | int | None,
    idempotency_key: str | None,
) -> str | None:
    """Return the ``toolCallId`` an MCP request's call gets, or ``None`` for a fresh one.

    The same idempotency key (``_meta["io.countersign/idempotencyKey"]``) of the same
    user on the same gateway, or the same JSON-RPC request id in the same MCP
    session, names the same call: a retry gets the kept result. A request with
    neither (a sessionless request without a key) is always a new call.
    """
    if idempotency_key:
        seed = f"key\0{gateway}\0{user_pk}\0{idempotency_key}"
    elif session and request_id is not None:
        seed = f"req\0{gateway}\0{user_pk}\0{session}\0{request_id!r}"
    else:
        return None
    return "mcp-" + hashlib.sha256(seed.encode()).hexdigest()[:32]


def gateway_call_start(
    *,
    gateway: str,
    user: User,
    session: str,
    tool_call_id: str | None,
    name: str,
    arguments: dict[str, Any] | None,
    metadata: dict[str, Any],
    keyed: bool = True,
) -> GatewayStarted:
    """Record and dispatch an MCP client's call of tool ``name`` on ``gateway`` for ``user``.

    ``session``: the MCP session (its thread); ``tool_call_id``: from
    :func:`gateway_tool_call_id` (``None``: a new id); ``keyed``: the id comes from
    an idempotency key, so it may name a call of another session (``False``: from
    the session's request id, looked up in the session's thread only);
    ``metadata``: kept on the call (the MCP request's id, the client). Raises :class:`GatewayRefused` before
    recording anything: ``unknown_tool`` (not offered by the gateway),
    ``invalid_arguments`` (the tool's schema refuses them; the message says what
    to fix) or ``conflict`` (the id names a kept call of another tool or other
    arguments). Implements SEC-01, LP-01, DC-04.
    """
    tools = {tool.name: tool for tool in gateway_tools(gateway=gateway)}
    tool = tools.get(name)
    if tool is None:
        raise GatewayRefused(
            "unknown_tool",
            f"tool {name!r} is not offered by gateway {gateway!r}; "
            f"list the tools again (available: {sorted(tools)})",
        )
    parsed = parse_arguments(arguments or {}, tool=tool)
    if parsed.value is None:
        raise GatewayRefused(
            "invalid_arguments",
            f"arguments of {name!r} were refused: {parsed.error}",
        )
    value = parsed.value
    if tool_call_id is not None and keyed:
        kept = gateway_call_kept(gateway=gateway, user=user, tool_call_id=tool_call_id)
        if kept is not None:
            return _kept_start(kept, name=name, arguments_sha256=value.sha256)
    definition = tool.agui_tool().model_dump(
        mode="json", by_alias=True, exclude_none=True
    )
    with transaction.atomic():
        recorded = _record(
            gateway=gateway,
            user=user,
            session=session,
            tool_call_id=tool_call_id or "mcp-" + secrets.token_hex(16),
            tool=tool,
            arguments=value,
            definition=definition,
            metadata=metadata,
        )
        if not recorded.created:
            return _kept_start(recorded.call, name=name, arguments_sha256=value.sha256)
        run_here = _dispatch_reserving(call=recorded.call)
    return GatewayStarted(
        tool_call_pk=recorded.call.pk,
        tool_call_id=recorded.call.tool_call_id,
        created=True,
        run_here=run_here,
    )


def _record(
    *,
    gateway: str,
    user: User,
    session: str,
    tool_call_id: str,
    tool: Tool,
    arguments: ValidatedArguments,
    definition: dict[str, Any],
    metadata: dict[str, Any],
) -> GatewayCall:
    """Record the call in its session's thread (looked up again if it was deleted)."""
    for _ in range(2):
        thread_pk, thread_id = gateway_thread_pk(
            gateway=gateway,
            owner=user,
            session=session,
            title=f"MCP session on {gateway}",
        )
        try:
            return gateway_call_record(
                thread_pk=thread_pk,
                thread_id=thread_id,
                tool_call_id=tool_call_id,
                tool=tool,
                arguments=arguments,
                tool_definition=definition,
                metadata={"mcp": metadata},
            )
        except Thread.DoesNotExist:
            gateway_thread_forget(thread_pk=thread_pk)
    raise RuntimeError(f"the thread of MCP session {session!r} keeps disappearing")


def _dispatch_reserving(*, call: ToolCall) -> ToolRun | None:
    """Dispatch new gateway ``call``; reserve it here when it may run at once.

    The pipeline's dispatch step (policy, grant, approval request), except that
    an execution queued to run now is reserved in the same transaction
    (``execution_reserve``: the same checks a worker makes) rather than handed
    to a worker; anything else goes on as in
    :func:`orchestration.pipeline.pending_calls_dispatch`. Returns the prepared
    run of the reserved call, or ``None``. Must run inside the transaction that
    recorded the call. Implements FT-06, SEC-01, LP-01, DC-04.
    """
    # The dispatch's and the reservation's audit entries: one INSERT, one head update.
    with audit_batch():
        dispatched = pending_calls_route(run=call.run)
        now = [q for q in dispatched.queued if q.not_before is None]
        executions_enqueue([q for q in dispatched.queued if q not in now])
        if not now:
            run_continue(run=call.run)
            return None
        step = execution_reserve(thread_pk=call.thread_id, tool_call_pk=call.pk)
    if not isinstance(step, Reserved):
        if step.answered:
            run_continue(run=call.run)
        return None
    return tool_run_prepare(step)


async def gateway_call_execute(*, started: GatewayStarted) -> ToolResult:
    """Run the upstream call :func:`gateway_call_start` reserved; return its result.

    Awaited in the MCP request's own event loop: the upstream MCP call goes over
    the connection the process keeps for that server (``agentcore.mcp``), no
    worker, no polling. Touches no database (sync code records the outcome:
    :func:`gateway_call_finish`). The caller shields it from the client's
    cancellation: a call that started is finished and recorded. A process that
    dies before the outcome leaves the reservation, committed before the
    upstream call, to the janitor (BC32). Raises ``ValueError`` for a call that
    was not reserved at its start. Implements LP-05, LP-07, LP-08, BC32.
    """
    prepared = started.run_here
    if prepared is None:
        raise ValueError(
            f"call {started.tool_call_id!r} was not reserved at its start; "
            "wait for its outcome instead"
        )
    crashpoints.crash_point("after_reservation")
    result = await tool_run_async(prepared)
    crashpoints.crash_point("after_tool")
    return result


def gateway_call_finish(
    *, started: GatewayStarted, result: ToolResult
) -> GatewayOutcome:
    """Record ``result`` as the outcome of the call ``started`` reserved; return its answer.

    One transaction: the execution's outcome, the call's one tool message, the
    audit entry and the notifications (``execution_outcome_record``), and the
    run settled (:func:`orchestration.pipeline.run_continue`: a gateway's run is
    finished, never continued). A late duplicate records nothing and returns the
    answer already kept. Implements DC-04, LP-05, LP-08, FT-06.
    """
    prepared = started.run_here
    if prepared is None:
        raise ValueError(f"call {started.tool_call_id!r} was not reserved at its start")
    call = prepared.reserved.call
    with transaction.atomic():
        settled = execution_outcome_record(
            thread_pk=call.thread_id, tool_call_pk=call.pk, result=result
        )
        if settled.answered:
            run_continue(run=call.run)
    crashpoints.crash_point("after_outcome")
    message = _answer_of(thread_pk=call.thread_id, tool_call_id=call.tool_call_id)
    if not settled.answered or settled.call is None or message is None:
        # Answered by someone else meanwhile (an operator resolving it): as kept.
        outcome = gateway_call_outcome(tool_call_pk=call.pk)
        if outcome is None:  # an answered call keeps its tool message
            raise RuntimeError(f"call {call.tool_call_id!r} has no answer")
        return outcome
    # Run on a policy's or a grant's authority: no approver edited it.
    return _outcome(message=message, state=str(settled.call.state), edited=None)


def _kept_start(call: ToolCall, *, name: str, arguments_sha256: str) -> GatewayStarted:
    """Return the kept ``call`` as a start, refusing a retry that is not the same call."""
    kept_sha = canonical_sha256(call.arguments) if call.arguments is not None else None
    if call.name != name or kept_sha != arguments_sha256:
        raise GatewayRefused(
            "conflict",
            f"this request id or idempotency key already named a call of {call.name!r} "
            "with other arguments; use a new idempotency key for a new call",
        )
    return GatewayStarted(
        tool_call_pk=call.pk, tool_call_id=call.tool_call_id, created=False
    )


def gateway_call_kept(
    *, gateway: str, user: User, tool_call_id: str
) -> ToolCall | None:
    """Return ``user``'s call ``tool_call_id`` on ``gateway`` (any session), or ``None``."""
    return (
        ToolCall.objects.filter(
            tool_call_id=tool_call_id, thread__owner=user, thread__agent=gateway
        )
        .select_related("run")
        .first()
    )


def gateway_call_outcome(*, tool_call_pk: int) -> GatewayOutcome | None:
    """Return call ``tool_call_pk``'s answer as an MCP result, or ``None`` while it waits.

    The answer is the call's one tool message (DC-04): its content as MCP blocks
    (text; images and audio as such; other parts as their JSON text), ``isError``
    when the message carries an error (rejection, expiry, denial, cancellation,
    an upstream failure or timeout: its body says why). An approval with edited
    arguments adds a first text block saying what the approver changed.
    """
    row = (
        ToolCall.objects.filter(pk=tool_call_pk)
        .values_list("thread_id", "tool_call_id", "state")
        .first()
    )
    if row is None:
        return None
    thread_pk, tool_call_id, state = row
    message = _answer_of(thread_pk=thread_pk, tool_call_id=tool_call_id)
    if message is None:
        return None
    return _outcome(
        message=message,
        state=str(state),
        edited=_edit_sentence(tool_call_pk=tool_call_pk),
    )


def _answer_of(*, thread_pk: int, tool_call_id: str) -> Message | None:
    """Return the one tool message answering call ``tool_call_id``, or ``None``."""
    return Message.objects.filter(
        thread_id=thread_pk, tool_call_id=tool_call_id, role=Message.Role.TOOL
    ).first()


def _outcome(*, message: Message, state: str, edited: str | None) -> GatewayOutcome:
    """Return a call's answer ``message`` as MCP parts; ``edited`` goes first."""
    content = mcp_blocks_from_content(message.content)
    if edited is not None:
        content.insert(0, {"type": "text", "text": edited})
    return GatewayOutcome(
        content=content, is_error=bool(message.error), status=state, edited=edited
    )


def gateway_call_state(*, tool_call_pk: int) -> str | None:
    """Return call ``tool_call_pk``'s state (``awaiting_approval``, ``executing``...), or ``None``."""
    found = gateway_call_brief(tool_call_pk=tool_call_pk)
    return found[1] if found is not None else None


def gateway_call_brief(*, tool_call_pk: int) -> tuple[str, str] | None:
    """Return call ``tool_call_pk``'s ``(toolCallId, state)``, or ``None`` when it is gone."""
    row = (
        ToolCall.objects.filter(pk=tool_call_pk)
        .values_list("tool_call_id", "state")
        .first()
    )
    return (str(row[0]), str(row[1])) if row is not None else None


def gateway_call_cancel(*, tool_call_pk: int, cancelled_by: User) -> str:
    """Cancel call ``tool_call_pk`` because its MCP client gave up; return what happened.

    ``"cancelled"``: it waited (for a person or a worker) and is answered as
    cancelled, its approval request closed; ``"cancelled_after_start"``: it was
    approved or running, is left to finish, and the cancellation is audited (the
    result is kept and never sent); ``"answered"``: it already had its answer.
    """
    call = ToolCall.objects.select_related("thread", "run").get(pk=tool_call_pk)
    return call_pending_cancel(
        call=call,
        cancelled_by=cancelled_by,
        reason="the MCP client cancelled the request",
    )


def gateway_refresh(*, gateway: str) -> None:
    """Relist gateway ``gateway``'s upstream MCP tools now (best effort, never raises)."""
    agent_mcp_refresh(gateway)


def _edit_sentence(*, tool_call_pk: int) -> str | None:
    """Return a sentence naming the arguments an approver changed, or ``None``."""
    approval = (
        ApprovalRequest.objects.filter(
            tool_call_id=tool_call_pk, status=ApprovalRequest.Status.APPROVED
        )
        .exclude(edited_arguments=None)
        .order_by("-pk")
        .first()
    )
    if approval is None:
        return None
    before = approval.proposed_arguments or {}
    after = approval.edited_arguments or {}
    changes = [
        f"{key}: {before.get(key)!r} -> {after.get(key)!r}"
        for key in sorted(set(before) | set(after))
        if before.get(key) != after.get(key)
    ]
    if not changes:
        return None
    return (
        "An approver changed the arguments before it ran (" + "; ".join(changes) + ")."
    )
