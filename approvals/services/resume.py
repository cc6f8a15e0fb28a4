"""Deciding interrupts from ``RunAgentInput.resume``: the queue's decision, from the client.

:func:`resume_check` checks a whole resume against the thread's open interrupts
(approval requests, :mod:`approvals.interrupts`) before anything changes; then
:func:`orchestration.resume.resume_decide` decides each through the pipeline's
:func:`orchestration.pipeline.approval_decide`, the same service, permission,
validation, audit and exactly-once execution as the approval queue. The
answers it gives:

- an open interrupt the input leaves uncovered, or input without ``resume``
  while interrupts are open: 409 ``interrupts_uncovered`` naming them (IR-07);
- two entries for one interrupt: 400 ``duplicate_resume_entry`` (IR-08);
- an entry naming no interrupt of this thread: ignored, with a warning (IR-08);
- a payload that fails ``responseSchema``: 400 ``invalid_resume_payload``, or
  ``invalid_arguments`` for ``editedArgs`` that fail the tool's schema or policy
  (IR-09, IR-11); nothing is decided and the interrupt stays open;
- a resolved entry after the request expired: 409 ``INTERRUPT_EXPIRED`` (IR-10);
  a cancelled one is accepted;
- a sender without ``approvals.decide_approvalrequest``: 403 ``permission_denied``
  and nothing changes (IR-12);
- an entry naming an interrupt already decided (by the queue, or by an earlier
  resume: a replay): 409 ``interrupt_decided`` with the recorded decisions,
  ``openInterruptIds`` naming those still open (resume only those, IR-17), and
  nothing decided or executed again (IR-13).

Runs inside the caller's transaction, which holds the thread's lock, so
concurrent resumes and a racing queue decision are serialized (IR-14).
Interrupt ids are ``"cs-approval-<pk>"`` (:func:`approvals.interrupts.interrupt_id`);
an entry in any other form names no interrupt (IR-02).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from agentcore.arguments import ValidatedArguments
from approvals.authorization import authorization_require
from approvals.exceptions import (
    ApprovalPermissionDenied,
    InvalidResponse,
    ResumeInvalid,
    ResumeRefused,
)
from approvals.interrupts import interrupt_approval_pk, interrupt_id
from approvals.models import DECIDE_PERMISSION, ApprovalRequest
from approvals.services.decisions import (
    Decision,
    edited_arguments_validate,
    response_validate,
)
from core.types import JSONValue, User
from threads.models import Run, Thread

if TYPE_CHECKING:
    from agentcore.events import ResumeEntry

logger = logging.getLogger(__name__)

#: The reason recorded when a resume rejects or cancels without giving one.
DEFAULT_REJECT_REASON = "declined by the user in the AG-UI client"
DEFAULT_CANCEL_REASON = "cancelled by the user in the AG-UI client"
_PAYLOAD_KEYS = frozenset({"approved", "editedArgs", "reason"})


@dataclass(frozen=True)
class ResumePlan:
    """One checked resume entry: the decision to take on ``approval``."""

    approval: ApprovalRequest
    decision: Decision
    reason: str
    edited: ValidatedArguments | None
    cancelled: bool
    #: The answer to a remote agent's question interrupt (no call), else ``None``.
    response: JSONValue = None

    @property
    def tool_call_id(self) -> str:
        """The held call's ``toolCallId``."""
        return getattr(self.approval.call, "tool_call_id", "")

    @property
    def remote_interrupt_id(self) -> str:
        """The remote agent's own interrupt id this plan answers (IR-18), or ``""``."""
        return self.approval.interrupt_id


def _entry_decision(
    entry: ResumeEntry, approval: ApprovalRequest, index: int
) -> dict[str, Any]:
    """Return ``{"decision", "reason", "edited"}`` for one entry, validating its payload."""
    where = f"resume.{index}.payload"
    if entry.status == "cancelled":
        reason = (
            (entry.payload or {}).get("reason")
            if isinstance(entry.payload, dict)
            else None
        )
        return {
            "decision": "reject",
            "reason": reason
            if isinstance(reason, str) and reason.strip()
            else DEFAULT_CANCEL_REASON,
            "edited": None,
            "cancelled": True,
        }
    payload = entry.payload
    if approval.call is None:
        # A remote agent's question (IR-18): the payload is the answer itself,
        # validated against the interrupt's own responseSchema before any decision.
        try:
            response_validate(approval.response_schema, payload)
        except InvalidResponse as error:
            raise ResumeInvalid(
                f"{where}: {error}; nothing was decided",
                code="invalid_resume_payload",
                field=where,
            ) from error
        return {
            "decision": "approve",
            "reason": "",
            "edited": None,
            "cancelled": False,
            "response": payload,
        }
    if not isinstance(payload, dict) or not isinstance(payload.get("approved"), bool):
        raise ResumeInvalid(
            f"{where} must be an object with a boolean 'approved' (the interrupt's "
            "responseSchema); nothing was decided",
            code="invalid_resume_payload",
            field=where,
        )
    unknown = sorted(set(payload) - _PAYLOAD_KEYS)
    if unknown:
        raise ResumeInvalid(
            f"{where} has members {unknown} that responseSchema does not allow; "
            "send only approved, editedArgs and reason",
            code="invalid_resume_payload",
            field=where,
        )
    reason = payload.get("reason", "")
    if not isinstance(reason, str) or len(reason) > 2000:
        raise ResumeInvalid(
            f"{where}.reason must be a string of at most 2000 characters",
            code="invalid_resume_payload",
            field=f"{where}.reason",
        )
    edited = payload.get("editedArgs")
    if payload["approved"] and edited is not None:
        try:
            edited = edited_arguments_validate(approval=approval, edited=edited)
        except ResumeRefused:
            raise
        except Exception as error:
            raise ResumeInvalid(
                f"{where}.editedArgs: {error}; nothing was decided",
                code="invalid_arguments",
                field=f"{where}.editedArgs",
            ) from error
    if payload["approved"]:
        return {
            "decision": "approve",
            "reason": reason,
            "edited": edited,
            "cancelled": False,
        }
    return {
        "decision": "reject",
        "reason": reason.strip() or DEFAULT_REJECT_REASON,
        "edited": None,
        "cancelled": False,
    }


def recorded_decision(approval: ApprovalRequest) -> dict[str, Any]:
    """Return what was decided on ``approval``, as a resume refusal reports it (IR-13)."""
    return {
        "interruptId": interrupt_id(approval),
        "toolCallId": getattr(approval.call, "tool_call_id", None),
        "status": approval.status,
        "decidedBy": getattr(approval.decided_by, "username", None),
        "decidedAt": approval.decided_at.isoformat() if approval.decided_at else None,
        "editedArgs": approval.edited_arguments,
        "reason": approval.reason,
    }


def thread_open_approvals(*, thread: Thread) -> list[ApprovalRequest]:
    """Return the open interrupts of ``thread``'s last run: its pending approval requests."""
    latest = thread.runs.order_by("-created_at", "-id").first()
    if latest is None or latest.status != Run.Status.AWAITING_TOOLS:
        return []
    return list(
        ApprovalRequest.objects.filter(
            run=latest, status=ApprovalRequest.Status.PENDING
        )
        .select_related("tool_call", "run", "decided_by")
        .order_by("tool_call__position", "tool_call_id")
    )


def resume_check(
    *, user: User, thread: Thread, resume: Sequence[ResumeEntry] | None
) -> list[ResumePlan]:
    """Check ``resume`` against ``thread``'s open interrupts; return what to decide.

    ``resume`` holds ``ResumeEntry`` models (``interrupt_id``, ``status``,
    ``payload``). Changes nothing; raises for each refusal listed in the module
    text (:class:`approvals.exceptions.ResumeRefused`,
    :class:`approvals.exceptions.ApprovalPermissionDenied`). Must run inside a
    transaction holding the thread's lock. Implements IR-07…IR-13.
    """
    entries = list(resume or [])
    open_approvals = {interrupt_id(a): a for a in thread_open_approvals(thread=thread)}
    seen: set[str] = set()
    for index, entry in enumerate(entries):
        if entry.interrupt_id in seen:
            raise ResumeInvalid(
                f"resume.{index}.interruptId {entry.interrupt_id!r} repeats an earlier "
                "entry; answer each interrupt once",
                code="duplicate_resume_entry",
                field=f"resume.{index}.interruptId",
            )
        seen.add(entry.interrupt_id)
    decided = []
    known: list[tuple[int, Any, ApprovalRequest]] = []
    for index, entry in enumerate(entries):
        approval = open_approvals.get(entry.interrupt_id)
        if approval is not None:
            known.append((index, entry, approval))
            continue
        earlier_pk = interrupt_approval_pk(entry.interrupt_id)
        earlier = (
            ApprovalRequest.objects.filter(thread=thread, pk=earlier_pk)
            .select_related("tool_call", "decided_by")
            .first()
            if earlier_pk is not None
            else None
        )
        if earlier is None:
            logger.warning(
                "thread %s: resume entry for unknown interrupt %r ignored",
                thread.thread_id,
                entry.interrupt_id,
            )
        elif earlier.status == ApprovalRequest.Status.EXPIRED:
            if entry.status != "cancelled":
                raise ResumeRefused(
                    f"interrupt {entry.interrupt_id!r} expired at "
                    f"{earlier.expires_at.isoformat()}; it can only be cancelled",
                    code="INTERRUPT_EXPIRED",
                    field=f"resume.{index}",
                )
        else:
            decided.append(earlier)
    if decided:
        raise ResumeRefused(
            "interrupts "
            + ", ".join(repr(interrupt_id(a)) for a in decided)
            + " were already decided; nothing was decided or executed again. Follow "
            f"GET /agui/threads/{thread.thread_id}/events to receive what followed",
            code="interrupt_decided",
            # The ones still open, so the client can resume only those (IR-17).
            extra={
                "interrupts": [recorded_decision(a) for a in decided],
                "openInterruptIds": list(open_approvals),
            },
        )
    uncovered = [i for i in open_approvals if i not in seen]
    if uncovered:
        raise ResumeRefused(
            f"interrupts {uncovered} are open on this thread; send one resume entry "
            "for each (status 'resolved' with a payload, or 'cancelled')",
            code="interrupts_uncovered",
            extra={"interruptIds": uncovered},
        )
    if not known:
        return []
    if not getattr(user, "is_active", False) or not user.has_perm(DECIDE_PERMISSION):
        raise ApprovalPermissionDenied(
            f"user {getattr(user, 'username', None)!r} may not decide tool calls; "
            f"ask an administrator for the {DECIDE_PERMISSION!r} permission; "
            "nothing was decided"
        )
    now = timezone.now()
    plans = []
    for index, entry, approval in known:
        plan = _entry_decision(entry, approval, index)
        if approval.expires_at <= now and not plan["cancelled"]:
            raise ResumeRefused(
                f"interrupt {entry.interrupt_id!r} expired at "
                f"{approval.expires_at.isoformat()}; it can only be cancelled",
                code="INTERRUPT_EXPIRED",
                field=f"resume.{index}",
            )
        # Refused before any entry is decided: the tool's own permission, approver
        # groups, four-eyes and claims too (SEC-02, DC-03).
        authorization_require(approval=approval, user=user, decision=plan["decision"])
        plans.append(ResumePlan(approval=approval, **plan))
    return plans
