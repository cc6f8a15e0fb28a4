"""System checks of the approval workflow's settings, with stable ids (STYLE.md 18).

Notifications:

- ``approvals.E101``: ``COUNTERSIGN["NOTIFICATIONS"]`` is not a list;
- ``approvals.E102``: a notification target is invalid (kind, events, address,
  URL, secret or an unknown key: the message names the entry and the field);
- ``approvals.E103``: two targets share a name (deliveries are recorded by name);
- ``approvals.E104``: an ``apprise`` target is configured but apprise is not installed;
- ``approvals.E105``: ``PUBLIC_URL`` is not an absolute http(s) URL (notification
  links would not open);
- ``approvals.E106``: a notification number (``NOTIFY_*``) is not positive.

A ``slack`` target's token, signing secret, channel, group channels and API URL
are checked under ``approvals.E102`` (docs/slack.md); no message quotes a secret.

Audit (docs/audit.md):

- ``approvals.E110``: ``COUNTERSIGN["AUDIT_KEYS"]`` is malformed (the message names
  the item), so no audit entry could be written;
- ``approvals.W111`` (``check --deploy``): no audit key is set, so the chain is
  keyed with ``SECRET_KEY`` and rotating it makes the chain unverifiable.

Governance (ids in the ``threads`` range of the agents' settings):

- ``approvals.E070``: a static policy in ``COUNTERSIGN_AGENTS[agent]["policies"]``
  is not a valid declaration (unknown key, bad count, expiry shorter than the
  escalation steps...);
- ``approvals.E071``: a static policy names a tool the agent does not have;
- ``approvals.E072``: ``COUNTERSIGN["POLICY_FAIL_CLOSED_GROUP"]`` is not a group
  name, so a failing policy would route to nobody in particular.

Policies edited in the admin (:class:`approvals.models.ToolPolicy`) are checked
when saved (``ToolPolicy.clean``) and fail closed at run time if still wrong.
Implements LP-01.
"""

from __future__ import annotations

import importlib.util
from typing import Any
from urllib.parse import urlparse

from django.conf import settings
from django.core import checks

from agentcore.policy import PolicyError, decision_from
from approvals.notifications.targets import target_name, target_problems
from core.conf import countersign_settings
from threads.checks import positive_number_error

_NUMBERS = (
    "NOTIFY_EXPIRING_SECONDS",
    "NOTIFY_MAX_ATTEMPTS",
    "NOTIFY_RETRY_BACKOFF_SECONDS",
    "NOTIFY_RETRY_MAX_DELAY_SECONDS",
    "NOTIFY_TIMEOUT_SECONDS",
    "NOTIFY_LINK_MAX_AGE_SECONDS",
)


@checks.register()
def check_notifications(
    app_configs: Any = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """Check ``COUNTERSIGN["NOTIFICATIONS"]``, ``PUBLIC_URL`` and the ``NOTIFY_*`` numbers."""
    errors: list[checks.CheckMessage] = []
    raw = countersign_settings.NOTIFICATIONS
    if not isinstance(raw, list):
        return [
            checks.Error(
                f"COUNTERSIGN['NOTIFICATIONS'] is {type(raw).__name__}, not a list",
                hint="Give a list of targets (docs/notifications.md), or [] for none; "
                "COUNTERSIGN_NOTIFICATIONS_JSON must be a JSON array.",
                id="approvals.E101",
            )
        ]
    names: set[str] = set()
    for index, entry in enumerate(raw):
        problems = target_problems(index, entry)
        errors += [
            checks.Error(
                problem,
                hint="See docs/slack.md for a Slack target's fields."
                if isinstance(entry, dict) and entry.get("kind") == "slack"
                else "See docs/notifications.md for each kind's fields.",
                id="approvals.E102",
            )
            for problem in problems
        ]
        if problems:
            continue
        name = target_name(index, entry)
        if name in names:
            errors.append(
                checks.Error(
                    f"two notification targets are named {name!r}",
                    hint="Give each target a distinct 'name'.",
                    id="approvals.E103",
                )
            )
        names.add(name)
        if entry["kind"] == "apprise" and importlib.util.find_spec("apprise") is None:
            errors.append(
                checks.Error(
                    f"notification target {name!r} is an apprise target, but apprise "
                    "is not installed",
                    hint="pip install 'countersign[apprise]', or remove the target.",
                    id="approvals.E104",
                )
            )
    public = urlparse(str(countersign_settings.PUBLIC_URL))
    if public.scheme not in ("http", "https") or not public.netloc:
        errors.append(
            checks.Error(
                f"COUNTERSIGN['PUBLIC_URL'] is {countersign_settings.PUBLIC_URL!r}",
                hint="Give the site's address as people reach it, e.g. "
                "https://countersign.example.com (COUNTERSIGN_PUBLIC_URL).",
                id="approvals.E105",
            )
        )
    for name in _NUMBERS:
        error = positive_number_error(
            name,
            getattr(countersign_settings, name),
            hint="Give a positive number.",
            id="approvals.E106",
        )
        if error is not None:
            errors.append(error)
    return errors


def _agent_tool_names(name: str) -> set[str] | None:
    """Return the local tool names of agent ``name``, or ``None`` if they cannot be loaded."""
    from threads.agent_config import agent_settings, toolset_load

    try:
        config = agent_settings(name)
        return {t.name for t in toolset_load(tuple(config.get("toolsets", ())))}
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
                id="approvals.E072",
            )
        )
    agents = getattr(settings, "COUNTERSIGN_AGENTS", None) or {}
    for agent, config in agents.items():
        policies = config.get("policies") if isinstance(config, dict) else None
        if not isinstance(policies, dict) or not policies:
            continue  # threads.E021 reports a 'policies' that is not a mapping
        # An MCP agent's tools are its servers'; an external agent declares each
        # call's tool with the call: neither is known here.
        declares_its_tools = bool(config.get("mcp_servers")) or (
            config.get("provider") == "external"
        )
        tools = None if declares_its_tools else _agent_tool_names(agent)
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
                        id="approvals.E070",
                    )
                )
            if tools is not None and tool_name not in tools:
                errors.append(
                    checks.Error(
                        f"{where} names a tool agent {agent!r} does not have",
                        hint=f"Use one of {', '.join(sorted(tools)) or 'its tools'}.",
                        id="approvals.E071",
                    )
                )
    return errors


@checks.register()
def check_audit_keys(
    app_configs: Any = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """Check that ``COUNTERSIGN["AUDIT_KEYS"]`` parses (SEC-04)."""
    from django.core.exceptions import ImproperlyConfigured

    from approvals.services.audit import audit_keys

    try:
        audit_keys()
    except ImproperlyConfigured as error:
        return [
            checks.Error(
                str(error),
                hint="Set COUNTERSIGN_AUDIT_KEYS to id:secret[,id:secret...], the "
                "current key first (docs/audit.md).",
                id="approvals.E110",
            )
        ]
    return []


@checks.register(checks.Tags.security, deploy=True)
def check_audit_keys_deploy(
    app_configs: Any = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """Warn when the audit chain is keyed with ``SECRET_KEY`` (SEC-04)."""
    if countersign_settings.AUDIT_KEYS:
        return []
    return [
        checks.Warning(
            "The audit chain is keyed with SECRET_KEY: rotating SECRET_KEY would "
            "make every audit entry unverifiable.",
            hint="Set COUNTERSIGN_AUDIT_KEYS=id:secret (docs/audit.md).",
            id="approvals.W111",
        )
    ]
