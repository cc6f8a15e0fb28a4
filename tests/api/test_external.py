"""The approval API for external agents, in process: declare, decide, claim, report.

The calls go through the real recorder, policy dispatch, decisions and execution
ledger; no worker is needed (an external agent's call is run by its caller).
"""

from __future__ import annotations

import base64
import json
import time
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.utils import timezone

from approvals.models import ApprovalRequest, AuditEntry, ToolExecution
from tests.helpers.external import declare, signed_webhook_receiver
from threads.models import Event, Message, Run, Thread, ToolCall

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("external_agents")]


def approve(client: Any, approval_id: int, **body: Any) -> Any:
    response = client.post(
        f"/api/approvals/{approval_id}/approve/", body, format="json"
    )
    assert response.status_code == 200, response.json()
    return response


# -- declare ---------------------------------------------------------------------


def test_a_call_needing_approval_is_recorded_in_the_agents_thread_and_queued(
    api: Any, user: Any
) -> None:
    """A declared refund is a thread of the agent with the call, pending in the queue."""
    # given/when: the billing agent declares a refund in its conversation
    response = declare(api, conversationId="conv-1", summary="Refund A-1: late")
    # then: 201 with a pending request
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["status"] == "pending"
    assert body["decision"] is None
    approval = ApprovalRequest.objects.get(pk=body["approvalId"])
    assert approval.status == "pending"
    assert approval.tool_name == "refund"
    assert approval.proposed_arguments == {"order_id": "A-1", "amount": 25}
    # the caller's summary is what the call is called, in the queue and the API
    listed = api.get(f"/api/approvals/{approval.pk}/").json()
    assert listed["label"] == "Refund A-1: late"
    thread = Thread.objects.get(client_thread_id="conv-1")
    assert (thread.owner, thread.agent) == (user, "billing")
    # threadId is the thread's global id (the REST API's), minted, not the caller's
    assert body["threadId"] == thread.thread_id != "conv-1"
    call = ToolCall.objects.get(tool_call_id=body["toolCallId"])
    assert call.state == "awaiting_approval"
    assert [e.type for e in Event.objects.filter(thread=thread).order_by("seq")] == [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "RUN_FINISHED",
    ]
    assert Message.objects.get(thread=thread, role="assistant").content == (
        "Refund A-1: late"
    )


def test_an_auto_call_is_approved_at_once_with_its_arguments(api: Any) -> None:
    """A tool whose policy is auto is approved in the response: claim it and run it."""
    response = declare(api, tool="lookup", arguments={"order_id": "A-1"})
    assert response.status_code == 201
    body = response.json()
    assert body["status"] == "approved"
    assert body["approvalId"] is None
    assert body["decision"]["approved"] is True
    assert body["decision"]["arguments"] == {"order_id": "A-1"}
    assert body["decision"]["authorizedBy"] == "policy"
    assert len(body["decision"]["argumentsHash"]) == 64


def test_a_denied_call_is_answered_denied_and_never_claimable(api: Any) -> None:
    """The policy's deny answers at once; a claim of it is refused with 409."""
    body = declare(api, tool="wipe", arguments={}).json()
    assert body["status"] == "denied"
    assert body["decision"]["approved"] is False
    assert body["outcome"]["error"] == "policy_denied"
    claim = api.post(
        f"/api/external/tool-calls/{body['toolCallId']}/claim/",
        {"holder": "r1"},
        format="json",
    )
    assert claim.status_code == 409
    assert claim.json()["type"] == "not_claimable"
    assert "'denied'" in claim.json()["fields"]["status"][0]


def test_caller_hints_never_lower_the_policy(api: Any) -> None:
    """A read-only hint on a tool whose policy requires approval still needs a person."""
    body = declare(api, annotations={"readOnlyHint": True}).json()
    assert body["status"] == "pending"


def test_an_unconfigured_tool_of_a_lenient_agent_needs_approval(api: Any) -> None:
    """Without strict, a tool no policy names goes to a person, whatever its hints."""
    body = declare(
        api,
        agent="helper",
        tool="send_mail",
        arguments={"to": "a@example.com"},
        annotations={"readOnlyHint": True},
    ).json()
    assert body["status"] == "pending"


def test_calls_of_one_conversation_share_its_thread(api: Any) -> None:
    """Two calls with one conversationId are two runs of one thread, both in the queue."""
    first = declare(api, conversationId="conv-2").json()
    second = declare(
        api, conversationId="conv-2", arguments={"order_id": "A-2", "amount": 5}
    ).json()
    assert first["threadId"] == second["threadId"]
    assert Thread.objects.get(client_thread_id="conv-2").thread_id == first["threadId"]
    assert first["toolCallId"] != second["toolCallId"]
    assert Run.objects.filter(thread__client_thread_id="conv-2").count() == 2
    assert ApprovalRequest.objects.filter(status="pending").count() == 2


def test_an_idempotency_key_returns_the_same_call(api: Any) -> None:
    """The same key and body again answer 200 with the same call; nothing is recorded twice."""
    first = declare(api, idempotencyKey="k-1")
    again = declare(api, idempotencyKey="k-1")
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["toolCallId"] == first.json()["toolCallId"]
    assert ToolCall.objects.count() == 1
    assert ApprovalRequest.objects.count() == 1


def test_a_callers_expiry_shortens_the_request(api: Any) -> None:
    """expiresAt brings the request's expiry forward."""
    soon = timezone.now() + timedelta(seconds=90)
    body = declare(api, expiresAt=soon.isoformat()).json()
    approval = ApprovalRequest.objects.get(pk=body["approvalId"])
    assert abs((approval.expires_at - soon).total_seconds()) < 1


# -- bad input: 4xx naming the field, nothing recorded -----------------------------


@pytest.mark.parametrize(
    ("change", "field", "kind"),
    [
        ({"agent": "demo"}, "agent", "unknown_agent"),
        ({"agent": "nobody"}, "agent", "unknown_agent"),
        ({"tool": "format_disk"}, "tool", "unknown_tool"),
        ({"tool": "bad name!"}, "tool", "invalid_tool"),
        ({"arguments": {"order_id": "A-1"}}, "arguments", "invalid_arguments"),
        ({"arguments": {"order_id": 7, "amount": 1}}, "arguments", "invalid_arguments"),
        ({"arguments": ["A-1"]}, "arguments", "invalid_arguments"),
        ({"arguments": "A-1"}, "arguments", "invalid_arguments"),
        ({"inputSchema": {"type": "array"}}, "inputSchema", "invalid_input_schema"),
        ({"inputSchema": "object"}, "inputSchema", "invalid_input_schema"),
        (
            {"inputSchema": {"type": "object", "properties": {"a": {"type": "nope"}}}},
            "inputSchema",
            "invalid_input_schema",
        ),
        ({"conversationId": "a b/c"}, "conversationId", "validation_error"),
        ({"expiresAt": "2001-01-01T00:00:00Z"}, "expiresAt", "validation_error"),
        ({"expiresAt": "tomorrow"}, "expiresAt", "validation_error"),
        ({"agent": ""}, "agent", "validation_error"),
        ({"holder": "x"}, "holder", "validation_error"),
    ],
)
def test_bad_declarations_answer_400_naming_the_field(
    api: Any, change: dict[str, Any], field: str, kind: str
) -> None:
    """Each bad declaration is refused before anything is recorded."""
    response = declare(api, **change)
    assert response.status_code == 400, response.json()
    body = response.json()
    assert body["type"] == kind
    assert field in body["fields"], body
    assert ToolCall.objects.count() == 0
    assert Thread.objects.count() == 0


def test_missing_fields_are_named(api: Any) -> None:
    response = api.post("/api/external/tool-calls/", {}, format="json")
    assert response.status_code == 400
    assert set(response.json()["fields"]) == {"agent", "tool", "arguments"}


def test_an_idempotency_key_reused_with_other_arguments_is_refused(api: Any) -> None:
    """The same key with other arguments answers 400 naming idempotencyKey; one call stays."""
    declare(api, idempotencyKey="k-2")
    response = declare(
        api, idempotencyKey="k-2", arguments={"order_id": "A-9", "amount": 1}
    )
    assert response.status_code == 400
    assert response.json()["type"] == "idempotency_key_reused"
    assert "idempotencyKey" in response.json()["fields"]
    assert ToolCall.objects.count() == 1


def test_conversation_ids_are_each_owners_own(
    api: Any, other_api: Any, user: Any
) -> None:
    """Two owners using one conversationId get a thread each; neither sees the other's."""
    # given: a conversation of the first owner
    mine = declare(api, conversationId="conv-mine").json()
    # when: another owner declares in a conversation of the same id
    response = declare(other_api, conversationId="conv-mine")
    # then: it is a thread of their own, with a global id of its own
    assert response.status_code == 201, response.json()
    theirs = response.json()
    assert theirs["threadId"] != mine["threadId"]
    threads = Thread.objects.filter(client_thread_id="conv-mine").order_by("pk")
    assert [t.owner_id == user.pk for t in threads] == [True, False]
    assert Run.objects.filter(thread=threads[0]).count() == 1
    assert Run.objects.filter(thread=threads[1]).count() == 1
    # and: the first owner's next declaration stays in the first thread
    again = declare(api, conversationId="conv-mine").json()
    assert again["threadId"] == mine["threadId"]


def test_a_conversation_of_another_agent_is_refused(api: Any) -> None:
    """One of the owner's conversation ids names one agent's thread; another agent is told."""
    declare(api, conversationId="conv-agent")
    response = declare(
        api,
        agent="helper",
        conversationId="conv-agent",
        tool="note",
        arguments={"text": "hi"},
    )
    assert response.status_code == 403, response.json()
    assert "your conversation with agent 'billing'" in response.json()["detail"]
    assert ToolCall.objects.count() == 1


def test_unauthenticated_declarations_are_refused() -> None:
    from rest_framework.test import APIClient

    response = declare(APIClient())
    assert response.status_code == 401


# -- decide, claim, report ---------------------------------------------------------


def _approved(api: Any, approver_api: Any, **edit: Any) -> dict[str, Any]:
    body = declare(api).json()
    approve(approver_api, body["approvalId"], **edit)
    state = api.get(f"/api/external/tool-calls/{body['toolCallId']}/").json()
    assert state["status"] == "approved", state
    return state


def test_an_edit_is_what_the_caller_runs(api: Any, approver_api: Any) -> None:
    """The approver's edit is the decision's arguments, with its hash."""
    state = _approved(
        api, approver_api, editedArguments={"order_id": "A-1", "amount": 10}
    )
    decision = state["decision"]
    assert decision["arguments"] == {"order_id": "A-1", "amount": 10}
    assert decision["edited"] is True
    assert decision["authorizedBy"] == "approval"
    assert decision["decidedBy"] == "ada"


def test_an_edit_that_breaks_the_declared_schema_is_refused(
    api: Any, approver_api: Any
) -> None:
    body = declare(api).json()
    response = approver_api.post(
        f"/api/approvals/{body['approvalId']}/approve/",
        {"editedArguments": {"order_id": "A-1", "amount": "ten"}},
        format="json",
    )
    assert response.status_code == 400
    assert ApprovalRequest.objects.get(pk=body["approvalId"]).status == "pending"


def test_a_rejection_reaches_the_caller_with_its_reason(
    api: Any, approver_api: Any
) -> None:
    body = declare(api).json()
    response = approver_api.post(
        f"/api/approvals/{body['approvalId']}/reject/",
        {"reason": "not this customer"},
        format="json",
    )
    assert response.status_code == 200, response.json()
    state = api.get(f"/api/external/tool-calls/{body['toolCallId']}/").json()
    assert state["status"] == "rejected"
    assert state["decision"]["approved"] is False
    assert state["decision"]["reason"] == "not this customer"


def test_one_claim_wins_and_the_second_names_the_holder(
    api: Any, approver_api: Any
) -> None:
    state = _approved(api, approver_api)
    url = f"/api/external/tool-calls/{state['toolCallId']}/claim/"
    first = api.post(url, {"holder": "replica-a", "leaseSeconds": 30}, format="json")
    second = api.post(url, {"holder": "replica-b"}, format="json")
    assert first.status_code == 200, first.json()
    assert first.json()["status"] == "claimed"
    assert first.json()["claim"]["holder"] == "replica-a"
    assert second.status_code == 409
    assert second.json()["type"] == "claimed_by_another"
    assert "replica-a" in second.json()["detail"]
    assert second.json()["fields"] == {"holder": [second.json()["detail"]]}


def test_the_holder_renews_its_lease(api: Any, approver_api: Any) -> None:
    state = _approved(api, approver_api)
    url = f"/api/external/tool-calls/{state['toolCallId']}/claim/"
    api.post(url, {"holder": "replica-a", "leaseSeconds": 5}, format="json")
    before = ToolExecution.objects.get().lease_expires_at
    renewed = api.post(url, {"holder": "replica-a", "leaseSeconds": 600}, format="json")
    assert renewed.status_code == 200
    execution = ToolExecution.objects.get()
    assert execution.lease_expires_at - before > timedelta(seconds=500)
    assert execution.attempts == 1


def test_an_outcome_answers_the_call_once_with_audit_and_thread_story(
    api: Any, approver_api: Any
) -> None:
    state = _approved(api, approver_api)
    call_id = state["toolCallId"]
    api.post(
        f"/api/external/tool-calls/{call_id}/claim/", {"holder": "r1"}, format="json"
    )
    url = f"/api/external/tool-calls/{call_id}/outcome/"
    body = {"holder": "r1", "result": {"refund_id": "R-9"}}
    first = api.post(url, body, format="json")
    again = api.post(url, body, format="json")
    assert first.status_code == again.status_code == 200, first.json()
    assert first.json()["status"] == "succeeded"
    assert first.json()["outcome"] == {"content": '{"refund_id":"R-9"}', "error": None}
    assert again.json() == first.json()
    call = ToolCall.objects.get(tool_call_id=call_id)
    assert call.state == "succeeded"
    assert call.run.status == "finished"
    assert Message.objects.filter(tool_call_id=call_id, role="tool").count() == 1
    actions = list(AuditEntry.objects.order_by("id").values_list("action", flat=True))
    assert actions[-2:] == ["execution.reserved", "execution.succeeded"]
    # nothing continues an external agent's run: it runs elsewhere
    assert Run.objects.filter(thread=call.thread).count() == 1


def test_a_failed_outcome_is_recorded_as_failed(api: Any, approver_api: Any) -> None:
    state = _approved(api, approver_api)
    call_id = state["toolCallId"]
    api.post(
        f"/api/external/tool-calls/{call_id}/claim/", {"holder": "r1"}, format="json"
    )
    response = api.post(
        f"/api/external/tool-calls/{call_id}/outcome/",
        {"holder": "r1", "result": "card declined", "error": "upstream_error"},
        format="json",
    )
    assert response.json()["status"] == "failed"
    assert response.json()["outcome"] == {
        "content": "card declined",
        "error": "upstream_error",
    }


@pytest.mark.parametrize(
    ("claim", "body", "kind", "field"),
    [
        (None, {"holder": "r1", "result": 1}, "outcome_without_claim", "holder"),
        ("r1", {"holder": "r2", "result": 1}, "claimed_by_another", "holder"),
    ],
)
def test_outcomes_without_the_claim_are_refused(
    api: Any,
    approver_api: Any,
    claim: str | None,
    body: dict[str, Any],
    kind: str,
    field: str,
) -> None:
    state = _approved(api, approver_api)
    call_id = state["toolCallId"]
    if claim:
        api.post(
            f"/api/external/tool-calls/{call_id}/claim/",
            {"holder": claim},
            format="json",
        )
    response = api.post(
        f"/api/external/tool-calls/{call_id}/outcome/", body, format="json"
    )
    assert response.status_code == 409
    assert response.json()["type"] == kind
    assert field in response.json()["fields"]
    assert not Message.objects.filter(tool_call_id=call_id, role="tool").exists()


def test_a_second_different_outcome_is_refused(api: Any, approver_api: Any) -> None:
    state = _approved(api, approver_api)
    call_id = state["toolCallId"]
    api.post(
        f"/api/external/tool-calls/{call_id}/claim/", {"holder": "r1"}, format="json"
    )
    url = f"/api/external/tool-calls/{call_id}/outcome/"
    api.post(url, {"holder": "r1", "result": "ok"}, format="json")
    response = api.post(url, {"holder": "r1", "result": "other"}, format="json")
    assert response.status_code == 409
    assert response.json()["type"] == "outcome_conflict"
    assert "result" in response.json()["fields"]
    assert Message.objects.get(tool_call_id=call_id, role="tool").content == "ok"


def test_an_oversized_result_is_refused_and_the_claim_stays(
    api: Any, approver_api: Any
) -> None:
    state = _approved(api, approver_api)
    call_id = state["toolCallId"]
    api.post(
        f"/api/external/tool-calls/{call_id}/claim/", {"holder": "r1"}, format="json"
    )
    response = api.post(
        f"/api/external/tool-calls/{call_id}/outcome/",
        {"holder": "r1", "result": "x" * (300 * 1024)},
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["type"] == "result_too_large"
    assert "result" in response.json()["fields"]
    assert ToolExecution.objects.get().state == "reserved"


def test_another_token_may_not_claim(
    api: Any, approver_api: Any, other_api: Any
) -> None:
    """Another user's token cannot see the call (404); an operator's sees it but may not claim (403)."""
    state = _approved(api, approver_api)
    call_id = state["toolCallId"]
    url = f"/api/external/tool-calls/{call_id}/claim/"
    assert other_api.post(url, {"holder": "x"}, format="json").status_code == 404
    refused = approver_api.post(url, {"holder": "x"}, format="json")
    assert refused.status_code == 403
    assert ToolExecution.objects.get().state == "queued"


def test_a_pending_call_cannot_be_claimed(api: Any) -> None:
    body = declare(api).json()
    response = api.post(
        f"/api/external/tool-calls/{body['toolCallId']}/claim/",
        {"holder": "r1"},
        format="json",
    )
    assert response.status_code == 409
    assert response.json()["type"] == "not_claimable"
    assert "'pending'" in response.json()["fields"]["status"][0]


@pytest.mark.parametrize(
    "body",
    [{}, {"holder": ""}, {"holder": "r", "leaseSeconds": 0}, {"holder": "r", "x": 1}],
)
def test_bad_claims_answer_400(api: Any, approver_api: Any, body: Any) -> None:
    state = _approved(api, approver_api)
    response = api.post(
        f"/api/external/tool-calls/{state['toolCallId']}/claim/", body, format="json"
    )
    assert response.status_code == 400


def test_a_lapsed_claim_becomes_outcome_unknown_and_a_late_outcome_still_lands(
    api: Any, approver_api: Any
) -> None:
    """A claim whose lease ended without an outcome is outcome_unknown for an operator."""
    state = _approved(api, approver_api)
    call_id = state["toolCallId"]
    url = f"/api/external/tool-calls/{call_id}/claim/"
    api.post(url, {"holder": "r1"}, format="json")
    ToolExecution.objects.update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    # when: another replica tries, after the lease lapsed
    response = api.post(url, {"holder": "r2"}, format="json")
    # then: nobody may run it again; the operator sees outcome_unknown
    assert response.status_code == 409
    assert "'outcome_unknown'" in response.json()["fields"]["status"][0]
    assert ToolCall.objects.get(tool_call_id=call_id).state == "outcome_unknown"
    late = api.post(
        f"/api/external/tool-calls/{call_id}/outcome/",
        {"holder": "r1", "result": "done"},
        format="json",
    )
    assert late.status_code == 200
    assert late.json()["status"] == "succeeded"


def test_a_worker_delivery_never_runs_an_external_call(
    api: Any, approver_api: Any
) -> None:
    """An approval enqueues the execution as for any call; the worker leaves it to the caller."""
    from orchestration.pipeline import tool_call_execute

    state = _approved(api, approver_api)
    call = ToolCall.objects.get(tool_call_id=state["toolCallId"])
    assert tool_call_execute(tool_call_pk=call.pk) is not None
    assert ToolExecution.objects.get().state == "queued"
    assert ToolCall.objects.get(pk=call.pk).state == "approved"


def test_the_janitors_redelivery_of_a_lapsed_claim_records_outcome_unknown(
    api: Any, approver_api: Any
) -> None:
    """A lapsed claim the janitor hands to a worker becomes outcome_unknown, never run."""
    from orchestration.pipeline import tool_call_execute

    state = _approved(api, approver_api)
    call = ToolCall.objects.get(tool_call_id=state["toolCallId"])
    api.post(
        f"/api/external/tool-calls/{call.tool_call_id}/claim/",
        {"holder": "r1"},
        format="json",
    )
    # a live claim: the worker leaves it to its holder
    tool_call_execute(tool_call_pk=call.pk)
    assert ToolCall.objects.get(pk=call.pk).state == "executing"
    ToolExecution.objects.update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    tool_call_execute(tool_call_pk=call.pk)
    assert ToolCall.objects.get(pk=call.pk).state == "outcome_unknown"
    assert ToolExecution.objects.get().state == "outcome_unknown"
    status = api.get(f"/api/external/tool-calls/{call.tool_call_id}/").json()
    assert status["status"] == "outcome_unknown"


def test_the_janitor_leaves_an_approved_unclaimed_call_to_its_caller(
    api: Any, approver_api: Any
) -> None:
    """An approved external call waiting for its claim is no lost message."""
    from orchestration.janitor import lost_messages_requeue

    _approved(api, approver_api)
    ToolExecution.objects.update(created_at=timezone.now() - timedelta(hours=1))
    counts = lost_messages_requeue(stale_seconds=1)
    assert counts["executions_requeued"] == 0


# -- waiting -----------------------------------------------------------------------


@pytest.mark.parametrize("wait", ["-1", "61", "soon", "nan"])
def test_a_bad_wait_answers_400_naming_it(api: Any, wait: str) -> None:
    body = declare(api).json()
    response = api.get(f"/api/external/tool-calls/{body['toolCallId']}/?wait={wait}")
    assert response.status_code == 400
    assert "wait" in response.json()["fields"]


def test_another_users_call_is_not_found(api: Any, other_api: Any) -> None:
    body = declare(api).json()
    assert (
        other_api.get(f"/api/external/tool-calls/{body['toolCallId']}/").status_code
        == 404
    )
    assert other_api.get("/api/external/tool-calls/nope/").status_code == 404


SECRET = "whsec_" + base64.b64encode(b"countersign-callback-secret-32b").decode()


def test_a_decision_reaches_the_agents_signed_webhook(
    api: Any, approver_api: Any, settings: Any
) -> None:
    """The agent's webhook gets the decision, signed; another agent's does not."""
    from approvals.models import NotificationDelivery
    from approvals.notifications.delivery import (
        deliveries_create,
        notification_deliver,
    )

    with signed_webhook_receiver(SECRET) as (received, url):
        agents = dict(settings.COUNTERSIGN_AGENTS)
        agents["billing"] = {
            **agents["billing"],
            "webhook": {"url": url, "secret": SECRET},
        }
        settings.COUNTERSIGN_AGENTS = agents
        other = declare(api, agent="helper", tool="send_mail", arguments={}).json()
        body = declare(api).json()
        approve(approver_api, body["approvalId"])
        approve(approver_api, other["approvalId"])
        # what the approval_decided receiver does after the decision commits
        for approval in ApprovalRequest.objects.all():
            deliveries_create(approval=approval, event="decided")
        (delivery,) = NotificationDelivery.objects.filter(target="agent:billing")
        assert delivery.approval_id == body["approvalId"]
        assert notification_deliver(delivery_pk=delivery.pk) == "delivered"
    assert len(received) == 1
    assert received[0]["type"] == "approval.decided"
    assert received[0]["data"]["id"] == body["approvalId"]


def test_a_long_poll_on_a_decided_call_answers_at_once(api: Any) -> None:
    """?wait= returns as soon as the call is decided (here: already, by its policy)."""
    body = declare(api, tool="lookup", arguments={"order_id": "A-1"}).json()
    started = time.monotonic()
    response = api.get(f"/api/external/tool-calls/{body['toolCallId']}/?wait=30")
    assert response.status_code == 200
    assert response.json()["status"] == "approved"
    assert time.monotonic() - started < 10


def test_a_long_poll_on_a_pending_call_answers_pending_after_the_wait(
    api: Any,
) -> None:
    body = declare(api).json()
    started = time.monotonic()
    response = api.get(f"/api/external/tool-calls/{body['toolCallId']}/?wait=0.3")
    assert response.json()["status"] == "pending"
    assert time.monotonic() - started >= 0.3


def test_the_sse_stream_of_a_final_call_sends_its_state_and_ends(api: Any) -> None:
    body = declare(api, tool="wipe", arguments={}).json()
    response = api.get(f"/api/external/tool-calls/{body['toolCallId']}/events/")
    assert response.status_code == 200
    assert response["content-type"] == "text/event-stream"

    async def read() -> str:
        chunks = [c async for c in response.streaming_content]
        return "".join(c.decode() if isinstance(c, bytes) else c for c in chunks)

    text = async_to_sync(read)()
    frames = [f for f in text.split("\n\n") if f.startswith("id:")]
    assert len(frames) == 1
    assert frames[0].splitlines()[:2] == ["id: 1", "event: state"]
    assert json.loads(frames[0].splitlines()[2][len("data: ") :])["status"] == "denied"


def test_the_sse_stream_needs_credentials_and_a_visible_call(
    api: Any, other_api: Any
) -> None:
    from rest_framework.test import APIClient

    body = declare(api).json()
    url = f"/api/external/tool-calls/{body['toolCallId']}/events/"
    assert APIClient().get(url).status_code == 401
    assert other_api.get(url).status_code == 404


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "holder"),
        ({"holder": "r1", "error": "x" * 101}, "error"),
        ({"holder": "r1", "extra": 1}, "extra"),
        ({"holder": ["r1"]}, "holder"),
    ],
)
def test_malformed_outcomes_answer_400_naming_the_field(
    api: Any, approver_api: Any, body: dict[str, Any], field: str
) -> None:
    state = _approved(api, approver_api)
    call_id = state["toolCallId"]
    api.post(
        f"/api/external/tool-calls/{call_id}/claim/", {"holder": "r1"}, format="json"
    )
    response = api.post(
        f"/api/external/tool-calls/{call_id}/outcome/", body, format="json"
    )
    assert response.status_code == 400
    assert field in response.json()["fields"]
    assert ToolExecution.objects.get().state == "reserved"


def test_a_long_poll_without_credentials_is_refused(api: Any) -> None:
    from rest_framework.test import APIClient

    body = declare(api).json()
    response = APIClient().get(f"/api/external/tool-calls/{body['toolCallId']}/?wait=5")
    assert response.status_code == 401
