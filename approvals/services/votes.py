"""Four-eyes and N-of-M: recording each approver's vote on a tool-call request.

:func:`vote_record` runs inside :func:`approvals.services.approval_decision_record`,
holding the request's row lock (thread → call → approval), so two approvers
committing the N-th approval at the same moment are serialized: the first
decides the request, the second finds it decided. An edit by one approver
resets the approvals given to the earlier arguments (each reset vote says why).
Implements SEC-02, DC-03.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.utils import timezone

from agentcore.arguments import ValidatedArguments, canonical_sha256
from approvals.exceptions import ApprovalAlreadyDecided
from approvals.models import ApprovalRequest, ApprovalVote
from approvals.services.audit import audit_append
from core.types import User


@dataclass(frozen=True, slots=True)
class VoteOutcome:
    """What one vote did: ``final`` when it decided the request, ``repeated`` when it changed nothing."""

    final: bool
    repeated: bool = False
    reset: tuple[str, ...] = ()


def _votes_cache(approval: ApprovalRequest, votes: list[ApprovalVote]) -> None:
    """Make ``approval.votes.all()`` return ``votes`` without a query (as a prefetch does).

    ``votes`` must be all of the request's votes, oldest first, read or written
    under its row lock (so no other transaction adds one before it commits).
    """
    cached = ApprovalVote.objects.filter(approval=approval)
    # What prefetch_related stores: a queryset whose result is already known.
    cached._result_cache = votes
    cached._prefetch_done = True  # type: ignore[attr-defined]
    approval._prefetched_objects_cache = {  # type: ignore[attr-defined]
        **getattr(approval, "_prefetched_objects_cache", {}),
        "votes": cached,
    }


def vote_record(
    *,
    approval: ApprovalRequest,
    voter: User,
    decision: str,
    reason: str,
    edited_arguments: ValidatedArguments | None,
) -> VoteOutcome:
    """Record ``voter``'s ``decision`` on the locked, pending ``approval``; return what it did.

    ``edited_arguments`` is the value the caller validated; the vote stores its
    hash (``arguments_hash``), the request its params. An approval counts toward
    ``approvals_required`` only for the arguments now proposed (the edited ones
    if any); approving with different arguments replaces them and resets the
    earlier approvals (audited ``approval.votes_reset``). ``final`` is true when
    this vote is the N-th distinct approval, or the ``rejections_required``-th
    rejection. A voter's identical repeat is ``repeated``; a different second
    vote raises :class:`ApprovalAlreadyDecided`. Who may vote (groups, four-eyes,
    claims) the caller checked with :func:`approvals.authorization.authorization_require`.
    Implements SEC-02 (four-eyes).
    """
    # Every vote, with its voter: the live ones decide, and all of them are what
    # the decision's notification shows (approvals_progress), without reading
    # them again once this vote is added (B2).
    every = list(approval.votes.select_related("voter"))
    votes = [v for v in every if v.reset_at is None]
    current = approval.approved_arguments
    current_hash = canonical_sha256(current)
    if edited_arguments is not None and edited_arguments.params != current:
        proposed = edited_arguments.as_dict()
        proposed_hash = edited_arguments.sha256
    else:
        proposed = current
        proposed_hash = current_hash
    own = next((v for v in votes if v.voter_id == voter.pk), None)
    if own is not None:
        if own.decision == decision and (
            decision == "reject" or own.arguments_hash == proposed_hash
        ):
            return VoteOutcome(final=False, repeated=True)
        if not (decision == "approve" and own.decision == "approve"):
            raise ApprovalAlreadyDecided(
                f"user {voter.username!r} already voted {own.decision!r} on approval "
                f"{approval.pk!r}; another approver must decide"
            )
    reset: list[str] = []
    if decision == "approve" and proposed_hash != current_hash:
        now = timezone.now()
        earlier = [v for v in votes if v.decision == "approve"]
        for vote in earlier:
            vote.reset_at = now
            vote.reset_reason = (
                f"{voter.username} edited the arguments; approve the new "
                "arguments to count again"
            )
            vote.save(update_fields=["reset_at", "reset_reason"])
            reset.append(vote.voter.username)
        approval.edited_arguments = (
            None if proposed == approval.proposed_arguments else proposed
        )
        approval.save(update_fields=["edited_arguments"])
        audit_append(
            actor=voter,
            action="approval.votes_reset",
            target=approval,
            before={"arguments": current, "approved_by": reset},
            after={"arguments": proposed},
        )
        votes = [v for v in votes if v.reset_at is None]
    vote = ApprovalVote.objects.create(
        approval=approval,
        voter=voter,
        decision=decision,
        arguments_hash=proposed_hash if decision == "approve" else "",
        reason=reason,
    )
    votes.append(vote)
    every.append(vote)
    _votes_cache(approval, every)
    if decision == "approve":
        given = sum(
            1
            for v in votes
            if v.decision == "approve" and v.arguments_hash == proposed_hash
        )
        final = given >= approval.approvals_required
    else:
        given = sum(1 for v in votes if v.decision == "reject")
        final = given >= approval.rejections_required
    audit_append(
        actor=voter,
        action=f"approval.vote.{decision}",
        target=approval,
        after={
            "vote": vote.pk,
            "arguments_hash": vote.arguments_hash,
            "given": given,
            "required": (
                approval.approvals_required
                if decision == "approve"
                else approval.rejections_required
            ),
            "reason": reason,
            "reset": reset,
        },
    )
    return VoteOutcome(final=final, reset=tuple(reset))


def approvals_progress(approval: ApprovalRequest) -> dict[str, Any]:
    """Return ``{"required", "given", "by", "rejections", "reset"}`` for ``approval``.

    ``by`` lists the usernames whose live approvals cover the current arguments;
    ``reset`` the votes an edit reset, as ``{"by", "reason", "at"}``. The one
    shape the REST API, the admin and the AG-UI interrupt metadata show.
    """
    current = canonical_sha256(approval.approved_arguments)
    votes = list(approval.votes.all())  # prefetched (with voters) by the selectors
    by = [
        v.voter.username
        for v in votes
        if v.reset_at is None
        and v.decision == "approve"
        and v.arguments_hash == current
    ]
    return {
        "required": approval.approvals_required,
        "given": len(by),
        "by": by,
        "rejections": [
            {"by": v.voter.username, "reason": v.reason}
            for v in votes
            if v.reset_at is None and v.decision == "reject"
        ],
        "rejectionsRequired": approval.rejections_required,
        "reset": [
            {
                "by": v.voter.username,
                "reason": v.reset_reason,
                "at": v.reset_at.isoformat() if v.reset_at else None,
            }
            for v in votes
            if v.reset_at is not None
        ],
    }


def _stamp(value: Any) -> str | None:
    # The REST API's DateTimeField form, so the snapshot and the API agree.
    return value.isoformat().replace("+00:00", "Z") if value else None


def governance_snapshot(approval: ApprovalRequest) -> dict[str, Any]:
    """Return ``approval``'s routing, N-of-M, escalation and claim state (camelCase).

    Risk is not here: :func:`approvals.selectors.approval_risk` merges the
    policy's declared risk with the computed one (REST, queue and interrupts ``risk``).

    Part of :func:`approvals.services.notify.approval_snapshot` and of the REST
    output, so every surface shows the same governance state: ``approvals``
    (:func:`approvals_progress`), ``approverGroups``, ``requesterMayApprove``,
    ``escalation``, ``escalationStep``, ``stepDeadline``, ``policySource``, ``claimedBy``, ``claimedAt``.
    """
    return {
        "approvals": approvals_progress(approval),
        "approverGroups": sorted(g.name for g in approval.approver_groups.all()),
        "requesterMayApprove": approval.requester_may_approve,
        "escalation": approval.escalation or [],
        "escalationStep": approval.escalation_step,
        "stepDeadline": _stamp(approval.step_deadline),
        "policySource": approval.policy_source,
        "claimedBy": getattr(approval.claimed_by, "username", None),
        "claimedAt": _stamp(approval.claimed_at),
    }
