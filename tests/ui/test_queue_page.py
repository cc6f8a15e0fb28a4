"""The queue page's server side without a browser: filters, pages, "I can decide", order.

DC-03: a queue that scales (pages counted in the database, the requests a decider can
act on first) and says plainly what is wrong with a filter.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from approvals.models import ApprovalRequest
from approvals.selectors import QUEUE_PAGE_SIZE
from tests.helpers.ui import PASSWORD, make_user, pending_request

pytestmark = pytest.mark.django_db

DECIDER = ("approvals.decide_approvalrequest", "demo.add_refund")


def cards(response) -> list[dict]:
    """Return the cards the page hands to queue.js."""
    text = response.content.decode()
    start = text.index('<script id="queue-initial" type="application/json">')
    body = text[start:].split(">", 1)[1].split("</script>", 1)[0]
    return json.loads(body)


@pytest.mark.parametrize(
    ("query", "words"),
    [
        ("?colour=red", "no filter called “colour”"),
        ("?view=archived", "“view” cannot be “archived”"),
        ("?sort=random", "“sort” cannot be “random”"),
        ("?risk=huge", "“risk” cannot be “huge”"),
        ("?mine=yes", "“mine” cannot be “yes”"),
        ("?page=0", "“0” is not a page number"),
        ("?page=two", "“two” is not a page number"),
    ],
)
def test_a_bad_filter_is_a_400_naming_it(client, query, words):
    """An unknown filter or value is refused by name, never silently ignored."""
    make_user("alice", *DECIDER)
    client.login(username="alice", password=PASSWORD)
    response = client.get(f"/approvals/{query}")
    assert response.status_code == 400
    assert words in response.content.decode()


def test_the_queue_is_paged_most_urgent_first_and_mine_by_default(client):
    """A decider sees the requests they can decide (not their own), 25 a page, soonest
    expiry first; ``mine=0`` shows every pending request."""
    alice = make_user("alice", *DECIDER)
    olivia = make_user("olivia", "demo.add_refund")
    now = timezone.now()
    made = []
    for index in range(QUEUE_PAGE_SIZE + 5):
        request = pending_request(olivia, call_id=f"c{index}", amount=float(index + 1))
        # The last made expires first: urgency, not age, orders the page.
        ApprovalRequest.objects.filter(pk=request.pk).update(
            expires_at=now + timedelta(hours=100 - index)
        )
        made.append(request.pk)
    own = pending_request(alice, call_id="mine", amount=1.0)
    ApprovalRequest.objects.filter(pk=own.pk).update(
        expires_at=now + timedelta(minutes=1)
    )
    client.login(username="alice", password=PASSWORD)

    first = client.get("/approvals/")
    second = client.get("/approvals/?page=2")
    everything = client.get("/approvals/?mine=0")

    assert first.status_code == 200
    assert [c["id"] for c in cards(first)] == list(reversed(made))[:QUEUE_PAGE_SIZE]
    assert [c["id"] for c in cards(second)] == list(reversed(made))[QUEUE_PAGE_SIZE:]
    assert "page 1 of 2" in first.content.decode()
    assert 'href="?page=2"' in first.content.decode()
    # Her own request (four-eyes) is not hers to decide, but is in "All pending", first.
    assert own.pk not in [c["id"] for c in cards(first) + cards(second)]
    assert cards(everything)[0]["id"] == own.pk
    assert cards(everything)[0]["facts"]["viewer"]["whyNot"] == (
        "You asked for this call, so another approver must decide."
    )


def test_recently_decided_lists_the_newest_decision_first(client):
    """The decided view is in decision order, newest first (as the CSV export)."""
    make_user("alice", *DECIDER)
    olivia = make_user("olivia", "demo.add_refund")
    now = timezone.now()
    decided = []
    for index in range(3):
        request = pending_request(olivia, call_id=f"d{index}", amount=1.0)
        ApprovalRequest.objects.filter(pk=request.pk).update(
            status="rejected",
            reason="no",
            decided_at=now - timedelta(minutes=10 - index),
        )
        decided.append(request.pk)
    client.login(username="alice", password=PASSWORD)
    response = client.get("/approvals/?view=decided")
    assert [c["id"] for c in cards(response)] == list(reversed(decided))
