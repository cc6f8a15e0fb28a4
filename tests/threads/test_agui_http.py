"""AG-UI over HTTP, input checks and authentication, with Django's async test client.

Everything here is answered before a run starts, so no worker is involved: a
rejected input is an HTTP error with a JSON body naming the problem and no event
stream (AGUI-1.0.md §2.5). Implements FT-01, SEC-02.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient
from rest_framework.authtoken.models import Token

from threads.models import Message, Run, Thread

pytestmark = pytest.mark.django_db(transaction=True)


def body(**overrides: Any) -> dict[str, Any]:
    data = {
        "threadId": "t-http",
        "runId": "r-http",
        "protocolVersion": "1.0",
        "state": {},
        "messages": [
            {"id": "u1", "role": "user", "content": "What is the weather in Oslo?"}
        ],
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }
    data.update(overrides)
    return data


async def post(
    payload: Any, *, token: str | None = None, raw: bytes | None = None, **extra: Any
) -> Any:
    client = AsyncClient(**extra)
    headers = {"Authorization": f"Token {token}"} if token else {}
    data = raw if raw is not None else json.dumps(payload)
    return await client.post(
        "/agui/demo/", data=data, content_type="application/json", headers=headers
    )


async def test_agui_post_without_credentials_is_401_with_no_stream():
    response = await post(body())

    assert response.status_code == 401
    assert response["Content-Type"] == "application/json"
    assert response.json()["type"] == "not_authenticated"
    assert "Token" in response.json()["detail"]
    assert not await Thread.objects.filter(client_thread_id="t-http").aexists()


async def test_agui_post_with_an_unknown_token_is_401():
    response = await post(body(), token="0" * 40)

    assert response.status_code == 401
    assert response.json() == {"type": "not_authenticated", "detail": "invalid token"}


async def test_agui_post_missing_messages_is_400_naming_the_field(token):
    payload = body()
    del payload["messages"]

    response = await post(payload, token=token)

    assert response.status_code == 400
    assert response.json()["type"] == "invalid_input"
    assert response.json()["fields"] == {"messages": "Field required"}
    assert "messages: Field required" in response.json()["detail"]


async def test_agui_post_unknown_message_role_is_400_naming_the_message(token):
    payload = body(messages=[{"id": "u1", "role": "robot", "content": "beep"}])

    response = await post(payload, token=token)

    assert response.status_code == 400
    fields = response.json()["fields"]
    assert list(fields) == ["messages.0"]
    assert "'robot'" in fields["messages.0"]


async def test_agui_post_non_json_body_is_400(token):
    response = await post(None, raw=b"{not json", token=token)

    assert response.status_code == 400
    assert response.json()["type"] == "invalid_json"
    assert response.json()["detail"].startswith("the body is not JSON")


async def test_agui_post_json_that_is_not_an_object_is_400(token):
    response = await post(None, raw=b"[1, 2]", token=token)

    assert (response.status_code, response.json()["type"]) == (400, "invalid_input")


async def test_agui_post_for_an_unknown_agent_is_404(token):
    client = AsyncClient()
    response = await client.post(
        "/agui/nobody/",
        data=json.dumps(body()),
        content_type="application/json",
        headers={"Authorization": f"Token {token}"},
    )

    assert response.status_code == 404
    assert response.json()["type"] == "unknown_agent"
    assert "'nobody'" in response.json()["detail"]


async def test_agui_post_reusing_a_run_id_is_409(user, token):
    """runId MUST NOT be reused on a thread (AGUI-1.0.md §2.4)."""
    thread = await Thread.objects.acreate(thread_id="t-http", owner=user)
    await Run.objects.acreate(
        thread=thread, run_id="r-http", status=Run.Status.FINISHED
    )

    response = await post(body(), token=token)

    assert response.status_code == 409
    assert response.json() == {
        "type": "run_conflict",
        "detail": "runId 'r-http' was already used on this thread; send a new runId for "
        "every run",
    }
    assert not await Message.objects.filter(thread=thread).aexists()


async def test_agui_post_during_an_active_run_is_409_saying_what_to_do(user, token):
    """A second message while a run is active is refused, and nothing of it is stored."""
    thread = await Thread.objects.acreate(thread_id="t-http", owner=user)
    await Run.objects.acreate(thread=thread, run_id="r-busy", status=Run.Status.RUNNING)

    response = await post(body(runId="r-2"), token=token)

    assert response.status_code == 409
    assert response.json()["type"] == "run_conflict"
    assert response.json()["detail"].startswith(
        "run 'r-busy' is still running on this thread"
    )
    assert "wait for it to finish or cancel it" in response.json()["detail"]
    assert not await Message.objects.filter(thread=thread).aexists()
    assert await Run.objects.filter(thread=thread).acount() == 1


async def test_agui_post_with_another_users_thread_id_starts_a_thread_of_ones_own(
    user, other_user
):
    """Client thread ids are per owner: mallory's "t-http" is not olivia's, nor a 404."""
    theirs = await Thread.objects.acreate(thread_id="t-http", owner=user)
    mallory = await sync_to_async(lambda: Token.objects.create(user=other_user).key)()

    response = await post(body(), token=mallory)

    assert response.status_code == 200
    mine = await Thread.objects.aget(owner=other_user, client_thread_id="t-http")
    assert mine.pk != theirs.pk
    assert mine.thread_id not in ("t-http", "")
    assert not await Message.objects.filter(thread=theirs).aexists()
    assert not await Run.objects.filter(thread=theirs).aexists()


async def test_agui_post_with_a_session_needs_the_csrf_token(user):
    """Session auth is CSRF-checked; token auth (above) needs no CSRF token."""
    client = AsyncClient(enforce_csrf_checks=True)
    await client.aforce_login(user)

    response = await client.post(
        "/agui/demo/", data=json.dumps(body()), content_type="application/json"
    )

    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]


async def test_agui_events_without_credentials_is_401_and_bad_after_is_400(user, token):
    await Thread.objects.acreate(thread_id="t-http", owner=user)
    client = AsyncClient()

    anonymous = await client.get("/agui/threads/t-http/events")
    bad = await client.get(
        "/agui/threads/t-http/events?after=x",
        headers={"Authorization": f"Token {token}"},
    )
    missing = await client.get(
        "/agui/threads/nope/events", headers={"Authorization": f"Token {token}"}
    )

    assert anonymous.status_code == 401
    assert (bad.status_code, bad.json()["type"]) == (400, "invalid_after")
    assert (missing.status_code, missing.json()["type"]) == (404, "not_found")


async def test_agui_events_of_another_users_thread_answer_as_an_unknown_id(
    user, other_user
):
    """By its client id or its global id, another user's thread is "not found", like "nope"."""
    theirs = await Thread.objects.acreate(client_thread_id="t-theirs", owner=user)
    mallory = await sync_to_async(lambda: Token.objects.create(user=other_user).key)()
    headers = {"Authorization": f"Token {mallory}"}

    answers = [
        await AsyncClient().get(f"/agui/threads/{thread_id}/events", headers=headers)
        for thread_id in (theirs.client_thread_id, theirs.thread_id, "nope")
    ]

    assert [(a.status_code, a["Content-Type"]) for a in answers] == [
        (404, "application/json")
    ] * 3
    assert [a.json() for a in answers] == [
        {"type": "not_found", "detail": f"thread {thread_id!r} was not found"}
        for thread_id in (theirs.client_thread_id, theirs.thread_id, "nope")
    ]


async def test_ir05_capabilities_declare_interrupts_and_approve_with_edits(token):
    """IR-05: GET /agui/<agent>/capabilities declares interrupts and approve-with-edits."""
    response = await AsyncClient().get(
        "/agui/demo/capabilities", headers={"Authorization": f"Token {token}"}
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["humanInTheLoop"] == {
        "supported": True,
        "approvals": True,
        "interrupts": True,
        "approveWithEdits": True,
    }
    assert body["tools"]["clientProvided"] is True
    assert {"lookup_order", "refund_order", "get_weather"} <= {
        t["name"] for t in body["tools"]["items"]
    }
    assert (await AsyncClient().get("/agui/demo/capabilities")).status_code == 401
    unknown = await AsyncClient().get(
        "/agui/nope/capabilities", headers={"Authorization": f"Token {token}"}
    )
    assert unknown.status_code == 404
