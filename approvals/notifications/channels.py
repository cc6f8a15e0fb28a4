"""Sending one notification to one target: email, Standard Webhooks POST, or apprise.

:func:`notification_content` builds what every channel says about an event;
:func:`notification_send` sends it and raises :class:`DeliveryFailed` with a short,
sanitized reason (no secret, no response body: SEC-06) when the target did not
take it.

Webhooks follow the Standard Webhooks scheme (standardwebhooks.com), signed with
its reference library: headers ``webhook-id`` (the delivery's id, the same on
every retry, so receivers can drop duplicates), ``webhook-timestamp`` (Unix
seconds) and ``webhook-signature`` (``v1,<base64 HMAC-SHA256 of
"<id>.<timestamp>.<body>" keyed by the base64-decoded secret>``); the body is
JSON ``{"type": "approval.<event>", "version": 2, "timestamp", "data": {...}}``. A receiver
verifies with ``standardwebhooks.Webhook(secret).verify(body, headers)``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import httpx
from django.conf import settings
from django.core.mail import EmailMessage, get_connection
from standardwebhooks.webhooks import Webhook

from approvals.facts import approval_facts
from approvals.notifications.links import approval_link_url
from approvals.notifications.targets import Target
from approvals.services.notify import approval_snapshot

if TYPE_CHECKING:
    from approvals.models import ApprovalRequest

_HEADLINES = {
    "requested": "Approval requested",
    "expiring": "Approval expiring soon",
    "decided": "Approval decided",
    "escalated": "Approval escalated",
    "executed": "Approved call executed",
    "failed": "Approved call failed",
    "expired": "Approval expired",
}

#: The version of the webhook payload's shape (docs/notifications.md): 2 added
#: ``version``, ``data.facts`` and the outcome events.
PAYLOAD_VERSION = 2


def _utc(moment: datetime) -> str:
    """Return ``moment`` as people read it in a message: ``2026-12-03 09:14 UTC``."""
    return f"{moment.astimezone(UTC):%Y-%m-%d %H:%M} UTC"


class DeliveryFailed(Exception):
    """The target did not take the notification; ``str()`` is the sanitized reason."""


@dataclass(frozen=True, slots=True)
class NotificationContent:
    """What a notification says: ``subject`` and ``body`` for people, ``payload`` for machines."""

    event: str
    subject: str
    body: str
    payload: dict[str, Any]


def notification_content(
    *, approval: ApprovalRequest, event: str, group: str = ""
) -> NotificationContent:
    """Return the subject, text and JSON payload announcing ``event`` on ``approval``.

    The payload (version :data:`PAYLOAD_VERSION`) has ``data``: the request's
    snapshot (the queue's JSON shape) plus ``event``, ``link`` (signed,
    expiring), ``threadTitle``, ``facts`` (:func:`approvals.facts.approval_facts`
    without a viewer: votes, deciders, arguments, phase, headline) and ``group``
    for an escalation. The text says the same facts in sentences.
    """
    link = approval_link_url(approval.pk)
    snapshot = approval_snapshot(approval)
    facts = approval_facts(approval)
    thread_title = str(approval.thread)
    what = snapshot.get("label") or approval.tool_name
    headline = _HEADLINES.get(event, event)
    subject = f"[Countersign] {headline}: {what}"
    lines = [
        f"{headline}: {what}",
        "",
        f"Tool: {approval.tool_name}"
        + (" (destructive)" if approval.is_destructive else ""),
        f"Thread: {thread_title}",
        f"Requested by: {getattr(approval.requested_by, 'username', None) or 'unknown'}",
        facts["headline"],
        f"Approvals: {facts['votes']['text']}",
    ]
    if event in ("requested", "expiring", "escalated"):
        lines.append(f"Expires at: {_utc(approval.expires_at)}")
    if approval.kind == "tool_call" or approval.proposed_arguments:
        lines.append(
            "Arguments: "
            + json.dumps(
                approval.approved_arguments, ensure_ascii=False, sort_keys=True
            )
        )
    if approval.message:
        lines.append(f"Message: {approval.message}")
    if facts["arguments"]["edited"]:
        lines.append(
            "Proposed arguments: "
            + json.dumps(
                approval.proposed_arguments, ensure_ascii=False, sort_keys=True
            )
        )
    if facts["decidedBy"] and approval.decided_at:
        lines.append(
            f"Decided by: {', '.join(facts['decidedBy'])} at "
            f"{_utc(approval.decided_at)}"
        )
    if approval.reason:
        lines.append(f"Reason: {approval.reason}")
    if approval.status == "responded" and isinstance(approval.response, str):
        lines.append(f"Answered instead of running it: {approval.response}")
    execution = facts["execution"]
    if execution and execution.get("result"):
        lines.append(f"Result: {execution['result']}")
    if group:
        lines.append(f"Escalated to: {group}")
    lines += ["", f"Open it (sign-in required to decide): {link}", ""]
    data = {
        **snapshot,
        "event": event,
        "link": link,
        "threadTitle": thread_title,
        "facts": facts,
    }
    if group:
        data["group"] = group
    payload = {
        "type": f"approval.{event}",
        "version": PAYLOAD_VERSION,
        "timestamp": datetime.now(UTC).isoformat(),
        "data": data,
    }
    return NotificationContent(
        event=event, subject=subject, body="\n".join(lines), payload=payload
    )


def notification_send(
    *, target: Target, content: NotificationContent, message_id: str, timeout: float
) -> None:
    """Send ``content`` to ``target``; ``message_id`` identifies it across retries.

    Raises :class:`DeliveryFailed` (sanitized reason) when the target refused it
    or could not be reached within ``timeout`` seconds.
    """
    if target.kind == "email":
        _send_email(target, content, timeout)
    elif target.kind == "webhook":
        _send_webhook(target, content, message_id, timeout)
    else:
        _send_apprise(target, content)


def _send_email(target: Target, content: NotificationContent, timeout: float) -> None:
    message = EmailMessage(
        subject=content.subject,
        body=content.body,
        from_email=target.from_email or settings.DEFAULT_FROM_EMAIL,
        to=list(target.to),
        connection=get_connection(fail_silently=False, timeout=timeout),
    )
    try:
        message.send()
    except (OSError, TimeoutError) as error:
        # smtplib's errors are OSError subclasses; their text names the SMTP
        # reply or the socket error, never the password.
        raise DeliveryFailed(
            f"SMTP {settings.EMAIL_HOST}:{settings.EMAIL_PORT}: "
            f"{type(error).__name__}: {error}"[:500]
        ) from error


def webhook_request(
    *, target: Target, content: NotificationContent, message_id: str
) -> tuple[bytes, dict[str, str]]:
    """Return the body and headers of ``content``'s webhook, signed (Standard Webhooks)."""
    body = json.dumps(content.payload, separators=(",", ":"), ensure_ascii=False)
    now = datetime.now(UTC)
    signature = Webhook(target.secret).sign(msg_id=message_id, timestamp=now, data=body)
    headers = {
        **dict(target.headers),
        "content-type": "application/json",
        "user-agent": "Countersign-Notifications",
        "webhook-id": message_id,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": signature,
    }
    return body.encode("utf-8"), headers


def _send_webhook(
    target: Target, content: NotificationContent, message_id: str, timeout: float
) -> None:
    body, headers = webhook_request(
        target=target, content=content, message_id=message_id
    )
    host = httpx.URL(target.url).host
    try:
        response = httpx.post(
            target.url, content=body, headers=headers, timeout=timeout
        )
    except httpx.HTTPError as error:
        raise DeliveryFailed(
            f"webhook {host}: {type(error).__name__}: {error}"[:500]
        ) from error
    if not response.is_success:
        raise DeliveryFailed(
            f"webhook {host} answered HTTP {response.status_code}; it must answer 2xx"
        )


def _send_apprise(target: Target, content: NotificationContent) -> None:
    try:
        import apprise
    except ImportError as error:
        raise DeliveryFailed(
            "apprise is not installed: pip install 'countersign[apprise]'"
        ) from error
    sender = apprise.Apprise()
    for url in target.urls:
        if not sender.add(url):
            # The URL may hold a token: name its scheme only.
            raise DeliveryFailed(
                f"apprise does not understand a {url.split(':', 1)[0]!r} URL"
            )
    if not sender.notify(title=content.subject, body=content.body):
        raise DeliveryFailed(
            "apprise could not deliver to every URL (the worker log says why)"
        )
