"""The refund flow driven entirely through the REST API, on the embedded pool and on Celery.

POST a message → the demo agent looks the order up (auto) and proposes a refund →
the approval is listed → an operator approves or rejects it through the API →
the call is answered by exactly one tool message and the thread continues.
Implements DC-05 (integrations drive the whole loop), SEC-02 (nothing runs
unapproved), DC-04 / FT-06 (one tool message per call).
"""

from __future__ import annotations

import json
from collections import Counter

from approvals.models import ApprovalRequest
from demo.models import Refund
from threads.models import Thread


def _post_refund_request(api) -> Thread:
    thread_id = api.post("/api/threads/", {"title": "refund"}, format="json").json()[
        "threadId"
    ]
    posted = api.post(
        f"/api/threads/{thread_id}/messages/",
        {"content": "refund order A-1001 25.00"},
        format="json",
    )
    assert posted.status_code == 201, posted.json()
    return Thread.objects.get(client_thread_id=thread_id)


def _wait_for_approval(executor, thread: Thread) -> None:
    """Wait until the refund call is in the queue and the thread is quiet.

    Waiting on the approval row itself: between a run's last event and the
    dispatch of its pending calls, the thread briefly looks idle.
    """
    executor.wait_for(
        lambda: ApprovalRequest.objects.filter(thread=thread, status="pending").exists()
    )
    executor.settle(thread)


def _listed_approval(api, thread: Thread) -> dict:
    approvals = api.get(
        f"/api/approvals/?thread={thread.thread_id}&status=pending"
    ).json()
    assert [a["tool"] for a in approvals["results"]] == ["refund_order"], approvals
    return approvals["results"][0]


def _one_tool_message_per_call(api, thread: Thread) -> list[dict]:
    messages = api.get(f"/api/threads/{thread.thread_id}/messages/").json()["results"]
    call_ids = [c["id"] for m in messages for c in m.get("toolCalls", [])]
    answers = Counter(m["toolCallId"] for m in messages if m["role"] == "tool")
    assert sorted(answers) == sorted(call_ids)
    assert set(answers.values()) == {1}
    return messages


def test_dc05_sec02_refund_approved_through_the_api(api, approver_api, executor):
    """Approve via the API → the refund runs once → the thread ends quoting its result."""
    thread = _post_refund_request(api)
    _wait_for_approval(executor, thread)
    approval = _listed_approval(api, thread)
    assert approval["proposedArguments"] == {
        "order_id": "A-1001",
        "amount": 25.0,
        "reason": "customer request",
    }
    assert (
        api.get(f"/api/threads/{thread.thread_id}/").json()["status"]
        == "waiting_for_approval"
    )
    assert not Refund.objects.exists()  # nothing ran before the approval (SEC-02)

    approved = approver_api.post(
        f"/api/approvals/{approval['id']}/approve/", {}, format="json"
    )
    executor.settle(thread)

    assert approved.status_code == 200
    assert approved.json()["status"] == "approved"
    assert Refund.objects.count() == 1
    messages = _one_tool_message_per_call(api, thread)
    refund_result = next(
        m
        for m in messages
        if m["role"] == "tool" and m["toolCallId"] == approval["toolCallId"]
    )
    assert "error" not in refund_result
    final = messages[-1]
    assert final["role"] == "assistant"
    result_text = refund_result["content"]
    refund = Refund.objects.get()
    assert final["content"] == (
        f"Refund done: 25.00 EUR refunded on order A-1001 (refund #{refund.pk})."
    )
    assert json.loads(result_text)["amount"] == "25.00"
    assert "A-1001" in result_text
    call = api.get(f"/api/tool-calls/{approval['toolCallId']}/").json()
    assert (call["state"], call["approval"]["status"]) == ("succeeded", "approved")
    assert call["result"]["content"] == result_text
    assert api.get(f"/api/threads/{thread.thread_id}/").json()["status"] == "idle"


def test_dc05_sec02_refund_rejected_through_the_api(api, approver_api, executor):
    """Reject with a reason via the API → the tool message says rejected, with the reason."""
    thread = _post_refund_request(api)
    _wait_for_approval(executor, thread)
    approval = _listed_approval(api, thread)

    rejected = approver_api.post(
        f"/api/approvals/{approval['id']}/reject/",
        {"reason": "customer already got a voucher"},
        format="json",
    )
    executor.settle(thread)

    assert rejected.status_code == 200
    assert not Refund.objects.exists()
    messages = _one_tool_message_per_call(api, thread)
    answer = next(
        m
        for m in messages
        if m["role"] == "tool" and m["toolCallId"] == approval["toolCallId"]
    )
    assert answer["error"] == "declined_by_operator"
    assert json.loads(answer["content"]) == {
        "status": "rejected",
        "reason": "customer already got a voucher",
        "executed": False,
    }
    final = messages[-1]
    assert final["role"] == "assistant"
    assert final["content"] == (
        "I did not refund 25.00 EUR on order A-1001: an approver declined it, "
        "saying: customer already got a voucher."
    )
