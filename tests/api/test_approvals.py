"""The approval queue over the REST API: visibility, deciding, editing, resolving (SEC-02, DC-05)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.utils import timezone
from rest_framework.test import APIClient

from approvals.models import ApprovalRequest, AuditEntry, ToolExecution
from approvals.services import approval_snapshot
from tests.helpers.api import pending_refund_thread, token_client
from threads.models import Message, ToolCall

pytestmark = pytest.mark.django_db

PROPOSED = {"order_id": "A-1001", "amount": 25.0, "reason": "customer request"}


def _stamp(value) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


def test_dc05_approval_retrieve_mirrors_the_snapshot(api, approval):
    """GET approvals/<id>/ has the snapshot's fields (same names and values) plus runId."""
    response = api.get(f"/api/approvals/{approval.pk}/")

    assert response.status_code == 200
    snapshot = approval_snapshot(approval)
    snapshot.update(
        requestedAt=_stamp(approval.requested_at), expiresAt=_stamp(approval.expires_at)
    )
    body = response.json()
    # The fields that depend on who asks, or on the tool's policy.
    mine = {
        k: body.pop(k)
        for k in ("canAuthorize", "authorization", "risk", "undoUntil", "facts")
    }
    assert body == {**snapshot, "runId": "t-refund-run", "execution": None}
    assert mine["canAuthorize"] is False  # the owner holds neither permission
    assert mine["risk"]["level"] == "medium"  # destructive, 25 within 100
    assert mine["undoUntil"] is None
    # The facts every surface shows, with the owner's own "why not", in words.
    assert mine["facts"]["votes"]["text"] == "0 of 1 approval"
    assert mine["facts"]["headline"] == "Waiting for a decision from an approver."
    assert mine["facts"]["viewer"]["whyNot"] == (
        "Your account may view requests but not decide them (it lacks the "
        "permission “Can approve or reject tool calls”)."
    )
    assert response.json()["proposedArguments"] == PROPOSED
    assert response.json()["status"] == "pending"


def test_dc05_approvals_are_visible_to_owner_and_deciders_only(
    api, other_api, approver_api, staff_user, django_user_model, approval
):
    """Owner and holders of the decide/view permission see it; anyone else, staff too, gets 404."""
    viewer = django_user_model.objects.create_user(username="vic", password="pw-vic-1")
    viewer.user_permissions.add(Permission.objects.get(codename="view_approvalrequest"))

    seen = {
        "owner": api.get("/api/approvals/").json()["count"],
        "other": other_api.get("/api/approvals/").json()["count"],
        "approver": approver_api.get("/api/approvals/").json()["count"],
        "staff": token_client(staff_user).get("/api/approvals/").json()["count"],
        "viewer": token_client(viewer).get("/api/approvals/").json()["count"],
    }

    assert seen == {"owner": 1, "other": 0, "approver": 1, "staff": 0, "viewer": 1}
    assert other_api.get(f"/api/approvals/{approval.pk}/").status_code == 404
    for action in ("approve", "reject", "resolve"):
        response = other_api.post(
            f"/api/approvals/{approval.pk}/{action}/", {"reason": "x"}, format="json"
        )
        assert response.status_code == 404, action
    assert APIClient().get("/api/approvals/").status_code == 401


def test_sec02_deciding_without_the_permission_is_403(api, approval):
    """The thread's owner may see the request but not decide it: 403, nothing changes (SEC-02)."""
    response = api.post(f"/api/approvals/{approval.pk}/approve/", {}, format="json")

    assert response.status_code == 403
    assert response.json() == {
        "type": "permission_denied",
        "detail": "user 'olivia' may not decide tool calls; ask an administrator for the "
        "'approvals.decide_approvalrequest' permission",
    }
    approval.refresh_from_db()
    assert approval.status == "pending"
    assert not ToolExecution.objects.exists()


def test_sec02_approve_records_who_and_queues_the_exact_arguments(
    approver_api, approval
):
    """Approve → approved by the approver, the proposed arguments queued for execution."""
    response = approver_api.post(
        f"/api/approvals/{approval.pk}/approve/",
        {"reason": "looks right"},
        format="json",
    )

    assert response.status_code == 200
    approval.refresh_from_db()
    body = response.json()
    assert (body["status"], body["decidedBy"], body["reason"]) == (
        "approved",
        "ada",
        "looks right",
    )
    assert body["decidedAt"] == _stamp(approval.decided_at)
    assert body["editedArguments"] is None
    assert body["execution"] == {
        "state": "queued",
        "authorizedBy": "approval",
        "attempts": 0,
        "error": "",
    }
    assert ToolExecution.objects.get().arguments == PROPOSED
    assert (
        AuditEntry.objects.filter(
            action="approval.approved", actor__username="ada"
        ).count()
        == 1
    )


def test_sec02_edited_arguments_are_revalidated(approver_api, approval):
    """An edit that breaks the schema is a 400 naming the field; a valid edit is kept apart."""
    invalid = approver_api.post(
        f"/api/approvals/{approval.pk}/approve/",
        {"edited_arguments": {**PROPOSED, "amount": -5}},
        format="json",
    )
    approval.refresh_from_db()
    status_after_invalid = approval.status
    valid = approver_api.post(
        f"/api/approvals/{approval.pk}/approve/",
        {"edited_arguments": {**PROPOSED, "amount": 20.0}},
        format="json",
    )

    assert invalid.status_code == 400
    assert invalid.json()["type"] == "invalid_arguments"
    assert list(invalid.json()["fields"]) == ["edited_arguments"]
    assert "field 'amount'" in invalid.json()["detail"]
    assert status_after_invalid == "pending"
    assert valid.status_code == 200
    assert valid.json()["proposedArguments"] == PROPOSED
    assert valid.json()["editedArguments"] == {**PROPOSED, "amount": 20.0}
    assert ToolExecution.objects.get().arguments == {**PROPOSED, "amount": 20.0}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"edited_arguments": [1, 2]}, "edited_arguments"),
        ({"edited_arguments": "{}"}, "edited_arguments"),
        ({"reason": "x" * 2001}, "reason"),
        ({"approve": True}, "approve"),
    ],
    ids=["list", "string", "long-reason", "unknown-field"],
)
def test_approve_body_is_validated(approver_api, approval, body, field):
    """A malformed approve body is a 400 naming the field; the request stays pending."""
    response = approver_api.post(
        f"/api/approvals/{approval.pk}/approve/", body, format="json"
    )

    assert response.status_code == 400
    assert list(response.json()["fields"]) == [field]
    approval.refresh_from_db()
    assert approval.status == "pending"


def test_sec02_reject_needs_a_reason_and_answers_the_call(approver_api, approval):
    """Reject without a reason → 400 on ``reason``; with one → the tool message says why."""
    missing = approver_api.post(
        f"/api/approvals/{approval.pk}/reject/", {}, format="json"
    )
    blank = approver_api.post(
        f"/api/approvals/{approval.pk}/reject/", {"reason": "  "}, format="json"
    )
    rejected = approver_api.post(
        f"/api/approvals/{approval.pk}/reject/",
        {"reason": "order already refunded"},
        format="json",
    )
    call = approver_api.get("/api/tool-calls/t-refund-call/?thread=t-refund")

    assert missing.json()["fields"] == {"reason": ["This field is required."]}
    assert blank.json()["fields"] == {"reason": ["This field may not be blank."]}
    assert rejected.status_code == 200
    assert (rejected.json()["status"], rejected.json()["reason"]) == (
        "rejected",
        "order already refunded",
    )
    tool_message = Message.objects.get(role="tool", tool_call_id="t-refund-call")
    assert tool_message.error == "declined_by_operator"
    # An approver may read the calls behind the requests they decide.
    assert (call.status_code, call.json()["state"]) == (200, "declined")


def test_a_second_users_identical_approve_is_refused_not_silently_accepted(
    approver_api, second_approver, approval
):
    """Only the decider's own repeat is a 200 no-op; another approver's identical
    approve of a decided request is a 409 saying their vote was not recorded."""
    first = approver_api.post(
        f"/api/approvals/{approval.pk}/approve/", {}, format="json"
    )
    repeat = approver_api.post(
        f"/api/approvals/{approval.pk}/approve/", {}, format="json"
    )
    other = token_client(second_approver).post(
        f"/api/approvals/{approval.pk}/approve/", {}, format="json"
    )

    assert (first.status_code, repeat.status_code) == (200, 200)
    assert other.status_code == 409
    assert other.json()["type"] == "already_decided"
    assert "your decision was not recorded" in other.json()["detail"]
    assert list(approval.votes.values_list("voter__username", flat=True)) == [
        first.json()["decidedBy"]
    ]


def test_sec02_a_rejected_call_cannot_then_be_approved(approver_api, api, approval):
    """A second, different decision is a 409; the result shows the rejection (SEC-02)."""
    approver_api.post(
        f"/api/approvals/{approval.pk}/reject/", {"reason": "no"}, format="json"
    )

    response = approver_api.post(
        f"/api/approvals/{approval.pk}/approve/", {}, format="json"
    )
    call = api.get("/api/tool-calls/t-refund-call/").json()

    assert response.status_code == 409
    assert response.json()["type"] == "already_decided"
    assert "reload the queue" in response.json()["detail"]
    assert call["state"] == "declined"
    assert call["approval"]["status"] == "rejected"
    assert call["result"]["error"] == "declined_by_operator"
    assert '"status":"rejected"' in call["result"]["content"]
    assert '"reason":"no"' in call["result"]["content"]


def test_resolve_answers_an_outcome_unknown_execution(approver_api, approval):
    """resolve/ writes the operator's answer for a call whose outcome is unknown."""
    not_yet = approver_api.post(
        f"/api/approvals/{approval.pk}/resolve/",
        {"succeeded": True, "content": "done", "reason": "checked"},
        format="json",
    )
    approver_api.post(f"/api/approvals/{approval.pk}/approve/", {}, format="json")
    ToolExecution.objects.update(state=ToolExecution.State.OUTCOME_UNKNOWN)
    ToolCall.objects.filter(pk=approval.tool_call_id).update(
        state=ToolCall.State.OUTCOME_UNKNOWN
    )

    resolved = approver_api.post(
        f"/api/approvals/{approval.pk}/resolve/",
        {
            "succeeded": True,
            "content": "refund R-1 went through",
            "reason": "ledger shows it",
        },
        format="json",
    )

    assert not_yet.status_code == 409
    assert not_yet.json()["type"] == "already_decided"
    assert resolved.status_code == 200
    assert resolved.json()["execution"]["state"] == "resolved"
    message = Message.objects.get(role="tool", tool_call_id="t-refund-call")
    assert (message.content, message.error) == ("refund R-1 went through", None)


def test_resolve_without_the_permission_is_403(api, approval):
    """The owner cannot resolve an execution: 403."""
    response = api.post(
        f"/api/approvals/{approval.pk}/resolve/",
        {"succeeded": False, "content": "no", "reason": "unsure"},
        format="json",
    )

    assert response.status_code == 403


def test_queue_lists_pending_first_then_newest_and_filters(
    approver_api, user, other_user
):
    """approvals/ puts pending first, then newest; filters by tool, thread, status, age."""
    pending_refund_thread(user, thread_id="t-a")
    pending_refund_thread(other_user, thread_id="t-b")
    pending_refund_thread(user, thread_id="t-c")
    decided = ApprovalRequest.objects.get(thread__client_thread_id="t-c")
    approver_api.post(
        f"/api/approvals/{decided.pk}/reject/", {"reason": "dup"}, format="json"
    )
    ApprovalRequest.objects.filter(thread__client_thread_id="t-a").update(
        requested_at=timezone.now() - timedelta(hours=2)
    )

    def listed(query: str = "") -> list[str]:
        response = approver_api.get(f"/api/approvals/{query}")
        assert response.status_code == 200, response.json()
        return [a["threadId"] for a in response.json()["results"]]

    assert listed() == ["t-b", "t-a", "t-c"]
    assert listed("?status=pending") == ["t-b", "t-a"]
    assert listed("?thread=t-c") == ["t-c"]
    assert listed("?tool=refund_order") == ["t-b", "t-a", "t-c"]
    assert listed("?tool=get_weather") == []
    assert listed("?older_than=3600") == ["t-a"]
    bad = approver_api.get("/api/approvals/?older_than=-1")
    assert bad.status_code == 400
    assert list(bad.json()["fields"]) == ["older_than"]


def test_unknown_or_huge_approval_ids_answer_404(approver_api):
    """An id that does not exist, or does not fit a database integer, is a 404."""
    assert approver_api.get("/api/approvals/12345/").status_code == 404
    huge = approver_api.post(
        "/api/approvals/" + "9" * 30 + "/approve/", {}, format="json"
    )
    assert huge.status_code == 404
    assert huge.json()["type"] == "not_found"


def test_a_response_for_a_tool_call_request_is_400_naming_the_field(
    approver_api, approval
):
    """`response` answers interrupts and input requests; a tool call takes edits (IR-18)."""
    response = approver_api.post(
        f"/api/approvals/{approval.pk}/approve/",
        {"response": {"approved": True}},
        format="json",
    )

    approval.refresh_from_db()
    assert response.status_code == 400
    assert response.json()["type"] == "invalid_response"
    assert "'editedArguments'" in response.json()["detail"]
    assert approval.status == "pending"


def _queue_of(owner, approver_api, n: int, start: int) -> None:
    """Make ``n`` requests: pending, approved (an execution queued) and rejected in turn."""
    for index in range(start, start + n):
        thread = pending_refund_thread(owner, thread_id=f"t-n{index}")
        approval = ApprovalRequest.objects.get(thread=thread)
        if index % 3 == 1:
            approver_api.post(
                f"/api/approvals/{approval.pk}/approve/", {}, format="json"
            )
        elif index % 3 == 2:
            approver_api.post(
                f"/api/approvals/{approval.pk}/reject/", {"reason": "no"}, format="json"
            )


def test_the_list_reads_a_fixed_number_of_queries_per_page(approver_api, user):
    """GET approvals/ costs the same queries for a page of 3 or of 9: no query per row."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    # Given three requests in each state
    _queue_of(user, approver_api, 3, 0)

    def page_queries(limit: int) -> int:
        with CaptureQueriesContext(connection) as queries:
            response = approver_api.get(f"/api/approvals/?limit={limit}")
        assert response.status_code == 200
        assert len(response.json()["results"]) == limit
        # The demo refund tool's own review reads its refunds once per call
        # (a tool's hook, not the list's): counted apart.
        return len([q for q in queries if '"demo_' not in q["sql"]])

    # When the page grows from 3 to 9 requests
    small = page_queries(3)
    _queue_of(user, approver_api, 6, 3)
    large = page_queries(9)

    # Then it reads no more queries
    assert large == small


def test_the_list_page_size_is_bounded(approver_api, user):
    """A limit over 200 is a 400 naming ``limit``; without one the page has the default size."""
    pending_refund_thread(user, thread_id="t-bound")
    too_big = approver_api.get("/api/approvals/?limit=100000")
    assert too_big.status_code == 400
    assert "limit" in too_big.json()["fields"]
