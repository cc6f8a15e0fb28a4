"""The cockpit's server side without a browser: what ``/attention.json`` counts, and the
permission page of the thread routes (403 with what is missing, 404 otherwise)."""

from __future__ import annotations

import pytest

from approvals.models import ApprovalRequest
from approvals.selectors import approval_queue
from orchestration.pipeline import approval_decide
from tests.helpers.ui import PASSWORD, make_user, pending_request
from threads.services import thread_create

pytestmark = pytest.mark.django_db


def test_attention_counts_what_the_queue_lists_as_yours(client):
    """The count is the queue's "I can decide" total: bob (no demo.add_refund) may
    still reject, so both count for him, marked ``canApprove: false``; the requester
    (four-eyes) and a voter on an N-of-M request are not waited for."""
    owner = make_user("olivia", "demo.add_refund")
    alice = make_user("alice", "approvals.decide_approvalrequest", "demo.add_refund")
    bob = make_user("bob", "approvals.decide_approvalrequest")
    make_user("carol")
    first = pending_request(owner, call_id="c1", amount=10.0)
    pending_request(owner, call_id="c2", amount=20.0)

    client.login(username="alice", password=PASSWORD)
    data = client.get("/attention.json").json()
    assert data["count"] == 2
    assert [r["id"] for r in data["requests"]][:1] == [first.pk]
    assert data["requests"][0]["url"] == f"/threads/{first.thread.thread_id}/#call-c1"
    assert data["requests"][0]["tool"] == "refund_order"

    assert [r["canApprove"] for r in data["requests"]] == [True, True]
    assert data["count"] == approval_queue(user=alice, mine=True)["total"]

    client.login(username="bob", password=PASSWORD)
    data = client.get("/attention.json").json()
    assert data["count"] == 2
    assert [r["canApprove"] for r in data["requests"]] == [False, False]
    assert data["count"] == approval_queue(user=bob, mine=True)["total"]

    # alice votes on a request needing two approvals: it no longer waits for her
    ApprovalRequest.objects.filter(pk=first.pk).update(approvals_required=2)
    first.refresh_from_db()
    approval_decide(approval=first, decided_by=alice, decision="approve")
    client.login(username="alice", password=PASSWORD)
    data = client.get("/attention.json").json()
    assert data["count"] == 1 == approval_queue(user=alice, mine=True)["total"]
    # and the requester is never waited for (four-eyes)
    owner.user_permissions.add(*alice.user_permissions.all())
    client.login(username="olivia", password=PASSWORD)
    assert client.get("/attention.json").json()["count"] == 0

    client.login(username="carol", password=PASSWORD)
    assert client.get("/attention.json").json() == {"count": 0, "requests": []}


def test_title_count_script_only_for_deciders(client):
    """Every UI page of a decider loads attention.js and names its JSON; others do not."""
    make_user("alice", "approvals.decide_approvalrequest")
    make_user("carol")
    client.login(username="alice", password=PASSWORD)
    page = client.get("/").content.decode()
    assert 'data-attention-url="/attention.json"' in page
    assert "ui/attention.js" in page
    assert 'id="notify-toggle"' in page
    client.login(username="carol", password=PASSWORD)
    page = client.get("/").content.decode()
    assert "attention" not in page


def test_thread_routes_answer_with_a_permission_page(client):
    """View-only approver: 403 naming the permission and the owner; a plain user: 404
    that reveals nothing; both the UI's page, not Django's."""
    owner = make_user("olivia")
    make_user("vera", "approvals.view_approvalrequest")
    make_user("carol")
    thread = thread_create(owner=owner, title="private")

    client.login(username="vera", password=PASSWORD)
    response = client.get(f"/threads/{thread.thread_id}/")
    assert response.status_code == 403
    text = response.content.decode()
    assert "You can&#x27;t open this thread" in text
    assert "approvals.decide_approvalrequest" in text
    assert "olivia" in text
    assert "private" not in text

    client.login(username="carol", password=PASSWORD)
    response = client.get(f"/threads/{thread.thread_id}/")
    assert response.status_code == 404
    text = response.content.decode()
    assert "No such thread" in text
    assert "olivia" not in text
    assert "private" not in text
    assert client.get("/threads/nope/").status_code == 404
