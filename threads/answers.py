"""Answering tool calls: writing the one tool message a call gets, and what follows.

:func:`tool_message_write` is the one way Countersign answers a call (approved,
refused, rejected, expired, cancelled, interrupted): one tool message per call,
enforced by a unique constraint (DC-04, FT-06). :func:`run_answers_complete`
is the one test "are all of a run's pending calls answered?", and
:func:`run_finish_if_answered` the one place an ``awaiting_tools`` run becomes
``finished`` because of it. Implements DC-04, FT-06, BC20.
"""

from __future__ import annotations

import json
from typing import Any

from django.db import IntegrityError, transaction

from agentcore.history import INTERRUPTED_CONTENT, INTERRUPTED_ERROR
from agentcore.interrupts import APPROVE_KEYS, companion_answer, companion_call_for
from core.types import JSONValue
from threads.ids import new_tool_message_id
from threads.locks import calls_lock, thread_seq_lock, tool_calls_lock
from threads.models import Message, Run, ToolCall
from threads.transitions import run_transition, tool_call_transition
from threads.validation import storable

#: ``Message.metadata["source"]`` of tool messages Countersign itself wrote.
APPLICATION_SOURCE = "countersign"

#: Calls the approval workflow owns until it answers them itself.
WORKFLOW_STATES = frozenset(
    {
        ToolCall.State.AWAITING_APPROVAL,
        ToolCall.State.APPROVED,
        ToolCall.State.EXECUTING,
        ToolCall.State.OUTCOME_UNKNOWN,
    }
)


def compact_json(value: JSONValue) -> str:
    """Return ``value`` as compact JSON text (the body of a Countersign tool message)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def refusal_content(*, status: str, reason: str) -> str:
    """Return the tool message body for a call that was not executed, and why.

    ``{"status": <status>, "reason": <reason>, "executed": false}``: the shape the
    model reads for rejected, denied, refused, expired and cancelled calls.
    """
    return compact_json({"status": status, "reason": reason, "executed": False})


def response_content(*, response: str, by: str) -> str:
    """Return the tool message body for a call a person answered instead of running it.

    ``{"status": "responded", "response": <text>, "by": <username>, "executed":
    false}``: the refusal shape (:func:`refusal_content`) with the person's text
    in place of a reason, so the model reads it as the answer to its call.
    """
    return compact_json(
        {"status": "responded", "response": response, "by": by, "executed": False}
    )


def tool_message_write(
    *,
    call: ToolCall,
    content: str | list[dict[str, Any]],
    error: str | None,
    state: str,
) -> Message | None:
    """Write the one tool message answering ``call``; return it, or ``None`` if answered.

    The unique constraint on (thread, toolCallId) for tool messages makes a second
    answer impossible, whatever the timing (DC-04, FT-06). Moves the call to
    ``state`` (:func:`threads.transitions.tool_call_transition`). Must run inside a
    transaction holding the call's row lock (:mod:`threads.locks`).
    """
    if ToolCall.objects.filter(pk=call.pk).answered().exists():
        return None
    # The caller locked the thread: its position is known without reading it again.
    position = thread_seq_lock(thread_pk=call.thread_id)
    try:
        with transaction.atomic():
            message = Message.objects.create(
                thread_id=call.thread_id,
                message_id=new_tool_message_id(),
                role=Message.Role.TOOL,
                content=storable(content, what=f"result of {call.tool_call_id}"),
                metadata={"source": APPLICATION_SOURCE},
                tool_call_id=call.tool_call_id,
                error=error,
                run=None,
                position=position,
            )
    except IntegrityError:
        return None
    tool_call_transition(call=call, to=state)
    return message


def run_answer_dangling_calls(*, run: Run) -> list[str]:
    """Answer every call of an ended ``run`` that has no result with an "interrupted" error.

    A run cancelled or failed while calls were streaming or executing would leave
    assistant ``toolCalls`` without tool messages, which every provider refuses
    on the next request (BC20). The synthetic answer is persisted right after the
    run, before any later message. Calls the approval workflow owns are left to
    it. Returns the answered ``toolCallId`` values. Implements FT-06.
    """
    answered: list[str] = []
    with transaction.atomic():
        _, calls = tool_calls_lock(
            thread_pk=run.thread_id, calls=ToolCall.objects.filter(run=run)
        )
        for call in calls:
            if call.state in WORKFLOW_STATES:
                continue
            message = tool_message_write(
                call=call,
                content=INTERRUPTED_CONTENT,
                error=INTERRUPTED_ERROR,
                state=ToolCall.State.CANCELLED,
            )
            if message is not None:
                answered.append(call.tool_call_id)
    return answered


def run_answers_complete(*, run: Run) -> bool:
    """Return whether every call in ``run.pending_tool_call_ids`` has its tool message.

    A run that ended with interrupts is complete only once each interrupt has its
    resume entry too (IR-18).
    """
    resumed = {entry.get("interruptId") for entry in run.resume or []}
    if any(i.get("id") not in resumed for i in run.interrupts or []):
        return False
    pending = set(run.pending_tool_call_ids)
    answered = set(
        ToolCall.objects.filter(thread_id=run.thread_id, tool_call_id__in=pending)
        .answered()
        .values_list("tool_call_id", flat=True)
    )
    return answered == pending


def run_awaits_answers(*, run_pk: int) -> bool:
    """Return whether run ``run_pk`` is ``awaiting_tools`` with a pending call unanswered."""
    run = Run.objects.filter(pk=run_pk).first()
    return (
        run is not None
        and run.status == Run.Status.AWAITING_TOOLS
        and not run_answers_complete(run=run)
    )


def run_finish_if_answered(*, run: Run) -> bool:
    """Finish the ``awaiting_tools`` ``run`` once all its pending calls are answered.

    Returns whether the run is now finished by this call. ``run`` must be locked
    (inside ``transaction.atomic()``; :func:`threads.locks.run_lock`). Implements FT-06.
    """
    if run.status != Run.Status.AWAITING_TOOLS or not run_answers_complete(run=run):
        return False
    return run_transition(run=run, to=Run.Status.FINISHED)


def error_content(*, error: str | None, detail: str | None) -> str:
    """Return the tool message body for a call that failed before or at execution.

    ``{"error": <code>, "detail": <sentence>}``: invalid arguments, refused execution.
    """
    return compact_json({"error": error, "detail": detail})


#: A refused companion's state: declined by an operator, or cancelled / expired.
_COMPANION_REFUSED = {False: ToolCall.State.DECLINED, True: ToolCall.State.CANCELLED}


def interrupt_companions_answer(*, run: Run, entry: dict[str, Any]) -> list[str]:
    """Answer the framework companions of the call ``entry``'s interrupt holds; return their ids.

    ``entry`` is the resume entry just recorded for one of ``run``'s interrupts. A
    companion (Agent Framework's ``confirm_changes`` beside a held call,
    :func:`agentcore.interrupts.companion_call_for`) gets the answer that
    framework's protocol reads (:func:`agentcore.interrupts.companion_answer`):
    accepted when the entry approves, not when it rejects or cancels. The
    thread must be locked by the caller; the companions are locked here (no
    other transaction reaches them without the thread's lock). Implements DC-04.
    """
    interrupt = next(
        (i for i in run.interrupts or [] if i.get("id") == entry.get("interruptId")),
        None,
    )
    held = (interrupt or {}).get("toolCallId")
    if not held:
        return []
    payload = entry.get("payload")
    approved = (
        entry.get("status") == "resolved"
        and isinstance(payload, dict)
        and any(payload.get(key) is True for key in APPROVE_KEYS)
    )
    answered = []
    for call in calls_lock(calls=ToolCall.objects.filter(run=run).unanswered()):
        if companion_call_for(
            name=call.name, arguments=call.arguments_text, held_ids=[held]
        ):
            if approved and call.state == ToolCall.State.AWAITING_APPROVAL:
                tool_call_transition(call=call, to=ToolCall.State.APPROVED)
            message = tool_message_write(
                call=call,
                content=companion_answer(
                    arguments=call.arguments_text, approved=approved
                ),
                error=None,
                state=ToolCall.State.SUCCEEDED
                if approved
                else _COMPANION_REFUSED[entry.get("status") == "cancelled"],
            )
            if message is not None:
                answered.append(call.tool_call_id)
    return answered


#: A held call's refused state → (status, error, reason) of the answer Countersign
#: writes when the remote agent did not answer it itself.
_HELD_REFUSALS: dict[str, tuple[str, str, str]] = {
    ToolCall.State.DECLINED: (
        "rejected",
        "rejected",
        "an operator declined this call; it was not executed",
    ),
    ToolCall.State.EXPIRED: (
        "expired",
        "approval_expired",
        "no operator decided in time; it was not executed",
    ),
    ToolCall.State.CANCELLED: (
        "cancelled",
        "cancelled",
        "the call was cancelled before anyone decided; it was not executed",
    ),
}


def held_calls_answer_refused(*, run: Run) -> list[str]:
    """Answer the calls ``run`` resumed as refused that its remote agent left unanswered.

    ``run`` carried to a remote agent the resume entries of its interrupts
    (IR-18: the continuation of the interrupted run, or the thread's next run
    after a cancel): a call held by an interrupt an operator rejected, let expire
    or cancelled is the remote's to answer after the resume, but some remotes
    answer it only in a snapshot, or not at all. Once ``run`` ended, each such
    call of an earlier run still without a tool message gets Countersign's
    refusal, so every call has its one answer whatever the remote did (a later
    answer of the remote's is then ignored). Returns the answered
    ``toolCallId`` values. Implements DC-04, FT-06.
    """
    if not (run.input or {}).get("resume"):
        return []
    answered: list[str] = []
    with transaction.atomic():
        _, calls = tool_calls_lock(
            thread_pk=run.thread_id,
            calls=ToolCall.objects.filter(
                thread_id=run.thread_id,
                run__created_at__lte=run.created_at,
                state__in=list(_HELD_REFUSALS),
            )
            .exclude(run=run)
            .unanswered(),
        )
        for call in calls:
            status, error, reason = _HELD_REFUSALS[call.state]
            message = tool_message_write(
                call=call,
                content=refusal_content(status=status, reason=reason),
                error=error,
                state=call.state,
            )
            if message is not None:
                answered.append(call.tool_call_id)
    return answered
