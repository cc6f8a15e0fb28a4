"""Scoped grants ("always allow"): future calls of one tool that run without asking.

An approver grants, while approving a request, future calls of the same tool
for this thread, this user or this agent, whose arguments satisfy a constraint
(exact values, ranges such as ``amount <= 50``, or a JSON Schema fragment),
until a time. A grant is applied at policy time (:func:`grant_find`) and checked
again at execution (:func:`grant_refusal`), so revoking it (:func:`grant_revoke`)
stops calls already queued under it. A grant never exceeds its granter: it
stands in for one approval by them, so it covers only calls they could approve
alone, and only while they still hold the tool's permission. Every change is
audited. Implements SEC-02, LP-01.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db.models import Q
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from agentcore.policy import PolicyDecision
from agentcore.tools import Tool
from approvals.exceptions import (
    ApprovalAlreadyDecided,
    ApprovalPermissionDenied,
    GrantRefused,
)
from approvals.governance import groups_named, user_in_groups
from approvals.models import DECIDE_PERMISSION, ApprovalGrant, ApprovalRequest
from approvals.services.audit import audit_append
from core.conf import countersign_settings
from core.types import User
from threads.models import Thread, ToolCall

#: Keys of a grant as the REST API and :func:`orchestration.pipeline.approval_decide` take it.
GRANT_KEYS = frozenset(
    {"scope", "exact", "ranges", "schema", "expiresAt", "durationSeconds"}
)
_RANGE_KEYS = {
    "min": "minimum",
    "max": "maximum",
    "lt": "exclusiveMaximum",
    "gt": "exclusiveMinimum",
}


def grant_constraint(spec: dict[str, Any]) -> dict[str, Any]:
    """Return the JSON Schema a grant ``spec``'s ``exact``, ``ranges`` and ``schema`` make.

    ``exact``: ``{"order_id": "A-1"}`` → ``const``; ``ranges``: ``{"amount":
    {"max": 50}}`` (``min``, ``max``, ``gt``, ``lt``) → ``minimum``/``maximum``...;
    ``schema``: a JSON Schema 2020-12 fragment, used as is. All must hold.
    Raises :class:`GrantRefused` naming the bad part.
    """
    parts: list[dict[str, Any]] = []
    exact = spec.get("exact") or {}
    ranges = spec.get("ranges") or {}
    if not isinstance(exact, dict) or not isinstance(ranges, dict):
        raise GrantRefused("grant 'exact' and 'ranges' must be JSON objects")
    if exact:
        parts.append(
            {
                "type": "object",
                "properties": {k: {"const": v} for k, v in exact.items()},
                "required": sorted(exact),
            }
        )
    for name, bounds in ranges.items():
        if not isinstance(bounds, dict) or not bounds or set(bounds) - set(_RANGE_KEYS):
            raise GrantRefused(
                f"grant range {name!r} must be an object of {sorted(_RANGE_KEYS)}, "
                f"got {bounds!r}"
            )
        if not all(
            isinstance(v, int | float) and not isinstance(v, bool)
            for v in bounds.values()
        ):
            raise GrantRefused(f"grant range {name!r} bounds must be numbers")
        parts.append(
            {
                "type": "object",
                "properties": {
                    name: {
                        "type": "number",
                        **{_RANGE_KEYS[k]: v for k, v in bounds.items()},
                    }
                },
                "required": [name],
            }
        )
    fragment = spec.get("schema")
    if fragment is not None:
        if not isinstance(fragment, dict):
            raise GrantRefused("grant 'schema' must be a JSON Schema object")
        try:
            Draft202012Validator.check_schema(fragment)
        except SchemaError as error:
            raise GrantRefused(
                f"grant 'schema' is not valid JSON Schema 2020-12: {error.message}"
            ) from error
        parts.append(fragment)
    if not parts:
        raise GrantRefused(
            "a grant needs a constraint: 'exact' values, 'ranges' or a 'schema'; "
            "a grant without one would allow every call of the tool"
        )
    return {"allOf": parts}


def _expiry(spec: dict[str, Any], now: datetime) -> datetime:
    longest = now + timedelta(seconds=float(countersign_settings.GRANT_MAX_SECONDS))
    if spec.get("expiresAt") is not None:
        when = parse_datetime(str(spec["expiresAt"]))
        if when is None or timezone.is_naive(when):
            raise GrantRefused(
                "grant 'expiresAt' must be an ISO 8601 time with a zone, "
                f"got {spec['expiresAt']!r}"
            )
    elif spec.get("durationSeconds") is not None:
        seconds = spec["durationSeconds"]
        if (
            isinstance(seconds, bool)
            or not isinstance(seconds, int | float)
            or seconds <= 0
        ):
            raise GrantRefused("grant 'durationSeconds' must be a positive number")
        when = now + timedelta(seconds=float(seconds))
    else:
        raise GrantRefused("a grant needs 'expiresAt' or 'durationSeconds'")
    if when <= now or when > longest:
        raise GrantRefused(
            f"grant must end in the future and within {countersign_settings.GRANT_MAX_SECONDS}s"
        )
    return when


def _granter_refusal(
    *, user: User, tool: Tool | None, approvals_required: int
) -> str | None:
    """Why ``user`` cannot (or can no longer) stand behind a grant of ``tool``, or ``None``."""
    name = getattr(user, "username", None)
    if not getattr(user, "is_active", False) or not user.has_perm(DECIDE_PERMISSION):
        return f"the granter {name!r} no longer may decide tool calls"
    permission = getattr(tool, "permission", None)
    if permission and not user.has_perm(permission):
        return f"the granter {name!r} lacks the permission {permission!r} the tool requires"
    if approvals_required > 1:
        return (
            f"the call needs {approvals_required} approvals; a grant stands in for "
            "one approver only"
        )
    return None


def grant_create(
    *,
    approval: ApprovalRequest,
    call: ToolCall,
    tool: Tool | None,
    granted_by: User,
    spec: dict[str, Any],
) -> ApprovalGrant:
    """Create the scoped grant ``spec`` that ``granted_by`` makes while approving ``approval``.

    ``tool`` is the call's tool (its permission bounds the grant). ``spec``:
    ``{"scope": "thread"|"user"|"agent", "exact"?, "ranges"?, "schema"?,
    "expiresAt"? | "durationSeconds"?}`` (see :func:`grant_constraint`). The
    approved call itself must satisfy the constraint. Raises
    :class:`GrantRefused` for a bad spec, or one exceeding the granter's own
    rights (the tool's permission; a request needing more than one approval).
    Runs under the request's lock; audited ``grant.created``. Implements SEC-02.
    """
    if not isinstance(spec, dict) or set(spec) - GRANT_KEYS:
        raise GrantRefused(
            f"grant must be an object with the keys {sorted(GRANT_KEYS)}"
        )
    scope = spec.get("scope")
    if scope not in ApprovalGrant.Scope.values:
        raise GrantRefused(
            f"grant 'scope' must be one of {ApprovalGrant.Scope.values}, got {scope!r}"
        )
    constraint = grant_constraint(spec)
    now = timezone.now()
    expires_at = _expiry(spec, now)
    refusal = _granter_refusal(
        user=granted_by, tool=tool, approvals_required=approval.approvals_required
    )
    if refusal is not None:
        raise GrantRefused(f"cannot grant: {refusal}")
    if not Draft202012Validator(constraint).is_valid(approval.approved_arguments):
        raise GrantRefused(
            "the grant's constraint does not cover the call being approved; "
            "widen it or approve without a grant"
        )
    thread = call.thread
    grant = ApprovalGrant.objects.create(
        tool_name=approval.tool_name,
        agent=approval.run.agent,
        scope=scope,
        thread=thread if scope == ApprovalGrant.Scope.THREAD else None,
        user=thread.owner if scope == ApprovalGrant.Scope.USER else None,
        constraint=constraint,
        granted_by=granted_by,
        approval=approval,
        expires_at=expires_at,
    )
    audit_append(
        actor=granted_by,
        action="grant.created",
        target=grant,
        after={
            "tool": grant.tool_name,
            "agent": grant.agent,
            "scope": scope,
            "thread": thread.thread_id if grant.thread_id else None,
            "user": getattr(grant.user, "username", None),
            "constraint": constraint,
            "expires_at": grant.expires_at.isoformat(),
            "approval": approval.pk,
        },
    )
    return grant


def _scope_covers(grant: ApprovalGrant, thread: Thread) -> bool:
    if grant.scope == ApprovalGrant.Scope.THREAD:
        return grant.thread_id == thread.pk
    if grant.scope == ApprovalGrant.Scope.USER:
        return grant.user_id is not None and grant.user_id == thread.owner_id
    return True


def grant_refusal(
    *,
    grant: ApprovalGrant,
    tool: Tool | None,
    agent: str,
    thread: Thread,
    arguments: dict[str, Any],
    decision: PolicyDecision,
) -> str | None:
    """Return why ``grant`` does not allow this call, or ``None`` when it does.

    Checked at policy time and again at execution: not revoked, not expired, the
    same tool and agent, the scope covers ``thread``, the arguments satisfy the
    constraint, and the granter could approve ``decision`` alone (its groups,
    not the requester unless allowed, one approval, the tool's permission).
    """
    if grant.revoked_at is not None:
        return f"grant {grant.pk} was revoked"
    if grant.expires_at <= timezone.now():
        return f"grant {grant.pk} expired at {grant.expires_at.isoformat()}"
    if grant.tool_name != getattr(tool, "name", None) or grant.agent != agent:
        return f"grant {grant.pk} is for another tool or agent"
    if not _scope_covers(grant, thread):
        return f"grant {grant.pk} does not cover this {grant.scope}"
    if not Draft202012Validator(grant.constraint).is_valid(arguments):
        return f"the arguments are outside grant {grant.pk}'s constraint"
    if decision.action == "deny":
        return "the tool's policy denies the call"
    granter = grant.granted_by
    refusal = _granter_refusal(
        user=granter, tool=tool, approvals_required=decision.approvals_required
    )
    if refusal is not None:
        return refusal
    if not user_in_groups(user=granter, groups=groups_named(decision.groups)):
        return (
            f"the granter {granter.username!r} is not in the policy's approver groups"
        )
    if (
        not decision.requester_may_approve
        and thread.owner_id is not None
        and thread.owner_id == granter.pk
    ):
        return f"the granter {granter.username!r} requested the call (four-eyes)"
    return None


def grant_find(
    *,
    tool: Tool,
    agent: str,
    thread: Thread,
    arguments: dict[str, Any],
    decision: PolicyDecision,
) -> ApprovalGrant | None:
    """Return the newest live grant that allows this ``require_approval`` call, or ``None``."""
    candidates = (
        ApprovalGrant.objects.filter(
            tool_name=tool.name,
            agent=agent,
            revoked_at__isnull=True,
            expires_at__gt=timezone.now(),
        )
        .filter(
            Q(scope=ApprovalGrant.Scope.THREAD, thread=thread)
            | Q(scope=ApprovalGrant.Scope.USER, user_id=thread.owner_id)
            | Q(scope=ApprovalGrant.Scope.AGENT)
        )
        .select_related("granted_by")
    )
    for grant in candidates:
        if (
            grant_refusal(
                grant=grant,
                tool=tool,
                agent=agent,
                thread=thread,
                arguments=arguments,
                decision=decision,
            )
            is None
        ):
            return grant
    return None


def grant_revoke(
    *, grant: ApprovalGrant, revoked_by: User, reason: str = ""
) -> ApprovalGrant:
    """Revoke ``grant`` (calls queued under it are refused at execution); return it.

    Needs the decide permission. Raises :class:`ApprovalPermissionDenied`, or
    :class:`ApprovalAlreadyDecided` when it was already revoked. Audited
    ``grant.revoked``.
    """
    if not getattr(revoked_by, "is_active", False) or not revoked_by.has_perm(
        DECIDE_PERMISSION
    ):
        raise ApprovalPermissionDenied(
            f"user {getattr(revoked_by, 'username', None)!r} may not revoke grants; "
            f"it needs the {DECIDE_PERMISSION!r} permission"
        )
    updated = ApprovalGrant.objects.filter(pk=grant.pk, revoked_at__isnull=True).update(
        revoked_at=timezone.now(), revoked_by=revoked_by, revoke_reason=reason
    )
    if not updated:
        raise ApprovalAlreadyDecided(f"grant {grant.pk} was already revoked")
    grant.refresh_from_db()
    audit_append(
        actor=revoked_by,
        action="grant.revoked",
        target=grant,
        before={"revoked_at": None},
        after={"revoked_at": str(grant.revoked_at), "reason": reason},
    )
    return grant
