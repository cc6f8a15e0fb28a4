"""MCP tools through the whole product: queue, approval, exactly-once execution, continuation.

A real MCP test server runs in its own process (streamable HTTP) or as the stdio
child of whichever process connects (the test process, or the Celery worker).
Each flow runs on the embedded pool and on a real Celery worker (``executor``).
Rules: RT-03, RT-10, LP-01, LP-05, LP-07, FT-06, DC-04, SEC-04.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from mcp import Client

from agentcore.arguments import canonical_sha256
from agentcore.mcp import IDEMPOTENCY_META_KEY
from approvals.models import ApprovalRequest, ToolExecution
from approvals.services import approval_snapshot
from orchestration.pipeline import approval_decide
from tests.mcp_servers import HttpServer, executed
from threads.models import Message, Run, ToolCall
from threads.services import message_post, thread_create


def _tool_messages(thread: Any) -> list[Message]:
    return list(
        Message.objects.filter(thread=thread, role="tool").order_by("position", "id")
    )


def _final_text(thread: Any) -> str:
    message = (
        Message.objects.filter(thread=thread, role="assistant")
        .exclude(content="")
        .order_by("position", "id")
        .last()
    )
    return message.content if message is not None else ""


def _start(user: Any, agent: str, executor: Any) -> ToolCall:
    thread = thread_create(owner=user, title=agent, agent=agent)
    message_post(thread=thread, content="please do it")
    executor.settle(thread)
    return ToolCall.objects.get(thread=thread)


def test_destructive_mcp_tool_is_approved_executed_once_and_continues(
    client: Any,
    user: Any,
    approver: Any,
    mcp_agents: Any,
    executor: Any,
    mcp_log: Path,
) -> None:
    """Queue → approve → one execution on the server → one tool message → continuation."""
    call = _start(user, "mcp_files", executor)
    thread = call.thread

    # Given: the destructive MCP tool waits in the approval queue, not executed.
    assert (call.name, call.state) == ("files__delete_file", "awaiting_approval")
    approval = ApprovalRequest.objects.get(tool_call=call)
    assert (approval.tool_name, approval.is_destructive) == ("files__delete_file", True)
    assert approval.proposed_arguments == {"path": "/srv/report.txt"}
    assert approval_snapshot(approval)["label"] == (
        "MCP server 'files', tool 'delete_file'; the server claims: "
        "destructiveHint=true (the server's own claims, unverified; untrusted "
        "server: hints not relied on)"
    )
    assert executed(mcp_log) == []
    # The queue page and the REST API show the same label to the operator.
    client.force_login(approver)
    page = client.get("/approvals/")
    assert page.status_code == 200
    assert "tool 'delete_file'; the server claims: destructiveHint=true" in (
        page.content.decode()
    )
    detail = client.get(f"/api/approvals/{approval.pk}/")
    assert detail.status_code == 200
    assert detail.json()["label"] == approval_snapshot(approval)["label"]

    # When: an operator approves it.
    approval_decide(approval=approval, decided_by=approver, decision="approve")
    executor.settle(thread)

    # Then: the server executed it exactly once, with the idempotency key in _meta.
    [entry] = executed(mcp_log)
    assert (entry["tool"], entry["arguments"]) == (
        "delete_file",
        {"path": "/srv/report.txt"},
    )
    assert entry["meta"][IDEMPOTENCY_META_KEY] == f"{thread.thread_id}:call_mcp_1"
    # The header configured through headers_env reached the server.
    assert entry["authorization"] == "Bearer test-token-1"
    execution = ToolExecution.objects.get(tool_call=call)
    assert (execution.state, execution.attempts, execution.authorized_by) == (
        "succeeded",
        1,
        "approval",
    )
    assert execution.details == {
        "mcp_server": "files",
        "mcp_tool": "delete_file",
        "structured_content": {"result": "deleted /srv/report.txt"},
    }
    answers = _tool_messages(thread)
    assert [(m.tool_call_id, m.content, m.error) for m in answers] == [
        ("call_mcp_1", "deleted /srv/report.txt", None)
    ]
    runs = list(Run.objects.filter(thread=thread).order_by("created_at", "id"))
    assert [r.status for r in runs] == ["finished", "finished"]
    assert runs[1].continues_id == runs[0].pk
    assert _final_text(thread) == "Result: deleted /srv/report.txt"
    call.refresh_from_db()
    assert call.state == "succeeded"


def test_trusted_read_only_mcp_tool_runs_without_approval(
    user: Any, mcp_agents: Any, executor: Any, mcp_log: Path
) -> None:
    """A trusted server's readOnlyHint tool is auto-approved by policy and answered once."""
    call = _start(user, "mcp_docs", executor)
    thread = call.thread

    log = executor.worker.log_path.read_text()[-3000:] if executor.worker else ""
    assert (call.name, call.state) == ("docs__read_file", "succeeded"), (
        [m.content for m in _tool_messages(thread)],
        log,
    )
    assert not ApprovalRequest.objects.filter(tool_call=call).exists()
    execution = ToolExecution.objects.get(tool_call=call)
    assert (execution.state, execution.authorized_by, execution.attempts) == (
        "succeeded",
        "policy",
        1,
    )
    assert [e["tool"] for e in executed(mcp_log)] == ["read_file"]
    answers = _tool_messages(thread)
    assert [(m.content, m.error) for m in answers] == [
        ("contents of /srv/readme.md", None)
    ]
    assert _final_text(thread) == "Result: contents of /srv/readme.md"


def test_untrusted_read_only_claim_still_needs_approval(
    user: Any, mcp_agents: Any, executor: Any, mcp_log: Path
) -> None:
    """An untrusted server's readOnlyHint does not widen anything (RT-10)."""
    call = _start(user, "mcp_files_read", executor)

    assert (call.name, call.state) == ("files__read_file", "awaiting_approval")
    assert executed(mcp_log) == []


def test_server_gone_after_approval_answers_with_an_error(
    user: Any,
    approver: Any,
    mcp_agents: Any,
    executor: Any,
    files_server: HttpServer,
    mcp_log: Path,
) -> None:
    """The server disappearing before execution: one error tool message, the thread goes on."""
    call = _start(user, "mcp_files", executor)
    approval = ApprovalRequest.objects.get(tool_call=call)
    files_server.stop()

    approval_decide(approval=approval, decided_by=approver, decision="approve")
    executor.settle(call.thread, timeout=60)

    answers = _tool_messages(call.thread)
    assert len(answers) == 1
    assert answers[0].error == "upstream_unavailable"
    assert json.loads(answers[0].content) == {
        "error": "upstream_unavailable",
        "detail": (
            "MCP server 'files' is unreachable (a transient upstream failure); the "
            "call was not executed. Retry later, or tell the user the service is "
            "unavailable."
        ),
    }
    assert ToolExecution.objects.get(tool_call=call).state == "failed"
    assert executed(mcp_log) == []
    assert _final_text(call.thread).startswith("Result: ")


def test_schema_change_after_approval_asks_again_then_runs_once(
    user: Any,
    approver: Any,
    mcp_agents: Any,
    executor: Any,
    files_server: HttpServer,
    mcp_log: Path,
) -> None:
    """Approved against one schema, the server changed it: a new request, then one run (17.5)."""
    call = _start(user, "mcp_files_read", executor)
    first = ApprovalRequest.objects.get(tool_call=call)
    advertised = next(
        t["parameters"] for t in call.run.input["tools"] if t["name"] == call.name
    )

    async def widen() -> None:
        async with Client(files_server.url) as client:
            await client.call_tool("widen_schema", {})

    asyncio.run(widen())
    approval_decide(approval=first, decided_by=approver, decision="approve")
    executor.settle(call.thread, timeout=60)

    # Not run, not refused: back in the queue, the earlier decision on record.
    assert _tool_messages(call.thread) == []
    assert executed(mcp_log) == []
    first.refresh_from_db()
    again = ApprovalRequest.objects.get(tool_call=call)
    assert (first.status, first.tool_call_id, first.superseded_by_id) == (
        "approved",
        None,
        again.pk,
    )
    assert (again.status, again.reapproval, again.reapproval_count) == (
        "pending",
        "schema_changed",
        1,
    )
    assert again.proposed_arguments == {"path": "/srv/notes.md"}
    assert again.previous_schema_hash == canonical_sha256(advertised)
    assert again.schema_hash != again.previous_schema_hash
    assert again.schema_valid is True
    snapshot = approval_snapshot(again)
    assert (snapshot["supersedes"], snapshot["previousArguments"]) == (
        first.pk,
        {"path": "/srv/notes.md"},
    )
    call.refresh_from_db()
    assert call.state == "awaiting_approval"
    assert ToolExecution.objects.get(tool_call=call).state == "queued"

    approval_decide(approval=again, decided_by=approver, decision="approve")
    executor.settle(call.thread, timeout=60)

    answers = _tool_messages(call.thread)
    assert [(a.error, a.content) for a in answers] == [
        (None, "contents of /srv/notes.md")
    ]
    ran = executed(mcp_log)
    assert [(e["tool"], e["arguments"]) for e in ran] == [
        ("read_file", {"path": "/srv/notes.md", "encoding": "utf-8"})
    ]
    assert ran[0]["meta"][IDEMPOTENCY_META_KEY] == (
        f"{call.thread.thread_id}:{call.tool_call_id}"
    )
    execution = ToolExecution.objects.get(tool_call=call)
    assert (execution.state, execution.attempts) == ("succeeded", 1)
    assert _final_text(call.thread) == "Result: contents of /srv/notes.md"
