"""Approvals in Slack: the real ``slack_sdk`` against a local fake Web API, signed clicks.

The message is posted and rewritten by the notification deliveries (embedded
pool here; a Celery worker and a live server in the end-to-end test); the clicks
and forms are signed as Slack signs them and sent to the interactivity endpoint,
which decides through ``orchestration.pipeline.approval_decide``.
SEC-02, DC-03, LP-01.
"""

from __future__ import annotations

import json
import os
import re
import time
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlparse

import httpx
import pytest
import yaml
from django.contrib.auth.models import Group, Permission
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.urls import reverse
from django.utils import timezone

from approvals.checks import check_notifications
from approvals.models import (
    ApprovalRequest,
    ApprovalVote,
    ChatMessage,
    ChatRequestSeen,
    ChatUserLink,
    NotificationDelivery,
    ToolExecution,
    ToolPolicy,
)
from approvals.notifications.chat import edit_values
from approvals.notifications.slack import slack_message
from approvals.notifications.targets import configured_targets
from approvals.services.claims import approval_claim
from approvals.services.escalation import approvals_escalate
from demo.models import Refund
from orchestration.pipeline import approvals_expire
from tests.helpers.executors import database_url_for_subprocess
from tests.helpers.fake_slack import (
    SIGNING_SECRET,
    TEAM,
    TOKEN,
    FakeSlack,
    click,
    signed,
    submission,
)
from tests.helpers.governance import held_refund, post_as, refund_policy
from tests.helpers.live import LiveServer, start_server
from threads.models import Message

URL = "/integrations/slack/interactions/"
FINANCE_CHANNEL = "C0FINANCE"
DEFAULT_CHANNEL = "C0APPROVE"
LEADS_CHANNEL = "C0LEADS"
ADA, GRACE, OLIVIA, STRANGER = "U0ADA", "U0GRACE", "U0OLIVIA", "U0STRANGER"

embedded = pytest.mark.parametrize("executor", ["embedded"], indirect=True)


@pytest.fixture
def fake_slack():
    """A fake Slack Web API knowing ada, grace and olivia (verified emails) and a stranger."""
    fake = FakeSlack().start()
    fake.users = {
        ADA: {"email": "Ada@Example.com", "confirmed": True},
        GRACE: {"email": "grace@example.com", "confirmed": True},
        OLIVIA: {"email": "olivia@example.com", "confirmed": True},
        STRANGER: {"email": "nobody@example.com", "confirmed": True},
    }
    yield fake
    fake.stop()


@pytest.fixture
def slack(settings, monkeypatch, fake_slack, user, finance):
    """Configure one Slack target (finance routed to its channel), here and for workers.

    Olivia (the requester) is a finance decider too, so four-eyes is what refuses her.
    """
    target = {
        "name": "slack",
        "kind": "slack",
        "token": TOKEN,
        "signing_secret": SIGNING_SECRET,
        "channel": DEFAULT_CHANNEL,
        "channels": {"finance": FINANCE_CHANNEL, "leads": LEADS_CHANNEL},
        "api_url": fake_slack.api_url,
    }
    numbers = {
        "NOTIFY_MAX_ATTEMPTS": 4,
        "NOTIFY_RETRY_BACKOFF_SECONDS": 0.2,
        "NOTIFY_TIMEOUT_SECONDS": 5.0,
        "DECISION_UNDO_SECONDS": 0.0,
    }
    settings.COUNTERSIGN = {
        **settings.COUNTERSIGN,
        "NOTIFICATIONS": [target],
        "PUBLIC_URL": "http://testserver",
        **numbers,
    }
    monkeypatch.setenv("COUNTERSIGN_NOTIFICATIONS_JSON", json.dumps([target]))
    monkeypatch.setenv("COUNTERSIGN_PUBLIC_URL", "http://testserver")
    for name, value in numbers.items():
        monkeypatch.setenv(f"COUNTERSIGN_{name}", str(value))
    for person, email in zip(finance, ("ada", "grace", "hopper"), strict=True):
        person.email = f"{email}@example.com"
        person.save(update_fields=["email"])
    user.email = "olivia@example.com"
    user.save(update_fields=["email"])
    user.user_permissions.add(
        Permission.objects.get(codename="decide_approvalrequest"),
        Permission.objects.get(codename="add_refund"),
    )
    user.groups.add(Group.objects.get(name="finance"))
    refund_policy()
    return target


def _posted(fake: FakeSlack, approval: ApprovalRequest, executor) -> str:
    """Wait for the request's message; return its ts."""
    message = executor.wait_for(
        lambda: ChatMessage.objects.filter(approval=approval).first()
    )
    executor.wait_for(lambda: _idle(approval))
    return message.message_id


def _idle(approval: ApprovalRequest) -> bool:
    """Whether every delivery of ``approval`` is done (delivered or failed)."""
    return (
        not NotificationDelivery.objects.filter(approval=approval)
        .exclude(status__in=("delivered", "failed"))
        .exists()
    )


def _send(client, payload=None, **kwargs):
    body, headers = signed(payload, **kwargs)
    return client.post(
        URL,
        data=body,
        content_type="application/x-www-form-urlencoded",
        headers=headers,
    )


def _click(client, action_id, approval_pk, slack_user, ts):
    """Send ``slack_user``'s signed click of ``action_id`` on message ``ts`` in finance's channel."""
    return _send(
        client,
        click(action_id, approval_pk, user=slack_user, channel=FINANCE_CHANNEL, ts=ts),
    )


def _held(requester, executor):
    call = held_refund(requester, executor)
    return call, ApprovalRequest.objects.get(tool_call=call)


@embedded
def test_a_request_posts_one_message_and_approve_executes_once_with_the_result(
    slack, fake_slack, user, client, executor
):
    """Posted once to finance's channel; Approve (and Slack's retry of it) runs the
    refund once, and the message ends with the outcome and the result, no buttons."""
    call, approval = _held(user, executor)
    ts = _posted(fake_slack, approval, executor)
    (post,) = fake_slack.of("chat.postMessage")
    assert post["channel"] == FINANCE_CHANNEL
    text = fake_slack.message_text(ts)
    assert text.startswith("Refunding 25.00 EUR on order A-1001\n*Status*\npending")
    assert '"amount": 25.0' in text
    assert "*Approvers*\nfinance" in text
    assert fake_slack.buttons(ts) == [
        "countersign.approve",
        "countersign.reject",
        "countersign.edit",
        "countersign.respond",
        "countersign.open",
    ]
    open_button = fake_slack.messages[ts]["blocks"][-1]["elements"][-1]
    assert open_button["url"].startswith("http://testserver/approvals/link/")

    answer = _click(client, "countersign.approve", approval.pk, ADA, ts)
    assert answer.status_code == 200, answer.content
    # Slack retries a click it thinks timed out: signed again (its own timestamp).
    again = _send(
        client,
        click(
            "countersign.approve", approval.pk, user=ADA, channel=FINANCE_CHANNEL, ts=ts
        ),
        timestamp=int(time.time()) - 1,
    )
    assert again.status_code == 200
    executor.settle(call.thread)
    executor.wait_for(lambda: _idle(approval))
    approval.refresh_from_db()
    assert (approval.status, approval.decided_by.username) == ("approved", "ada")
    assert ToolExecution.objects.get(tool_call=call).state == "succeeded"
    (refund,) = Refund.objects.filter(order_id="A-1001")
    assert ApprovalVote.objects.filter(approval=approval).count() == 1
    final = fake_slack.message_text(ts)
    assert "approved by ada" in final
    assert "execution succeeded" in final
    # The refund's id, not 1: PostgreSQL's sequences outlive the rows an earlier
    # transactional test flushed.
    assert (
        f'"status":"refunded","refund_id":{refund.pk},"order_id":"A-1001","amount":"25.00"'
        in final
    )
    assert fake_slack.buttons(ts) == ["countersign.open"]
    assert len(fake_slack.of("chat.postMessage")) == 1
    assert fake_slack.of("chat.postEphemeral") == []


def _modal(fake: FakeSlack) -> dict:
    """Return the last modal Countersign opened."""
    return fake.of("views.open")[-1]["view"]


@embedded
def test_reject_asks_a_reason_and_the_message_shows_it(
    slack, fake_slack, user, client, executor
):
    """Reject opens the reason form; an empty reason is refused on the form; a reason
    rejects, the agent is told, and the message says who and why."""
    call, approval = _held(user, executor)
    ts = _posted(fake_slack, approval, executor)
    opened = _click(client, "countersign.reject", approval.pk, GRACE, ts)
    assert opened.status_code == 200
    (view_call,) = fake_slack.of("views.open")
    assert view_call["trigger_id"].startswith(f"trigger-{GRACE}-countersign.reject-")
    view = view_call["view"]
    assert view["callback_id"] == "countersign.reject"
    assert json.loads(view["private_metadata"]) == {
        "approval": approval.pk,
        "channel": FINANCE_CHANNEL,
        "ts": ts,
    }

    empty = _send(
        client,
        submission(
            view,
            user=GRACE,
            values={"reason": {"type": "plain_text_input", "value": "  "}},
        ),
    )
    assert empty.status_code == 200
    assert empty.json() == {
        "response_action": "errors",
        "errors": {
            "reason": "give a reason when rejecting a call; it is sent to the agent"
        },
    }
    assert not ApprovalVote.objects.filter(approval=approval).exists()

    sent = _send(
        client,
        submission(
            view,
            user=GRACE,
            values={
                "reason": {
                    "type": "plain_text_input",
                    "value": "order was already refunded by phone",
                }
            },
        ),
    )
    assert sent.status_code == 200
    assert sent.content == b""
    executor.settle(call.thread)
    executor.wait_for(lambda: _idle(approval))
    approval.refresh_from_db()
    assert (approval.status, approval.decided_by.username, approval.reason) == (
        "rejected",
        "grace",
        "order was already refunded by phone",
    )
    assert not Refund.objects.exists()
    text = fake_slack.message_text(ts)
    assert "rejected by grace" in text
    assert "order was already refunded by phone" in text
    assert fake_slack.buttons(ts) == ["countersign.open"]


@embedded
def test_respond_asks_the_answer_and_the_agent_gets_it_instead_of_the_tool(
    slack, fake_slack, user, client, executor
):
    """Respond (as on the queue) opens the answer form; an empty answer is refused on
    the form; the answer ends the request as responded, nothing runs, the agent gets
    the text as the call's result, and the message says who answered and what."""
    call, approval = _held(user, executor)
    ts = _posted(fake_slack, approval, executor)
    opened = _click(client, "countersign.respond", approval.pk, GRACE, ts)
    assert opened.status_code == 200
    (view_call,) = fake_slack.of("views.open")
    assert view_call["trigger_id"].startswith(f"trigger-{GRACE}-countersign.respond-")
    view = view_call["view"]
    assert view["callback_id"] == "countersign.respond"
    assert view["submit"]["text"] == "Send answer"
    assert [b.get("block_id") for b in view["blocks"]] == [None, "response"]

    empty = _send(
        client,
        submission(
            view,
            user=GRACE,
            values={"response": {"type": "plain_text_input", "value": "  "}},
        ),
    )
    assert empty.status_code == 200
    errors = empty.json()["errors"]
    assert list(errors) == ["response"]
    assert errors["response"].startswith("Nothing recorded: ")
    assert ApprovalRequest.objects.get(pk=approval.pk).status == "pending"

    answer = "Order A-1001 was refunded by voucher already."
    sent = _send(
        client,
        submission(
            view,
            user=GRACE,
            values={"response": {"type": "plain_text_input", "value": answer}},
        ),
    )
    assert sent.status_code == 200
    assert sent.content == b""
    executor.settle(call.thread)
    executor.wait_for(lambda: _idle(approval))
    approval.refresh_from_db()
    assert (approval.status, approval.decided_by.username, approval.response) == (
        "responded",
        "grace",
        answer,
    )
    assert not Refund.objects.exists()
    assert not ToolExecution.objects.filter(tool_call=call).exists()
    tool_message = Message.objects.get(
        thread=call.thread, role="tool", tool_call_id=call.tool_call_id
    )
    assert answer in json.dumps(tool_message.content)
    text = fake_slack.message_text(ts)
    assert "*Status*\nresponded" in text
    assert "responded by grace" in text
    assert fake_slack.buttons(ts) == ["countersign.open"]


@embedded
def test_edit_opens_the_tool_fields_validates_like_the_web_and_shows_the_diff(
    slack, fake_slack, user, client, executor
):
    """Edit: one input per schema field, filled in; a non-number and a schema failure
    are refused on the form with nothing recorded; 20 instead of 25 approves and runs
    20, and the message shows the diff."""
    call, approval = _held(user, executor)
    ts = _posted(fake_slack, approval, executor)
    _click(client, "countersign.edit", approval.pk, ADA, ts)
    view = _modal(fake_slack)
    assert view["callback_id"] == "countersign.edit"
    inputs = {
        b["block_id"]: b["element"] for b in view["blocks"] if b["type"] == "input"
    }
    assert inputs["arg:amount"]["type"] == "number_input"
    assert inputs["arg:amount"]["initial_value"] == "25.0"
    assert inputs["arg:order_id"]["initial_value"] == "A-1001"

    def values(amount: str) -> dict:
        return {
            "arg:order_id": {"type": "plain_text_input", "value": "A-1001"},
            "arg:amount": {"type": "number_input", "value": amount},
            "arg:reason": {"type": "plain_text_input", "value": "partial refund"},
        }

    not_a_number = _send(client, submission(view, user=ADA, values=values("twenty")))
    assert not_a_number.json() == {
        "response_action": "errors",
        "errors": {"arg:amount": "'twenty' is not a number"},
    }
    refused = _send(client, submission(view, user=ADA, values=values("-5")))
    body = refused.json()
    assert body["response_action"] == "errors"
    assert "edited arguments are invalid" in " ".join(body["errors"].values())
    assert not ApprovalVote.objects.filter(approval=approval).exists()

    sent = _send(client, submission(view, user=ADA, values=values("20")))
    assert sent.status_code == 200, sent.content
    assert sent.content == b""
    executor.settle(call.thread)
    executor.wait_for(lambda: _idle(approval))
    approval.refresh_from_db()
    assert approval.status == "approved"
    assert approval.edited_arguments == {
        "order_id": "A-1001",
        "amount": 20,
        "reason": "partial refund",
    }
    (refund,) = Refund.objects.all()
    assert str(refund.amount) == "20.00"
    text = fake_slack.message_text(ts)
    assert "*Edited*\n• `amount`: 25.0 → 20" in text
    assert "• `reason`:" in text
    assert "execution succeeded" in text


@embedded
def test_four_eyes_refuses_the_requesters_own_slack_user_and_records_nothing(
    slack, fake_slack, user, client, executor
):
    """Olivia asked for the call: her click is refused in a message only she sees."""
    _, approval = _held(user, executor)
    ts = _posted(fake_slack, approval, executor)
    updates = len(fake_slack.of("chat.update"))
    answer = _click(client, "countersign.approve", approval.pk, OLIVIA, ts)
    assert answer.status_code == 200
    (told,) = fake_slack.of("chat.postEphemeral")
    assert (told["channel"], told["user"]) == (FINANCE_CHANNEL, OLIVIA)
    assert told["text"].startswith("Nothing recorded: ")
    assert "four-eyes" in told["text"]
    approval.refresh_from_db()
    assert approval.status == "pending"
    assert not ApprovalVote.objects.filter(approval=approval).exists()
    assert len(fake_slack.of("chat.update")) == updates


@embedded
def test_a_person_without_the_permission_or_behind_a_claim_is_refused_in_slack(
    slack, fake_slack, user, finance, client, executor, caplog, django_user_model
):
    """Mallory (mapped, no decide permission) and grace (ada holds the claim): each is
    told why in a message only they see, nothing is recorded, and no log line holds
    the bot token or the signing secret."""
    django_user_model.objects.create_user("mallory", "nobody@example.com", "pw")
    _, approval = _held(user, executor)
    ts = _posted(fake_slack, approval, executor)
    with caplog.at_level("DEBUG"):
        _click(client, "countersign.approve", approval.pk, STRANGER, ts)
        refused = fake_slack.of("chat.postEphemeral")[-1]
        assert refused["user"] == STRANGER
        assert refused["text"].startswith("Nothing recorded: ")
        assert "mallory" in refused["text"]

        approval_claim(approval=approval, user=finance[0])
        _click(client, "countersign.approve", approval.pk, GRACE, ts)
        claimed = fake_slack.of("chat.postEphemeral")[-1]
        assert claimed["user"] == GRACE
        assert claimed["text"].startswith("Nothing recorded: ")
        assert "claimed by 'ada'" in claimed["text"]
    approval.refresh_from_db()
    assert approval.status == "pending"
    assert not ApprovalVote.objects.filter(approval=approval).exists()
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert TOKEN not in logged
    assert SIGNING_SECRET not in logged


@embedded
def test_two_of_n_with_one_vote_from_slack_and_one_from_the_web(
    slack, fake_slack, user, finance, client, executor
):
    """2 of N: ada approves in Slack (the message shows 1 of 2), grace on the web;
    the call runs once and the message shows both and the result."""
    ToolPolicy.objects.update(approvals_required=2)
    call, approval = _held(user, executor)
    ts = _posted(fake_slack, approval, executor)
    assert "*Approvals*\n0 of 2 (none yet)" in fake_slack.message_text(ts)

    _click(client, "countersign.approve", approval.pk, ADA, ts)
    executor.wait_for(lambda: _idle(approval))
    assert "*Approvals*\n1 of 2 (ada)" in fake_slack.message_text(ts)
    (told,) = fake_slack.of("chat.postEphemeral")
    assert told["text"].startswith("Your approval is recorded: 1 of 2.")
    assert not ToolExecution.objects.filter(tool_call=call).exists()

    web = post_as(client, finance[1], f"/api/approvals/{approval.pk}/approve/")
    assert web.status_code == 200, web.content
    executor.settle(call.thread)
    executor.wait_for(lambda: _idle(approval))
    assert Refund.objects.filter(order_id="A-1001").count() == 1
    text = fake_slack.message_text(ts)
    assert "*Approvals*\n2 of 2 (ada, grace)" in text
    assert "approved by grace" in text
    assert "execution succeeded" in text


@embedded
def test_a_decision_on_the_web_and_an_expiry_rewrite_the_message(
    slack, fake_slack, user, finance, client, executor
):
    """The message follows the request: rejected on the web; another request expires
    (and a late click on it only refreshes it)."""
    call, approval = _held(user, executor)
    ts = _posted(fake_slack, approval, executor)
    web = post_as(
        client,
        finance[0],
        f"/api/approvals/{approval.pk}/reject/",
        {"reason": "duplicate"},
    )
    assert web.status_code == 200, web.content
    executor.settle(call.thread)
    executor.wait_for(lambda: _idle(approval))
    assert "rejected by ada at " in fake_slack.message_text(ts)
    assert fake_slack.buttons(ts) == ["countersign.open"]

    call2, second = _held(user, executor)
    ts2 = _posted(fake_slack, second, executor)
    ApprovalRequest.objects.filter(pk=second.pk).update(expires_at=timezone.now())
    assert approvals_expire() == 1
    executor.settle(call2.thread)
    executor.wait_for(lambda: _idle(second))
    assert "*Outcome*\nexpired" in fake_slack.message_text(ts2)
    assert fake_slack.buttons(ts2) == ["countersign.open"]

    updates = len(fake_slack.of("chat.update"))
    late = _click(client, "countersign.approve", second.pk, ADA, ts2)
    assert late.status_code == 200
    executor.wait_for(lambda: _idle(second))
    assert len(fake_slack.of("chat.update")) == updates + 1  # refreshed
    assert "already 'expired'" in fake_slack.of("chat.postEphemeral")[-1]["text"]
    assert not ApprovalVote.objects.filter(approval=second).exists()


@embedded
def test_forged_stale_and_replayed_requests_are_refused_with_nothing_recorded(
    slack, fake_slack, user, client, executor
):
    """401 for a wrong secret, a stale timestamp, no signature, a replay; nothing recorded."""
    _, approval = _held(user, executor)
    ts = _posted(fake_slack, approval, executor)
    payload = click(
        "countersign.approve", approval.pk, user=ADA, channel=FINANCE_CHANNEL, ts=ts
    )
    forged = _send(client, payload, secret="not-the-apps-signing-secret-0000")
    stale = _send(client, payload, timestamp=int(time.time()) - 6 * 60)
    unsigned = client.post(
        URL, data=signed(payload)[0], content_type="application/x-www-form-urlencoded"
    )
    garbled = client.post(
        URL,
        data=b"payload=%7B%7D",
        content_type="application/x-www-form-urlencoded",
        headers={"X-Slack-Request-Timestamp": "soon", "X-Slack-Signature": "v0=00"},
    )
    for refused in (forged, stale, unsigned, garbled):
        assert refused.status_code == 401, refused.content
        assert refused.json()["error"] == "invalid_signature"
    assert not ChatRequestSeen.objects.exists()

    # A copy of a request Slack really sent, sent again: refused after the first.
    body, headers = signed(
        click(
            "countersign.reject", approval.pk, user=ADA, channel=FINANCE_CHANNEL, ts=ts
        )
    )
    first = client.post(
        URL,
        data=body,
        content_type="application/x-www-form-urlencoded",
        headers=headers,
    )
    replay = client.post(
        URL,
        data=body,
        content_type="application/x-www-form-urlencoded",
        headers=headers,
    )
    assert (first.status_code, replay.status_code) == (200, 401)
    assert len(fake_slack.of("views.open")) == 1
    approval.refresh_from_db()
    assert approval.status == "pending"
    assert not ApprovalVote.objects.filter(approval=approval).exists()
    assert fake_slack.of("chat.postEphemeral") == []


@embedded
def test_a_429_from_slack_is_retried_after_retry_after_and_visible_in_the_admin(
    slack, fake_slack, user, admin_client, executor
):
    """The post is answered 429 (Retry-After: 1): the delivery records it, waits, posts once."""
    fake_slack.fail_next("chat.postMessage", 429, "ratelimited", {"Retry-After": "1"})
    _, approval = _held(user, executor)
    delivery = executor.wait_for(
        lambda: (
            NotificationDelivery.objects.filter(
                approval=approval, event="requested", attempts__gte=1
            )
            .exclude(status="sending")
            .first()
        )
    )
    assert (
        delivery.status == "retrying"
    )  # for Retry-After's second, not the 0.2 s backoff
    assert delivery.next_attempt_at >= delivery.last_attempt_at + timedelta(seconds=1)
    page = admin_client.get(
        reverse("admin:approvals_notificationdelivery_changelist")
        + "?status__exact=retrying"
    )
    assert "ratelimited" in page.content.decode()
    ts = _posted(fake_slack, approval, executor)
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("delivered", 2)
    assert (
        delivery.last_error
        == "Slack chat.postMessage answered HTTP 429 ratelimited; retry after 1 s"
    )
    attempts = fake_slack.of("chat.postMessage")
    assert [a.get("_failed") for a in attempts] == [429, None]
    assert list(fake_slack.messages) == [ts]


@embedded
def test_an_unmapped_user_is_told_how_to_link_and_then_decides(
    slack, fake_slack, user, finance, client, executor
):
    """A Slack user whose email matches no one: told (with a link), nothing recorded;
    after linking their account once, their click decides."""
    call, approval = _held(user, executor)
    ts = _posted(fake_slack, approval, executor)
    fake_slack.users[ADA] = {"email": "ada@example.com", "confirmed": False}
    answer = _click(client, "countersign.approve", approval.pk, ADA, ts)
    assert answer.status_code == 200
    told = fake_slack.of("chat.postEphemeral")[-1]["text"]
    assert told.startswith(
        "Countersign does not know who you are, so nothing was recorded."
    )
    link = told.rsplit(": ", 1)[1].removeprefix("http://testserver")
    assert not ApprovalVote.objects.filter(approval=approval).exists()

    assert client.get(link).status_code == 302  # sign in first
    client.force_login(finance[0])
    page = client.get(link)
    assert page.status_code == 200
    assert "U0ADA" in page.content.decode()
    assert not ChatUserLink.objects.exists()  # a GET links nothing
    assert client.post(link).status_code == 200
    (made,) = ChatUserLink.objects.all()
    assert (made.surface, made.workspace, made.external_id, made.user) == (
        "slack",
        TEAM,
        ADA,
        finance[0],
    )
    assert client.get(link[:-5] + "xx/").status_code == 400
    client.logout()

    _click(client, "countersign.approve", approval.pk, ADA, ts)
    executor.settle(call.thread)
    approval.refresh_from_db()
    assert (approval.status, approval.decided_by) == ("approved", finance[0])


@pytest.mark.django_db
def test_malformed_interaction_bodies_get_a_400_naming_the_field(
    slack, fake_slack, client
):
    """Signed but not Slack's payload: 400 with the field; other payload types: 200."""
    cases = {
        b"": "payload",
        b"payload=not-json": "payload",
        b"payload=%5B1%5D": "payload",
        b"payload=%ff%fe": "payload",
    }
    for body, field in cases.items():
        answer = _send(client, body=body)
        assert answer.status_code == 400, body
        assert answer.json()["field"] == field
    bad = {
        "actions": click("countersign.approve", 1, user=ADA) | {"actions": []},
        "actions[0].value": click("countersign.approve", "one", user=ADA),
        "view": {"type": "view_submission", "view": "x"},
        "view.private_metadata": submission(
            {"callback_id": "countersign.reject", "private_metadata": "{"},
            user=ADA,
            values={},
        ),
    }
    for field, payload in bad.items():
        answer = _send(client, payload)
        assert (answer.status_code, answer.json()["field"]) == (400, field), field
    for ignored in (
        {"type": "view_closed"},
        {"type": "shortcut"},
        click("someone.elses.button", 1, user=ADA),
        click("countersign.open", 1, user=ADA),
    ):
        assert _send(client, ignored).status_code == 200
    # A request id Countersign does not know: the person is told.
    unknown = _send(
        client, click("countersign.approve", 999999, user=ADA, channel="C1", ts="1.2")
    )
    assert unknown.status_code == 200
    told = fake_slack.of("chat.postEphemeral")[-1]
    assert told["text"] == "Approval request 999999 no longer exists in Countersign."
    too_big = _send(client, body=b"payload=" + b"x" * (300 * 1024))
    assert (too_big.status_code, too_big.json()["field"]) == (413, "payload")
    assert client.get(URL).status_code == 405


def test_slack_settings_are_checked_and_the_secrets_never_shown(settings):
    """E102 names each wrong field of a Slack target, quoting no secret; repr hides them."""
    settings.COUNTERSIGN = {
        **settings.COUNTERSIGN,
        "NOTIFICATIONS": [
            {
                "kind": "slack",
                "token": "xoxp-user-token-secret",
                "signing_secret": "short",
                "channel": "",
                "channels": {"finance": 3},
                "api_url": "ftp://slack",
                "events": ["requested"],
            }
        ],
    }
    messages = [e.msg for e in check_notifications()]
    text = "\n".join(messages)
    assert "has unknown key 'events' for kind 'slack'" in text
    for name in ("token", "signing_secret", "channel", "channels", "api_url"):
        assert f"['{name}']" in text, name
    assert "xoxp-user-token-secret" not in text
    assert "'short'" not in text
    with pytest.raises(SystemCheckError):
        call_command("check")

    settings.COUNTERSIGN = {
        **settings.COUNTERSIGN,
        "NOTIFICATIONS": [
            {
                "kind": "slack",
                "token": TOKEN,
                "signing_secret": SIGNING_SECRET,
                "channel": "C1",
            }
        ],
    }
    assert check_notifications() == []
    (target,) = configured_targets()
    assert (target.name, target.events) == (
        "slack-0",
        frozenset({"requested", "escalated", "updated"}),
    )
    assert TOKEN not in repr(target)
    assert SIGNING_SECRET not in repr(target)


@pytest.mark.parametrize("executor", ["celery"], indirect=True)
def test_end_to_end_through_a_live_server_and_a_celery_worker(
    slack, fake_slack, user, redis_url, executor, tmp_path
):
    """uvicorn takes the signed click, a Celery worker posts, executes and rewrites."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": database_url_for_subprocess(),
        "REDIS_URL": redis_url,
        "PYTHONUNBUFFERED": "1",
    }
    process, port = start_server(env, tmp_path / "uvicorn.log")
    server = LiveServer(
        mode="celery", process=process, port=port, log_path=tmp_path / "uvicorn.log"
    )
    try:
        call, approval = _held(user, executor)
        ts = _posted(fake_slack, approval, executor)
        body, headers = signed(
            click(
                "countersign.approve",
                approval.pk,
                user=ADA,
                channel=FINANCE_CHANNEL,
                ts=ts,
            )
        )
        # A new process imports the decision stack on its first request (bench B6):
        # warm it with a request it refuses, then time a real one.
        warm = httpx.post(f"{server.url}{URL}", content=body, timeout=30)
        assert warm.status_code == 401
        started = time.monotonic()
        answer = httpx.post(
            f"{server.url}{URL}",
            content=body,
            headers={**headers, "content-type": "application/x-www-form-urlencoded"},
            timeout=10,
        )
        assert answer.status_code == 200, server.logs()
        assert time.monotonic() - started < 3  # Slack's budget
        executor.settle(call.thread)
        executor.wait_for(lambda: "execution succeeded" in fake_slack.message_text(ts))
        assert Refund.objects.filter(order_id="A-1001").count() == 1
        assert "approved by ada" in fake_slack.message_text(ts)
        assert fake_slack.buttons(ts) == ["countersign.open"]
    finally:
        server.stop()


def test_the_app_manifest_in_the_docs_is_valid_yaml_with_the_scopes_and_the_endpoint():
    """docs/slack.md's manifest parses, asks the scopes the calls need, points at our URL."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "slack.md").read_text()
    (block,) = re.findall(r"```yaml\n(.*?)```", text, flags=re.S)
    manifest = yaml.safe_load(block)
    assert set(manifest) == {
        "display_information",
        "features",
        "oauth_config",
        "settings",
    }
    assert manifest["display_information"]["name"] == "Countersign"
    assert manifest["oauth_config"]["scopes"]["bot"] == [
        "chat:write",
        "users:read",
        "users:read.email",
    ]
    interactivity = manifest["settings"]["interactivity"]
    assert interactivity["is_enabled"] is True
    assert urlparse(interactivity["request_url"]).scheme == "https"
    assert urlparse(interactivity["request_url"]).path == reverse("slack-interactions")
    assert manifest["settings"]["socket_mode_enabled"] is False
    # The same document as JSON, as Slack also takes it.
    assert json.loads(json.dumps(manifest)) == manifest


@embedded
def test_approve_keeps_the_webs_undo_window_and_undo_from_slack_takes_it_back(
    slack, settings, fake_slack, user, client, executor
):
    """With an undo window the message offers Undo until the call runs; Undo makes the
    request pending again, nothing runs, and the buttons come back."""
    settings.COUNTERSIGN = {**settings.COUNTERSIGN, "DECISION_UNDO_SECONDS": 6.0}
    call, approval = _held(user, executor)
    ts = _posted(fake_slack, approval, executor)
    _click(client, "countersign.approve", approval.pk, ADA, ts)
    executor.wait_for(lambda: _idle(approval))
    assert fake_slack.buttons(ts) == ["countersign.undo", "countersign.open"]
    assert "approved by ada" in fake_slack.message_text(ts)

    answer = _click(client, "countersign.undo", approval.pk, ADA, ts)
    assert answer.status_code == 200
    executor.wait_for(lambda: _idle(approval))
    approval.refresh_from_db()
    assert approval.status == "pending"
    assert not ToolExecution.objects.filter(tool_call=call).exists()
    assert fake_slack.buttons(ts)[:2] == ["countersign.approve", "countersign.reject"]
    assert not Refund.objects.exists()


@embedded
def test_an_escalation_rewrites_the_message_and_tells_the_new_groups_channel(
    slack, fake_slack, user, executor
):
    """The beat escalates finance → leads: the finance message names the new group, and
    leads' own channel gets the request too, both rewritten from then on."""
    ToolPolicy.objects.update(
        escalation=[{"groups": ["leads"], "after_seconds": 60}], expiry_seconds=3600
    )
    _, approval = _held(user, executor)
    ts = _posted(fake_slack, approval, executor)
    assert "*Approvers*\nfinance" in fake_slack.message_text(ts)
    ApprovalRequest.objects.filter(pk=approval.pk).update(
        step_deadline=timezone.now() - timedelta(seconds=1)
    )
    assert approvals_escalate() == 1
    executor.wait_for(
        lambda: ChatMessage.objects.filter(approval=approval).count() == 2
    )
    executor.wait_for(lambda: _idle(approval))
    posts = fake_slack.of("chat.postMessage")
    assert [p["channel"] for p in posts] == [FINANCE_CHANNEL, LEADS_CHANNEL]
    leads_ts = ChatMessage.objects.get(
        approval=approval, channel=LEADS_CHANNEL
    ).message_id
    for message in (ts, leads_ts):
        text = fake_slack.message_text(message)
        assert "*Approvers*\nleads" in text
        assert "*Status*\npending" in text
        assert fake_slack.buttons(message)[0] == "countersign.approve"
    escalated = NotificationDelivery.objects.get(approval=approval, event="escalated")
    assert (escalated.target, escalated.group, escalated.status) == (
        "slack",
        "leads",
        "delivered",
    )


def test_edit_form_text_is_read_per_the_schema_types():
    """Numbers, booleans, JSON and text as the schema says; each bad field named; blanks left out."""
    schema = {
        "properties": {
            "count": {"type": "integer"},
            "amount": {"type": "number"},
            "urgent": {"type": "boolean"},
            "tags": {"type": "array"},
            "note": {"type": "string"},
            "nullable": {"type": ["string", "null"]},
            "free": {},
        }
    }
    values, errors = edit_values(
        schema,
        (
            ("count", " 3 "),
            ("amount", "20"),
            ("urgent", "True"),
            ("tags", '["a", "b"]'),
            ("note", " keep my spaces "),
            ("nullable", "x"),
            ("free", '{"a": 1}'),
            ("unknown", "7"),
            ("blank", ""),
            ("absent", None),
        ),
    )
    assert errors == {}
    assert values == {
        "count": 3,
        "amount": 20,
        "urgent": True,
        "tags": ["a", "b"],
        "note": " keep my spaces ",
        "nullable": "x",
        "free": {"a": 1},
        "unknown": 7,
    }
    assert edit_values(schema, (("amount", "20.50"),))[0] == {"amount": 20.5}
    _, errors = edit_values(
        schema,
        (("count", "2.5"), ("amount", "1e"), ("urgent", "yes"), ("tags", "[1,")),
    )
    assert errors == {
        "count": "'2.5' is not a whole number",
        "amount": "'1e' is not a number",
        "urgent": "choose true or false",
        "tags": 'write a JSON value (e.g. [1, 2] or {"a": 1})',
    }
    assert edit_values(None, (("x", "1"),)) == ({"x": 1}, {})


def test_model_output_cannot_mention_or_link_in_the_message():
    """Arguments, rationale and results are escaped: no @channel ping, no link markup."""
    card = {
        "id": 7,
        "kind": "tool_call",
        "label": "<!channel> refund",
        "tool": "refund_order",
        "status": "pending",
        "risk": {"level": "high", "reasons": ["<@U123> says so"]},
        "requester": "olivia",
        "thread": {"title": "<https://evil.example|click>"},
        "expiresAt": "2026-12-03T10:00:00+00:00",
        "rationale": "Ping <!here> & <!channel>",
        "proposedArguments": {"note": "<!everyone>"},
        "argumentsDiff": [],
        "approvals": {"required": 1, "given": 0, "by": []},
        "approverGroups": [],
        "parametersSchema": None,
        "outcome": None,
        "link": "http://testserver/approvals/link/x/",
    }
    text, blocks = slack_message(card)
    mrkdwn = [text]  # the fallback text is mrkdwn too

    def walk(node):
        if isinstance(node, dict):
            if node.get("type") == "mrkdwn":
                mrkdwn.append(node["text"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(blocks)
    rendered = "\n".join(mrkdwn)
    assert "<!" not in rendered.replace("<!date^", "")
    assert "<@" not in rendered
    assert "<https" not in rendered
    assert "&lt;!here&gt; &amp; &lt;!channel&gt;" in rendered
    assert "<!date^1796292000^{date_short_pretty} {time}|" in rendered
    assert text == "Approval pending: &lt;!channel&gt; refund"
    # A header is plain text: shown as written, never a mention.
    assert blocks[0]["text"] == {"type": "plain_text", "text": "<!channel> refund"}
    assert [b["action_id"] for b in blocks[-1]["elements"]] == [
        "countersign.approve",
        "countersign.reject",
        "countersign.respond",
        "countersign.open",
    ]
