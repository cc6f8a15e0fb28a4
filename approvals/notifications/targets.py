"""The notification targets configured in ``COUNTERSIGN["NOTIFICATIONS"]``.

Each entry is a dict:

- ``name``: a unique label, recorded on every delivery (default ``<kind>-<index>``);
- ``kind``: ``"email"`` (Django's email framework, ``EMAIL_*`` settings),
  ``"webhook"`` (an HTTP POST signed with the Standard Webhooks scheme) or
  ``"apprise"`` (any apprise URL: Slack, Teams, ntfy...; needs ``pip install
  countersign[apprise]``);
- ``events``: which of ``requested``, ``expiring``, ``decided``, ``escalated``,
  ``executed``, ``failed``, ``expired`` it receives (default all);
- email: ``to`` (a list of addresses), optional ``from``;
- webhook: ``url`` (http or https) and ``secret`` (``whsec_`` + base64, as
  Standard Webhooks prescribes; generate one with ``python -c "import base64, os;
  print('whsec_' + base64.b64encode(os.urandom(24)).decode())"``), optional ``headers``;
- apprise: ``urls`` (a list of apprise URLs);
- slack (approvals decided in Slack, :mod:`.chat`, docs/slack.md): ``token`` (the
  bot token, ``xoxb-…``), ``signing_secret`` (the app's signing secret, which
  verifies the interactivity requests), ``channel`` (the channel id a request is
  posted to) and optional ``channels`` (``{"<approver group>": "<channel id>"}``:
  a request routed to a group is posted to its channel), ``api_url`` (the Web
  API's base URL, default ``https://slack.com/api/``). Its events are fixed:
  ``requested`` posts the message, ``escalated`` posts it in the new group's
  channel too (when it has its own), ``updated`` (any change of the request,
  its votes or its execution) rewrites them.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import urlparse

from django.conf import settings

from core.conf import countersign_settings

EVENTS: Final = (
    "requested",
    "expiring",
    "decided",
    "escalated",
    "executed",
    "failed",
    "expired",
)
#: The events a chat surface's messages follow: posted (and posted again in an
#: escalation group's own channel), then rewritten on every change.
CHAT_EVENTS: Final = ("requested", "escalated", "updated")
#: The targets whose message people act on (:mod:`approvals.notifications.chat`).
CHAT_KINDS: Final = ("slack",)
KINDS: Final = ("email", "webhook", "apprise", *CHAT_KINDS)
SLACK_API_URL: Final = "https://slack.com/api/"
_KEYS: Final = {
    "email": {"name", "kind", "events", "to", "from"},
    "webhook": {"name", "kind", "events", "url", "secret", "headers"},
    "apprise": {"name", "kind", "events", "urls"},
    "slack": {
        "name",
        "kind",
        "token",
        "signing_secret",
        "channel",
        "channels",
        "api_url",
    },
}


@dataclass(frozen=True, slots=True)
class Target:
    """One valid notification target (see the module docstring for the fields)."""

    name: str
    kind: str
    events: frozenset[str]
    to: tuple[str, ...] = ()
    from_email: str = ""
    url: str = ""
    # Secrets stay out of repr(), hence out of logs and tracebacks (SEC-06).
    secret: str = field(default="", repr=False)
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    urls: tuple[str, ...] = field(default=(), repr=False)
    token: str = field(default="", repr=False)
    signing_secret: str = field(default="", repr=False)
    channel: str = ""
    channels: tuple[tuple[str, str], ...] = ()
    api_url: str = SLACK_API_URL
    #: Only requests of these agents (empty: every agent); an external agent's
    #: own webhook hears only its calls.
    agents: frozenset[str] = frozenset()

    def channel_for(self, groups: list[str]) -> str:
        """Return the channel of the first of ``groups`` that has one, else ``channel``."""
        routes = dict(self.channels)
        return next((routes[g] for g in groups if g in routes), self.channel)


def target_problems(index: int, entry: Any) -> list[str]:
    """Return what is wrong with target ``entry`` (position ``index``), ``[]`` if nothing.

    Each message names the entry and the field, and says what to write instead.
    """
    where = f"COUNTERSIGN['NOTIFICATIONS'][{index}]"
    if not isinstance(entry, dict):
        return [f"{where} is {type(entry).__name__}, not a dict"]
    kind = entry.get("kind")
    if kind not in KINDS:
        return [f"{where}['kind'] is {kind!r}; use one of {', '.join(KINDS)}"]
    problems = [
        f"{where} has unknown key {key!r} for kind {kind!r}; "
        f"allowed: {', '.join(sorted(_KEYS[kind]))}"
        for key in sorted(set(entry) - _KEYS[kind])
    ]
    name = entry.get("name", "")
    if not isinstance(name, str) or len(name) > 100:
        problems.append(f"{where}['name'] must be a string of at most 100 characters")
    if kind in CHAT_KINDS:
        return problems + _slack_problems(where, entry)
    events = entry.get("events", list(EVENTS))
    if not isinstance(events, list) or not events or not set(events) <= set(EVENTS):
        problems.append(
            f"{where}['events'] is {events!r}; give a non-empty list of "
            f"{', '.join(EVENTS)}"
        )
    if kind == "email":
        to = entry.get("to")
        if not _strings(to) or not all("@" in a for a in to or ()):
            problems.append(
                f"{where}['to'] must be a non-empty list of email addresses"
            )
    elif kind == "webhook":
        url = entry.get("url")
        parsed = urlparse(url) if isinstance(url, str) else None
        if (
            parsed is None
            or parsed.scheme not in ("http", "https")
            or not parsed.netloc
        ):
            problems.append(f"{where}['url'] is {url!r}; give an http(s) URL")
        if not _secret_ok(entry.get("secret")):
            problems.append(
                f"{where}['secret'] must be 'whsec_' followed by base64 of at least "
                "24 random bytes (Standard Webhooks)"
            )
        headers = entry.get("headers", {})
        if not isinstance(headers, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
        ):
            problems.append(f"{where}['headers'] must map header names to strings")
    elif not _strings(entry.get("urls")):
        problems.append(f"{where}['urls'] must be a non-empty list of apprise URLs")
    return problems


def _slack_problems(where: str, entry: dict[str, Any]) -> list[str]:
    """Return what is wrong with a ``slack`` target (never quoting a secret)."""
    problems = []
    token = entry.get("token")
    if not isinstance(token, str) or not token.startswith("xoxb-"):
        problems.append(
            f"{where}['token'] must be the app's bot token (it starts with 'xoxb-'; "
            "Slack: OAuth & Permissions → Bot User OAuth Token)"
        )
    secret = entry.get("signing_secret")
    if not isinstance(secret, str) or len(secret) < 16:
        problems.append(
            f"{where}['signing_secret'] must be the app's signing secret "
            "(Slack: Basic Information → App Credentials)"
        )
    channel = entry.get("channel")
    if not isinstance(channel, str) or not channel.strip():
        problems.append(
            f"{where}['channel'] must be the id of the channel requests are posted to "
            "(e.g. 'C0123456789'; invite the app to it)"
        )
    channels = entry.get("channels", {})
    if not isinstance(channels, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and v.strip()
        for k, v in channels.items()
    ):
        problems.append(
            f"{where}['channels'] must map approver group names to channel ids"
        )
    api_url = entry.get("api_url", SLACK_API_URL)
    parsed = urlparse(api_url) if isinstance(api_url, str) else None
    if (
        parsed is None
        or parsed.scheme not in ("http", "https")
        or not parsed.netloc
        or not str(api_url).endswith("/")
    ):
        problems.append(
            f"{where}['api_url'] is {api_url!r}; give the Web API's http(s) base URL "
            "ending in '/' (default https://slack.com/api/)"
        )
    return problems


def _strings(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(v, str) and v for v in value)
    )


def _secret_ok(secret: Any) -> bool:
    if not isinstance(secret, str) or not secret.startswith("whsec_"):
        return False
    try:
        return len(base64.b64decode(secret[len("whsec_") :], validate=True)) >= 24
    except (binascii.Error, ValueError):
        return False


def target_name(index: int, entry: dict[str, Any]) -> str:
    """Return the name of target ``entry`` at ``index``: its ``name``, else ``<kind>-<index>``."""
    return str(entry.get("name") or f"{entry.get('kind')}-{index}")


def configured_targets() -> list[Target]:
    """Return the valid targets of ``COUNTERSIGN["NOTIFICATIONS"]``, in order.

    Invalid entries are left out (the system checks report them at start-up), so a
    bad entry never stops the others.
    """
    raw = countersign_settings.NOTIFICATIONS or []
    targets: list[Target] = []
    for index, entry in enumerate(raw if isinstance(raw, list) else []):
        if target_problems(index, entry):
            continue
        targets.append(
            Target(
                name=target_name(index, entry),
                kind=entry["kind"],
                events=frozenset(
                    CHAT_EVENTS
                    if entry["kind"] in CHAT_KINDS
                    else entry.get("events", EVENTS)
                ),
                to=tuple(entry.get("to", ())),
                from_email=str(entry.get("from", "")),
                url=str(entry.get("url", "")),
                secret=str(entry.get("secret", "")),
                headers=tuple(sorted((entry.get("headers") or {}).items())),
                urls=tuple(entry.get("urls", ())),
                token=str(entry.get("token", "")),
                signing_secret=str(entry.get("signing_secret", "")),
                channel=str(entry.get("channel", "")),
                channels=tuple((entry.get("channels") or {}).items()),
                api_url=str(entry.get("api_url", SLACK_API_URL)),
            )
        )
    return targets + external_agent_targets()


def external_agent_targets() -> list[Target]:
    """Return the webhook of each external agent that configures one (``"webhook"``).

    ``COUNTERSIGN_AGENTS[name]["webhook"] = {"url": ..., "secret": "whsec_..."}``:
    the agent's caller hears each decision on its calls (event ``decided``),
    signed as every webhook is (Standard Webhooks), named ``agent:<name>``. An
    entry without a valid URL or secret is left out.
    """
    agents = getattr(settings, "COUNTERSIGN_AGENTS", {}) or {}
    targets: list[Target] = []
    for name, config in agents.items():
        hook = config.get("webhook") if isinstance(config, dict) else None
        if config.get("provider") != "external" or not isinstance(hook, dict):
            continue
        url, secret = hook.get("url"), hook.get("secret")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            continue
        if not _secret_ok(secret):
            continue
        targets.append(
            Target(
                name=f"agent:{name}",
                kind="webhook",
                events=frozenset({"decided"}),
                url=url,
                secret=str(secret),
                agents=frozenset({str(name)}),
            )
        )
    return targets


def target_named(name: str) -> Target | None:
    """Return the configured target called ``name``, or ``None``."""
    return next((t for t in configured_targets() if t.name == name), None)


def chat_targets(kind: str) -> list[Target]:
    """Return the configured chat targets of surface ``kind`` (``"slack"``), in order."""
    return [t for t in configured_targets() if t.kind == kind]
