"""What the approver is told, server side: an edit graded before it is confirmed, a
snooze's end, and money rendered once for the queue and the thread page.

No browser: the JSON the pages read (``/approvals/<id>/preview.json``,
``/approvals/<id>/context.json``, ``/threads/<id>/state.json``). DC-03, LP-01, SEC-02.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from approvals.labels import approval_label
from approvals.models import ApprovalRequest, ApprovalSnooze
from core.text import sentence
from tests.helpers.api import pending_refund_thread
from tests.helpers.governance import decider

pytestmark = pytest.mark.django_db

EDIT = {"order_id": "A-1001", "amount": 150, "reason": "customer request"}


@pytest.fixture
def refund(user) -> ApprovalRequest:
    """A 25.00 EUR refund asked by olivia, waiting for an approver."""
    return ApprovalRequest.objects.get(thread=pending_refund_thread(user))


def _preview(client, approval, body):
    return client.post(
        f"/approvals/{approval.pk}/preview.json",
        data=json.dumps(body),
        content_type="application/json",
    )


def test_an_edit_over_the_threshold_is_graded_on_the_edit(
    client, refund, django_user_model
):
    """The proposal (25.00) is medium risk; the edit to 150 is high, says which
    threshold it crosses, reads as 150.00 EUR and must be confirmed. Nothing changes."""
    client.force_login(decider(django_user_model, "ada"))

    context = client.get(f"/approvals/{refund.pk}/context.json").json()
    response = _preview(client, refund, {"arguments": EDIT})

    assert context["risk"]["level"] == "medium"
    assert response.status_code == 200
    preview = response.json()
    assert preview["arguments"] == EDIT
    assert preview["risk"]["level"] == "high"
    assert "amount 150 is over the policy threshold 100" in preview["risk"]["reasons"]
    assert preview["review"]["summary"] == (
        "Refund 150.00 EUR to Ada Lovelace on order A-1001"
    )
    assert preview["needsConfirmation"] is True
    refund.refresh_from_db()
    assert refund.status == "pending"
    assert refund.edited_arguments is None


def test_an_edit_within_the_threshold_reads_medium_and_names_the_limit(
    client, refund, django_user_model
):
    """12.50 is within the threshold: medium, still confirmed (the tool is destructive)."""
    client.force_login(decider(django_user_model, "ada"))

    preview = _preview(client, refund, {"arguments": {**EDIT, "amount": 12.5}}).json()

    assert preview["risk"]["level"] == "medium"
    assert preview["risk"]["reasons"] == [
        "destructive: the tool declares that it changes or deletes data, but "
        "amount 12.5 is within the policy threshold 100"
    ]
    assert preview["review"]["summary"].startswith("Refund 12.50 EUR ")
    assert preview["needsConfirmation"] is True


def test_a_bad_preview_says_what_was_wrong(client, refund, django_user_model, user):
    """No ``arguments`` object, or an edit the approval would refuse: 400 naming it;
    a request the user may not see: 404."""
    client.force_login(decider(django_user_model, "ada"))

    missing = _preview(client, refund, {"args": EDIT})
    not_json = client.post(
        f"/approvals/{refund.pk}/preview.json",
        data=b"{",
        content_type="application/json",
    )
    refused = _preview(client, refund, {"arguments": {**EDIT, "amount": "lots"}})
    unknown = _preview(client, ApprovalRequest(pk=999_999), {"arguments": EDIT})

    assert missing.status_code == 400
    assert missing.json()["field"] == "arguments"
    assert '{"arguments": {...}}' in missing.json()["detail"]
    assert not_json.status_code == 400
    assert refused.status_code == 400
    assert refused.json()["field"] == "editedArguments"
    assert "amount" in refused.json()["detail"]
    assert unknown.status_code == 404
    client.force_login(user)  # the requester sees no queue
    assert _preview(client, refund, {"arguments": EDIT}).status_code == 404


def test_a_snoozed_request_says_until_when_for_its_snoozer_only(
    client, refund, django_user_model
):
    """``snoozedUntil`` is the snooze's end for the approver who snoozed, ``None`` for
    another, and ``None`` again once it ended or was lifted."""
    ada = decider(django_user_model, "ada")
    grace = decider(django_user_model, "grace")
    client.force_login(ada)

    snoozed = client.post(
        f"/api/approvals/{refund.pk}/snooze/",
        data={"seconds": 3600},
        content_type="application/json",
    ).json()
    mine = client.get(f"/approvals/{refund.pk}/context.json").json()
    client.force_login(grace)
    theirs = client.get(f"/approvals/{refund.pk}/context.json").json()

    until = ApprovalSnooze.objects.get(approval=refund, user=ada).until
    assert datetime.fromisoformat(mine["snoozedUntil"]) == until
    assert datetime.fromisoformat(snoozed["until"].replace("Z", "+00:00")) == until
    assert theirs["snoozedUntil"] is None

    ApprovalSnooze.objects.filter(approval=refund).update(
        until=timezone.now() - timedelta(seconds=1)
    )
    client.force_login(ada)
    assert (
        client.get(f"/approvals/{refund.pk}/context.json").json()["snoozedUntil"]
        is None
    )


def test_money_reads_the_same_on_the_thread_page_and_in_the_queue(
    client, refund, django_user_model, user
):
    """The thread's label, the notifications' label and the queue's summary show the
    refund as 25.00 EUR (the tool's one money rendering), never as 25.0."""
    client.force_login(user)
    state = client.get(f"/threads/{refund.thread.thread_id}/state.json").json()
    client.force_login(decider(django_user_model, "ada"))
    context = client.get(f"/approvals/{refund.pk}/context.json").json()

    label = state["calls"][refund.call.tool_call_id]["label"]
    assert label == "Refunding 25.00 EUR on order A-1001"
    assert approval_label(refund) == label
    assert context["facts"]["review"]["summary"] == (
        "Refund 25.00 EUR to Ada Lovelace on order A-1001"
    )
    assert "25.0 " not in json.dumps([label, context["facts"]["review"]])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Rejected: “too much”", "Rejected: “too much”."),
        ("Rejected: “too much.”", "Rejected: “too much.”"),
        ("Done.", "Done."),
        ("Really? ", "Really?"),
        ("Wait…", "Wait…"),
        ("(see above)", "(see above)."),
        ("", ""),
    ],
)
def test_a_sentence_ends_once(text, expected):
    """A full stop is added only where the words have no end of their own."""
    assert sentence(text) == expected
