"""Governance of tool calls: which policy applies, who may decide, how requests are routed.

:func:`call_policy` resolves a call's :class:`agentcore.policy.PolicyDecision`
from, in order of precedence, an enabled :class:`approvals.models.ToolPolicy` row
(admin, for the agent, then for every agent), ``COUNTERSIGN_AGENTS[agent]
["policies"][tool]`` (settings) and the tool's own ``policy`` (code), giving a
callable policy its context. A decision that fails (a callable that raises, a
declaration that is nonsense) fails closed: one approval by the group named in
``COUNTERSIGN["POLICY_FAIL_CLOSED_GROUP"]``, logged. Whether a user may decide
a request (its groups, four-eyes) is :func:`approvals.authorization.approval_authorization`.
Implements LP-01, SEC-02, DC-03.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth.models import Group
from django.db.models import Q, QuerySet
from django.utils import timezone

from agentcore.policy import (
    FAIL_CLOSED_SOURCE,
    PolicyContext,
    PolicyDecision,
    decision_from,
    policy_evaluate,
)
from agentcore.tools import Tool
from approvals.models import (
    DECIDE_ANY_GROUP_PERMISSION,
    DECIDE_PERMISSION,
    ApprovalRequest,
    ToolPolicy,
)
from core.conf import countersign_settings
from core.types import AnyUser
from threads.agent_config import agent_settings
from threads.exceptions import UnknownAgent
from threads.models import Thread

logger = logging.getLogger(__name__)


def policy_context(*, thread: Thread, agent: str, tool: Tool) -> PolicyContext:
    """Return the context a policy callable gets for a call of ``tool`` on ``thread``."""
    owner = thread.owner
    return PolicyContext(
        user=getattr(owner, "username", None),
        user_groups=tuple(
            sorted(owner.groups.values_list("name", flat=True))
            if owner is not None
            else ()
        ),
        thread_id=thread.thread_id,
        agent=agent,
        tool=tool.properties(),
    )


def _declared(agent: str, tool_name: str) -> tuple[Any, str] | None:
    """Return ``(declaration, source)`` of the admin row or settings entry, or ``None``."""
    rows = list(
        ToolPolicy.objects.filter(
            tool_name=tool_name, enabled=True, agent__in=[agent, ""]
        ).prefetch_related("groups")
    )
    rows.sort(key=lambda row: row.agent == "")  # the agent's own row first
    if rows:
        return rows[0].declaration(), "admin"
    try:
        declared = (agent_settings(agent).get("policies") or {}).get(tool_name)
    except UnknownAgent:
        declared = None
    if declared is not None:
        return declared, "settings"
    return None


def policy_declared(*, agent: str, tool_name: str) -> bool:
    """Return whether an admin ``ToolPolicy`` row or the agent's settings name ``tool_name``.

    A strict external agent accepts only the tools a policy names. Implements LP-01.
    """
    return _declared(agent, tool_name) is not None


def call_policy(
    *, thread: Thread, agent: str, tool: Tool, arguments: dict[str, Any]
) -> PolicyDecision:
    """Return the policy decision for ``tool`` called with validated ``arguments``.

    Precedence: admin ``ToolPolicy`` row, then the agent's ``policies`` setting,
    then the tool's own policy. Never raises: a failing policy fails closed to
    one approval by the strictest group (``POLICY_FAIL_CLOSED_GROUP``), logged.
    Implements LP-01.
    """
    context = policy_context(thread=thread, agent=agent, tool=tool)
    declared = _declared(agent, tool.name)
    if declared is None:
        decision = tool.policy_decide(arguments, context)
    else:
        decision = policy_evaluate(
            declared[0], arguments, context, tool_name=tool.name, source=declared[1]
        )
    if decision.source == FAIL_CLOSED_SOURCE:
        strict = str(countersign_settings.POLICY_FAIL_CLOSED_GROUP)
        decision = decision_from(
            {
                "action": "require_approval",
                "groups": [strict] if strict else [],
                "risk_level": decision.risk_level,
                "risk_reason": decision.risk_reason,
            },
            source=FAIL_CLOSED_SOURCE,
        )
    return decision


def approval_routing(
    *, decision: PolicyDecision, tool: Tool, now: datetime | None = None
) -> tuple[dict[str, Any], list[Group]]:
    """Return the request columns and approver groups ``decision`` routes a request to.

    ``expires_at`` is the final expiry (the decision's, else the tool's, else
    ``APPROVAL_TIMEOUT_SECONDS``); ``step_deadline`` ends the first step when
    there are escalation steps. Groups that do not exist yet are created, so a
    request is never routed to nobody. Implements DC-03.
    """
    now = now or timezone.now()
    timeout = (
        decision.expiry_seconds
        or getattr(tool, "approval_timeout", None)
        or float(countersign_settings.APPROVAL_TIMEOUT_SECONDS)
    )
    steps: list[dict[str, Any]] = [
        {"groups": list(step.groups), "after_seconds": step.after_seconds}
        for step in decision.escalation
    ]
    fields = {
        "expires_at": now + timedelta(seconds=float(timeout)),
        "approvals_required": decision.approvals_required,
        "rejections_required": decision.rejections_required,
        "requester_may_approve": decision.requester_may_approve,
        "escalation": steps,
        "step_deadline": (
            now + timedelta(seconds=float(steps[0]["after_seconds"])) if steps else None
        ),
        "risk_level": decision.risk_level,
        "risk_reason": decision.risk_reason,
        "policy_source": decision.source,
    }
    return fields, groups_named(decision.groups)


def groups_named(names: Iterable[str]) -> list[Group]:
    """Return the Django groups called ``names``, creating missing ones (so routing never drops)."""
    return [Group.objects.get_or_create(name=name)[0] for name in names]


def user_in_groups(*, user: AnyUser, groups: list[Group]) -> bool:
    """Return whether ``user`` is a member of one of ``groups``.

    Any user when ``groups`` is empty; a holder of ``approvals.decide_any_group``
    (superusers hold every permission) always.
    """
    if not groups or user.has_perm(DECIDE_ANY_GROUP_PERMISSION):
        return True
    ids = {g.pk for g in groups}
    return user.groups.filter(pk__in=ids).exists()


def assigned_to(
    *, user: AnyUser, approvals: QuerySet[ApprovalRequest]
) -> QuerySet[ApprovalRequest]:
    """Return the pending requests of ``approvals`` assigned to ``user``.

    Claimed by ``user``, or routed to one of ``user``'s groups (any group for a
    holder of ``approvals.decide_any_group``; no group for a holder of the
    decide permission) and not held by
    anyone else's live claim (a claim lapses after
    ``COUNTERSIGN["APPROVAL_CLAIM_SECONDS"]``, as in
    :func:`approvals.authorization.claim_refusal`); never requests ``user`` made
    when the requester may not approve. Implements DC-03 ("assigned to me").
    """
    if not getattr(user, "is_authenticated", False):
        return approvals.none()
    if user.has_perm(DECIDE_ANY_GROUP_PERMISSION):
        routed = Q()
    else:
        routed = Q(approver_groups__in=user.groups.all())
        if user.has_perm(DECIDE_PERMISSION):
            # A request routed to no group is every decider's.
            routed |= Q(approver_groups__isnull=True)
    lapsed = timezone.now() - timedelta(
        seconds=float(countersign_settings.APPROVAL_CLAIM_SECONDS)
    )
    unheld = Q(claimed_by__isnull=True) | Q(claimed_at__lte=lapsed)
    mine = Q(claimed_by=user) | (routed & unheld)
    return (
        approvals.filter(status=ApprovalRequest.Status.PENDING)
        .filter(mine)
        .distinct()
        .exclude(Q(requested_by=user) & Q(requester_may_approve=False))
    )
