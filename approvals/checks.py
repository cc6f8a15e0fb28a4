"""System checks for the approval workflow's settings, with stable ids (STYLE.md 18).

- ``approvals.E101``: ``COUNTERSIGN["NOTIFICATIONS"]`` is not a list;
- ``approvals.E102``: a notification target is invalid (kind, events, address,
  URL, secret or an unknown key: the message names the entry and the field);
- ``approvals.E103``: two targets share a name (deliveries are recorded by name);
- ``approvals.E104``: an ``apprise`` target is configured but apprise is not installed;
- ``approvals.E105``: ``PUBLIC_URL`` is not an absolute http(s) URL (notification
  links would not open);
- ``approvals.E106``: a notification number (``NOTIFY_*``) is not positive.
"""

from __future__ import annotations

import importlib.util
from typing import Any
from urllib.parse import urlparse

from django.core import checks

from approvals.notifications.targets import target_name, target_problems
from threads.conf import countersign_settings

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
                hint="Give a list of targets (README, Notifications), or [] for none; "
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
                hint="See README, Notifications, for each kind's fields.",
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
        value = getattr(countersign_settings, name)
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            errors.append(
                checks.Error(
                    f"COUNTERSIGN[{name!r}] is {value!r}",
                    hint="Give a positive number.",
                    id="approvals.E106",
                )
            )
    return errors
