"""System checks of the governance configuration (issue 16), run at start-up.

- ``threads.E070``: a static policy in ``COUNTERSIGN_AGENTS[agent]["policies"]``
  is not a valid declaration (unknown key, bad count, expiry shorter than the
  escalation steps...);
- ``threads.E071``: a static policy names a tool the agent does not have;
- ``threads.E072``: ``COUNTERSIGN["POLICY_FAIL_CLOSED_GROUP"]`` is not a group
  name, so a failing policy would route to nobody in particular.

Policies edited in the admin (:class:`approvals.models.ToolPolicy`) are checked
when saved (``ToolPolicy.clean``) and fail closed at run time if still wrong.
Implements LP-01.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks

from agentcore.policy import PolicyError, decision_from
from threads.conf import countersign_settings


def _agent_tool_names(name: str) -> set[str] | None:
    """Return the local tool names of agent ``name``, or ``None`` if they cannot be loaded."""
    from threads.agent_config import _load_toolset, agent_settings

    try:
        config = agent_settings(name)
        return {t.name for t in _load_toolset(tuple(config.get("toolsets", ())))}
    except Exception:  # threads.E003 reports toolsets that do not import
        return None


@checks.register()
def check_policies(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Check every static policy declaration and the fail-closed group. Implements LP-01."""
    errors: list[checks.CheckMessage] = []
    group = countersign_settings.POLICY_FAIL_CLOSED_GROUP
    if not isinstance(group, str) or not group.strip():
        errors.append(
            checks.Error(
                f"COUNTERSIGN['POLICY_FAIL_CLOSED_GROUP'] is {group!r}",
                hint="Name the Django group that approves calls whose policy failed, "
                "e.g. 'approvers-strict'.",
                id="threads.E072",
            )
        )
    agents = getattr(settings, "COUNTERSIGN_AGENTS", None) or {}
    for agent, config in agents.items():
        policies = config.get("policies") if isinstance(config, dict) else None
        if not isinstance(policies, dict) or not policies:
            continue  # threads.E021 reports a 'policies' that is not a mapping
        tools = _agent_tool_names(agent) if not config.get("mcp_servers") else None
        for tool_name, declared in policies.items():
            where = f"COUNTERSIGN_AGENTS[{agent!r}]['policies'][{tool_name!r}]"
            try:
                decision_from(declared, source="settings")
            except PolicyError as error:
                errors.append(
                    checks.Error(
                        f"{where} is invalid: {error}",
                        hint="Give an action string or a mapping of action, groups, "
                        "approvals_required, rejections_required, requester_may_approve, "
                        "expiry_seconds, escalation, risk_level, risk_reason, reason.",
                        id="threads.E070",
                    )
                )
            if tools is not None and tool_name not in tools:
                errors.append(
                    checks.Error(
                        f"{where} names a tool agent {agent!r} does not have",
                        hint=f"Use one of {', '.join(sorted(tools)) or 'its tools'}.",
                        id="threads.E071",
                    )
                )
    return errors
