"""The thread's owner can abandon calls waiting for approval and move on (FT-06, BC20)."""

from __future__ import annotations

import json

from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from approvals.models import ApprovalRequest
from demo.models import Refund
from threads.models import Message, Run


def _client(user) -> APIClient:
    client = APIClient()
    client.credentials(
        HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}"
    )
    return client


def test_owner_cancels_pending_calls_then_posts_again(user, other_user, executor):
    owner = _client(user)
    thread = owner.post("/api/threads/", {"title": "refund"}, format="json").json()
    owner.post(
        f"/api/threads/{thread['threadId']}/messages/",
        {"content": "refund order A-1001 25.00"},
        format="json",
    )
    from threads.models import Thread

    executor.settle(Thread.objects.get(client_thread_id=thread["threadId"]))
    blocked = owner.post(
        f"/api/threads/{thread['threadId']}/messages/", {"content": "hi"}, format="json"
    )
    assert blocked.status_code == 409
    assert (
        f"/api/threads/{thread['threadId']}/cancel-pending/" in blocked.json()["detail"]
    )

    stranger = _client(other_user).post(
        f"/api/threads/{thread['threadId']}/cancel-pending/",
        {"reason": "x"},
        format="json",
    )
    missing = owner.post(
        f"/api/threads/{thread['threadId']}/cancel-pending/", {}, format="json"
    )
    cancelled = owner.post(
        f"/api/threads/{thread['threadId']}/cancel-pending/",
        {"reason": "customer changed their mind"},
        format="json",
    )

    assert stranger.status_code == 404
    assert missing.status_code == 400
    assert "reason" in missing.json()["fields"]
    assert cancelled.status_code == 200
    refund_call = ApprovalRequest.objects.get().tool_call
    assert cancelled.json() == {"cancelledToolCallIds": [refund_call.tool_call_id]}
    approval = ApprovalRequest.objects.get()
    assert (approval.status, approval.reason) == (
        "cancelled",
        "customer changed their mind",
    )
    answer = Message.objects.get(role="tool", tool_call_id=refund_call.tool_call_id)
    assert json.loads(answer.content) == {
        "status": "cancelled",
        "reason": "customer changed their mind",
        "executed": False,
    }
    assert Refund.objects.count() == 0
    detail = owner.get(f"/api/threads/{thread['threadId']}/").json()
    assert (detail["status"], detail["pendingToolCallIds"]) == ("idle", [])

    again = owner.post(
        f"/api/threads/{thread['threadId']}/messages/",
        {"content": "What is the weather in Oslo?"},
        format="json",
    )
    assert again.status_code == 201
    executor.settle(Thread.objects.get(client_thread_id=thread["threadId"]))
    last = (
        Run.objects.filter(thread__client_thread_id=thread["threadId"])
        .order_by("-created_at")
        .first()
    )
    assert last.status == "finished"
    # The new run reports the cancelled answer, then streams its own work.
    from threads.models import Event

    types = list(
        Event.objects.filter(run=last).order_by("seq").values_list("type", flat=True)
    )
    assert types[:2] == ["RUN_STARTED", "TOOL_CALL_RESULT"]


def test_thread_creation_honours_idempotency_key(user, db):
    """Retrying a thread creation with the same key creates one thread (DC-05)."""
    from threads.models import Thread

    client = _client(user)
    first = client.post(
        "/api/threads/",
        {"title": "once"},
        format="json",
        HTTP_IDEMPOTENCY_KEY="create-1",
    )
    again = client.post(
        "/api/threads/",
        {"title": "once"},
        format="json",
        HTTP_IDEMPOTENCY_KEY="create-1",
    )
    other = client.post(
        "/api/threads/",
        {"title": "twice"},
        format="json",
        HTTP_IDEMPOTENCY_KEY="create-1",
    )

    assert (first.status_code, again.status_code, other.status_code) == (201, 201, 422)
    assert again.json() == first.json()
    assert again["Idempotent-Replayed"] == "true"
    assert Thread.objects.filter(owner=user).count() == 1
