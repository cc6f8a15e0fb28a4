"""Who may authorize an approval request: the one check every surface shares.

Authorizing (approving) a held call needs two permissions: the queue's
``approvals.decide_approvalrequest`` *and* the tool's own Django permission
(``Tool.permission``, e.g. ``demo.add_refund``), the one execution checks
against the approver (:mod:`approvals.services.execution`). Rejecting needs the
decide permission only: a refusal has no side effect. The decision service, the
AG-UI resume path, the queue page, the admin and the REST API all ask
:func:`approval_authorization`, so an approval is never recorded that execution
would refuse. Implements SEC-02, DC-03, DC-05.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.db.models import Q

from approvals.models import DECIDE_PERMISSION, ApprovalRequest
from threads.agent_config import agent_toolset

logger = logging.getLogger(__name__)

#: How many users and groups "who can" names at most.
WHO_CAN_LIMIT = 10


@dataclass(frozen=True)
class Authorization:
    """Whether one user may authorize one request, and if not why and who can.

    ``permissions`` are the Django permission strings authorizing needs (the
    decide permission first); ``missing`` those the user lacks; ``reason`` a
    sentence (empty when ``can_authorize``); ``can_reject`` whether the user may
    still reject it; ``who_can_users`` / ``who_can_groups`` the active usernames
    and group names holding every permission (at most :data:`WHO_CAN_LIMIT` each).
    """

    can_authorize: bool
    can_reject: bool
    permissions: tuple[str, ...]
    missing: tuple[str, ...] = ()
    reason: str = ""
    who_can_users: tuple[str, ...] = field(default=())
    who_can_groups: tuple[str, ...] = field(default=())

    def as_json(self) -> dict[str, Any]:
        """Return the camelCase JSON shape used by the REST API, the queue and the admin.

        ``{"canAuthorize": bool, "canReject": bool, "requiredPermissions": [str],
        "missingPermissions": [str], "reason": str, "whoCan": {"users": [str],
        "groups": [str]}}``.
        """
        return {
            "canAuthorize": self.can_authorize,
            "canReject": self.can_reject,
            "requiredPermissions": list(self.permissions),
            "missingPermissions": list(self.missing),
            "reason": self.reason,
            "whoCan": {
                "users": list(self.who_can_users),
                "groups": list(self.who_can_groups),
            },
        }


def approval_tool(approval: ApprovalRequest) -> Any:
    """Return the agent's tool ``approval`` names, or ``None`` when it is not configured.

    Never raises: an unknown agent gives ``None`` (a remote agent's tool is its own).
    """
    try:
        return agent_toolset(approval.run.agent).resolve(approval.tool_name)
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
    permissions: tuple[str, ...],
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Return ``(usernames, group names)`` holding every one of ``permissions``.

    Users: active ones holding each permission directly, through a group, or as
    superusers (Django's ``with_perm``). Groups: those granting all of them.
    Sorted, at most :data:`WHO_CAN_LIMIT` of each.
    """
    users = get_user_model().objects.filter(is_active=True)
    groups = Group.objects.all()
    for dotted in permissions:
        users = users.filter(
            pk__in=get_user_model().objects.with_perm(dotted).values("pk")
        )
        permission = Permission.objects.filter(_permission_q(dotted)).first()
        groups = groups.filter(permissions=permission) if permission else groups.none()
    names = users.order_by("username").values_list("username", flat=True)
    group_names = groups.order_by("name").values_list("name", flat=True).distinct()
    return tuple(names[:WHO_CAN_LIMIT]), tuple(group_names[:WHO_CAN_LIMIT])


def approval_authorization(approval: ApprovalRequest, user: Any) -> Authorization:
    """Return whether ``user`` may authorize ``approval``, and if not why and who can.

    An inactive or anonymous user lacks every permission. The ``reason`` names
    the missing permissions and who holds them all. Implements SEC-02.
    """
    permissions = required_permissions(approval)
    active = bool(getattr(user, "is_active", False)) and bool(
        getattr(user, "is_authenticated", False)
    )
    missing = tuple(p for p in permissions if not (active and user.has_perm(p)))
    can_reject = active and user.has_perm(DECIDE_PERMISSION)
    if not missing:
        return Authorization(
            can_authorize=True, can_reject=can_reject, permissions=permissions
        )
    users, groups = who_can_authorize(permissions)
    holders = [*users, *(f"group {g}" for g in groups)]
    who = (
        f"who can: {', '.join(holders)}"
        if holders
        else "nobody holds them all yet; ask an administrator to grant them"
    )
    name = getattr(user, "username", None) or "anonymous"
    lacks = " and ".join(repr(p) for p in missing)
    reason = (
        f"{name} lacks {lacks}; approving {approval.tool_name!r} needs "
        f"{' and '.join(repr(p) for p in permissions)} ({who})"
    )
    return Authorization(
        can_authorize=False,
        can_reject=can_reject,
        permissions=permissions,
        missing=missing,
        reason=reason,
        who_can_users=users,
        who_can_groups=groups,
    )
