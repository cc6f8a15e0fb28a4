"""Countersign as an MCP gateway, driven by the official ``mcp`` client against a live server.

A real Countersign (uvicorn, embedded mode) serves ``/mcp/ops/`` in front of the
real ``files`` MCP test server; the official SDK's client calls it with a
Countersign token as bearer. Read-only calls run at once; destructive ones wait
for a person; rejections, edits, retries, the hold bound and cancellation come
back as MCP results. Implements SEC-01, SEC-02, DC-04, FT-06, LP-05.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
import pytest
from asgiref.sync import sync_to_async
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.fixtures.mcp import GATEWAY
from tests.helpers.live import token_for
from tests.mcp_servers import executed
from threads.models import ToolCall

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("close_thread_connections", "gateway_settings"),
]


@asynccontextmanager
async def official_client(
    url: str, token: str, *, mode: str = "legacy"
) -> AsyncIterator[Any]:
    """Connect the official ``mcp`` client to ``url`` with ``token`` as bearer."""
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"},
        timeout=httpx2.Timeout(10, read=30.0),
    )
    try:
        async with Client(
            streamable_http_client(url, http_client=http), mode=mode, cache=None
        ) as client:
            yield client
    finally:
        await http.aclose()


def gateway_url(live: Any) -> str:
    return f"{live.url}/mcp/{GATEWAY}/"


async def test_read_only_upstream_tool_runs_at_once(
    user, gateway_live, gateway_upstream
):
    """A read-only tool of a trusted upstream is auto-approved and answered in the same request."""
    token = await sync_to_async(token_for)(user)
    async with official_client(gateway_url(gateway_live), token) as client:
        listed = await client.list_tools()
        names = [t.name for t in listed.tools]
        result = await client.call_tool("files__read_file", {"path": "/etc/motd"})

    assert "files__read_file" in names
    assert "files__delete_file" in names
    assert "countersign__status" in names
    assert result.is_error is False
    assert [c.text for c in result.content] == ["contents of /etc/motd"]
    call = await sync_to_async(ToolCall.objects.get)(name="files__read_file")
    assert call.state == ToolCall.State.SUCCEEDED
    assert executed(gateway_upstream.log)[-1]["arguments"] == {"path": "/etc/motd"}


async def approval_of(tool_name: str, *, timeout: float = 10.0) -> Any:
    """Wait for the pending approval request of the gateway call of ``tool_name``."""
    from approvals.models import ApprovalRequest

    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    find = sync_to_async(
        lambda: (
            ApprovalRequest.objects.filter(
                tool_name=tool_name, status=ApprovalRequest.Status.PENDING
            )
            .order_by("-pk")
            .first()
        )
    )
    while (approval := await find()) is None:
        assert loop.time() < deadline, f"no approval request for {tool_name!r}"
        await asyncio.sleep(0.02)
    return approval


async def decide(
    live: Any, approver: Any, pk: int, verb: str, body: dict[str, Any]
) -> None:
    """Approve or reject approval ``pk`` through the live server's REST API."""
    token = await sync_to_async(token_for)(approver)
    async with httpx.AsyncClient(base_url=live.url, timeout=10) as http:
        response = await http.post(
            f"/api/approvals/{pk}/{verb}/",
            json=body,
            headers={"Authorization": f"Bearer {token}"},
        )
    assert response.status_code == 200, response.text


def upstream_calls(upstream: Any, tool: str) -> list[dict[str, Any]]:
    return [line for line in executed(upstream.log) if line["tool"] == tool]


async def test_destructive_call_waits_is_approved_with_an_edit_and_runs_once(
    user, approver, gateway_live, gateway_upstream
):
    """The held request returns the edited call's result, saying what the approver changed."""
    token = await sync_to_async(token_for)(user)
    async with official_client(gateway_url(gateway_live), token) as client:
        call = asyncio.create_task(
            client.call_tool("files__delete_file", {"path": "/srv/a.txt"})
        )
        approval = await approval_of("files__delete_file")
        assert approval.proposed_arguments == {"path": "/srv/a.txt"}
        await decide(
            gateway_live,
            approver,
            approval.pk,
            "approve",
            {"editedArguments": {"path": "/srv/b.txt"}, "reason": "wrong file"},
        )
        result = await call

    assert result.is_error is False
    texts = [c.text for c in result.content]
    assert texts == [
        "An approver changed the arguments before it ran "
        "(path: '/srv/a.txt' -> '/srv/b.txt').",
        "deleted /srv/b.txt",
    ]
    assert [c["arguments"] for c in upstream_calls(gateway_upstream, "delete_file")][
        -1:
    ] == [{"path": "/srv/b.txt"}]
    call_row = await sync_to_async(ToolCall.objects.select_related("thread").get)(
        pk=approval.tool_call_id
    )
    assert call_row.thread.owner_id == user.pk
    assert call_row.thread.agent == GATEWAY


async def test_rejected_call_returns_is_error_with_the_reason(
    user, approver, gateway_live
):
    """A rejection reaches the client as the tool's result: isError, with the reason."""
    token = await sync_to_async(token_for)(user)
    async with official_client(gateway_url(gateway_live), token) as client:
        call = asyncio.create_task(
            client.call_tool("files__delete_file", {"path": "/srv/keep.txt"})
        )
        approval = await approval_of("files__delete_file")
        await decide(
            gateway_live, approver, approval.pk, "reject", {"reason": "keep it"}
        )
        result = await call

    assert result.is_error is True
    assert json.loads(result.content[0].text) == {
        "status": "rejected",
        "reason": "keep it",
        "executed": False,
    }


async def test_held_request_past_its_bound_returns_pending_then_a_later_check_the_outcome(
    user, approver, gateway_live, gateway_upstream
):
    """Past hold_seconds the model is told to check again; both ways of checking work."""
    token = await sync_to_async(token_for)(user)
    async with official_client(gateway_url(gateway_live), token) as client:
        pending = await client.call_tool(
            "files__delete_file", {"path": "/srv/late.txt"}
        )
        approval = await approval_of("files__delete_file")
        meta = pending.meta or {}
        call_id = meta["io.countersign/toolCallId"]
        assert meta["io.countersign/status"] == "pending"
        assert pending.is_error is False
        assert pending.content[0].text == (
            "PENDING: the call of files__delete_file waits for a person's approval in "
            f"Countersign (state awaiting_approval, toolCallId {call_id}); it has not run "
            "yet. To check again, call files__delete_file again with the same arguments, "
            f'or call countersign__status with {{"toolCallId": "{call_id}"}}.'
        )
        await decide(gateway_live, approver, approval.pk, "approve", {})
        # The same arguments again: the same call, not a second one.
        again = await client.call_tool("files__delete_file", {"path": "/srv/late.txt"})
        status = await client.call_tool("countersign__status", {"toolCallId": call_id})

    assert [c.text for c in again.content] == ["deleted /srv/late.txt"]
    assert [c.text for c in status.content] == ["deleted /srv/late.txt"]
    late = [
        c
        for c in upstream_calls(gateway_upstream, "delete_file")
        if c["arguments"] == {"path": "/srv/late.txt"}
    ]
    assert len(late) == 1
    count = await sync_to_async(
        ToolCall.objects.filter(
            name="files__delete_file", arguments={"path": "/srv/late.txt"}
        ).count
    )()
    assert count == 1


async def test_a_retry_with_the_same_idempotency_key_gets_the_kept_result(
    user, gateway_live, gateway_upstream
):
    """Two sessions, one key: the upstream runs once and both get the same result."""
    token = await sync_to_async(token_for)(user)
    meta = {"io.countersign/idempotencyKey": "retry-key-1"}
    before = len(upstream_calls(gateway_upstream, "read_file"))
    async with official_client(gateway_url(gateway_live), token) as client:
        first = await client.call_tool(
            "files__read_file", {"path": "/r.txt"}, meta=meta
        )
    async with official_client(gateway_url(gateway_live), token) as client:
        second = await client.call_tool(
            "files__read_file", {"path": "/r.txt"}, meta=meta
        )

    assert [c.text for c in first.content] == ["contents of /r.txt"]
    assert [c.text for c in second.content] == ["contents of /r.txt"]
    assert len(upstream_calls(gateway_upstream, "read_file")) == before + 1


async def wait_for(predicate: Any, *, what: str, timeout: float = 10.0) -> None:
    """Poll the database until ``predicate()`` holds; fail naming ``what``."""
    check = sync_to_async(predicate)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await check():
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


async def test_cancelling_a_waiting_request_cancels_the_call(user, gateway_live):
    """notifications/cancelled while the call waits: the call and its approval are cancelled."""
    from approvals.models import ApprovalRequest

    token = await sync_to_async(token_for)(user)
    async with official_client(gateway_url(gateway_live), token) as client:
        call = asyncio.create_task(
            client.call_tool("files__delete_file", {"path": "/srv/cancel.txt"})
        )
        approval = await approval_of("files__delete_file")
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        await wait_for(
            lambda: (
                ApprovalRequest.objects.get(pk=approval.pk).status
                == ApprovalRequest.Status.CANCELLED
            ),
            what="the approval cancelled",
        )
        # The session goes on.
        after = await client.call_tool("files__read_file", {"path": "/after"})

    row = await sync_to_async(ToolCall.objects.get)(pk=approval.tool_call_id)
    assert row.state == ToolCall.State.CANCELLED
    assert [c.text for c in after.content] == ["contents of /after"]


async def test_an_upstream_crash_returns_is_error_and_the_next_call_reconnects(
    user, gateway_live, gateway_upstream
):
    """The upstream dies: the call is answered isError with the reason; once back, calls work."""
    from tests.mcp_servers import start_http_server

    token = await sync_to_async(token_for)(user)
    async with official_client(gateway_url(gateway_live), token) as client:
        await client.call_tool("files__read_file", {"path": "/warm"})
        gateway_upstream.stop()
        failed = await client.call_tool("files__read_file", {"path": "/down"})
        restarted = await sync_to_async(start_http_server)(
            gateway_upstream.log, port=gateway_upstream.port
        )
        gateway_upstream.process = restarted.process
        back = await client.call_tool("files__read_file", {"path": "/back"})

    assert failed.is_error is True
    assert "files" in failed.content[0].text
    assert [c.text for c in back.content] == ["contents of /back"]


HEADERS = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}


def sse_json(response: httpx.Response) -> dict[str, Any]:
    """Return the JSON-RPC message of a response, SSE-framed or plain JSON."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [
            line[5:].strip()
            for line in response.text.splitlines()
            if line.startswith("data:") and line[5:].strip()
        ]
        return json.loads(data[-1])
    return response.json()


async def test_authentication_and_protected_resource_metadata(user, gateway_live):
    """No or a wrong token: 401 pointing at the RFC 9728 metadata, which names the resource."""
    url = gateway_url(gateway_live)
    async with httpx.AsyncClient(base_url=gateway_live.url, timeout=10) as http:
        anonymous = await http.post(url, json=INITIALIZE, headers=HEADERS)
        wrong = await http.post(
            url, json=INITIALIZE, headers={**HEADERS, "Authorization": "Bearer nope"}
        )
        metadata = await http.get(
            f"/.well-known/oauth-protected-resource/mcp/{GATEWAY}/"
        )
        unknown = await http.post(
            "/mcp/no-such-gateway/", json=INITIALIZE, headers=HEADERS
        )

    metadata_url = (
        f"{gateway_live.url}/.well-known/oauth-protected-resource/mcp/{GATEWAY}/"
    )
    assert anonymous.status_code == 401
    assert (
        f'resource_metadata="{metadata_url}"' in anonymous.headers["www-authenticate"]
    )
    assert wrong.status_code == 401
    assert metadata.status_code == 200
    assert metadata.json()["resource"] == f"{gateway_live.url}/mcp/{GATEWAY}/"
    assert metadata.json()["bearer_methods_supported"] == ["header"]
    assert metadata.json()["authorization_servers"] == [f"{gateway_live.url}/"]
    assert unknown.status_code == 404
    assert "no MCP gateway is named 'no-such-gateway'" in unknown.json()["error"]


async def test_bad_input_is_a_json_rpc_error_and_nothing_is_recorded(
    user, other_user, gateway_live
):
    """Unknown tool, schema failure, malformed JSON, oversize, another token's session,
    a Host or Origin outside ALLOWED_HOSTS (DNS rebinding)."""
    from mcp.shared.exceptions import MCPError

    token = await sync_to_async(token_for)(user)
    other = await sync_to_async(token_for)(other_user)
    count = sync_to_async(ToolCall.objects.count)
    before = await count()
    async with official_client(gateway_url(gateway_live), token) as client:
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("files__format_disk", {})
        with pytest.raises(MCPError) as invalid:
            await client.call_tool("files__read_file", {"path": 5})
        with pytest.raises(MCPError) as status:
            await client.call_tool("countersign__status", {"toolCallId": "mcp-nope"})
    assert unknown.value.code == -32602
    assert "tool 'files__format_disk' is not offered by gateway 'ops'" in (
        unknown.value.message
    )
    assert invalid.value.code == -32602
    assert "arguments of 'files__read_file' were refused" in invalid.value.message
    assert "no call 'mcp-nope' of yours" in status.value.message

    url = gateway_url(gateway_live)
    mine = {**HEADERS, "Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=gateway_live.url, timeout=10) as http:
        opened = await http.post(url, json=INITIALIZE, headers=mine)
        session = opened.headers["mcp-session-id"]
        malformed = await http.post(
            url,
            content=b'{"jsonrpc": "2.0", "id": 2, "meth',
            headers={**mine, "mcp-session-id": session},
        )
        oversized = await http.post(
            url,
            content=b'{"pad": "' + b"x" * (2 * 1024 * 1024) + b'"}',
            headers={**mine, "mcp-session-id": session},
        )
        stolen = await http.post(
            url,
            json={"jsonrpc": "2.0", "id": 3, "method": "tools/list"},
            headers={
                **HEADERS,
                "Authorization": f"Bearer {other}",
                "mcp-session-id": session,
            },
        )

    async with httpx.AsyncClient(base_url=gateway_live.url, timeout=10) as http:
        rebound = await http.post(
            url, json=INITIALIZE, headers={**mine, "Host": "evil.example"}
        )
        foreign = await http.post(
            url, json=INITIALIZE, headers={**mine, "Origin": "https://evil.example"}
        )

    assert rebound.status_code == 421
    assert foreign.status_code == 403
    assert sse_json(malformed)["error"]["code"] == -32700
    assert oversized.status_code == 413
    assert stolen.status_code == 404
    assert stolen.json()["error"]["message"] == "Session not found"
    assert await count() == before


async def test_fastmcp_client_runs_a_read_and_gets_a_rejection_as_is_error(
    user, approver, gateway_live
):
    """fastmcp's Client (PyPI): tools listed, a read answered, a rejection as isError."""
    from fastmcp import Client as FastMCPClient
    from fastmcp.client.transports import StreamableHttpTransport

    token = await sync_to_async(token_for)(user)
    transport = StreamableHttpTransport(
        gateway_url(gateway_live), headers={"Authorization": f"Bearer {token}"}
    )
    async with FastMCPClient(transport) as client:
        tools = {t.name for t in await client.list_tools()}
        read = await client.call_tool("files__read_file", {"path": "/fast"})
        call = asyncio.create_task(
            client.call_tool(
                "files__delete_file", {"path": "/srv/fast.txt"}, raise_on_error=False
            )
        )
        approval = await approval_of("files__delete_file")
        await decide(gateway_live, approver, approval.pk, "reject", {"reason": "no"})
        rejected = await call

    assert {"files__read_file", "files__delete_file", "countersign__status"} <= tools
    assert [c.text for c in read.content] == ["contents of /fast"]
    assert rejected.is_error is True
    assert json.loads(rejected.content[0].text)["reason"] == "no"


async def test_pydantic_ai_agent_with_a_fake_model_waits_for_the_approval(
    user, approver, gateway_live, gateway_upstream
):
    """Pydantic AI's MCPToolset: the fake model's destructive call waits, is approved, runs once."""
    from pydantic_ai import Agent
    from pydantic_ai.mcp import MCPToolset
    from pydantic_ai.messages import (
        ModelMessage,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [
            part
            for message in messages
            for part in getattr(message, "parts", [])
            if isinstance(part, ToolReturnPart)
        ]
        if not returns:
            assert "files__delete_file" in {t.name for t in info.function_tools}
            return ModelResponse(
                parts=[
                    ToolCallPart(
                        tool_name="files__delete_file", args={"path": "/srv/pai.txt"}
                    )
                ]
            )
        return ModelResponse(parts=[TextPart(f"tool said: {returns[0].content}")])

    token = await sync_to_async(token_for)(user)
    toolset = MCPToolset(
        gateway_url(gateway_live), headers={"Authorization": f"Bearer {token}"}
    )
    agent = Agent(FunctionModel(model), toolsets=[toolset])
    async with agent:
        run = asyncio.create_task(agent.run("delete /srv/pai.txt"))
        approval = await approval_of("files__delete_file")
        await decide(gateway_live, approver, approval.pk, "approve", {})
        result = await run

    assert result.output == "tool said: deleted /srv/pai.txt"
    runs = [
        c
        for c in upstream_calls(gateway_upstream, "delete_file")
        if c["arguments"] == {"path": "/srv/pai.txt"}
    ]
    assert len(runs) == 1


async def test_tools_list_changed_is_passed_through_and_progress_is_sent_while_waiting(
    user, approver, gateway_live
):
    """An upstream's new tool reaches the client as list_changed; a held call reports progress."""
    import mcp_types

    changed = asyncio.Event()
    progress: list[str | None] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, mcp_types.ToolListChangedNotification):
            changed.set()

    async def on_progress(value: float, total: float | None, text: str | None) -> None:
        progress.append(text)

    token = await sync_to_async(token_for)(user)
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"},
        timeout=httpx2.Timeout(10, read=30.0),
    )
    async with Client(
        streamable_http_client(gateway_url(gateway_live), http_client=http),
        mode="legacy",
        cache=None,
        message_handler=on_message,
    ) as client:
        before = {t.name for t in (await client.list_tools()).tools}
        await client.call_tool("files__toggle_extra", {})
        await asyncio.wait_for(changed.wait(), 10)
        after = {t.name for t in (await client.list_tools()).tools}
        changed.clear()
        await client.call_tool("files__toggle_extra", {})
        await asyncio.wait_for(changed.wait(), 10)

        call = asyncio.create_task(
            client.call_tool(
                "files__delete_file",
                {"path": "/srv/progress.txt"},
                progress_callback=on_progress,
            )
        )
        approval = await approval_of("files__delete_file")
        while not progress:
            await asyncio.sleep(0.05)
        await decide(gateway_live, approver, approval.pk, "approve", {})
        result = await call
    await http.aclose()

    assert after - before == {"files__extra"}
    assert progress[0] == "files__delete_file is awaiting_approval in Countersign"
    assert [c.text for c in result.content] == ["deleted /srv/progress.txt"]


async def test_with_a_celery_worker_an_approved_call_runs_once_and_a_retry_gets_it(
    user, approver, gateway_live_celery, gateway_upstream
):
    """Production's shape: the worker executes; the held request and a retry both get it."""
    live = gateway_live_celery
    token = await sync_to_async(token_for)(user)
    meta = {"io.countersign/idempotencyKey": "celery-key-1"}
    async with official_client(gateway_url(live), token) as client:
        read = await client.call_tool("files__read_file", {"path": "/celery"})
        call = asyncio.create_task(
            client.call_tool("files__delete_file", {"path": "/srv/c.txt"}, meta=meta)
        )
        approval = await approval_of("files__delete_file")
        await decide(live, approver, approval.pk, "approve", {})
        first = await call
        again = await client.call_tool(
            "files__delete_file", {"path": "/srv/c.txt"}, meta=meta
        )

    assert [c.text for c in read.content] == ["contents of /celery"]
    assert [c.text for c in first.content] == ["deleted /srv/c.txt"]
    assert [c.text for c in again.content] == ["deleted /srv/c.txt"]
    runs = [
        c
        for c in upstream_calls(gateway_upstream, "delete_file")
        if c["arguments"] == {"path": "/srv/c.txt"}
    ]
    assert len(runs) == 1


async def test_a_2026_07_28_client_without_sessions_gets_the_same_gateway(
    user, approver, gateway_live
):
    """The current revision (server/discover, no Mcp-Session-Id) lists, calls and waits too."""
    token = await sync_to_async(token_for)(user)
    async with official_client(gateway_url(gateway_live), token, mode="auto") as client:
        names = {t.name for t in (await client.list_tools()).tools}
        read = await client.call_tool("files__read_file", {"path": "/modern"})
        call = asyncio.create_task(
            client.call_tool("files__delete_file", {"path": "/srv/modern.txt"})
        )
        approval = await approval_of("files__delete_file")
        await decide(gateway_live, approver, approval.pk, "approve", {})
        deleted = await call
        version = client.session.protocol_version

    assert version == "2026-07-28"
    assert "files__read_file" in names
    assert [c.text for c in read.content] == ["contents of /modern"]
    assert [c.text for c in deleted.content] == ["deleted /srv/modern.txt"]
    row = await sync_to_async(ToolCall.objects.select_related("thread").get)(
        pk=approval.tool_call_id
    )
    assert row.metadata["mcp"]["session"] is False
    assert row.metadata["mcp"]["protocolVersion"] == "2026-07-28"


async def test_cancelling_a_running_call_lets_it_finish_and_audits_it(
    user, gateway_live
):
    """A call already running upstream is not interrupted: it finishes, the cancel is audited."""
    from approvals.models import AuditEntry

    token = await sync_to_async(token_for)(user)
    async with official_client(gateway_url(gateway_live), token) as client:
        call = asyncio.create_task(client.call_tool("files__slow", {"seconds": 1.5}))
        await wait_for(
            lambda: ToolCall.objects.filter(
                name="files__slow", state=ToolCall.State.EXECUTING
            ).exists(),
            what="the slow call executing",
        )
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        await wait_for(
            lambda: ToolCall.objects.filter(
                name="files__slow", state=ToolCall.State.SUCCEEDED
            ).exists(),
            what="the slow call finished",
        )

    row = await sync_to_async(ToolCall.objects.get)(name="files__slow")
    audited = await sync_to_async(
        lambda: list(
            AuditEntry.objects.filter(
                action="tool_call.cancelled_after_start", target_id=str(row.pk)
            ).values_list("after", flat=True)
        )
    )()
    assert audited == [
        {"reason": "the MCP client cancelled the request", "state": "executing"}
    ]
