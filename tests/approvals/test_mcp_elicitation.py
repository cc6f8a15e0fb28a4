"""MCP input required: a server's elicitation becomes a request of kind ``input`` in the queue.

The real MCP test server (stdio child of whichever process executes the call: the test
process on the embedded pool, the Celery worker otherwise) runs ``ask_name``, which asks
for a name mid-call. The request appears in the same queue with the server's schema as
its form; the operator's answer continues the call (accept with content, reject →
decline, expiry → cancel), and the call still has one execution and one tool message.
Rules: DC-03, DC-04, SEC-04.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from approvals.models import ApprovalRequest, AuditEntry, ToolExecution
from orchestration.pipeline import approval_decide, approvals_expire
from threads.models import Message, ToolCall
from threads.services import message_post, thread_create


def _ask(user: Any, executor: Any) -> tuple[Any, ApprovalRequest]:
    thread = thread_create(owner=user, title="ask", agent="mcp_ask")
    message_post(thread=thread, content="who am I talking to?")
    request = executor.wait_for(
        lambda: ApprovalRequest.objects.filter(thread=thread, kind="input").first()
    )
    return thread, request


def _tool_contents(thread: Any) -> list[Any]:
    return [m.content for m in Message.objects.filter(thread=thread, role="tool")]


def _asked_names(log: Path) -> list[str]:
    if not log.exists():
        return []
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    return [line["arguments"]["name"] for line in lines if line["tool"] == "ask_name"]


def test_input_request_is_queued_with_the_schema_and_the_answer_continues_the_call(
    client: Any,
    user: Any,
    approver: Any,
    mcp_agents: Any,
    executor: Any,
    mcp_log: Path,
) -> None:
    thread, request = _ask(user, executor)

    # Given: the request shows the server's question and schema; the call is running.
    assert (request.kind, request.status, request.tool_call) == (
        "input",
        "pending",
        None,
    )
    assert request.tool_name == "docs__ask_name"
    assert request.message == "What is your name?"
    assert request.response_schema["required"] == ["name"]
    assert request.interrupt_id == "input-call_mcp_1-1"
    assert ToolCall.objects.get(thread=thread).state == "executing"
    client.force_login(approver)
    shown = client.get(f"/api/approvals/{request.pk}/").json()
    assert (shown["kind"], shown["message"]) == ("input", "What is your name?")

    # When: an answer off the schema is refused, then a good one is given.
    bad = client.post(
        f"/api/approvals/{request.pk}/approve/",
        {"response": {"nickname": "A"}},
        content_type="application/json",
    )
    good = client.post(
        f"/api/approvals/{request.pk}/approve/",
        {"response": {"name": "Ada"}},
        content_type="application/json",
    )
    executor.settle(thread)

    # Then: the server got exactly that answer once; one execution, one tool message.
    assert bad.status_code == 400
    assert bad.json()["type"] == "invalid_response"
    assert good.status_code == 200, good.json()
    assert _tool_contents(thread) == ["elicitation answered: accept, name Ada"]
    assert _asked_names(mcp_log) == ["Ada"]
    call = ToolCall.objects.get(thread=thread)
    assert call.state == "succeeded"
    assert ToolExecution.objects.get(tool_call=call).attempts == 1
    assert AuditEntry.objects.filter(
        action="approval.approved", target_id=str(request.pk)
    ).exists()


@pytest.mark.parametrize("executor", ["embedded"], indirect=True)
def test_rejected_input_request_is_declined_to_the_server(
    user: Any,
    approver: Any,
    mcp_agents: Any,
    executor: Any,
    mcp_log: Path,
) -> None:
    thread, request = _ask(user, executor)

    approval_decide(
        approval=request, decided_by=approver, decision="reject", reason="no names"
    )
    executor.settle(thread)

    assert _tool_contents(thread) == ["elicitation answered: decline"]
    assert _asked_names(mcp_log) == []


@pytest.mark.parametrize("executor", ["embedded"], indirect=True)
def test_expired_input_request_is_cancelled_to_the_server(
    user: Any,
    mcp_agents: Any,
    executor: Any,
    mcp_log: Path,
) -> None:
    thread, request = _ask(user, executor)
    ApprovalRequest.objects.filter(pk=request.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )

    assert approvals_expire() == 1
    executor.settle(thread)

    request.refresh_from_db()
    assert request.status == "expired"
    assert _tool_contents(thread) == ["elicitation answered: cancel"]
    assert _asked_names(mcp_log) == []
