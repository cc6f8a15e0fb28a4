"""Threads that record an agent running elsewhere take no message and no run.

An MCP gateway's session thread records its client's calls; an external agent's
thread the calls it declares through the approval API. A REST message, an AG-UI
POST naming such a thread, or an AG-UI run of such an agent would start a run no
agent can execute: each is refused with 409 ``recorded_thread`` saying where to
go instead, and nothing is recorded. Implements FT-06, DC-01.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from django.test import Client
from rest_framework.authtoken.models import Token

from orchestration.gateway import (
    gateway_call_execute,
    gateway_call_finish,
    gateway_call_start,
)
from tests.helpers.external import declare
from threads.models import Event, Message, Run, Thread

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("external_agents")]

GATEWAY = {"provider": "mcp_gateway", "toolsets": ["demo.tools.DEMO_TOOLS"]}


@pytest.fixture
def gateway_thread(settings: Any, user: Any) -> Thread:
    """Return the session thread of a gateway that answered one auto-approved call."""
    settings.COUNTERSIGN_AGENTS = {**settings.COUNTERSIGN_AGENTS, "gw": GATEWAY}
    started = gateway_call_start(
        gateway="gw",
        user=user,
        session="s-1",
        tool_call_id=None,
        name="lookup_order",
        arguments={"order_id": "A-1001"},
        metadata={},
    )
    result = asyncio.run(gateway_call_execute(started=started))
    gateway_call_finish(started=started, result=result)
    return Thread.objects.get(agent="gw")


@pytest.fixture
def external_thread(api: Any) -> Thread:
    """Return the thread of an external agent's declared call."""
    response = declare(api, conversationId="conv-1")
    assert response.status_code == 201, response.json()
    return Thread.objects.get(client_thread_id="conv-1")


def recorded() -> tuple[int, int, int, int]:
    return (
        Thread.objects.count(),
        Run.objects.count(),
        Message.objects.count(),
        Event.objects.count(),
    )


def agui(user: Any, agent: str, thread_id: str) -> Any:
    body = {
        "threadId": thread_id,
        "runId": "r-new",
        "state": {},
        "messages": [{"id": "u-new", "role": "user", "content": "hello"}],
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }
    client = Client()
    return client.post(
        f"/agui/{agent}/",
        data=json.dumps(body),
        content_type="application/json",
        headers={"Authorization": f"Token {Token.objects.get(user=user).key}"},
    )


def test_a_rest_message_to_a_gateway_thread_is_refused(api, gateway_thread):
    """409 recorded_thread, pointing at the MCP session; no message, no run."""
    before = recorded()

    response = api.post(
        f"/api/threads/{gateway_thread.thread_id}/messages/",
        {"content": "hello"},
        format="json",
    )

    assert response.status_code == 409
    body = response.json()
    assert body["type"] == "recorded_thread"
    assert body["detail"] == (
        f"thread {gateway_thread.thread_id!r} records the calls MCP clients send to "
        "gateway 'gw'; no agent runs there, so it takes no message and no run: call "
        "the tools through an MCP session at /mcp/gw/ instead"
    )
    assert recorded() == before
    assert set(Run.objects.values_list("status", flat=True)) == {"finished"}


def test_a_rest_message_to_an_external_thread_is_refused(api, external_thread):
    """The external agent runs elsewhere: the message goes to it, not here."""
    before = recorded()

    response = api.post(
        "/api/threads/conv-1/messages/", {"content": "hello"}, format="json"
    )

    assert response.status_code == 409
    body = response.json()
    assert body["type"] == "recorded_thread"
    assert body["detail"] == (
        f"thread {external_thread.thread_id!r} records the calls external agent 'billing' declares through "
        "the approval API; that agent runs elsewhere, so it takes no message and no "
        "run here: send the message to the agent itself, which declares its calls "
        "with POST /api/external/tool-calls/"
    )
    assert recorded() == before


@pytest.mark.parametrize("thread_fixture", ["gateway_thread", "external_thread"])
def test_an_agui_post_naming_a_recorded_thread_is_refused(
    api, user, request, thread_fixture
):
    """Through another agent's AG-UI endpoint too: the thread's own agent decides."""
    thread = request.getfixturevalue(thread_fixture)
    before = recorded()

    response = agui(user, "demo", thread.thread_id)

    assert response.status_code == 409
    assert response.json()["type"] == "recorded_thread"
    assert f"thread {thread.thread_id!r} records the calls" in response.json()["detail"]
    assert recorded() == before


@pytest.mark.parametrize(
    ("agent", "words"),
    [
        ("gw", "agent 'gw' records the calls MCP clients send to gateway 'gw'"),
        ("billing", "agent 'billing' records the calls external agent 'billing'"),
    ],
)
def test_an_agui_run_of_a_gateway_or_external_agent_is_refused(
    api, user, settings, agent, words
):
    """A new thread of such an agent is not created: no run could execute it."""
    settings.COUNTERSIGN_AGENTS = {**settings.COUNTERSIGN_AGENTS, "gw": GATEWAY}
    before = recorded()

    response = agui(user, agent, "t-fresh")

    assert response.status_code == 409
    assert response.json()["type"] == "recorded_thread"
    assert words in response.json()["detail"]
    assert recorded() == before
