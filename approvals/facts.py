"""The facts of one approval request, computed once for every surface.

The queue card, the thread page, the admin change page, the REST API, the AG-UI
interrupt ``metadata``, email, webhooks and Slack render what a request is
from :func:`approval_facts`, so none of them can tell a different story: the
votes given and still needed (and from which group), who voted, the proposed
and the approved arguments, who decided, whether that decision stands yet (an
undo window), what ran, and — for one viewer — why they cannot act and who can.
Every sentence here is written for a person: no permission codenames, no
Python reprs, no timestamps (pages show times themselves, in the viewer's zone).
Implements SEC-02 (what was proposed and approved is shown apart) and DC-03.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django.contrib.auth.models import Permission
from django.utils import timezone

from agentcore.arguments import canonical_sha256
from approvals.authorization import (
    approval_authorization,
    approval_tool,
    required_permissions,
    who_can_authorize,
)
from approvals.labels import approval_label
from approvals.models import DECIDE_PERMISSION, ApprovalRequest, ToolExecution
from approvals.services.votes import approvals_progress
from core.text import sentence
from core.types import AnyUser, JSONValue

#: Longest excerpt of a tool's result shown as an outcome, in characters.
RESULT_CHARS = 600

#: Where a request is in its life, as every surface names it.
PHASES = (
    "waiting",  # pending: more approvals (or a first decision) needed
    "undo_window",  # approved; its execution waits, and it can still be undone
    "approved",  # approved and standing; queued or running
    "executed",  # approved, ran and succeeded (or an operator resolved it)
    "failed",  # approved, ran and failed
    "outcome_unknown",  # approved; the worker stopped mid-run
    "rejected",
    "responded",  # an approver answered the call with text; nothing ran
    "expired",
    "cancelled",
)


def _names(names: list[str]) -> str:
    """Return ``["a", "b", "c"]`` as ``"a, b and c"``."""
    if len(names) <= 1:
        return "".join(names)
    return ", ".join(names[:-1]) + " and " + names[-1]


def _groups_phrase(groups: list[str]) -> str:
    """Return who an approval is routed to, as a phrase ("the finance group")."""
    if not groups:
        return "an approver"
    if len(groups) == 1:
        return f"the {groups[0]} group"
    return "the " + _names(groups).replace(" and ", " or ") + " groups"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _permission_names(dotted: tuple[str, ...]) -> list[str]:
    """Return the human names of permissions (``"Can add refund"``), never their codenames."""
    names = []
    for item in dotted:
        app_label, _, codename = item.partition(".")
        permission = Permission.objects.filter(
            content_type__app_label=app_label, codename=codename
        ).first()
        names.append(f"“{permission.name}”" if permission else "a permission")
    return names


def _text(content: JSONValue) -> str:
    """Return the text of a tool message's content (text parts joined, media named)."""
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        text = "\n".join(
            str(p.get("text", "")) if p.get("type") == "text" else f"[{p.get('type')}]"
            for p in content
            if isinstance(p, dict)
        )
    else:
        text = "" if content is None else str(content)
    text = text.strip()
    return text if len(text) <= RESULT_CHARS else text[: RESULT_CHARS - 1] + "…"


def arguments_diff(proposed: JSONValue, edited: JSONValue) -> list[dict[str, Any]]:
    """Return the differences between ``proposed`` and ``edited`` arguments, by path.

    ``[{"path": "a.b", "change": "changed"|"added"|"removed", "proposed", "edited"}]``
    in path order; nested objects are compared member by member, anything else
    whole. ``[]`` when ``edited`` is ``None`` or equal. Implements IR-11 (both
    versions kept and shown).
    """
    if edited is None:
        return []
    out: list[dict[str, Any]] = []

    def walk(path: str, left: Any, right: Any) -> None:
        if isinstance(left, dict) and isinstance(right, dict):
            for key in sorted(set(left) | set(right)):
                sub = f"{path}.{key}" if path else str(key)
                if key not in right:
                    out.append(
                        {
                            "path": sub,
                            "change": "removed",
                            "proposed": left[key],
                            "edited": None,
                        }
                    )
                elif key not in left:
                    out.append(
                        {
                            "path": sub,
                            "change": "added",
                            "proposed": None,
                            "edited": right[key],
                        }
                    )
                else:
                    walk(sub, left[key], right[key])
        elif left != right:
            out.append(
                {
                    "path": path or "(arguments)",
                    "change": "changed",
                    "proposed": left,
                    "edited": right,
                }
            )

    walk("", proposed, edited)
    return out


def approval_review(
    approval: ApprovalRequest, *, arguments: JSONValue | None = None
) -> dict[str, Any]:
    """Return how the call reads: the tool's own review, else its arguments as facts.

    ``{"summary", "facts": [{"label", "value"}], "warnings": [str], "declared":
    bool}`` for the arguments that would run, or for ``arguments`` when given (an
    approver's edit before it is approved, already validated). A tool that declares ``review``
    (:meth:`agentcore.tools.Tool.describe_review`) gives its summary, facts and
    pre-decision warnings; any other (an MCP or remote agent's tool) reads as its
    label and one line per argument. Arguments that fail the tool's schema are
    a warning too, so "valid" is never implied beside a call that would be refused.
    """
    proposal = arguments is None
    if arguments is None:
        arguments = approval.approved_arguments
    params = arguments if isinstance(arguments, dict) else {}
    tool = approval_tool(approval)
    review = tool.describe_review(params) if tool is not None else None
    if review is not None:
        out = {**review.as_json(), "declared": True}
    else:
        # The schema's order where the tool is known, else by name: a JSON column
        # keeps no key order on PostgreSQL (jsonb).
        declared = list((tool.parameters or {}).get("properties", {})) if tool else []
        rank = {name: i for i, name in enumerate(declared)}
        keys = sorted(params, key=lambda k: (rank.get(k, len(rank)), str(k)))
        out = {
            "summary": approval_label(approval) or approval.tool_name,
            "facts": [
                {
                    "label": str(key),
                    "value": value
                    if isinstance(value, str)
                    else json.dumps(value, ensure_ascii=False, sort_keys=True),
                }
                for key in keys
                for value in (params[key],)
            ],
            "warnings": [],
            "declared": False,
        }
    if proposal and not approval.schema_valid:
        out["warnings"].append(
            "the arguments do not fit the tool's schema"
            + (f": {approval.schema_errors}" if approval.schema_errors else "")
        )
    return out


def _execution(approval: ApprovalRequest) -> ToolExecution | None:
    if approval.status != ApprovalRequest.Status.APPROVED:
        return None
    return approval.call_execution()


def _edited_by(approval: ApprovalRequest, current_hash: str) -> str | None:
    """Return who first approved the current (edited) arguments, or ``None``."""
    if approval.edited_arguments is None:
        return None
    for vote in approval.votes.all():  # oldest first; prefetched by the selectors
        if (
            vote.reset_at is None
            and vote.decision == "approve"
            and vote.arguments_hash == current_hash
        ):
            return str(vote.voter.username)
    return None


def _phase(
    approval: ApprovalRequest, execution: ToolExecution | None, now: datetime
) -> str:
    status = approval.status
    if status != ApprovalRequest.Status.APPROVED:
        return "waiting" if status == ApprovalRequest.Status.PENDING else str(status)
    if execution is None:
        return "approved"
    states = ToolExecution.State
    if (
        execution.state == states.QUEUED
        and not execution.attempts
        and execution.not_before is not None
        and execution.not_before > now
    ):
        return "undo_window"
    if execution.state in (states.SUCCEEDED, states.RESOLVED):
        return "executed"
    if execution.state == states.FAILED:
        return "failed"
    if execution.state == states.OUTCOME_UNKNOWN:
        return "outcome_unknown"
    return "approved"


def _headline(
    *,
    approval: ApprovalRequest,
    phase: str,
    votes: dict[str, Any],
    deciders: list[str],
    execution: dict[str, Any] | None,
) -> str:
    """Return the one sentence saying where ``approval`` stands, for a person."""
    who = _names(deciders) or "an operator"
    if phase == "waiting":
        if votes["given"]:
            return (
                f"Waiting for {_plural(votes['remaining'], 'more approval')} from "
                f"{_groups_phrase(votes['waitingGroups'])} "
                f"({votes['given']} of {votes['required']} given: "
                f"{_names(votes['voters'])})."
            )
        if votes["required"] > 1:
            return (
                f"Waiting for {votes['required']} approvals from "
                f"{_groups_phrase(votes['waitingGroups'])}."
            )
        return f"Waiting for a decision from {_groups_phrase(votes['waitingGroups'])}."
    if phase == "undo_window":
        return f"Approved by {who}; it runs in a few seconds unless it is undone."
    if phase == "approved":
        return f"Approved by {who}; it is running."
    if phase == "executed":
        return f"Approved by {who}; it ran and succeeded."
    if phase == "failed":
        error = (execution or {}).get("error") or "an error"
        return f"Approved by {who}; it ran and failed ({error})."
    if phase == "outcome_unknown":
        return (
            f"Approved by {who}; the worker stopped while running it, so whether "
            "it took effect is unknown until an operator resolves it."
        )
    # A person's words may end in their own full stop: each sentence ends once.
    if phase == "rejected":
        reason = f": “{approval.reason}”" if approval.reason else ""
        return sentence(f"Rejected by {who}{reason}")
    if phase == "responded":
        text = str(approval.response or "")
        excerpt = text if len(text) <= 200 else text[:199] + "…"
        return sentence(f"Answered by {who} instead of running it: “{excerpt}”")
    if phase == "expired":
        return "Expired: nobody decided in time, and the agent was told."
    reason = f": {approval.reason}" if approval.reason else ""
    return sentence(f"Cancelled{reason}")


def _viewer(
    *, approval: ApprovalRequest, user: AnyUser, votes: dict[str, Any]
) -> dict[str, Any]:
    """Return what ``user`` may do on ``approval`` and, if not, why and who can, in sentences."""
    authorization = approval_authorization(approval, user)
    name = getattr(user, "username", None)
    pending = approval.status == ApprovalRequest.Status.PENDING
    voted = name in votes["voters"] or any(r["by"] == name for r in votes["rejections"])
    can_approve = pending and authorization.can_authorize and not voted
    can_reject = pending and authorization.can_reject and not voted
    # Answering runs nothing and ends the request, so a vote given before does
    # not stand in the way (docs/approving.md "Respond instead").
    can_respond = (
        pending
        and authorization.can_reject
        and approval.kind == ApprovalRequest.Kind.TOOL_CALL
    )
    why: list[str] = []
    if pending and not can_approve:
        if not getattr(user, "is_authenticated", False):
            why.append("Sign in to decide.")
        elif voted:
            why.append(
                "You voted on this request already; "
                + (
                    f"it needs {_plural(votes['remaining'], 'more approval')} from "
                    "another approver."
                    if votes["remaining"]
                    else "another approver must decide."
                )
            )
        else:
            requester = (
                not approval.requester_may_approve
                and approval.requested_by_id is not None
                and approval.requested_by_id == getattr(user, "pk", None)
                and approval.kind == ApprovalRequest.Kind.TOOL_CALL
            )
            if requester:
                why.append("You asked for this call, so another approver must decide.")
            if DECIDE_PERMISSION in authorization.missing:
                why.append(
                    "Your account may view requests but not decide them "
                    f"(it lacks the permission {_permission_names((DECIDE_PERMISSION,))[0]})."
                )
            elif any(
                "approver group" in r or "group(s)" in r for r in authorization.refusals
            ):
                why.append(
                    f"Only members of {_groups_phrase(votes['waitingGroups'])} "
                    "can decide this request."
                )
            tool_permissions = tuple(
                p for p in authorization.missing if p != DECIDE_PERMISSION
            )
            if tool_permissions and DECIDE_PERMISSION not in authorization.missing:
                why.append(
                    f"Approving {approval.tool_name} also needs the permission "
                    f"{_names(_permission_names(tool_permissions))}, which your "
                    "account lacks"
                    + ("; you may still reject it." if can_reject else ".")
                )
            if authorization.claimed_by:
                why.append(
                    f"{authorization.claimed_by} is working on this request; wait "
                    "until they release it."
                )
    who_can = ""
    if pending and not can_approve:
        who_users, who_groups = (
            (authorization.who_can_users, authorization.who_can_groups)
            if not authorization.can_authorize
            else who_can_authorize(required_permissions(approval), approval)
        )
        users = [u for u in who_users if u not in votes["voters"] and u != name]
        groups = list(who_groups)
        holders = users + [f"anyone in the {g} group" for g in groups]
        who_can = (
            f"Who can: {_names(holders).replace(' and anyone', ' or anyone')}."
            if holders
            else "Nobody can approve it yet: ask an administrator to give an "
            "approver the permissions it needs."
        )
    return {
        "canApprove": can_approve,
        "canReject": can_reject,
        "canRespond": can_respond,
        "hasVoted": voted,
        "whyNot": " ".join(why),
        "whoCan": who_can,
    }


def approval_facts(
    approval: ApprovalRequest,
    user: AnyUser | None = None,
    *,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Return the facts every surface shows about ``approval``, as one JSON dict.

    Keys (camelCase JSON):

    - ``phase``: one of :data:`PHASES`; ``standing``: whether a decision was made
      and can no longer be undone (what notifications announce);
    - ``headline``: one sentence saying where the request stands, e.g. "Waiting
      for 1 more approval from the finance group (1 of 2 given: ada)." or
      "Approved by ada and bob; it ran and succeeded.";
    - ``votes``: ``{"given", "required", "remaining", "voters": [username],
      "waitingGroups": [group name], "rejections": [{"by", "reason"}],
      "text": "1 of 2 approvals"}`` (approvals count only for the current arguments);
    - ``arguments``: ``{"proposed", "approved", "edited": bool, "editedBy":
      username | None, "diff": [{"path", "change", "proposed", "edited"}]}``;
    - ``decidedBy``: the usernames whose approvals decided it (all N of N-of-M),
      the rejecter, or the approver who answered it with text (``responded``); ``decidedAt``: ISO 8601 or ``None``;
    - ``undoUntil``: ISO 8601 while an approval can still be undone, else ``None``;
    - ``execution``: ``{"state", "error", "result", "finishedAt"}`` once approved
      and recorded, else ``None`` (``result`` is the tool message's text, an excerpt);
    - ``review``: how the call reads and what to check first (:func:`approval_review`:
      ``{"summary", "facts", "warnings", "declared"}``), ``None`` for a question
      bound to no call;
    - ``viewer`` (only with ``user``): ``{"canApprove", "canReject", "canRespond", "hasVoted",
      "whyNot", "whoCan"}``, the last two sentences for that person (empty when
      they may act).

    Reads the request's prefetched votes and groups (:func:`approvals.selectors.approval_visible_to`),
    plus one query for the execution and one for its result. Never raises.
    Implements SEC-02, DC-03.
    """
    now = now or timezone.now()
    progress = approvals_progress(approval)
    groups = sorted(g.name for g in approval.approver_groups.all())
    required = int(progress["required"])
    given = int(progress["given"])
    votes = {
        "given": given,
        "required": required,
        "remaining": max(0, required - given),
        "voters": list(progress["by"]),
        "waitingGroups": groups,
        "rejections": list(progress["rejections"]),
        "text": f"{given} of {required} approval{'s' if required != 1 else ''}",
    }
    record = _execution(approval)
    phase = _phase(approval, record, now)
    execution: dict[str, Any] | None = None
    if record is not None:
        content = approval.call_result_content()
        execution = {
            "state": record.state,
            "error": record.error,
            "result": _text(content) if content is not None else "",
            "finishedAt": record.finished_at.isoformat()
            if record.finished_at
            else None,
        }
    status = approval.status
    deciders: list[str]
    if status == ApprovalRequest.Status.APPROVED:
        deciders = list(progress["by"]) or [
            u for u in [getattr(approval.decided_by, "username", None)] if u
        ]
    elif status == ApprovalRequest.Status.REJECTED:
        deciders = [r["by"] for r in progress["rejections"]] or [
            u for u in [getattr(approval.decided_by, "username", None)] if u
        ]
    elif status == ApprovalRequest.Status.RESPONDED:
        deciders = [u for u in [getattr(approval.decided_by, "username", None)] if u]
    else:
        deciders = []
    current_hash = canonical_sha256(approval.approved_arguments)
    facts: dict[str, Any] = {
        "phase": phase,
        "standing": phase not in ("waiting", "undo_window"),
        "headline": _headline(
            approval=approval,
            phase=phase,
            votes=votes,
            deciders=deciders,
            execution=execution,
        ),
        "votes": votes,
        "arguments": {
            "proposed": approval.proposed_arguments,
            "approved": approval.approved_arguments,
            "edited": approval.edited_arguments is not None,
            "editedBy": _edited_by(approval, current_hash),
            "diff": arguments_diff(
                approval.proposed_arguments, approval.edited_arguments
            ),
        },
        "decidedBy": deciders,
        "decidedAt": approval.decided_at.isoformat() if approval.decided_at else None,
        "undoUntil": record.not_before.isoformat()
        if phase == "undo_window" and record is not None and record.not_before
        else None,
        "execution": execution,
        "review": approval_review(approval)
        if approval.kind == ApprovalRequest.Kind.TOOL_CALL or approval.call
        else None,
    }
    if user is not None:
        facts["viewer"] = _viewer(approval=approval, user=user, votes=votes)
    return facts
