"""System checks for Countersign's configuration, with stable ids (STYLE.md 18).

One id per problem:

- ``threads.E001``: ``COUNTERSIGN_AGENTS`` is missing or empty;
- ``threads.E002``: an agent's provider needs an API key that is not set;
- ``threads.E003``: an agent's toolset path does not import;
- ``threads.E004``: ``CHANNEL_LAYERS['default']`` is missing;
- ``threads.E005``: an agent names an unknown provider;
- ``threads.E006``: an ``agui_http`` agent has no ``url``;
- ``threads.E030``: a janitor window (``COUNTERSIGN[...]_SECONDS``) is not a
  positive number;
- ``threads.E031``: ``RUN_STALE_SECONDS`` is not longer than four
  ``RUN_HEARTBEAT_SECONDS`` (the heartbeat's time to live, three intervals, plus
  one more): a dead worker's heartbeat key would expire before it proved the
  death, and a run whose key Redis lost could be reaped before the next
  refresh re-creates it;
- ``threads.E032``: the janitor's beat entry is missing or its schedule is not
  ``JANITOR_INTERVAL_SECONDS``;
"""

from __future__ import annotations

import os
from typing import Any

from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from threads.agent_config import KEY_ENV, PROVIDERS, config_problems
from threads.mcp_servers import check_mcp_servers

#: One check id per kind of agent-entry problem (``config_problems``).
_PROBLEM_IDS = {"unknown_key": "threads.E020", "invalid_value": "threads.E021"}

checks.register(check_mcp_servers)


@checks.register()
def check_agents(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Check ``COUNTERSIGN_AGENTS``: known providers, keys present, toolsets importable."""
    errors: list[checks.CheckMessage] = []
    agents = getattr(settings, "COUNTERSIGN_AGENTS", None)
    if not isinstance(agents, dict) or not agents:
        return [
            checks.Error(
                "COUNTERSIGN_AGENTS is missing or empty",
                hint="Define at least one agent, e.g. the default 'demo' agent.",
                id="threads.E001",
            )
        ]
    for name, config in agents.items():
        provider = config.get("provider")
        if provider not in PROVIDERS:
            errors.append(
                checks.Error(
                    f"COUNTERSIGN_AGENTS[{name!r}]['provider'] is {provider!r}",
                    hint=f"Use one of {', '.join(PROVIDERS)}.",
                    id="threads.E005",
                )
            )
            continue
        key = KEY_ENV.get(provider)
        if key and not os.environ.get(key):
            errors.append(
                checks.Error(
                    f"COUNTERSIGN_AGENTS[{name!r}] uses {provider!r} but {key} is not set",
                    hint=f"Export {key} in the environment of the web and worker processes.",
                    id="threads.E002",
                )
            )
        if provider == "agui_http" and not config.get("url"):
            errors.append(
                checks.Error(
                    f"COUNTERSIGN_AGENTS[{name!r}] uses 'agui_http' without 'url'",
                    hint="Set 'url' to the remote agent's AG-UI endpoint.",
                    id="threads.E006",
                )
            )
        errors.extend(
            checks.Error(p.message, hint=p.hint, id=_PROBLEM_IDS[p.kind])
            for p in config_problems(name, config)
        )
        for path in config.get("toolsets", ()):
            try:
                import_string(path)
            except ImportError as error:
                errors.append(
                    checks.Error(
                        f"COUNTERSIGN_AGENTS[{name!r}]['toolsets'] names {path!r}, "
                        f"which does not import: {error}",
                        hint="Give the dotted path of a tuple or list of tools.",
                        id="threads.E003",
                    )
                )
    return errors


@checks.register()
def check_channel_layer(
    app_configs: Any = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """Check that a channel layer is configured."""
    if "default" not in getattr(settings, "CHANNEL_LAYERS", {}):
        return [
            checks.Error(
                "CHANNEL_LAYERS['default'] is missing",
                hint="Set REDIS_URL or use the embedded default (in-memory layer).",
                id="threads.E004",
            )
        ]
    return []


#: The recovery windows the janitor reads (core.conf documents each).
JANITOR_SETTINGS = (
    "JANITOR_INTERVAL_SECONDS",
    "QUEUED_STALE_SECONDS",
    "RUN_STALE_SECONDS",
    "RUN_HEARTBEAT_SECONDS",
    "EXECUTION_LEASE_GRACE_SECONDS",
    "JANITOR_SWEEP_RETENTION_SECONDS",
)
#: The beat entry that runs the janitor (config/settings.py).
JANITOR_BEAT_ENTRY = "reap-stale-runs"


def positive_number_error(
    name: str, value: Any, *, hint: str, id: str
) -> checks.Error | None:
    """Return check ``id`` for ``COUNTERSIGN[name]`` when ``value`` is not a positive number.

    ``None`` when it is an ``int`` or ``float`` above zero (a ``bool`` is not a
    number here). The message is ``"COUNTERSIGN['<name>'] is <value!r>"``; the
    ``hint`` says what to set. Shared by the janitor's and the notifications' checks.
    """
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return checks.Error(f"COUNTERSIGN[{name!r}] is {value!r}", hint=hint, id=id)
    return None


@checks.register()
def check_janitor(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Check the janitor's windows and that beat runs it every ``JANITOR_INTERVAL_SECONDS``.

    Returns ``threads.E030`` per window that is not a positive number,
    ``threads.E031`` when ``RUN_STALE_SECONDS`` does not outlast four
    heartbeat intervals (``orchestration.supervision``: a heartbeat is fresh for
    three, its worker dead after four), ``threads.E032`` when the beat entry is missing or disagrees.
    The windows bound recovery from crashes (docs/recovery.md).
    """
    from core.conf import countersign_settings

    errors: list[checks.CheckMessage] = []
    values: dict[str, float] = {}
    for name in JANITOR_SETTINGS:
        value = getattr(countersign_settings, name)
        error = positive_number_error(
            name,
            value,
            hint="Set it to a positive number of seconds.",
            id="threads.E030",
        )
        if error is not None:
            errors.append(error)
        else:
            values[name] = float(value)
    if errors:
        return errors
    # orchestration.supervision.HEARTBEAT_DEAD_INTERVALS (threads cannot import
    # orchestration): the time to live (3 intervals) plus one refresh.
    dead_after = 4 * values["RUN_HEARTBEAT_SECONDS"]
    if values["RUN_STALE_SECONDS"] <= dead_after:
        errors.append(
            checks.Error(
                f"COUNTERSIGN['RUN_STALE_SECONDS'] ({values['RUN_STALE_SECONDS']}) "
                "is not longer than four RUN_HEARTBEAT_SECONDS "
                f"({dead_after}), the heartbeat's time to live plus one refresh",
                hint="Raise RUN_STALE_SECONDS or lower RUN_HEARTBEAT_SECONDS, so a "
                "run whose heartbeat key was lost (Redis restarted or flushed) is "
                "not reaped before the next refresh re-creates it.",
                id="threads.E031",
            )
        )
    entry = getattr(settings, "CELERY_BEAT_SCHEDULE", {}).get(JANITOR_BEAT_ENTRY)
    schedule = entry.get("schedule") if isinstance(entry, dict) else None
    if (
        not isinstance(schedule, int | float)
        or float(schedule) != (values["JANITOR_INTERVAL_SECONDS"])
    ):
        errors.append(
            checks.Error(
                f"CELERY_BEAT_SCHEDULE[{JANITOR_BEAT_ENTRY!r}] runs the janitor every "
                f"{schedule!r} s, not JANITOR_INTERVAL_SECONDS "
                f"({values['JANITOR_INTERVAL_SECONDS']})",
                hint="Build the beat entry from COUNTERSIGN['JANITOR_INTERVAL_SECONDS'] "
                "(as config/settings.py does).",
                id="threads.E032",
            )
        )
    return errors


def raise_on_configuration_errors() -> None:
    """Run Countersign's checks and raise ``ImproperlyConfigured`` listing any error.

    Called when a web or worker process starts (``config/asgi.py``, the Celery
    ``worker_init`` signal), so misconfiguration stops it at once with a message
    naming the setting, instead of failing the first run.
    """

    problems = [
        *check_agents(),
        *check_channel_layer(),
        *check_mcp_servers(),
        *check_janitor(),
    ]
    errors = [p for p in problems if p.level >= checks.ERROR]
    if errors:
        raise ImproperlyConfigured(
            "Countersign is misconfigured:\n"
            + "\n".join(f"- {e.id}: {e.msg} ({e.hint})" for e in errors)
        )
