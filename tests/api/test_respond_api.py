"""``POST /api/approvals/<id>/respond/``: answering a held call with text, through the API.

The end-to-end flow runs the demo agent on the embedded pool and on a Celery
worker (``executor``): the agent gets the approver's text as the refund's
result and finishes its turn with it; nothing is refunded. Each malformed body
is refused with a 4xx naming what to fix. Implements SEC-02, DC-03, DC-05, FT-06.
"""

from __future__ import annotations

import csv
import io
import json

import pytest

from approvals.models import RESPOND_MAX_CHARS, ApprovalRequest, ToolExecution
from demo.models import Refund
from tests.helpers.api import pending_refund_thread
from threads.models import Message

TEXT = "The customer already got a voucher; tell them it covers this."


def _pending(user) -> ApprovalRequest:
    pending_refund_thread(user, thread_id="t-refund")
    return ApprovalRequest.objects.get()


def test_respond_through_the_api_the_agent_continues_with_the_text(
    api, approver_api, executor
):
    """Respond → the refund never runs → the agent's last message quotes the approver's text."""
    posted = api.post("/api/threads/", {"title": "refund"}, format="json").json()
    thread_id = posted["threadId"]
    api.post(
        f"/api/threads/{thread_id}/messages/",
        {"content": "refund order A-1001 25.00"},
        format="json",
    )
    executor.wait_for(
        lambda: ApprovalRequest.objects.filter(
            thread__thread_id=thread_id, status="pending"
        ).exists()
    )
    approval = ApprovalRequest.objects.get(thread__thread_id=thread_id)
    executor.settle(approval.thread)

    answered = approver_api.post(
        f"/api/approvals/{approval.pk}/respond/", {"text": TEXT}, format="json"
    )
    executor.settle(approval.thread)

    assert answered.status_code == 200, answered.json()
    body = answered.json()
    assert (body["status"], body["response"], body["decidedBy"]) == (
        "responded",
        TEXT,
        "ada",
    )
    assert body["facts"]["phase"] == "responded"
    assert not Refund.objects.exists()
    assert not ToolExecution.objects.filter(tool_call__name="refund_order").exists()
    messages = api.get(f"/api/threads/{thread_id}/messages/").json()["results"]
    answers = [
        m
        for m in messages
        if m["role"] == "tool" and m["toolCallId"] == body["toolCallId"]
    ]
    assert len(answers) == 1
    assert answers[0]["error"] == "answered_by_operator"
    assert json.loads(answers[0]["content"]) == {
        "status": "responded",
        "response": TEXT,
        "by": "ada",
        "executed": False,
    }
    assert messages[-1]["role"] == "assistant"
    assert messages[-1]["content"] == (
        "I did not refund 25.00 EUR on order A-1001: an approver answered "
        f"instead: {TEXT}"
    )
    call = api.get(f"/api/tool-calls/{body['toolCallId']}/").json()
    assert (call["state"], call["approval"]["status"]) == ("declined", "responded")
    assert api.get(f"/api/threads/{thread_id}/").json()["status"] == "idle"
    events = api.get(f"/api/threads/{thread_id}/events/").json()["results"]
    results = [
        e
        for e in events
        if e["type"] == "TOOL_CALL_RESULT" and e["toolCallId"] == body["toolCallId"]
    ]
    assert [json.loads(e["content"])["response"] for e in results] == [TEXT]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ({}, "text", "This field is required."),
        ({"text": ""}, "text", "This field may not be blank."),
        ({"text": None}, "text", "This field may not be null."),
        ({"text": 42}, "text", "must be a string, not int"),
        ({"text": ["a"]}, "text", "must be a string, not list"),
        ({"text": {"a": 1}}, "text", "must be a string, not dict"),
        ({"text": True}, "text", "must be a string, not bool"),
        (
            {"text": "x" * (RESPOND_MAX_CHARS + 1)},
            "text",
            f"Ensure this field has no more than {RESPOND_MAX_CHARS} characters.",
        ),
        ({"text": "ok", "reason": "x"}, "reason", "unknown field 'reason'"),
    ],
)
def test_malformed_bodies_are_refused_naming_the_field(
    user, approver_api, body, field, message
):
    """Each malformed body: 400 naming the field; the request stays pending."""
    approval = _pending(user)

    response = approver_api.post(
        f"/api/approvals/{approval.pk}/respond/", body, format="json"
    )

    assert response.status_code == 400, response.content
    assert any(message in m for m in response.json()["fields"][field]), response.json()
    assert ApprovalRequest.objects.get(pk=approval.pk).status == "pending"
    assert not Message.objects.filter(role="tool").exists()


@pytest.mark.django_db
@pytest.mark.parametrize("raw", ["not json", "[1, 2]", '"text"', "null"])
def test_a_body_that_is_not_a_json_object_is_refused(user, approver_api, raw):
    """Unparsable JSON or a JSON value that is not an object: 400, nothing recorded."""
    approval = _pending(user)

    response = approver_api.post(
        f"/api/approvals/{approval.pk}/respond/",
        raw,
        content_type="application/json",
    )

    assert response.status_code == 400, response.content
    assert ApprovalRequest.objects.get(pk=approval.pk).status == "pending"


@pytest.mark.django_db
def test_whitespace_only_text_is_refused_by_the_service(user, approver_api):
    """Text that is only whitespace: 400 ``invalid_text`` naming ``text``."""
    approval = _pending(user)

    response = approver_api.post(
        f"/api/approvals/{approval.pk}/respond/", {"text": " \n\t "}, format="json"
    )

    assert response.status_code == 400
    assert response.json()["type"] == "invalid_text"
    assert "the answer is empty" in response.json()["detail"]
    assert "text" in response.json()["fields"]


@pytest.mark.django_db
def test_text_on_an_answered_or_approved_request_is_409(
    user, approver_api, second_approver
):
    """A second, different answer and an answer after approval: 409 ``already_decided``."""
    from tests.helpers.api import token_client

    approval = _pending(user)
    path = f"/api/approvals/{approval.pk}/respond/"
    assert approver_api.post(path, {"text": TEXT}, format="json").status_code == 200
    again = approver_api.post(path, {"text": TEXT}, format="json")
    assert (again.status_code, again.json()["status"]) == (200, "responded")

    other = approver_api.post(path, {"text": "something else"}, format="json")
    grace = token_client(second_approver).post(path, {"text": TEXT}, format="json")

    assert (other.status_code, other.json()["type"]) == (409, "already_decided")
    assert (grace.status_code, grace.json()["type"]) == (409, "already_decided")
    assert "already 'responded' by ada" in other.json()["detail"]
    assert Message.objects.filter(role="tool").count() == 1


@pytest.mark.django_db
def test_text_after_an_approval_is_409(user, approver_api):
    approval = _pending(user)
    approver_api.post(f"/api/approvals/{approval.pk}/approve/", {}, format="json")

    response = approver_api.post(
        f"/api/approvals/{approval.pk}/respond/", {"text": TEXT}, format="json"
    )

    assert (response.status_code, response.json()["type"]) == (409, "already_decided")
    assert ApprovalRequest.objects.get(pk=approval.pk).response is None


@pytest.mark.django_db
@pytest.mark.parametrize("kind", ["interrupt", "input"])
def test_text_on_an_interrupt_or_input_request_is_400(user, approver_api, kind):
    """Only held tool calls take text: 400 ``respond_not_supported``."""
    approval = _pending(user)
    ApprovalRequest.objects.filter(pk=approval.pk).update(kind=kind)

    response = approver_api.post(
        f"/api/approvals/{approval.pk}/respond/", {"text": TEXT}, format="json"
    )

    assert response.status_code == 400
    assert response.json()["type"] == "respond_not_supported"
    assert "approving with a 'response'" in response.json()["detail"]


@pytest.mark.django_db
def test_without_the_decide_permission_it_is_403_and_unseen_is_404(
    user, api, approver_api
):
    """The requester (no decide permission): 403; an unknown id: 404."""
    approval = _pending(user)

    refused = api.post(
        f"/api/approvals/{approval.pk}/respond/", {"text": TEXT}, format="json"
    )
    missing = approver_api.post(
        "/api/approvals/999999/respond/", {"text": TEXT}, format="json"
    )

    assert refused.status_code in (403, 404)
    assert missing.status_code == 404
    assert ApprovalRequest.objects.get(pk=approval.pk).status == "pending"


@pytest.mark.django_db
def test_the_csv_export_shows_the_response(user, approver_api):
    """decisions.csv: status ``responded`` and the text in the ``response`` column."""
    approval = _pending(user)
    text = 'Line one,\nline "two"'
    approver_api.post(
        f"/api/approvals/{approval.pk}/respond/", {"text": text}, format="json"
    )

    exported = approver_api.get("/api/approvals/decisions.csv?status=responded")

    assert exported.status_code == 200
    rows = list(csv.DictReader(io.StringIO(exported.content.decode())))
    assert [(r["id"], r["status"], r["decidedBy"], r["response"]) for r in rows] == [
        (str(approval.pk), "responded", "ada", text)
    ]
    assert rows[0]["executionState"] == ""
