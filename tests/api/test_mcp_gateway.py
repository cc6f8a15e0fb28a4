"""Countersign as an MCP gateway, driven by the official ``mcp`` client against a live server.

A real Countersign (uvicorn, embedded mode) serves ``/mcp/ops/`` in front of the
real ``files`` MCP test server; the official SDK's client calls it with a
Countersign token as bearer. Read-only calls run at once; destructive ones wait
for a person; rejections, edits, retries, the hold bound and cancellation come
back as MCP results. Implements SEC-01, SEC-02, DC-04, FT-06, LP-05.
"""

from __future__ import annotations

import asyncio
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


async def test_read_only_upstream_tool_runs_at_once(user, gateway_live, gateway_upstream):
    """A read-only tool of a trusted upstream is auto-approved and answered in the same request."""
    token = await sync_to_async(token_for)(user)
    async with official_client(gateway_url(gateway_live), token) as client:
        listed = await client.list_tools()
        names = [t.name for t in listed.tools]
        result = await client.call_tool("files__read_file", {"path": "/etc/motd"})

    assert "files__read_file" in names and "files__delete_file" in names
    assert "countersign__status" in names
    assert result.is_error is False
    assert [c.text for c in result.content] == ["contents of /etc/motd"]
    call = await sync_to_async(ToolCall.objects.get)(name="files__read_file")
    assert call.state == ToolCall.State.SUCCEEDED
    assert executed(gateway_upstream.log)[-1]["arguments"] == {"path": "/etc/motd"}
