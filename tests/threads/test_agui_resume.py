"""Interrupts and resume over AG-UI HTTP against a running server (httpx), both executors.

A POST whose run needs an operator ends with ``RUN_FINISHED.outcome =
{type:"interrupt"}`` naming the approval request; the client's next POST answers it
in ``resume[]``, decided through the queue's own service, and the agent continues in
that POST's stream. Every refusal is a JSON 4xx that changes nothing. The ``live``
fixture runs the server with the embedded pool and with a Celery worker.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import httpx
import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Permission
from django.utils import timezone

from agentcore.arguments import canonical_sha256
from approvals.models import ApprovalRequest, AuditEntry
from demo.models import Refund
from orchestration.pipeline import approval_decide
from tests.agentcore.helpers import coalesced
from tests.helpers.agui import bearer, parse_stream
from tests.helpers.live import run_input, token_for
from tests.threads.agui_history import apply_events
from threads.models import Message, ToolCall

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("close_thread_connections"),
]

REFUND = "refund order A-1001 25.00"


def make_approver(django_user_model: Any, name: str) -> Any:
    """Return a user who may decide calls and authorize refunds."""
    user = django_user_model.objects.create_user(username=name, password=f"pw-{name}-1")
    user.user_permissions.add(
        Permission.objects.get(codename="decide_approvalrequest"),
        Permission.objects.get(codename="add_refund"),
    )
    return django_user_model.objects.get(pk=user.pk)


class Client:
    """An AG-UI client keeping its accumulated history, as HttpAgent does."""

    def __init__(self, http: httpx.AsyncClient, token: str, thread_id: str) -> None:
        self.http = http
        self.token = token
        self.thread_id = thread_id
        self.messages: list[dict[str, Any]] = []
        self.turn = 0

    async def post(
        self,
        content: str | None = None,
        *,
        resume: list[dict[str, Any]] | None = None,
        run_id: str | None = None,
    ) -> httpx.Response:
        self.turn += 1
        messages = list(self.messages)
        if content is not None:
            messages.append({"id": f"u{self.turn}", "role": "user", "content": content})
        body = run_input(self.thread_id, run_id or f"run-{self.turn}", messages)
        if resume is not None:
            body["resume"] = resume
        response = await self.http.post(
            "/agui/demo/", json=body, headers=bearer(self.token)
        )
        if response.status_code == 200:
            self.messages = messages
        return response

    def apply(self, response: httpx.Response) -> list[dict[str, Any]]:
        events, _, _ = parse_stream(response.content)
        apply_events(self.messages, events)
        return coalesced(events)


def refund_ledger() -> list[tuple[str, str]]:
    return [(r.order_id, f"{r.amount:.2f}") for r in Refund.objects.order_by("id")]


async def interrupted(client: Client) -> dict[str, Any]:
    """POST the refund request; return the interrupt its run ends with."""
    response = await client.post(REFUND)
    assert response.status_code == 200, response.text
    events = client.apply(response)
    outcome = events[-1]["outcome"]
    assert outcome["type"] == "interrupt", events[-1]
    (interrupt,) = outcome["interrupts"]
    return interrupt


async def test_ir05_ir07_ir15_resume_approves_and_continues_in_the_same_stream(
    django_user_model, live
):
    """IR-05, IR-07, IR-09, IR-13, IR-15: resume approves; the result and the reply stream in that POST.

    The interrupt is the approval request (same id, real expiry, responseSchema
    with approved/editedArgs/reason, the arguments' hash and the risk). The resumed
    run does not restate the refund call, answers it with exactly one
    TOOL_CALL_RESULT and ends with success; a replay of the same resume is refused
    with the recorded decision and refunds nothing more.
    """
    approver = await sync_to_async(make_approver)(django_user_model, "iris")
    token = await sync_to_async(token_for)(approver)
    async with httpx.AsyncClient(base_url=live.url, timeout=60) as http:
        client = Client(http, token, f"resume-approve-{live.mode}")
        interrupt = await interrupted(client)
        approval = await ApprovalRequest.objects.select_related("tool_call").aget(
            thread__client_thread_id=client.thread_id
        )
        assert interrupt["id"] == f"cs-approval-{approval.pk}"
        assert interrupt["toolCallId"] == approval.tool_call.tool_call_id
        assert interrupt["reason"] == "tool_call"
        assert interrupt["expiresAt"] == approval.expires_at.isoformat().replace(
            "+00:00", "Z"
        )
        assert interrupt["message"].startswith("Refunding 25.00 EUR on order A-1001")
        facts = interrupt["metadata"].pop("facts")
        # The facts every surface shows (approvals.facts), without a viewer.
        assert facts["votes"]["text"] == "0 of 1 approval"
        assert facts["headline"] == "Waiting for a decision from an approver."
        assert facts["arguments"]["approved"] == approval.proposed_arguments
        assert "viewer" not in facts
        # The REST API's and the queue's risk (approvals.selectors.approval_risk).
        shown = await http.get(
            f"/api/approvals/{approval.pk}/",
            headers={"Authorization": f"Token {token}"},
        )
        assert shown.status_code == 200, shown.text
        assert interrupt["metadata"] == {
            "approvalId": approval.pk,
            "tool": "refund_order",
            "argumentsHash": canonical_sha256(approval.proposed_arguments),
            "risk": shown.json()["risk"],
            # Governance: one approval by anyone allowed, none given yet.
            "approvals": {"required": 1, "given": 0, "by": [], "reset": []},
            "approverGroups": [],
        }
        schema = interrupt["responseSchema"]
        assert schema["required"] == ["approved"]
        assert set(schema["properties"]) == {"approved", "editedArgs", "reason"}
        assert schema["properties"]["editedArgs"]["required"] == [
            "order_id",
            "amount",
            "reason",
        ]

        resume = [
            {
                "interruptId": interrupt["id"],
                "status": "resolved",
                "payload": {"approved": True},
            }
        ]
        response = await client.post(resume=resume)
        assert response.status_code == 200, response.text
        events = client.apply(response)
        assert [e["type"] for e in events] == [
            "RUN_STARTED",
            "TOOL_CALL_RESULT",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "RUN_FINISHED",
        ]
        assert events[0]["input"]["resume"] == resume
        assert events[1]["toolCallId"] == interrupt["toolCallId"]
        assert json.loads(events[1]["content"])["status"] == "refunded"
        assert events[-1]["outcome"] == {"type": "success"}
        assert "Refund done" in events[3]["delta"]

        replay = await client.post(resume=resume, run_id="run-replayed")
        assert replay.status_code == 409, replay.text
        body = replay.json()
        assert body["type"] == "interrupt_decided"
        assert [
            (i["interruptId"], i["status"], i["decidedBy"]) for i in body["interrupts"]
        ] == [(interrupt["id"], "approved", "iris")]

    assert await sync_to_async(refund_ledger)() == [("A-1001", "25.00")]
    answers = await sync_to_async(list)(
        Message.objects.filter(
            thread__client_thread_id=client.thread_id,
            role="tool",
            tool_call_id=interrupt["toolCallId"],
        )
    )
    assert len(answers) == 1


async def test_ir11_resume_with_edited_args_refunds_the_edit_and_audits_both(
    django_user_model, live
):
    """IR-11: editedArgs replaces the arguments whole, is validated, and the audit keeps both."""
    approver = await sync_to_async(make_approver)(django_user_model, "ed")
    token = await sync_to_async(token_for)(approver)
    async with httpx.AsyncClient(base_url=live.url, timeout=60) as http:
        client = Client(http, token, f"resume-edit-{live.mode}")
        interrupt = await interrupted(client)
        bad = await client.post(
            resume=[
                {
                    "interruptId": interrupt["id"],
                    "status": "resolved",
                    "payload": {"approved": True, "editedArgs": {"order_id": "A-1001"}},
                }
            ]
        )
        assert bad.status_code == 400, bad.text
        assert bad.json()["type"] == "invalid_arguments"
        assert "resume.0.payload.editedArgs" in bad.json()["fields"]
        edited = {"order_id": "A-1001", "amount": 10.0, "reason": "partial refund"}
        response = await client.post(
            resume=[
                {
                    "interruptId": interrupt["id"],
                    "status": "resolved",
                    "payload": {"approved": True, "editedArgs": edited},
                }
            ]
        )
        assert response.status_code == 200, response.text
        events = client.apply(response)
        assert events[-1]["outcome"] == {"type": "success"}

    assert await sync_to_async(refund_ledger)() == [("A-1001", "10.00")]
    approval = await ApprovalRequest.objects.aget(
        pk=interrupt["metadata"]["approvalId"]
    )
    assert approval.edited_arguments == edited
    assert approval.approved_arguments_hash == canonical_sha256(edited)
    entry = await AuditEntry.objects.filter(action="approval.approved").alast()
    assert entry is not None
    assert entry.after["proposed_arguments"]["amount"] == 25.0
    assert entry.after["edited_arguments"] == edited


async def test_ir07_ir08_ir09_ir12_refused_resumes_change_nothing(
    user, django_user_model, live
):
    """IR-07, IR-08, IR-09, IR-12, IR-16: uncovered, duplicate, malformed and unauthorized resumes are refused.

    Each answer is a JSON 4xx naming the problem; the interrupt stays open and
    nothing is refunded. An entry naming an unknown interrupt is ignored.
    """
    approver = await sync_to_async(make_approver)(django_user_model, "una")
    async with httpx.AsyncClient(base_url=live.url, timeout=60) as http:
        client = Client(http, await sync_to_async(token_for)(approver), "")
        client.thread_id = f"resume-refused-{live.mode}"
        interrupt = await interrupted(client)
        resolved = {
            "interruptId": interrupt["id"],
            "status": "resolved",
            "payload": {"approved": True},
        }

        uncovered = await client.post("thanks")
        assert uncovered.status_code == 409, uncovered.text
        assert uncovered.json()["type"] == "interrupts_uncovered"
        assert uncovered.json()["interruptIds"] == [interrupt["id"]]

        duplicate = await client.post(resume=[resolved, resolved])
        assert duplicate.status_code == 400
        assert duplicate.json()["fields"] == {
            "resume.1.interruptId": duplicate.json()["detail"]
        }

        for payload in ({}, {"approved": "yes"}, {"approved": True, "extra": 1}):
            malformed = await client.post(resume=[{**resolved, "payload": payload}])
            assert malformed.status_code == 400, malformed.text
            assert malformed.json()["type"] == "invalid_resume_payload"

        only_unknown = await client.post(
            resume=[{"interruptId": "no-such-interrupt", "status": "cancelled"}]
        )
        assert only_unknown.status_code == 409
        assert only_unknown.json()["type"] == "interrupts_uncovered"

        # IR-16: a client tool message for a call Countersign answers is refused.
        held_call = interrupt["toolCallId"]
        answer_held = await client.http.post(
            "/agui/demo/",
            json={
                **run_input(
                    client.thread_id,
                    "run-answers-held",
                    [
                        *client.messages,
                        {
                            "id": "client-answer",
                            "role": "tool",
                            "toolCallId": held_call,
                            "content": "done",
                        },
                    ],
                ),
                "resume": [resolved],
            },
            headers=bearer(client.token),
        )
        assert answer_held.status_code == 409, answer_held.text

        # The thread's owner without the permission: 403, nothing changes.
        owner = Client(http, await sync_to_async(token_for)(user), "")
        owner.thread_id = f"resume-owner-{live.mode}"
        held = await interrupted(owner)
        denied = await owner.post(
            resume=[
                {
                    "interruptId": held["id"],
                    "status": "resolved",
                    "payload": {"approved": True},
                }
            ]
        )
        assert denied.status_code == 403, denied.text
        assert denied.json()["type"] == "permission_denied"

        # An unknown entry beside a valid one is ignored (IR-08).
        accepted = await client.post(
            resume=[
                resolved,
                {"interruptId": "no-such-interrupt", "status": "cancelled"},
            ]
        )
        assert accepted.status_code == 200, accepted.text

    statuses = await sync_to_async(list)(
        ApprovalRequest.objects.order_by("id").values_list("status", flat=True)
    )
    assert statuses == ["approved", "pending"]


async def test_ir13_queue_decision_wins_over_a_later_resume(django_user_model, live):
    """IR-13: an operator decides in the queue while the client holds the interrupt.

    The client's later resume gets the recorded decision back (409
    ``interrupt_decided``) and nothing is refunded twice; following the thread
    shows the run that the decision continued.
    """
    holder = await sync_to_async(make_approver)(django_user_model, "holly")
    operator = await sync_to_async(make_approver)(django_user_model, "otto")
    async with httpx.AsyncClient(base_url=live.url, timeout=60) as http:
        client = Client(http, await sync_to_async(token_for)(holder), "")
        client.thread_id = f"resume-raced-{live.mode}"
        interrupt = await interrupted(client)
        approval = await ApprovalRequest.objects.aget(
            pk=interrupt["metadata"]["approvalId"]
        )
        await sync_to_async(approval_decide)(
            approval=approval,
            decided_by=operator,
            decision="reject",
            reason="not eligible",
        )
        late = await client.post(
            resume=[
                {
                    "interruptId": interrupt["id"],
                    "status": "resolved",
                    "payload": {"approved": True},
                }
            ]
        )
        assert late.status_code == 409, late.text
        (recorded,) = late.json()["interrupts"]
        assert (recorded["status"], recorded["decidedBy"], recorded["reason"]) == (
            "rejected",
            "otto",
            "not eligible",
        )
    assert await sync_to_async(refund_ledger)() == []


async def test_ir10_expired_interrupt_cannot_be_resolved_but_can_be_cancelled(
    django_user_model, live
):
    """IR-10: after expiry a resolved entry is refused (INTERRUPT_EXPIRED); a cancelled one goes on.

    The request expired while the client held the interrupt: resolving it is
    refused and changes nothing; cancelling it answers the call as expired and
    the agent continues in that POST's stream.
    """
    approver = await sync_to_async(make_approver)(django_user_model, "exa")
    async with httpx.AsyncClient(base_url=live.url, timeout=60) as http:
        client = Client(http, await sync_to_async(token_for)(approver), "")
        client.thread_id = f"resume-expired-{live.mode}"
        interrupt = await interrupted(client)
        await ApprovalRequest.objects.filter(
            pk=interrupt["metadata"]["approvalId"]
        ).aupdate(expires_at=timezone.now() - timedelta(seconds=1))
        late = await client.post(
            resume=[
                {
                    "interruptId": interrupt["id"],
                    "status": "resolved",
                    "payload": {"approved": True},
                }
            ]
        )
        assert late.status_code == 409, late.text
        assert late.json()["type"] == "INTERRUPT_EXPIRED"
        cancelled = await client.post(
            resume=[{"interruptId": interrupt["id"], "status": "cancelled"}]
        )
        assert cancelled.status_code == 200, cancelled.text
        events = client.apply(cancelled)
        assert [e["type"] for e in events][:2] == [
            "RUN_STARTED",
            "TOOL_CALL_RESULT",
        ], (events, live.logs())
        assert json.loads(events[1]["content"])["status"] == "expired"
        assert events[-1].get("outcome") == {"type": "success"}, (events, live.logs())
    call = await ToolCall.objects.aget(
        thread__client_thread_id=client.thread_id, name="refund_order"
    )
    assert call.state == ToolCall.State.EXPIRED
    assert await sync_to_async(refund_ledger)() == []
