"""The life of a call an external agent declares, step by step (the approval API).

The same steps as any application call (:mod:`orchestration.pipeline`), except
that the caller runs the tool:

1. **Declared.** :func:`external_call_declare` checks the call
   (``approvals.services.external.external_call_check``), records it as a run of
   the agent's thread (``threads.external.external_call_record``) and dispatches
   it with the pipeline's own step (:func:`orchestration.pipeline.
   pending_calls_dispatch`): the policy says ``auto``, a grant covers it, an
   approval request enters the queue (votes, notifications, escalation, expiry),
   or the policy denies it. Under an ``idempotencyKey`` this happens once.
2. **Decided** by operators as any request (``pipeline.approval_decide``).
3. **Claimed.** :func:`external_call_claim` reserves the execution for one
   claimant (``approvals.services.execution.execution_reserve`` with a
   ``holder``), committed before the caller runs the tool; the same holder
   claiming again renews its lease; a lapsed lease becomes ``outcome_unknown``.
4. **Outcome.** :func:`external_outcome_report` records the result once
   (``execution_outcome_report``): the one tool message, the audit entries and
   notifications a worker's outcome gets; the run then ends
   (``pipeline.run_continue``).

Implements FT-06, DC-04, LP-01, LP-05, LP-07, SEC-01, SEC-02, BC32.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction

from agentcore.arguments import canonical_json, canonical_sha256
from agentcore.dispatch import ToolResult
from approvals.exceptions import ExternalCallInvalid, NotClaimable
from approvals.models import ApprovalRequest, ToolExecution
from approvals.selectors import external_call_status
from approvals.services.execution import (
    Settled,
    execution_outcome_report,
    execution_reserve,
)
from approvals.services.external import approval_expiry_shorten, external_call_check
from core.types import JSONValue, User
from orchestration.pipeline import pending_calls_dispatch, run_continue
from threads.exceptions import IdempotencyKeyReused
from threads.external import DeclaredCall, external_call_record
from threads.idempotency import idempotent_response
from threads.models import ToolCall, new_public_id

#: The largest result a caller may report, in UTF-8 bytes of its JSON.
MAX_RESULT_BYTES = 256 * 1024


@dataclass(frozen=True)
class Declared:
    """What :func:`external_call_declare` did: the call, and whether this request recorded it."""

    call: ToolCall
    created: bool


def external_call_declare(
    *,
    user: User,
    agent: str,
    tool: dict[str, Any],
    arguments: Any,
    summary: str = "",
    annotations: dict[str, Any] | None = None,
    conversation_id: str = "",
    idempotency_key: str = "",
    expires_at: datetime | None = None,
    metadata: dict[str, Any] | None = None,
) -> Declared:
    """Record and dispatch the call ``agent`` intends to make; return it.

    ``tool`` is the AG-UI ``Tool`` JSON (``name``, ``description``,
    ``parameters``: the declared input schema), ``arguments`` a JSON object.
    The call is checked first (raises
    :class:`approvals.exceptions.ExternalCallInvalid` naming the field, nothing
    written), recorded on the thread of ``conversation_id`` and dispatched by the
    agent's policy like any call; ``expires_at`` may bring a pending request's
    expiry forward, never later than the policy's. With ``idempotency_key`` a
    retry with the same request returns the same call (``created`` false); the
    same key with another request raises ``ExternalCallInvalid``
    (``idempotencyKey``). Implements SEC-01, LP-01, FT-06, DC-01.
    """
    external_call_check(agent=agent, tool=tool, arguments=arguments)

    def produce() -> tuple[int, Any]:
        call = external_call_record(
            owner=user,
            declared=DeclaredCall(
                agent=agent,
                tool=tool,
                arguments=arguments,
                tool_call_id=new_public_id(),
                summary=summary,
                annotations=annotations,
                conversation_id=conversation_id,
                metadata=metadata,
            ),
        )
        pending_calls_dispatch(run=call.run)
        if expires_at is not None:
            approval = ApprovalRequest.objects.filter(tool_call=call).first()
            if approval is not None:
                with transaction.atomic():
                    approval_expiry_shorten(approval=approval, expires_at=expires_at)
        return 201, {"toolCallId": call.tool_call_id}

    if not idempotency_key:
        _, body = produce()
        return Declared(call=_call(body), created=True)
    request: JSONValue = {
        "agent": agent,
        "tool": tool,
        "arguments": arguments,
        "summary": summary,
        "annotations": annotations or {},
        "conversationId": conversation_id,
        "expiresAt": expires_at.isoformat() if expires_at else None,
    }
    try:
        stored = idempotent_response(
            user=user,
            key=idempotency_key,
            operation=f"external_call:{agent}",
            body=request,
            produce=produce,
        )
    except IdempotencyKeyReused as reused:
        raise ExternalCallInvalid(
            f"idempotencyKey {idempotency_key!r} was already used for a different "
            "call; send a new key for a new call, or the original body to get its "
            "state",
            field="idempotencyKey",
            code="idempotency_key_reused",
        ) from reused
    return Declared(call=_call(stored.body), created=not stored.replayed)


def _call(body: Any) -> ToolCall:
    return ToolCall.objects.select_related("run", "thread").get(
        tool_call_id=body["toolCallId"], run__input__external__isnull=False
    )


def external_call_claim(
    *, call: ToolCall, holder: str, lease_seconds: float
) -> dict[str, Any]:
    """Claim approved ``call`` for ``holder`` for ``lease_seconds``; return its state.

    One claim wins: the execution is reserved for ``holder`` and committed before
    the caller runs the tool. The same holder claiming again renews the lease.
    Returns :func:`approvals.selectors.external_call_status` (``claimed``).
    Raises :class:`approvals.exceptions.ExecutionClaimed` (another holder's live
    claim), :class:`approvals.exceptions.ExecutionDeferred` (inside the
    decision's undo window) and :class:`approvals.exceptions.NotClaimable` when
    the call may not run (pending, rejected, denied, already run, or its claim
    lapsed: then it became ``outcome_unknown``, which its thread shows).
    Implements LP-05, LP-07, BC32, BC34.
    """
    with transaction.atomic():
        step = execution_reserve(
            thread_pk=call.thread_id,
            tool_call_pk=call.pk,
            holder=holder,
            lease_seconds=lease_seconds,
        )
        if isinstance(step, Settled) and step.answered and step.call is not None:
            run_continue(run=step.call.run)
    state = external_call_status(call)
    if state["status"] != "claimed" or (state["claim"] or {}).get("holder") != holder:
        raise NotClaimable(
            f"call {call.tool_call_id!r} is {state['status']!r}, not approved for "
            "you to run; do not run it",
            call_status=state["status"],
        )
    return state


def external_outcome_report(
    *,
    call: ToolCall,
    holder: str,
    result: JSONValue,
    error: str | None,
) -> ToolExecution | None:
    """Record the outcome ``holder`` reports for its claimed ``call``; end the run.

    ``result`` is what the tool returned (a string is the tool message as it
    is; anything else is its compact JSON); ``error`` a short failure code, or
    ``None`` on success. Raises :class:`approvals.exceptions.ExternalCallInvalid`
    (``result``) for a result over :data:`MAX_RESULT_BYTES`, and
    :class:`approvals.exceptions.OutcomeRefused` for a report without a claim,
    from another holder, or different from the one already recorded (the same
    report again is answered as the first). Implements DC-04, LP-05, BC32.
    """
    content = result if isinstance(result, str) else canonical_json(result)
    if len(content.encode("utf-8")) > MAX_RESULT_BYTES:
        raise ExternalCallInvalid(
            f"result is {len(content.encode('utf-8'))} bytes; at most "
            f"{MAX_RESULT_BYTES} are recorded. Report a summary (or a link to the "
            "full result) instead",
            field="result",
            code="result_too_large",
        )
    now = time.monotonic()
    tool_result = ToolResult(
        tool_call_id=call.tool_call_id,
        name=call.name,
        content=content,
        error=error,
        message=None,
        details={"reportedBy": holder},
        end_turn=False,
        repair=None,
        started_at=now,
        finished_at=now,
    )
    digest = canonical_sha256({"result": result, "error": error})
    with transaction.atomic():
        step = execution_outcome_report(
            thread_pk=call.thread_id,
            tool_call_pk=call.pk,
            holder=holder,
            result=tool_result,
            outcome_sha256=digest,
        )
        if step.answered and step.call is not None:
            run_continue(run=step.call.run)
    return step.execution
