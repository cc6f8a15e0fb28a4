"""Outbound notifications: a real SMTP server, a real webhook receiver, a broken target.

Email goes through Django's SMTP backend to an aiosmtpd server on localhost; the
webhook receiver is an HTTP server in a thread that verifies every request with
the Standard Webhooks library; the broken target is a port nobody listens on.
Each flow runs on the embedded pool and on a real Celery worker process.
SEC-02 (a broken target never changes a decision), DC-03.
"""

from __future__ import annotations

import base64
import json
import os
import re
import socket
import threading
import time
from collections.abc import Iterator
from email import message_from_bytes
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
from aiosmtpd.controller import Controller
from django.core import signing
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.urls import reverse
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from approvals.checks import check_notifications
from approvals.models import ApprovalRequest, NotificationDelivery, ToolExecution
from approvals.notifications.links import (
    SALT,
    approval_link_token,
    approval_link_verify,
)
from approvals.services.expiring import approvals_expiring_announce
from approvals.signals import approval_escalated, send_now
from demo.models import Refund
from orchestration.pipeline import approval_decide
from threads.models import Message, ToolCall

SECRET = "whsec_" + base64.b64encode(b"countersign-test-secret-0123456789").decode()
LINK_RE = re.compile(r"http://testserver(/approvals/link/[^/\s]+/)")


class _Inbox:
    """An aiosmtpd handler keeping every message it receives."""

    def __init__(self) -> None:
        self.messages: list[Any] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        message = message_from_bytes(envelope.content)
        message["X-Rcpt"] = ",".join(envelope.rcpt_tos)
        self.messages.append(message)
        return "250 OK"

    def subjects(self) -> list[str]:
        return [str(m["Subject"]) for m in self.messages]


@pytest.fixture
def smtp_server() -> Iterator[tuple[_Inbox, int]]:
    """A real SMTP server on localhost; yields its inbox and port."""
    inbox = _Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=_free_port())
    controller.start()
    try:
        yield inbox, controller.port
    finally:
        controller.stop()


class _Receiver:
    """What the webhook receiver got: verified payloads, refusals, apprise posts."""

    def __init__(self) -> None:
        self.verified: list[dict[str, Any]] = []
        self.ids: list[str] = []
        self.refused: list[str] = []
        self.apprise: list[dict[str, Any]] = []

    def events(self) -> list[str]:
        return [p["type"] for p in self.verified]


@pytest.fixture
def webhook_receiver() -> Iterator[tuple[_Receiver, int]]:
    """An HTTP server that verifies Standard Webhooks signatures (and takes apprise JSON)."""
    received = _Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            if self.path.startswith("/apprise"):
                received.apprise.append(json.loads(body))
                self.send_response(200)
            else:
                try:
                    payload = Webhook(SECRET).verify(body, dict(self.headers))
                except WebhookVerificationError as error:
                    received.refused.append(str(error))
                    self.send_response(401)
                else:
                    received.verified.append(payload)
                    received.ids.append(self.headers["webhook-id"])
                    self.send_response(204)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield received, server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def notifications(settings, monkeypatch, smtp_server, webhook_receiver):
    """Configure four targets (email, webhook, apprise, a refused port) here and for workers.

    Requested before ``executor``, so a Celery worker it starts inherits the
    environment.
    """
    _, smtp_port = smtp_server
    _, hook_port = webhook_receiver
    targets = [
        {"name": "ops-mail", "kind": "email", "to": ["ops@example.com"]},
        {
            "name": "ops-hook",
            "kind": "webhook",
            "url": f"http://127.0.0.1:{hook_port}/hooks",
            "secret": SECRET,
        },
        {
            "name": "chat",
            "kind": "apprise",
            "events": ["requested"],
            "urls": [f"json://127.0.0.1:{hook_port}/apprise"],
        },
        {
            "name": "broken",
            "kind": "webhook",
            "url": f"http://127.0.0.1:{_free_port()}/nobody-listens",
            "secret": SECRET,
        },
    ]
    numbers = {
        "NOTIFY_MAX_ATTEMPTS": 3,
        "NOTIFY_RETRY_BACKOFF_SECONDS": 0.2,
        "NOTIFY_TIMEOUT_SECONDS": 5.0,
    }
    settings.COUNTERSIGN = {
        **settings.COUNTERSIGN,
        "NOTIFICATIONS": targets,
        "PUBLIC_URL": "http://testserver",
        **numbers,
    }
    # Django's test runner swaps in the in-memory backend: use the real SMTP one.
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST = "127.0.0.1"
    settings.EMAIL_PORT = smtp_port
    monkeypatch.setenv("COUNTERSIGN_NOTIFICATIONS_JSON", json.dumps(targets))
    monkeypatch.setenv("COUNTERSIGN_PUBLIC_URL", "http://testserver")
    for name, value in numbers.items():
        monkeypatch.setenv(f"COUNTERSIGN_{name}", str(value))
    monkeypatch.setenv("EMAIL_HOST", "127.0.0.1")
    monkeypatch.setenv("EMAIL_PORT", str(smtp_port))
    return targets


def _deliveries(
    approval: ApprovalRequest,
) -> dict[tuple[str, str], NotificationDelivery]:
    return {
        (d.event, d.target): d
        for d in NotificationDelivery.objects.filter(approval=approval)
    }


def _settled(approval: ApprovalRequest, event: str) -> bool:
    rows = [d for (e, _), d in _deliveries(approval).items() if e == event]
    return bool(rows) and all(d.status in ("delivered", "failed") for d in rows)


def test_notifications_reach_email_and_webhook_and_a_broken_target_is_recorded(
    notifications,
    smtp_server,
    webhook_receiver,
    pending_refund,
    approver,
    client,
    admin_client,
    settings,
    executor,
):
    """A new request, its expiry warning and its decision reach the SMTP server and the
    verifying webhook receiver with a signed link; the refused target is retried and
    recorded failed, and the approval is still decided and executed exactly once."""
    inbox, _ = smtp_server
    received, _ = webhook_receiver
    call = pending_refund
    approval = ApprovalRequest.objects.get(tool_call=call)

    executor.wait_for(lambda: _settled(approval, "requested"))
    requested = _deliveries(approval)
    assert {t: d.status for (e, t), d in requested.items() if e == "requested"} == {
        "ops-mail": "delivered",
        "ops-hook": "delivered",
        "chat": "delivered",
        "broken": "failed",
    }
    broken = requested[("requested", "broken")]
    assert broken.attempts == 3
    assert "ConnectError" in broken.last_error
    assert broken.delivered_at is None

    mail = next(m for m in inbox.messages if "Approval requested" in m["Subject"])
    assert mail["Subject"] == (
        "[Countersign] Approval requested: Refunding 25.00 EUR on order A-1001"
    )
    assert mail["X-Rcpt"] == "ops@example.com"
    body = mail.get_payload(decode=True).decode()
    assert "Tool: refund_order (destructive)" in body
    assert '"amount": 25.0' in body
    link_path = LINK_RE.search(body).group(1)

    hook = received.verified[received.events().index("approval.requested")]
    assert received.refused == []
    assert hook["data"]["id"] == approval.pk
    assert hook["data"]["toolCallId"] == call.tool_call_id
    assert hook["data"]["status"] == "pending"
    assert hook["data"]["proposedArguments"]["amount"] == 25.0
    # Each delivery signs its own link (timestamped to the second): both open the
    # same request.
    hook_path = urlparse(hook["data"]["link"]).path
    assert LINK_RE.fullmatch(f"http://testserver{hook_path}")
    assert approval_link_verify(hook_path.split("/")[-2]) == approval.pk
    assert approval_link_verify(link_path.split("/")[-2]) == approval.pk
    assert received.apprise[0]["title"] == mail["Subject"]

    # The signed link opens the request in the queue once signed in.
    assert client.get(link_path).status_code == 302  # to the login page
    client.force_login(approver)
    opened = client.get(link_path)
    assert opened.status_code == 302
    assert opened["Location"] == f"/approvals/#req-{approval.pk}"

    # Expiry approaching (the beat task's service), announced once.
    settings.COUNTERSIGN = {
        **settings.COUNTERSIGN,
        "NOTIFY_EXPIRING_SECONDS": 10 * 24 * 3600,
    }
    assert approvals_expiring_announce() == 1
    assert approvals_expiring_announce() == 0
    executor.wait_for(lambda: _settled(approval, "expiring"))
    assert any("Approval expiring soon" in s for s in inbox.subjects())

    # The decision is taken and executed whatever the broken target does.
    approval_decide(
        approval=approval,
        decided_by=approver,
        decision="approve",
        edited_arguments={"order_id": "A-1001", "amount": 20.0, "reason": "partial"},
    )
    executor.settle(call.thread)
    call.refresh_from_db()
    assert call.state == ToolCall.State.SUCCEEDED
    assert ToolExecution.objects.get(tool_call=call).state == "succeeded"
    (refund,) = Refund.objects.all()
    assert str(refund.amount) == "20.00"
    final = Message.objects.filter(thread=call.thread, role="assistant").last()
    assert final.content == (
        f"Refund done: 20.00 EUR refunded on order A-1001 (refund #{refund.pk}). "
        "The approver changed the amount: I had proposed 25.00 EUR. "
        'Reason recorded: "partial".'
    )

    executor.wait_for(lambda: _settled(approval, "decided"))
    executor.wait_for(lambda: _settled(approval, "executed"))
    final = _deliveries(approval)
    assert final[("decided", "ops-mail")].status == "delivered"
    assert final[("decided", "broken")].status == "failed"
    assert ("decided", "chat") not in final  # chat takes "requested" only
    decided_mail = next(m for m in inbox.messages if "Approval decided" in m["Subject"])
    decided_body = decided_mail.get_payload(decode=True).decode()
    assert "Decided by: ada" in decided_body
    assert '"amount": 20.0' in decided_body
    decided_hook = received.verified[received.events().index("approval.decided")]
    assert decided_hook["data"]["status"] == "approved"
    assert decided_hook["data"]["editedArguments"]["amount"] == 20.0
    # The same link, once the request is decided, opens the queue's decided view.
    assert (
        client.get(link_path)["Location"]
        == f"/approvals/?view=decided#req-{approval.pk}"
    )
    # One message id per delivery, kept across retries.
    assert len(set(received.ids)) == len(received.ids)

    # The broken target's failures are visible in the admin.
    page = admin_client.get(
        reverse("admin:approvals_notificationdelivery_changelist")
        + "?status__exact=failed"
    )
    assert page.status_code == 200
    listed = page.content.decode()
    # requested, expiring, decided, and the outcome: executed
    assert "4 notification deliveries" in listed
    assert listed.count("Connection refused") == 4


def test_escalation_is_delivered_naming_the_group(
    notifications, smtp_server, pending_refund, executor
):
    """``approval_escalated`` (fired by governance) is delivered once, naming the group."""
    inbox, _ = smtp_server
    approval = ApprovalRequest.objects.get(tool_call=pending_refund)
    send_now(approval_escalated, approval, group="finance")
    send_now(approval_escalated, approval, group="finance")
    executor.wait_for(lambda: _settled(approval, "escalated"))
    escalated = NotificationDelivery.objects.filter(
        approval=approval, event="escalated", target="ops-mail"
    ).get()
    assert (escalated.group, escalated.status) == ("finance", "delivered")
    mail = next(m for m in inbox.messages if "escalated" in m["Subject"])
    assert "Escalated to: finance" in mail.get_payload(decode=True).decode()


@pytest.mark.django_db
def test_signed_link_refuses_forged_and_expired_tokens(client, approver):
    """A forged link answers 400 and an expired one 410, each with a page saying what to do."""
    client.force_login(approver)
    forged = client.get("/approvals/link/123:abc:def/")
    assert forged.status_code == 400
    assert "This link is not valid" in forged.content.decode()

    token = approval_link_token(123)
    value, _, signature = token.rpartition(":")
    altered = client.get(f"/approvals/link/124:{value.split(':')[1]}:{signature}/")
    assert altered.status_code == 400

    old = signing.b62_encode(int(time.time()) - 8 * 24 * 3600)
    expired_token = signing.Signer(salt=SALT).sign(f"123:{old}")
    expired = client.get(f"/approvals/link/{expired_token}/")
    assert expired.status_code == 410
    assert "This link has expired" in expired.content.decode()

    missing = client.get(f"/approvals/link/{token}/")
    assert missing.status_code == 404
    assert "no longer exists" in missing.content.decode()


def test_system_checks_name_each_bad_notification_setting(settings):
    """Bad targets, duplicate names, a relative PUBLIC_URL and a zero number are reported."""
    settings.COUNTERSIGN = {
        **settings.COUNTERSIGN,
        "NOTIFICATIONS": [
            {"kind": "sms", "to": ["x"]},
            {"kind": "email", "to": ["not-an-address"], "event": ["requested"]},
            {"kind": "webhook", "url": "ftp://x", "secret": "plain"},
            {"name": "a", "kind": "email", "to": ["a@example.com"]},
            {
                "name": "a",
                "kind": "email",
                "to": ["b@example.com"],
                "events": ["later"],
            },
            {"name": "a", "kind": "email", "to": ["c@example.com"]},
        ],
        "PUBLIC_URL": "/relative",
        "NOTIFY_MAX_ATTEMPTS": 0,
    }
    found = [(m.id, m.msg) for m in check_notifications()]
    assert found == [
        (
            "approvals.E102",
            "COUNTERSIGN['NOTIFICATIONS'][0]['kind'] is 'sms'; use one of email, webhook, apprise, slack",
        ),
        (
            "approvals.E102",
            "COUNTERSIGN['NOTIFICATIONS'][1] has unknown key 'event' for kind 'email'; allowed: events, from, kind, name, to",
        ),
        (
            "approvals.E102",
            "COUNTERSIGN['NOTIFICATIONS'][1]['to'] must be a non-empty list of email addresses",
        ),
        (
            "approvals.E102",
            "COUNTERSIGN['NOTIFICATIONS'][2]['url'] is 'ftp://x'; give an http(s) URL",
        ),
        (
            "approvals.E102",
            "COUNTERSIGN['NOTIFICATIONS'][2]['secret'] must be 'whsec_' followed by base64 of at least 24 random bytes (Standard Webhooks)",
        ),
        (
            "approvals.E102",
            "COUNTERSIGN['NOTIFICATIONS'][4]['events'] is ['later']; give a non-empty list of requested, expiring, decided, escalated, executed, failed, expired",
        ),
        ("approvals.E103", "two notification targets are named 'a'"),
        ("approvals.E105", "COUNTERSIGN['PUBLIC_URL'] is '/relative'"),
        ("approvals.E106", "COUNTERSIGN['NOTIFY_MAX_ATTEMPTS'] is 0"),
    ]
    with pytest.raises(SystemCheckError, match=r"approvals\.E103"):
        call_command("check")

    settings.COUNTERSIGN = {**settings.COUNTERSIGN, "NOTIFICATIONS": {"kind": "email"}}
    assert [m.id for m in check_notifications()] == ["approvals.E101"]


def test_worker_environment_configures_notifications(monkeypatch):
    """Workers read the targets from ``COUNTERSIGN_NOTIFICATIONS_JSON`` (a fresh settings module)."""
    import subprocess
    import sys

    env = {
        **os.environ,
        "COUNTERSIGN_NOTIFICATIONS_JSON": json.dumps(
            [{"name": "m", "kind": "email", "to": ["a@example.com"]}]
        ),
        "COUNTERSIGN_NOTIFY_MAX_ATTEMPTS": "7",
    }
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import config.settings as s, json; "
            "print(json.dumps([s.COUNTERSIGN['NOTIFICATIONS'], s.COUNTERSIGN['NOTIFY_MAX_ATTEMPTS']]))",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(out.stdout) == [
        [{"name": "m", "kind": "email", "to": ["a@example.com"]}],
        7.0,
    ]
    # Malformed JSON does not stop the process: the system check names it (E101).
    broken = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=Path(__file__).resolve().parents[2],
        env={**env, "COUNTERSIGN_NOTIFICATIONS_JSON": "[{oops"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert broken.returncode == 1
    assert "approvals.E101" in broken.stderr
    assert "COUNTERSIGN['NOTIFICATIONS'] is str, not a list" in broken.stderr


@pytest.fixture
def embedded(settings: Any, transactional_db: Any) -> Iterator[Any]:
    """Run background work on the embedded pool only (one flow, not both executors)."""
    from tests.helpers.executors import Executor, use_embedded

    use_embedded(settings)
    yield Executor(mode="embedded")
    from threads.execution import wait_embedded

    wait_embedded(timeout=30)


def test_an_undone_approval_is_never_announced_and_the_standing_one_is(
    settings, webhook_receiver, user, approver, embedded
):
    """Approve (edited) with an undo window, undo, approve again: one ``approval.decided``
    (the approval that stood, naming its decider and arguments), then ``approval.executed``;
    payloads are version 2 and carry the facts every surface shows."""
    from approvals.services import approval_undo
    from tests.helpers.governance import held_refund

    received, hook_port = webhook_receiver
    settings.COUNTERSIGN = {
        **settings.COUNTERSIGN,
        "NOTIFICATIONS": [
            {
                "name": "hook",
                "kind": "webhook",
                "url": f"http://127.0.0.1:{hook_port}/hooks",
                "secret": SECRET,
                "events": ["decided", "executed", "failed", "expired"],
            }
        ],
        "PUBLIC_URL": "http://testserver",
    }
    call = held_refund(user, embedded)
    approval = ApprovalRequest.objects.get(tool_call=call)
    edited = {"order_id": "A-1001", "amount": 10.0, "reason": "partial"}

    # Given an edited approval inside its undo window, taken back
    approval_decide(
        approval=approval,
        decided_by=approver,
        decision="approve",
        edited_arguments=edited,
        # Long enough to undo under load; the deferred delivery then finds nothing.
        undo_seconds=3,
    )
    approval_undo(approval=ApprovalRequest.objects.get(pk=approval.pk), user=approver)
    undone = ApprovalRequest.objects.get(pk=approval.pk)
    # The edit goes with the approval it came with: the request shows the proposal.
    assert undone.status == "pending"
    assert undone.edited_arguments is None
    assert not NotificationDelivery.objects.filter(approval=approval).exists()

    # When the approval that stands is made (a short window this time) and runs
    approval_decide(
        approval=undone,
        decided_by=approver,
        decision="approve",
        edited_arguments=edited,
        undo_seconds=0.3,
    )
    assert not NotificationDelivery.objects.filter(approval=approval).exists()
    embedded.settle(call.thread)
    embedded.wait_for(lambda: _settled(approval, "executed"))
    embedded.wait_for(lambda: len(received.verified) == 2)

    # Then exactly one decided (the standing approval) and its outcome were sent
    assert sorted(
        NotificationDelivery.objects.filter(approval=approval).values_list(
            "event", flat=True
        )
    ) == ["decided", "executed"]
    by_type = {p["type"]: p for p in received.verified}
    assert sorted(by_type) == ["approval.decided", "approval.executed"]
    decided = by_type["approval.decided"]
    assert decided["version"] == 2
    facts = decided["data"]["facts"]
    assert facts["decidedBy"] == ["ada"]
    assert facts["arguments"]["approved"] == edited
    assert facts["arguments"]["proposed"]["amount"] == 25.0
    assert facts["standing"] is True
    executed = by_type["approval.executed"]["data"]["facts"]
    assert executed["phase"] == "executed"
    assert executed["execution"]["state"] == "succeeded"
    assert "10.00" in executed["execution"]["result"]
    assert str(Refund.objects.get().amount) == "10.00"


def test_an_expired_request_is_announced_as_expired(
    settings, db, user, django_capture_on_commit_callbacks
):
    """Expiry is an outcome: ``approval.expired`` is recorded for its targets."""
    from orchestration.pipeline import approvals_expire
    from tests.helpers.api import pending_refund_thread

    settings.COUNTERSIGN = {
        **settings.COUNTERSIGN,
        "NOTIFICATIONS": [{"name": "mail", "kind": "email", "to": ["a@example.com"]}],
    }
    thread = pending_refund_thread(user)
    approval = ApprovalRequest.objects.get(thread=thread)
    ApprovalRequest.objects.filter(pk=approval.pk).update(
        expires_at=approval.requested_at
    )
    with django_capture_on_commit_callbacks(execute=True):
        assert approvals_expire() == 1
    assert list(
        NotificationDelivery.objects.filter(approval=approval).values_list(
            "event", "target"
        )
    ) == [("expired", "mail")]
