"""Who may authorize an approval request: the one check every surface shares.

Authorizing (approving) a held call needs two permissions: the queue's
``approvals.decide_approvalrequest`` *and* the tool's own Django permission
(``Tool.permission``, e.g. ``demo.add_refund``), the one execution checks
against the approver (:mod:`approvals.services.execution`). Governance (issue
16) adds, for a tool-call request, the rules its policy routed it with: the
user must be in one of its approver groups (of the current escalation step),
and may not be the user who requested the call unless the policy allows it
(four-eyes); those apply to rejecting too. Rejecting needs no tool permission:
a refusal has no side effect. A live claim by someone else (:func:`claim_refusal`)
blocks both until it is released or lapses. The decision service, the AG-UI
resume path, claims, the queue page, the thread page, the admin and the REST
API all ask :func:`approval_authorization`, so an approval is never recorded
that execution would refuse, and "why not, who can" names every rule.
Implements SEC-02, DC-03, DC-05.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.db.models import Q, QuerySet
from django.utils import timezone

from approvals.exceptions import ApprovalClaimed, ApprovalNotAuthorized
from approvals.governance import user_in_groups
from approvals.models import (
    DECIDE_ANY_GROUP_PERMISSION,
    DECIDE_PERMISSION,
    ApprovalRequest,
)
from core.conf import countersign_settings
from core.types import AnyUser
from threads.agent_config import run_toolset

if TYPE_CHECKING:
    from agentcore.tools import Tool

logger = logging.getLogger(__name__)

#: How many users and groups "who can" names at most.
WHO_CAN_LIMIT = 10


@dataclass(frozen=True)
class Authorization:
    """Whether one user may authorize one request, and if not why and who can.

    ``permissions`` are the Django permission strings authorizing needs (the
    decide permission first); ``missing`` those the user lacks; ``refusals`` the
    governance rules that keep the user out (not in the approver groups, the
    requester); ``claimed_by`` who else holds a live claim (or ``None``);
    ``reason`` a sentence (empty when ``can_authorize``); ``can_reject`` whether
    the user may still reject it; ``who_can_users`` / ``who_can_groups`` the
    active usernames and group names holding every permission and passing the
    governance rules (at most :data:`WHO_CAN_LIMIT` each).
    """

    can_authorize: bool
    can_reject: bool
    permissions: tuple[str, ...]
    missing: tuple[str, ...] = ()
    refusals: tuple[str, ...] = ()
    claimed_by: str | None = None
    reason: str = ""
    who_can_users: tuple[str, ...] = field(default=())
    who_can_groups: tuple[str, ...] = field(default=())

    def as_json(self) -> dict[str, Any]:
        """Return the camelCase JSON shape used by the REST API, the queue and the admin.

        ``{"canAuthorize": bool, "canReject": bool, "requiredPermissions": [str],
        "missingPermissions": [str], "refusals": [str], "claimedBy": str | null,
        "reason": str, "whoCan": {"users": [str], "groups": [str]}}``.
        """
        return {
            "canAuthorize": self.can_authorize,
            "canReject": self.can_reject,
            "requiredPermissions": list(self.permissions),
            "missingPermissions": list(self.missing),
            "refusals": list(self.refusals),
            "claimedBy": self.claimed_by,
            "reason": self.reason,
            "whoCan": {
                "users": list(self.who_can_users),
                "groups": list(self.who_can_groups),
            },
        }


#: The backend that holds permissions (the lockout backend before it holds none).
PERMISSION_BACKEND = "django.contrib.auth.backends.ModelBackend"


def users_with_permission(dotted: str, *, is_active: bool = True) -> QuerySet[Any]:
    """Return the users holding permission ``dotted`` (``app_label.codename``).

    Directly, through a group, or as superusers: Django's ``with_perm`` on the
    model backend (it must be named: django-axes' backend comes first).
    """
    return get_user_model().objects.with_perm(
        dotted, is_active=is_active, backend=PERMISSION_BACKEND
    )


def approval_tool(approval: ApprovalRequest) -> Tool | None:
    """Return the agent's tool ``approval`` names, or ``None`` when it is not configured.

    Never raises: an unknown agent gives ``None`` (a remote agent's tool is its own).
    """
    try:
        return run_toolset(approval.run).resolve(approval.tool_name)
    except Exception:
        logger.warning("no tool for approval %s", approval.pk, exc_info=True)
        return None


def required_permissions(approval: ApprovalRequest) -> tuple[str, ...]:
    """Return the permissions authorizing ``approval`` needs: decide, then the tool's own."""
    tool = approval_tool(approval)
    permission = getattr(tool, "permission", None)
    if permission and permission != DECIDE_PERMISSION:
        return (DECIDE_PERMISSION, permission)
    return (DECIDE_PERMISSION,)


def _permission_q(dotted: str, prefix: str = "") -> Q:
    app_label, codename = dotted.split(".", 1)
    return Q(
        **{
            f"{prefix}content_type__app_label": app_label,
            f"{prefix}codename": codename,
        }
    )


def who_can_authorize(
    permissions: tuple[str, ...], approval: ApprovalRequest | None = None
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Return ``(usernames, group names)`` holding every one of ``permissions``.

    Users: active ones holding each permission directly, through a group, or as
    superusers (Django's ``with_perm``). Groups: those granting all of them.
    With a tool-call ``approval``, only users and groups its governance rules let
    decide (:func:`_governed`). Sorted, at most :data:`WHO_CAN_LIMIT` of each.
    """
    users = get_user_model().objects.filter(is_active=True)
    groups = Group.objects.all()
    if approval is not None:
        users, groups = _governed(approval, users, groups)
    for dotted in permissions:
        users = users.filter(pk__in=users_with_permission(dotted).values("pk"))
        permission = Permission.objects.filter(_permission_q(dotted)).first()
        groups = groups.filter(permissions=permission) if permission else groups.none()
    names = users.order_by("username").values_list("username", flat=True)
    group_names = groups.order_by("name").values_list("name", flat=True).distinct()
    return tuple(names[:WHO_CAN_LIMIT]), tuple(group_names[:WHO_CAN_LIMIT])


def _governed(
    approval: ApprovalRequest, users: QuerySet[Any], groups: QuerySet[Group]
) -> tuple[QuerySet[Any], QuerySet[Group]]:
    """Narrow ``users`` and ``groups`` to those ``approval``'s governance lets decide."""
    if approval.kind != ApprovalRequest.Kind.TOOL_CALL:
        return users, groups
    routed = list(approval.approver_groups.all())
    if routed:
        anywhere = users_with_permission(DECIDE_ANY_GROUP_PERMISSION)
        users = users.filter(
            Q(groups__in=routed) | Q(pk__in=anywhere.values("pk"))
        ).distinct()
        groups = groups.filter(pk__in=[g.pk for g in routed])
    if not approval.requester_may_approve and approval.requested_by_id is not None:
        users = users.exclude(pk=approval.requested_by_id)
    return users, groups


def governance_refusals(*, approval: ApprovalRequest, user: AnyUser) -> tuple[str, ...]:
    """Return the governance rules that keep ``user`` from deciding ``approval``.

    Sentences, empty when none applies: not a member of the request's approver
    groups (of its current escalation step; superusers always are), and being
    the user who requested the call while its policy does not allow that
    (four-eyes). Only tool-call requests are governed. Implements SEC-02, DC-03.
    """
    if approval.kind != ApprovalRequest.Kind.TOOL_CALL:
        return ()
    name = getattr(user, "username", None) or "anonymous"
    refusals = []
    routed = list(approval.approver_groups.all())
    if not user_in_groups(user=user, groups=routed):
        refusals.append(
            f"approval {approval.pk!r} is assigned to the group(s) "
            f"{sorted(g.name for g in routed)!r}; user {name!r} is in none of them "
            "and may only view it"
        )
    if (
        not approval.requester_may_approve
        and approval.requested_by_id is not None
        and approval.requested_by_id == getattr(user, "pk", None)
    ):
        refusals.append(
            f"user {name!r} requested this call and may not approve it; another "
            "approver must decide (four-eyes)"
        )
    return tuple(refusals)


def claim_refusal(*, approval: ApprovalRequest, user: AnyUser) -> str | None:
    """Return why ``user`` may not act on ``approval`` because someone else claimed it, or ``None``.

    A claim lapses ``COUNTERSIGN["APPROVAL_CLAIM_SECONDS"]`` after it was taken.
    """
    if approval.claimed_by_id is None or approval.claimed_by_id == getattr(
        user, "pk", None
    ):
        return None
    lapse = timedelta(seconds=float(countersign_settings.APPROVAL_CLAIM_SECONDS))
    if (
        approval.claimed_at is not None
        and approval.claimed_at + lapse <= timezone.now()
    ):
        return None
    holder = getattr(approval.claimed_by, "username", None)
    return (
        f"approval {approval.pk!r} is claimed by {holder!r}; "
        "wait until they release it (or the claim lapses)"
    )


def approval_authorization(approval: ApprovalRequest, user: AnyUser) -> Authorization:
    """Return whether ``user`` may authorize ``approval``, and if not why and who can.

    Authorizing needs every permission of :func:`required_permissions`, no
    :func:`governance_refusals` and no live claim by someone else
    (:func:`claim_refusal`); rejecting needs the decide permission and the same
    governance and claim rules. An inactive or anonymous user lacks every
    permission. The ``reason`` names the missing permissions, the governance
    rules, the claim, and who can (holders of every permission who pass the
    governance rules). Implements SEC-02, DC-03.
    """
    permissions = required_permissions(approval)
    active = bool(getattr(user, "is_active", False)) and bool(
        getattr(user, "is_authenticated", False)
    )
    missing = tuple(p for p in permissions if not (active and user.has_perm(p)))
    refusals = governance_refusals(approval=approval, user=user) if active else ()
    claim = claim_refusal(approval=approval, user=user) if active else None
    claimed_by = getattr(approval.claimed_by, "username", None) if claim else None
    can_reject = (
        active and user.has_perm(DECIDE_PERMISSION) and not refusals and not claim
    )
    if not missing and not refusals and not claim:
        return Authorization(
            can_authorize=True, can_reject=can_reject, permissions=permissions
        )
    users, groups = who_can_authorize(permissions, approval)
    holders = [*users, *(f"group {g}" for g in groups)]
    who = (
        f"who can: {', '.join(holders)}"
        if holders
        else "nobody holds them all yet; ask an administrator to grant them"
    )
    name = getattr(user, "username", None) or "anonymous"
    sentences = []
    if missing:
        lacks = " and ".join(repr(p) for p in missing)
        sentences.append(
            f"{name} lacks {lacks}; approving {approval.tool_name!r} needs "
            f"{' and '.join(repr(p) for p in permissions)}"
        )
    sentences += refusals
    if claim:
        sentences.append(claim)
    reason = "; ".join(sentences) + f" ({who})"
    return Authorization(
        can_authorize=False,
        can_reject=can_reject,
        permissions=permissions,
        missing=missing,
        refusals=refusals,
        claimed_by=claimed_by,
        reason=reason,
        who_can_users=users,
        who_can_groups=groups,
    )


def authorization_require(
    *, approval: ApprovalRequest, user: AnyUser, decision: str = "approve"
) -> Authorization:
    """Return ``user``'s :class:`Authorization` for ``approval``, or raise if ``decision`` is refused.

    ``decision`` ``"approve"`` needs ``can_authorize``; ``"reject"`` (and claiming)
    ``can_reject``. Raises :class:`ApprovalClaimed` (409) when the only obstacle
    is someone else's live claim, else :class:`ApprovalNotAuthorized` (403
    ``not_authorized``, a :class:`ApprovalPermissionDenied`) carrying the
    authorization, whose ``reason`` says why and who can. Callers check before
    recording anything, so the request stays pending. The same check the queue,
    the admin and the REST API show as ``canAuthorize``. Implements SEC-02, DC-03.
    """
    authorization = approval_authorization(approval, user)
    allowed = (
        authorization.can_authorize
        if decision == "approve"
        else authorization.can_reject
    )
    if allowed:
        return authorization
    lacking = (
        authorization.missing
        if decision == "approve"
        else tuple(p for p in authorization.missing if p == DECIDE_PERMISSION)
    )
    if authorization.claimed_by is not None and not (lacking or authorization.refusals):
        raise ApprovalClaimed(
            claim_refusal(approval=approval, user=user) or authorization.reason
        )
    raise ApprovalNotAuthorized(
        f"{authorization.reason}; the request stays pending and nothing was executed",
        authorization=authorization,
    )
