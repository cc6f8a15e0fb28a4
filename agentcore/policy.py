"""Policy decisions with context: who must approve a call, how many, and until when.

A tool's ``policy`` is ``"auto" | "require_approval" | "deny"``, a callable of the
validated params (the old forms), a callable of ``(params, context)`` returning a
:class:`PolicyDecision` (or one of the three strings, or a mapping of the same
shape), or a static declaration: a mapping such as ``{"action":
"require_approval", "groups": ["finance"], "approvals_required": 2}``.
:func:`decision_from` turns any of these into a :class:`PolicyDecision` and raises
:class:`PolicyError` for anything else; :func:`policy_evaluate` runs a policy and
fails closed (a strict approval, logged) when it raises or returns nonsense.

This module never imports Django. Implements LP-01, SEC-02.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal, get_args

__all__ = [
    "DECLARATION_FIELDS",
    "DECLARATION_KEYS",
    "FAIL_CLOSED_SOURCE",
    "Action",
    "EscalationStep",
    "PolicyContext",
    "PolicyDecision",
    "PolicyError",
    "decision_from",
    "policy_evaluate",
    "takes_context",
]

logger = logging.getLogger(__name__)

Action = Literal["auto", "require_approval", "deny"]
RiskLevel = Literal["", "low", "medium", "high", "critical"]
_ACTIONS: Final = frozenset(get_args(Action))
_RISKS: Final = frozenset(get_args(RiskLevel))
#: ``PolicyDecision.source`` of a decision made because the policy failed.
FAIL_CLOSED_SOURCE: Final = "fail_closed"
#: The keys a static declaration (or a mapping a callable returns) may have, in the
#: order forms show them (the admin's ``ToolPolicy`` form has one field per key).
DECLARATION_FIELDS: Final = (
    "action",
    "reason",
    "groups",
    "approvals_required",
    "rejections_required",
    "requester_may_approve",
    "expiry_seconds",
    "escalation",
    "risk_level",
    "risk_reason",
)
DECLARATION_KEYS: Final = frozenset(DECLARATION_FIELDS)


class PolicyError(ValueError):
    """A policy value that is not a decision; the message names what is wrong."""


@dataclass(frozen=True, slots=True)
class EscalationStep:
    """Move a request still undecided ``after_seconds`` into its current step to ``groups``."""

    groups: tuple[str, ...]
    after_seconds: float


@dataclass(frozen=True, slots=True)
class PolicyContext:
    """What a policy may look at besides the arguments.

    ``user`` is the requesting user's username (``None`` when anonymous),
    ``user_groups`` their Django group names, ``thread_id`` the AG-UI threadId,
    ``agent`` the configured agent name, ``tool`` the tool's declared properties
    (``name``, ``is_destructive``, ``is_read_only``, ``idempotent``,
    ``permission``, ``runs_on``).
    """

    user: str | None = None
    user_groups: tuple[str, ...] = ()
    thread_id: str | None = None
    agent: str | None = None
    tool: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PolicyDecision:
    """What happens to one call (LP-01, SEC-02).

    ``action``: ``auto`` (run it), ``deny`` (refuse; ``reason`` is what the model
    sees) or ``require_approval``; then ``groups`` (Django group names; empty =
    anyone holding the decide permission), ``approvals_required`` distinct
    approvers (N of M), ``rejections_required`` rejections that reject (default
    one), ``requester_may_approve`` (default no; yes for a policy given as a
    plain string, which keeps its pre-governance meaning), ``expiry_seconds`` (``None`` =
    the tool's or the default timeout; the final expiry), ``escalation`` steps,
    and ``risk_level`` with ``risk_reason``. ``source`` says where it came from
    (``tool``, ``settings``, ``admin``, ``grant``, ``fail_closed``).
    """

    action: Action
    reason: str = ""
    groups: tuple[str, ...] = ()
    approvals_required: int = 1
    rejections_required: int = 1
    requester_may_approve: bool = False
    expiry_seconds: float | None = None
    escalation: tuple[EscalationStep, ...] = ()
    risk_level: str = ""
    risk_reason: str = ""
    source: str = "tool"

    def with_source(self, source: str) -> PolicyDecision:
        """Return a copy of this decision marked as coming from ``source``."""
        return replace(self, source=source)


def takes_context(policy: Callable[..., Any]) -> bool:
    """Return whether callable ``policy`` accepts ``(params, context)`` rather than ``(params)``."""
    try:
        parameters = list(inspect.signature(policy).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [
        p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    return len(positional) >= 2 or any(
        p.kind == p.VAR_POSITIONAL or p.name == "context" for p in parameters
    )


def _positive_int(where: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise PolicyError(f"{where} must be an integer >= 1, got {value!r}")
    return value


def _seconds(where: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise PolicyError(
            f"{where} must be a positive number of seconds, got {value!r}"
        )
    return float(value)


def _groups(where: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise PolicyError(f"{where} must be a list of group names, got {value!r}")
    if not all(isinstance(g, str) and g.strip() for g in value):
        raise PolicyError(f"{where} must hold non-empty group names, got {value!r}")
    return tuple(value)


def _escalation(value: Any) -> tuple[EscalationStep, ...]:
    if isinstance(value, list | tuple) and all(
        isinstance(s, EscalationStep) for s in value
    ):
        return tuple(value)
    if not isinstance(value, list | tuple):
        raise PolicyError(
            f"escalation must be a list of {{'groups': [...], 'after_seconds': n}}, "
            f"got {value!r}"
        )
    steps = []
    for index, step in enumerate(value):
        where = f"escalation[{index}]"
        if not isinstance(step, Mapping) or set(step) - {"groups", "after_seconds"}:
            raise PolicyError(
                f"{where} must be {{'groups': [...], 'after_seconds': n}}, got {step!r}"
            )
        steps.append(
            EscalationStep(
                groups=_groups(f"{where}['groups']", step.get("groups")),
                after_seconds=_seconds(
                    f"{where}['after_seconds']", step.get("after_seconds")
                ),
            )
        )
    return tuple(steps)


def decision_from(value: Any, *, source: str = "tool") -> PolicyDecision:
    """Return ``value`` (an action string, a mapping or a decision) as a checked :class:`PolicyDecision`.

    Raises :class:`PolicyError` naming the bad field: an unknown action or key, a
    non-positive count, ``requester_may_approve`` not a bool, an expiry not longer
    than the escalation steps together (the final expiry must come last).
    """
    if isinstance(value, PolicyDecision):
        decision = value
    elif isinstance(value, str):
        if value not in _ACTIONS:
            raise PolicyError(f"action {value!r} must be one of {sorted(_ACTIONS)}")
        # The plain strings keep their original meaning: one approval
        # by anyone holding the decide permission, the requester included (the
        # AG-UI client's user consenting to their own agent's call, SEC-02).
        decision = PolicyDecision(action=value, requester_may_approve=True)  # type: ignore[arg-type]
    elif isinstance(value, Mapping):
        unknown = set(value) - DECLARATION_KEYS
        if unknown:
            raise PolicyError(
                f"unknown key(s) {sorted(unknown)}; allowed: {sorted(DECLARATION_KEYS)}"
            )
        options: dict[str, Any] = dict(value)
        options.setdefault("action", "require_approval")
        if "groups" in options:
            options["groups"] = _groups("groups", options["groups"])
        if "escalation" in options:
            options["escalation"] = _escalation(options["escalation"])
        try:
            decision = PolicyDecision(**options)
        except TypeError as error:
            raise PolicyError(str(error)) from error
    else:
        raise PolicyError(
            f"a policy must give 'auto', 'require_approval', 'deny', a mapping or a "
            f"PolicyDecision, got {type(value).__name__}"
        )
    if decision.action not in _ACTIONS:
        raise PolicyError(
            f"action {decision.action!r} must be one of {sorted(_ACTIONS)}"
        )
    _positive_int("approvals_required", decision.approvals_required)
    _positive_int("rejections_required", decision.rejections_required)
    if not isinstance(decision.requester_may_approve, bool):
        raise PolicyError(
            "requester_may_approve must be true or false, got "
            f"{decision.requester_may_approve!r}"
        )
    if not isinstance(decision.reason, str) or not isinstance(
        decision.risk_reason, str
    ):
        raise PolicyError("reason and risk_reason must be strings")
    if decision.risk_level not in _RISKS:
        raise PolicyError(
            f"risk_level {decision.risk_level!r} must be one of {sorted(_RISKS)}"
        )
    _groups("groups", decision.groups)
    escalation = _escalation(decision.escalation)
    if decision.expiry_seconds is not None:
        expiry = _seconds("expiry_seconds", decision.expiry_seconds)
        steps = sum(step.after_seconds for step in escalation)
        if escalation and expiry <= steps:
            raise PolicyError(
                f"expiry_seconds ({expiry:g}) must be longer than the escalation "
                f"steps together ({steps:g}): only the final expiry answers the call"
            )
    return replace(decision, escalation=escalation, source=source)


def fail_closed(reason: str) -> PolicyDecision:
    """Return the decision used when a policy fails: one approval by the strictest group.

    ``groups`` is left empty here; the application fills in its strictest group
    (``source`` ``fail_closed`` marks it).
    """
    return PolicyDecision(
        action="require_approval",
        risk_level="high",
        risk_reason=reason,
        source=FAIL_CLOSED_SOURCE,
    )


def policy_evaluate(
    policy: Any,
    params: dict[str, Any],
    context: PolicyContext | None,
    *,
    tool_name: str,
    source: str = "tool",
) -> PolicyDecision:
    """Run ``policy`` (any form, see the module) on ``params`` and ``context``; return its decision.

    A policy that raises, or returns something :func:`decision_from` refuses,
    fails closed (:func:`fail_closed`) and the problem is logged. Implements LP-01.
    """
    try:
        if callable(policy):
            value = (
                policy(params, context or PolicyContext())
                if takes_context(policy)
                else policy(params)
            )
        else:
            value = policy
        return decision_from(value, source=source)
    except Exception as error:
        logger.exception(
            "policy of tool %r failed (%s); requiring approval by the strictest group",
            tool_name,
            error,
        )
        return fail_closed(
            f"the policy of {tool_name!r} failed ({type(error).__name__}); "
            "a person from the strictest group decides"
        )
