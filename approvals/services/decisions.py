"""Deciding approval requests: approve (maybe with edits), reject, answer with text, or expire them.

Implements SEC-02, DC-03, DC-04, FT-06.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

from django.db import transaction
from django.db.models import prefetch_related_objects
from django.utils import timezone
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, best_match

from agentcore.arguments import (
    ValidatedArguments,
    parse_arguments,
    tool_schema_sha256,
)
from agentcore.interrupts import (
    approve_key,
    offers_edits,
    remote_tool,
    resume_payload,
)
from agentcore.tools import Tool
from approvals.authorization import approval_authorization, authorization_require
from approvals.exceptions import (
    ApprovalAlreadyDecided,
    ApprovalExpired,
    ApprovalPermissionDenied,
    InvalidEditedArguments,
    InvalidRespondText,
    InvalidResponse,
    ReasonRequired,
    RespondNotSupported,
    UndoTooLate,
)
from approvals.governance import call_policy
from approvals.locks import approval_lock, call_execution_lock
from approvals.models import (
    DECIDE_PERMISSION,
    RESPOND_MAX_CHARS,
    ApprovalRequest,
    ToolExecution,
)
from approvals.services.audit import audit_append, audit_batch
from approvals.services.dispatch import (
    QueuedExecution,
    call_answer_refused,
    execution_create,
    run_tools,
)
from approvals.services.grants import grant_create, grant_revoke
from approvals.services.notify import notify_approval_changed
from approvals.services.votes import VoteOutcome, vote_record
from approvals.signals import approval_decided, approval_outcome, send_on_commit
from approvals.transitions import AuditFact, approval_transition, call_transition
from core.types import JSONValue, User
from threads.answers import response_content
from threads.models import Run, ToolCall
from threads.services import run_resume_record
from threads.transitions import tool_call_transition

Decision = Literal["approve", "reject", "respond"]


@dataclass(frozen=True)
class Decided:
    """What :func:`approval_decision_record` did.

    ``approval`` is the locked request as it now is; ``queued`` the execution an
    approval queued (to hand to a worker), if any; ``answered`` whether the call
    or interrupt is settled without an execution (rejected, expired, an
    interrupt's resume entry), so its run may continue; ``expired`` whether the
    request had expired (it was answered as expired; the caller raises
    :class:`ApprovalExpired` after the commit).
    """

    approval: ApprovalRequest
    queued: QueuedExecution | None = None
    answered: bool = False
    expired: bool = False


def approval_decision_record(
    *,
    approval: ApprovalRequest,
    decided_by: User,
    decision: Decision,
    reason: str = "",
    edited_arguments: dict[str, Any] | ValidatedArguments | None = None,
    response: JSONValue = None,
    grant: dict[str, Any] | None = None,
    undo_seconds: float = 0.0,
) -> Decided:
    """Record an operator's decision on ``approval``; return what it did (:class:`Decided`).

    Who may decide is one check, made under the row lock before anything is
    recorded (:func:`approvals.authorization.authorization_require`): approving
    needs the decide permission and the tool's own permission, rejecting the
    decide permission; for a tool-call request both also need membership of its
    approver groups, not being its requester (four-eyes, unless the policy
    allows it) and no live claim by someone else.

    A tool-call request is decided through :func:`approvals.services.votes.vote_record`:
    the call runs only once ``approvals_required`` distinct approvers approved
    the same arguments (one rejection rejects unless ``rejections_required``
    says more); ``grant`` (an approver's scoped "always allow",
    :func:`approvals.services.grants.grant_create`) is made with the approval.
    Until then the request stays pending.

    ``undo_seconds`` > 0 (the operator UI passes ``DECISION_UNDO_SECONDS``) defers
    the execution created by the deciding (N-th) approval that long; until then
    :func:`approval_undo` withdraws that approval. 0 executes at once (REST,
    AG-UI resume).

    An ``interrupt`` request (a remote agent's, IR-18) is answered with one AG-UI
    resume entry sent to that agent once, in the input of the run's continuation:
    approve → ``resolved`` with ``response`` (or, for a tool-bound interrupt whose
    schema asks for ``approved``, ``{"approved": true, "editedArgs"?}``) validated
    against the interrupt's ``responseSchema`` before any side effect
    (:class:`InvalidResponse`); reject → ``resolved`` with ``{"approved": false,
    "reason"}`` for such a tool-bound interrupt, else ``cancelled``; expiry →
    ``cancelled``. The call itself is left for the agent to answer.

    Approve: the arguments (edited ones validated against the schema once, SEC-02:
    here, or by :func:`edited_arguments_validate` when they come as its value)
    are hashed and the call's execution record queued (a re-approval's queued
    execution takes the newly approved arguments); handing it to a worker after
    commit is the caller's. Reject: the call is answered with a tool message
    saying an operator declined it and why. A repeated identical decision returns
    the request unchanged and queues nothing (BC34). Continuing the run is the
    caller's too (:func:`orchestration.pipeline.approval_decide`), in the same
    transaction: this service opens no savepoint of its own.

    Respond (``decision="respond"``, the text in ``response``): the tool is not
    run; the call is answered with one tool message carrying the approver's text
    (:func:`threads.answers.response_content`) and the request ends
    ``responded``. Who may respond is who may reject (the decide permission,
    approver groups, four-eyes, claims), and one authorised responder ends the
    request whatever N of M asks: like a rejection, it runs nothing. Only a
    tool-call request can be answered so.

    Raises :class:`ApprovalPermissionDenied` without ``approvals.decide_approvalrequest``,
    :class:`ApprovalNotAuthorized` when the decider may not make this decision
    (the tool's own permission, approver groups, four-eyes; nothing is recorded,
    the request stays pending), :class:`ApprovalClaimed` when someone else claimed it,
    :class:`ApprovalAlreadyDecided` when decided otherwise, :class:`ReasonRequired` for a
    rejection without a reason, :class:`InvalidEditedArguments` for edits that fail
    the schema (or, after a schema change, unedited arguments that fail it),
    :class:`InvalidRespondText` for a response that is not text, is blank or is
    longer than :data:`RESPOND_MAX_CHARS`, :class:`RespondNotSupported` for a
    response to an interrupt or input request. Implements SEC-02, DC-03, DC-04, FT-06.
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
    if decision == "respond":
        response = respond_text_check(approval=approval, text=response)
    elif response is not None and approval.kind == ApprovalRequest.Kind.TOOL_CALL:
        raise InvalidResponse(
            f"approval {approval.pk!r} is a tool call: it takes 'editedArguments', "
            "not 'response'"
        )
    edited_value: ValidatedArguments | None = None
    if isinstance(edited_arguments, ValidatedArguments):
        edited_value, edited_arguments = edited_arguments, edited_arguments.as_dict()
    target_status = {
        "approve": ApprovalRequest.Status.APPROVED,
        "reject": ApprovalRequest.Status.REJECTED,
        "respond": ApprovalRequest.Status.RESPONDED,
    }[decision]
    queued: QueuedExecution | None = None
    # One INSERT for the vote's and the decision's audit entries (B2).
    with transaction.atomic(savepoint=False), audit_batch():
        _, call, locked = approval_lock(approval=approval)
        # Read once, under the request's lock (which every change of its groups
        # takes): the decider's check and the notification's snapshot share it.
        prefetch_related_objects([locked], "approver_groups")
        # Checked on the locked row: an escalation or a claim may have just
        # changed who may decide, and nothing is recorded if refused.
        authorization_require(approval=locked, user=decided_by, decision=decision)
        if locked.status != ApprovalRequest.Status.PENDING:
            if (
                locked.status == target_status
                and (
                    edited_arguments is None
                    or edited_arguments == locked.edited_arguments
                )
                and (response is None or response == locked.response)
                and _took_part(locked, decided_by, decision)
            ):
                return Decided(approval=locked)
            deciders = [
                v.voter.username
                for v in locked.votes.select_related("voter")
                if v.reset_at is None and v.decision == decision
            ] or ([locked.decided_by.username] if locked.decided_by else [])
            raise ApprovalAlreadyDecided(
                f"approval {locked.pk!r} was already {locked.status!r}"
                + (f" by {' and '.join(deciders)}" if deciders else "")
                + "; your decision was not recorded: reload the queue"
            )
        expired = locked.expires_at <= timezone.now()
        interrupt = locked.kind == ApprovalRequest.Kind.INTERRUPT
        if expired:
            approval_expire_locked(locked, call)
        elif decision == "respond":
            assert call is not None  # only tool_call requests get here
            _respond_locked(
                approval=locked, call=call, decided_by=decided_by, text=str(response)
            )
        elif locked.kind == ApprovalRequest.Kind.INPUT:
            _decide_input_locked(
                approval=locked,
                decided_by=decided_by,
                decision=decision,
                reason=reason,
                response=response,
            )
        elif interrupt:
            if (
                decision == "approve"
                and edited_arguments is not None
                and edited_value is None
            ):
                # Checked against the remote tool's declared arguments, the way
                # an AG-UI resume's editedArgs are (IR-11).
                edited_arguments = _validate_remote_edit(
                    approval=locked, edited=edited_arguments
                ).as_dict()
            _decide_interrupt_locked(
                approval=locked,
                call=call,
                decided_by=decided_by,
                decision=decision,
                reason=reason,
                edited_arguments=edited_arguments,
                response=response,
            )
        else:
            assert call is not None  # a tool_call request always has its call
            # Four-eyes / N of M: a vote decides only once enough agree.
            outcome, edited = _vote(
                approval=locked,
                call=call,
                voter=decided_by,
                decision=decision,
                reason=reason,
                edited_arguments=edited_value or edited_arguments,
                grant=grant,
            )
            if outcome.repeated:
                return Decided(approval=locked)
            if not outcome.final:
                notify_approval_changed(locked, call=call)
                return Decided(approval=locked)
            queued = _decide_locked(
                approval=locked,
                call=call,
                decided_by=decided_by,
                decision=decision,
                reason=reason,
                edited=edited,
                undo_seconds=undo_seconds,
            )
        notify_approval_changed(locked, call=call)
        if not expired and not (queued is not None and undo_seconds > 0):
            # An approval that can still be undone is announced once it stands:
            # when its window closes (approvals.services.execution).
            send_on_commit(approval_decided, locked)
    return Decided(
        approval=locked,
        queued=queued,
        answered=expired or decision in ("reject", "respond") or interrupt,
        expired=expired,
    )


def respond_text_check(*, approval: ApprovalRequest, text: JSONValue) -> str:
    """Return ``text`` as an approver's answer to ``approval``'s call, or raise why not.

    The text is kept as given (a person's words are not trimmed) but must hold
    something besides whitespace and be at most :data:`RESPOND_MAX_CHARS`
    characters. Raises :class:`RespondNotSupported` for a request that is not a
    held tool call (an interrupt or an input request is answered with
    ``response`` on approve), :class:`InvalidRespondText` otherwise. Changes
    nothing.
    """
    if approval.kind != ApprovalRequest.Kind.TOOL_CALL:
        raise RespondNotSupported(
            f"approval {approval.pk!r} is a {approval.kind} request, not a held tool "
            "call: answer it by approving with a 'response' that satisfies its "
            "responseSchema, or reject it"
        )
    if not isinstance(text, str):
        raise InvalidRespondText(
            f"the answer must be text, not {type(text).__name__}; send "
            '{"text": "..."}'
        )
    if not text.strip():
        raise InvalidRespondText(
            "the answer is empty; write what the agent should be told instead of "
            "the tool's result"
        )
    if len(text) > RESPOND_MAX_CHARS:
        raise InvalidRespondText(
            f"the answer is {len(text)} characters long; shorten it to at most "
            f"{RESPOND_MAX_CHARS}"
        )
    return text


def _answer_locked(
    *,
    approval: ApprovalRequest,
    call: ToolCall,
    decided_by: User,
    to: ApprovalRequest.Status,
    reason: str,
    after: dict[str, Any],
    content: str | None = None,
    actor: User | None = None,
) -> None:
    """Close the locked, pending ``approval`` as ``to`` and answer its call; the tool never runs.

    The one path of a rejection and of an approver's text answer: the request
    moves to ``to``, the call is answered as not executed
    (:func:`approvals.services.dispatch.call_answer_refused`: a refusal message
    saying ``reason``, or ``content`` when given; ``actor`` is named in that
    call's audit entry) and ``declined``, a queued execution a re-approval left
    is closed, and the decision is stamped and audited with ``after``.
    """
    before = {"status": approval.status}
    approval_transition(approval=approval, to=to, save=False)
    call_answer_refused(
        call=call,
        status=to.value,
        reason=reason,
        error="declined_by_operator"
        if to == ApprovalRequest.Status.REJECTED
        else "answered_by_operator",
        state=ToolCall.State.DECLINED,
        actor=actor,
        content=content,
    )
    _decision_record(
        approval=approval,
        decided_by=decided_by,
        before=before,
        after={"status": approval.status, **after},
    )


def _respond_locked(
    *, approval: ApprovalRequest, call: ToolCall, decided_by: User, text: str
) -> None:
    """Answer the locked, pending ``approval``'s call with ``text``; the tool never runs.

    One tool message (:func:`threads.answers.response_content`), the call
    ``declined`` (not executed), the request ``responded`` with the text in
    ``response``; a queued execution a re-approval left is closed. Audited.
    """
    approval.response = text
    approval.reason = ""
    _answer_locked(
        approval=approval,
        call=call,
        decided_by=decided_by,
        to=ApprovalRequest.Status.RESPONDED,
        reason=text,
        content=response_content(response=text, by=decided_by.get_username()),
        actor=decided_by,
        after={
            "response": text,
            "proposed_arguments": approval.proposed_arguments,
        },
    )


def _took_part(approval: ApprovalRequest, user: User, decision: Decision) -> bool:
    """Return whether ``user`` made (or voted for) ``approval``'s decision.

    Only their own repeat is an idempotent no-op (BC34); anyone else's identical
    decision on a request decided without them is refused, so nobody is told their
    vote counted when it was never recorded.
    """
    if approval.decided_by_id == user.pk:
        return True
    return approval.votes.filter(
        voter_id=user.pk, decision=decision, reset_at__isnull=True
    ).exists()


def approval_expired_error(approval: ApprovalRequest) -> ApprovalExpired:
    """Return the error telling a decider that ``approval`` expired before the decision."""
    return ApprovalExpired(
        f"approval {approval.pk!r} expired at {approval.expires_at.isoformat()}; "
        "the agent was told it expired"
    )


def _vote(
    *,
    approval: ApprovalRequest,
    call: ToolCall,
    voter: User,
    decision: Decision,
    reason: str,
    edited_arguments: dict[str, Any] | ValidatedArguments | None,
    grant: dict[str, Any] | None,
) -> tuple[VoteOutcome, ValidatedArguments | None]:
    """Validate an edit, record ``voter``'s vote and any grant; return the vote and the edit.

    The edit is validated here, once (an edit that is already a value validated
    against the tool's current schema is not): the decision uses the returned
    value. Who may vote was checked by the caller (``authorization_require``).
    """
    edited: ValidatedArguments | None = None
    if isinstance(edited_arguments, ValidatedArguments) and (
        edited_arguments.schema_sha256
        == tool_schema_sha256(_edit_tool(call=call, run=approval.run))
    ):
        edited = edited_arguments
    elif edited_arguments is not None:
        raw = (
            edited_arguments.as_dict()
            if isinstance(edited_arguments, ValidatedArguments)
            else edited_arguments
        )
        edited = _validate_edit(call=call, run=approval.run, edited=raw)
    outcome = vote_record(
        approval=approval,
        voter=voter,
        decision=decision,
        reason=reason,
        edited_arguments=edited,
    )
    if grant is not None and decision == "approve" and not outcome.repeated:
        grant_create(
            approval=approval,
            call=call,
            tool=run_tools(approval.run)[0].resolve(call.name),
            granted_by=voter,
            spec=grant,
        )
    return outcome, edited


def _decide_locked(
    *,
    approval: ApprovalRequest,
    call: ToolCall,
    decided_by: User,
    decision: Decision,
    reason: str,
    edited: ValidatedArguments | None,
    undo_seconds: float = 0.0,
) -> QueuedExecution | None:
    """Act on the deciding vote: queue the approved value for execution, or refuse the call.

    ``edited`` is the edit this vote validated; the value approved is the
    request's current arguments (an earlier approver's edit, or the proposal),
    validated when they were stored, so they are only hashed here. Returns the
    queued execution, which the caller hands to a worker after commit.
    """
    if decision != "approve":
        approval.reason = reason
        _answer_locked(
            approval=approval,
            call=call,
            decided_by=decided_by,
            to=ApprovalRequest.Status.REJECTED,
            reason=reason,
            after=_vote_decision_facts(
                approval, approved_hash="", undo_seconds=undo_seconds
            ),
        )
        return None
    before = {"status": approval.status}
    if approval.edited_arguments is not None:
        if edited is not None and edited.params == approval.edited_arguments:
            arguments = edited
        else:
            arguments = _stored_edit(call=call, approval=approval)
    elif not approval.schema_valid:
        # A re-approval after a schema change: the current arguments may not
        # fit the new schema, and running them would only come back here.
        raise InvalidEditedArguments(
            "the arguments do not match the tool's current input schema "
            f"({approval.schema_errors or 'see the schema'}); approve with "
            "edited arguments that do, or reject the call"
        )
    else:
        arguments = ValidatedArguments.stored(
            params=approval.proposed_arguments, schema_sha256=approval.schema_hash
        )
    approval_transition(
        approval=approval, to=ApprovalRequest.Status.APPROVED, save=False
    )
    approval.reason = reason
    tool_call_transition(call=call, to=ToolCall.State.APPROVED)
    not_before = (
        timezone.now() + timedelta(seconds=undo_seconds) if undo_seconds > 0 else None
    )
    queued = execution_create(
        call=call,
        arguments=arguments,
        authorized_by="approval",
        reapproved=approval.reapproval_count > 0,
        not_before=not_before,
    )
    _decision_record(
        approval=approval,
        decided_by=decided_by,
        before=before,
        after={
            "status": approval.status,
            **_vote_decision_facts(
                approval, approved_hash=arguments.sha256, undo_seconds=undo_seconds
            ),
        },
    )
    return queued


def _vote_decision_facts(
    approval: ApprovalRequest, *, approved_hash: str, undo_seconds: float
) -> dict[str, Any]:
    """Return the audit facts of a tool-call request's deciding vote, beside its status."""
    return {
        "reason": approval.reason,
        "proposed_arguments": approval.proposed_arguments,
        "edited_arguments": approval.edited_arguments,
        "approved_arguments_hash": approved_hash,
        "undo_seconds": undo_seconds or None,
    }


def approval_undo(*, approval: ApprovalRequest, user: User) -> ApprovalRequest:
    """Undo an approval whose execution has not started; the request is pending again.

    Under the row locks (thread → call → approval → execution): only an
    ``approved`` tool-call request whose execution is still ``queued``, never
    attempted and inside its ``not_before`` window can be undone; its execution
    record is removed (a delivery that arrives later finds none and does nothing),
    the call waits for approval again and the decision is cleared. Under N of M
    the deciding (N-th) approval is withdrawn: that vote is deleted
    and any grant made with it revoked, while the earlier approvers' votes still
    count (the request needs one more approval again). Only the decider, or a
    user who may authorize the request, may undo. Audited as ``approval.undone``. Raises :class:`UndoTooLate` when execution started or the
    window is over, :class:`ApprovalPermissionDenied` for anyone else.
    Exactly-once holds because the executor claims the record under the same lock
    only after ``not_before``. Implements SEC-02.
    """
    with transaction.atomic():
        _, call, locked = approval_lock(approval=approval)
        if not (
            getattr(user, "is_active", False)
            and (
                locked.decided_by_id == user.pk
                or approval_authorization(locked, user).can_authorize
            )
        ):
            raise ApprovalPermissionDenied(
                f"user {getattr(user, 'username', None)!r} may not undo the decision "
                f"on approval {locked.pk!r}: only its decider or someone who may "
                "authorize it can"
            )
        execution = call_execution_lock(call=call) if call is not None else None
        now = timezone.now()
        if (
            locked.status != ApprovalRequest.Status.APPROVED
            or locked.kind != ApprovalRequest.Kind.TOOL_CALL
            or call is None
            or execution is None
            or execution.state != ToolExecution.State.QUEUED
            or execution.attempts
            or execution.not_before is None
            or execution.not_before <= now
        ):
            raise UndoTooLate(
                f"approval {locked.pk!r} can no longer be undone: "
                + (
                    "it is not an approved call waiting to execute"
                    if execution is None or locked.status != "approved"
                    else f"its execution is {execution.state!r} (it may start at "
                    f"{execution.not_before.isoformat() if execution.not_before else 'once'})"
                )
            )
        before = {
            "status": locked.status,
            "decided_by": getattr(locked.decided_by, "username", None),
            "edited_arguments": locked.edited_arguments,
            "approved_arguments_hash": locked.approved_arguments_hash,
        }
        execution.delete()
        withdrawn = _deciding_vote_withdraw(approval=locked, user=user)
        before["vote"] = withdrawn
        approval_transition(
            approval=locked, to=ApprovalRequest.Status.PENDING, save=False
        )
        locked.decided_by = None
        locked.decided_at = None
        locked.reason = ""
        # The remaining approvers approved these arguments (an edit resets the
        # approvals of earlier ones); keep them so their votes still count
        # (approvals_progress compares hashes), unless no approval remains.
        remaining = locked.votes.filter(
            reset_at__isnull=True, decision="approve"
        ).exists()
        if not remaining:
            locked.edited_arguments = None
        locked.save()
        call_transition(
            call=call,
            to=ToolCall.State.AWAITING_APPROVAL,
            audit=AuditFact(
                actor=user,
                action="approval.undone",
                target=locked,
                before=before,
                after={"status": locked.status},
            ),
            notify=True,
            approval=locked,
        )
    return locked


def _deciding_vote_withdraw(*, approval: ApprovalRequest, user: User) -> int | None:
    """Delete the decider's live approval of ``approval`` and revoke grants made with it.

    Returns the deleted vote's id (``None`` when there was none: a request
    approved before governance). Runs under the row lock of :func:`approval_undo`.
    """
    vote = approval.votes.filter(
        voter_id=approval.decided_by_id, reset_at__isnull=True, decision="approve"
    ).last()
    if vote is None:
        return None
    for grant in approval.grants.filter(
        granted_by_id=vote.voter_id, revoked_at__isnull=True
    ):
        grant_revoke(
            grant=grant, revoked_by=user, reason="the approval it came with was undone"
        )
    pk = vote.pk
    vote.delete()
    return pk


def _decision_record(
    *,
    approval: ApprovalRequest,
    decided_by: User,
    before: dict[str, Any],
    after: dict[str, Any],
) -> None:
    """Stamp who decided ``approval`` and when, save it and audit the decision (SEC-04)."""
    approval.decided_by = decided_by
    approval.decided_at = timezone.now()
    approval.save()
    audit_append(
        actor=decided_by,
        action=f"approval.{approval.status}",
        target=approval,
        before=before,
        after=after,
    )


def _decide_interrupt_locked(
    *,
    approval: ApprovalRequest,
    call: ToolCall | None,
    decided_by: User,
    decision: Decision,
    reason: str,
    edited_arguments: dict[str, Any] | None,
    response: JSONValue,
) -> None:
    """Decide a remote agent's interrupt: validate, record its resume entry, audit (IR-18)."""
    before = {"status": approval.status}
    schema = approval.response_schema
    payload: JSONValue = response
    if edited_arguments == approval.proposed_arguments:
        edited_arguments = None  # "approve as proposed", however it was spelled
    if payload is None:
        # The remote's own terms: its schema's approve key, editedArgs if it
        # offers them, the approver's note only where it is no tool argument.
        try:
            payload = resume_payload(
                schema=schema,
                approved=decision == "approve",
                edited_args=edited_arguments,
                reason=reason,
                tool_arguments=approval.proposed_arguments,
            )
        except ValueError as error:
            raise InvalidEditedArguments(str(error)) from error
    if decision == "approve":
        response_validate(schema, payload)
        entry: dict[str, Any] = {
            "interruptId": approval.interrupt_id,
            "status": "resolved",
        }
        if payload is not None:
            entry["payload"] = payload
        if edited_arguments is not None:
            approval.edited_arguments = edited_arguments
        status = ApprovalRequest.Status.APPROVED
        call_state = ToolCall.State.APPROVED
    else:
        if payload is not None:
            response_validate(schema, payload)
            entry = {
                "interruptId": approval.interrupt_id,
                "status": "resolved",
                "payload": payload,
            }
        else:
            entry = {"interruptId": approval.interrupt_id, "status": "cancelled"}
        status = ApprovalRequest.Status.REJECTED
        call_state = ToolCall.State.DECLINED
    approval.response = payload
    approval_transition(approval=approval, to=status, save=False)
    approval.reason = reason
    run_resume_record(run=approval.run, entry=entry)
    if call is not None and call.state == ToolCall.State.AWAITING_APPROVAL:
        tool_call_transition(call=call, to=call_state)
    _decision_record(
        approval=approval,
        decided_by=decided_by,
        before=before,
        after={
            "status": approval.status,
            "reason": reason,
            "interrupt_id": approval.interrupt_id,
            "resume": entry,
        },
    )


def _decide_input_locked(
    *,
    approval: ApprovalRequest,
    decided_by: User,
    decision: Decision,
    reason: str,
    response: JSONValue,
) -> None:
    """Decide an MCP server's input request; the waiting call reads the answer."""
    if decision == "approve":
        response_validate(approval.response_schema, response)
        approval.response = response
        status = ApprovalRequest.Status.APPROVED
    else:
        status = ApprovalRequest.Status.REJECTED
    approval_transition(approval=approval, to=status, save=False)
    approval.reason = reason
    _decision_record(
        approval=approval,
        decided_by=decided_by,
        before={"status": "pending"},
        after={"status": approval.status, "reason": reason, "response": response},
    )


def response_validate(schema: JSONValue, payload: JSONValue) -> None:
    """Raise :class:`InvalidResponse` unless ``payload`` satisfies JSON Schema ``schema``.

    A ``schema`` that is not a JSON Schema object refuses nothing (it is the agent's).
    """
    if not isinstance(schema, dict):
        return
    try:
        # The metaschema check first: jsonschema validates against a malformed
        # schema ({"type": 5}) by raising TypeError or AttributeError mid-way.
        Draft202012Validator.check_schema(schema)
        error = best_match(Draft202012Validator(schema).iter_errors(payload))
    except (SchemaError, TypeError, AttributeError, ValueError, re.error):
        # The agent's schema is its own; one that is not a schema cannot refuse.
        return
    if error is not None:
        where = ".".join(str(p) for p in error.absolute_path) or "response"
        raise InvalidResponse(
            f"response does not match the request's responseSchema at {where!r}: "
            f"{error.message}; send a 'response' object that satisfies it"
        )


def _edit_tool(*, call: ToolCall, run: Run) -> Tool:
    """Return the tool ``call`` names in ``run``'s toolset; raise if it is gone."""
    tool = run_tools(run)[0].resolve(call.name)
    if tool is None:
        raise InvalidEditedArguments(f"tool {call.name!r} is no longer configured")
    return tool


def _validate_edit(
    *, call: ToolCall, run: Run, edited: JSONValue
) -> ValidatedArguments:
    """Validate an operator's edited arguments against the tool's schema (SEC-02).

    The object goes through the same ladder as the model's arguments (as an
    already decoded object, never through text) and must need no repair.
    """
    if not isinstance(edited, dict):
        raise InvalidEditedArguments(
            f"edited arguments must be a JSON object, not {type(edited).__name__}"
        )
    tool = _edit_tool(call=call, run=run)
    parsed = parse_arguments(edited, tool=tool)
    if parsed.value is None or parsed.value.repairs != ("already_decoded",):
        # The validator's message is written for the model; an operator needs only
        # what is wrong, not the advice to "call the tool again".
        detail = (parsed.error or "").split(" Expected parameters:")[0]
        raise InvalidEditedArguments(f"edited arguments are invalid: {detail}")
    _edit_policy_check(call=call, run=run, tool=tool, params=parsed.value.as_dict())
    return parsed.value


def _edit_policy_check(
    *, call: ToolCall, run: Run, tool: Tool, params: dict[str, Any]
) -> None:
    """Raise :class:`InvalidEditedArguments` when the policy denies the edited ``params``."""
    if (
        call_policy(
            thread=call.thread, agent=run.agent, tool=tool, arguments=params
        ).action
        == "deny"
    ):
        # Edited arguments go through policy again (IR-11): an edit cannot make a
        # call the policy refuses.
        raise InvalidEditedArguments(
            f"policy refuses {tool.name!r} with the edited arguments; edit them "
            "differently or reject the call"
        )


def _stored_edit(*, call: ToolCall, approval: ApprovalRequest) -> ValidatedArguments:
    """Return the edit an earlier approver's vote validated, checked against the policy again.

    Its schema validation was done when it was voted; the policy may have changed.
    """
    assert approval.edited_arguments is not None
    tool = _edit_tool(call=call, run=approval.run)
    value = ValidatedArguments.stored(
        params=approval.edited_arguments, schema_sha256=approval.schema_hash
    )
    _edit_policy_check(call=call, run=approval.run, tool=tool, params=value.as_dict())
    return value


def edited_arguments_validate(
    *, approval: ApprovalRequest, edited: JSONValue
) -> ValidatedArguments:
    """Return ``edited`` validated for ``approval``'s tool, schema and policy (SEC-02, IR-11).

    The value can be handed to :func:`approval_decide` as ``edited_arguments``,
    which then does not validate it again. Raises :class:`InvalidEditedArguments`.
    Changes nothing: callers check a whole input before any decision (IR-09).
    """
    call = approval.call
    if call is None:
        raise InvalidEditedArguments(
            f"approval {approval.pk!r} holds no tool call: answer it with `response`, "
            "not edited arguments"
        )
    if approval.kind == ApprovalRequest.Kind.INTERRUPT:
        return _validate_remote_edit(approval=approval, edited=edited)
    return _validate_edit(call=call, run=approval.run, edited=edited)


def _validate_remote_edit(
    *, approval: ApprovalRequest, edited: JSONValue
) -> ValidatedArguments:
    """Validate an edit of a remote agent's held call against that agent's own terms.

    The remote runs its tool, so Countersign's toolset has no say: the edit must
    be an object the interrupt's ``responseSchema`` accepts as ``editedArgs``
    (the remote tool's declared arguments, when it declares them), through the
    same ladder as a model's arguments, needing no repair. Raises
    :class:`InvalidEditedArguments`. Implements SEC-02, IR-11, IR-18.
    """
    if not isinstance(edited, dict):
        raise InvalidEditedArguments(
            f"edited arguments must be a JSON object, not {type(edited).__name__}"
        )
    schema = approval.response_schema
    if approve_key(schema) is not None and not offers_edits(schema):
        raise InvalidEditedArguments(
            f"the remote agent's interrupt for {approval.tool_name!r} offers no "
            "'editedArgs' in its responseSchema; approve the call as proposed or "
            "reject it"
        )
    tool = remote_tool(name=approval.tool_name, schema=schema)
    parsed = parse_arguments(edited, tool=tool)
    if parsed.value is None or parsed.value.repairs != ("already_decoded",):
        detail = (parsed.error or "").split(" Expected parameters:")[0]
        raise InvalidEditedArguments(f"edited arguments are invalid: {detail}")
    return parsed.value


def approval_expire_locked(approval: ApprovalRequest, call: ToolCall | None) -> None:
    """Expire the locked, pending ``approval`` and tell whoever waits for it.

    A tool_call request's call is answered as expired; an interrupt's agent gets a
    ``cancelled`` resume entry (IR-18); an input request's waiting call reads the
    expiry and tells its server ``cancel``. Audited.
    """
    approval_transition(
        approval=approval, to=ApprovalRequest.Status.EXPIRED, save=False
    )
    approval.decided_at = timezone.now()
    send_on_commit(approval_outcome, approval, outcome="expired")
    if approval.kind == ApprovalRequest.Kind.INPUT:
        # The waiting call sees the expiry and tells its server "cancel".
        approval.save(update_fields=["status", "decided_at"])
        audit_append(
            actor=None,
            action="approval.expired",
            target=approval,
            before={"status": "pending"},
            after={"status": "expired"},
        )
        notify_approval_changed(approval, call=call)
        return
    approval.save(update_fields=["status", "decided_at"])
    if approval.kind == ApprovalRequest.Kind.INTERRUPT:
        # The agent is told in its next input that nobody answered (IR-18).
        run_resume_record(
            run=approval.run,
            entry={"interruptId": approval.interrupt_id, "status": "cancelled"},
        )
        if call is not None and call.state == ToolCall.State.AWAITING_APPROVAL:
            tool_call_transition(call=call, to=ToolCall.State.EXPIRED)
        audit_append(
            actor=None,
            action="approval.expired",
            target=approval,
            before={"status": "pending"},
            after={"status": "expired", "interrupt_id": approval.interrupt_id},
        )
        notify_approval_changed(approval, call=call)
        return
    assert call is not None  # a tool_call request always has its call
    call_answer_refused(
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
    notify_approval_changed(approval, call=call)


def approval_expire(*, approval: ApprovalRequest) -> ApprovalRequest | None:
    """Expire ``approval`` if it is still pending once locked; return it, or ``None``.

    Its call is answered with an error tool message so its thread can continue
    (the caller continues the run, in the same transaction:
    :func:`orchestration.pipeline.approvals_expire`). Must run inside
    ``transaction.atomic()``; takes the request's row locks.
    """
    _, call, locked = approval_lock(approval=approval)
    if locked.status != ApprovalRequest.Status.PENDING:
        return None
    approval_expire_locked(locked, call)
    return locked
