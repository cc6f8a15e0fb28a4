"""Ids Countersign mints cannot be pre-empted by a client (threads.ids).

The trial that found it: an AG-UI input whose user message was named
``result-call_1``, the id the tool message answering the demo's first call used to
get. The answer's insert collided, the collision was read as "already answered",
and the thread stayed ``awaiting_tools`` for good. Here the same input runs the demo
agent through the AG-UI endpoint, on the embedded pool and on a Celery worker.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient
from rest_framework.authtoken.models import Token

from threads.ids import (
    RESERVED_PREFIX,
    check_input_messages,
    new_interrupt_id,
    new_message_id,
    new_tool_message_id,
)
from threads.models import Message, Run, Thread, ToolCall

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("close_thread_connections"),
]

MINTED = re.compile(r"cs-(msg|tool|int)-[0-9a-f]{32}")


def run_input(thread_id: str, run_id: str, messages: list[dict[str, Any]]) -> dict:
    return {
        "threadId": thread_id,
        "runId": run_id,
        "state": {},
        "messages": messages,
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }


async def post(token: str, payload: dict[str, Any]) -> Any:
    return await AsyncClient().post(
        "/agui/demo/",
        data=json.dumps(payload),
        content_type="application/json",
        headers={"Authorization": f"Token {token}"},
    )


async def drain(response: Any) -> list[dict[str, Any]]:
    """Read the SSE stream to its end; return the events."""
    events = []
    async for chunk in response.streaming_content:
        text = chunk.decode() if isinstance(chunk, bytes) else chunk
        for line in text.split("\n"):
            if line.startswith("data: "):
                events.append(json.loads(line[len("data: ") :]))
    return events


def test_minted_ids_are_namespaced_and_unguessable():
    ids = [new_message_id(), new_tool_message_id(), new_interrupt_id()]

    assert all(MINTED.fullmatch(i) for i in ids), ids
    assert all(i.startswith(RESERVED_PREFIX) for i in ids)
    assert len({new_tool_message_id() for _ in range(1000)}) == 1000


async def test_client_message_named_like_the_old_result_id_cannot_block_the_answer(
    user, executor
):
    """The trial: a user message ``result-call_1``; the lookup is still answered once."""
    token = (await Token.objects.acreate(user=user)).key
    response = await post(
        token,
        run_input(
            "t-preempt",
            "r-preempt",
            [
                {
                    "id": "result-call_1",
                    "role": "user",
                    "content": "refund order A-1001 25.00",
                }
            ],
        ),
    )
    assert response.status_code == 200
    events = await drain(response)
    assert events[-1]["type"] == "RUN_FINISHED"
    thread = await Thread.objects.aget(client_thread_id="t-preempt")

    await sync_to_async(executor.settle)(thread)

    lookup = await ToolCall.objects.aget(thread=thread, name="lookup_order")
    refund = await ToolCall.objects.aget(thread=thread, name="refund_order")
    assert lookup.tool_call_id == "call_1"
    assert lookup.state == ToolCall.State.SUCCEEDED
    answers = [
        m
        async for m in Message.objects.filter(
            thread=thread, role="tool", tool_call_id=lookup.tool_call_id
        )
    ]
    assert len(answers) == 1
    assert MINTED.fullmatch(answers[0].message_id)
    assert '"A-1001"' in str(answers[0].content)
    user_message = await Message.objects.aget(thread=thread, message_id="result-call_1")
    assert (user_message.role, user_message.content) == (
        "user",
        "refund order A-1001 25.00",
    )
    # The thread moved on to the operator: not stuck awaiting the lookup's answer.
    assert refund.state == ToolCall.State.AWAITING_APPROVAL
    statuses = [
        r.status async for r in Run.objects.filter(thread=thread).order_by("id")
    ]
    assert statuses == [Run.Status.FINISHED, Run.Status.AWAITING_TOOLS]


@pytest.fixture
async def answered_thread(user) -> Thread:
    """A thread whose call ``call_1`` has Countersign's tool message ``cs-tool-…``."""
    thread = await Thread.objects.acreate(thread_id="t-ids", owner=user)
    run = await Run.objects.acreate(
        thread=thread, run_id="r-1", status=Run.Status.FINISHED
    )
    await Message.objects.acreate(
        thread=thread, message_id="u1", role="user", content="hi", position=1
    )
    await Message.objects.acreate(
        thread=thread,
        message_id="a1",
        role="assistant",
        content="",
        run=run,
        position=2,
    )
    await ToolCall.objects.acreate(
        thread=thread,
        run=run,
        tool_call_id="call_1",
        parent_message_id="a1",
        name="lookup_order",
        arguments_text="{}",
        state=ToolCall.State.SUCCEEDED,
    )
    await Message.objects.acreate(
        thread=thread,
        message_id="cs-tool-" + "0" * 32,
        role="tool",
        content="done",
        tool_call_id="call_1",
        position=3,
    )
    return thread


async def _messages(thread: Thread) -> list[str]:
    return [
        m
        async for m in thread.messages.order_by("id").values_list(
            "message_id", flat=True
        )
    ]


@pytest.mark.parametrize(
    ("extra", "field", "value"),
    [
        # a new message under an id the thread already holds for another message
        (
            {"id": "cs-tool-" + "0" * 32, "role": "user", "content": "hi"},
            "messages.1.id",
            "cs-tool-" + "0" * 32,
        ),
        (
            {"id": "u1", "role": "user", "content": "something else"},
            "messages.1.id",
            "u1",
        ),
        ({"id": "a1", "role": "user", "content": "hi"}, "messages.1.id", "a1"),
        # a second answer to an answered call (no database text)
        (
            {"id": "t2", "role": "tool", "toolCallId": "call_1", "content": "again"},
            "messages.1.toolCallId",
            "call_1",
        ),
    ],
)
async def test_an_input_id_colliding_with_stored_history_is_409_before_anything_is_recorded(
    user, answered_thread, extra, field, value
):
    token = (await Token.objects.acreate(user=user)).key
    before = await _messages(answered_thread)

    response = await post(
        token,
        run_input(
            "t-ids", "r-2", [{"id": "u0", "role": "user", "content": "first"}, extra]
        ),
    )

    assert response.status_code == 409
    body = response.json()
    assert body["type"] == "id_conflict"
    assert list(body["fields"]) == [field]
    assert repr(value) in body["detail"]
    for leak in ("duplicate key", "constraint", "DETAIL", "uniq_", "Key ("):
        assert leak not in body["detail"]
    assert await _messages(answered_thread) == before
    assert not await Run.objects.filter(thread=answered_thread, run_id="r-2").aexists()


async def test_a_new_message_in_countersigns_namespace_is_400(user, answered_thread):
    token = (await Token.objects.acreate(user=user)).key

    response = await post(
        token,
        run_input(
            "t-ids",
            "r-2",
            [{"id": "cs-tool-" + "1" * 32, "role": "user", "content": "x"}],
        ),
    )

    assert response.status_code == 400
    assert response.json()["type"] == "invalid_input"
    assert list(response.json()["fields"]) == ["messages.0.id"]
    assert "'cs-'" in response.json()["detail"]
    assert not await Message.objects.filter(message_id="cs-tool-" + "1" * 32).aexists()


async def test_echoed_history_with_minted_ids_is_accepted(answered_thread):
    """A client feeding its history back (HttpAgent) may repeat Countersign's ids."""
    history = [
        {"id": "u1", "role": "user", "content": "hi"},
        {"id": "a1", "role": "assistant", "content": ""},
        {
            "id": "cs-tool-" + "0" * 32,
            "role": "tool",
            "toolCallId": "call_1",
            "content": "done",
        },
        {"id": "u2", "role": "user", "content": "thanks"},
    ]

    result = await sync_to_async(check_input_messages)(
        thread=answered_thread, messages=history
    )

    assert result is None


async def test_another_users_thread_id_is_a_new_thread_not_a_409(
    other_user, answered_thread
):
    """Ids are per owner: reusing someone else's threadId and message ids clashes with nothing."""
    token = (await Token.objects.acreate(user=other_user)).key

    response = await post(
        token,
        run_input(
            "t-ids", "r-2", [{"id": "u1", "role": "user", "content": "different"}]
        ),
    )

    assert response.status_code == 200
    mine = await Thread.objects.aget(owner=other_user, client_thread_id="t-ids")
    assert mine.pk != answered_thread.pk
    assert [
        m.content async for m in Message.objects.filter(thread=mine, role="user")
    ] == ["different"]


def _reusing_history() -> list[dict[str, Any]]:
    """The stored turn, then a later assistant message reusing ``call_1``, answered."""
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "lookup_order", "arguments": '{"order_id":"A-2"}'},
    }
    return [
        {"id": "u1", "role": "user", "content": "hi"},
        {
            "id": "a1",
            "role": "assistant",
            "toolCalls": [
                {**call, "function": {"name": "lookup_order", "arguments": "{}"}}
            ],
        },
        {
            "id": "cs-tool-" + "0" * 32,
            "role": "tool",
            "toolCallId": "call_1",
            "content": "done",
        },
        {"id": "u2", "role": "user", "content": "and A-2?"},
        {"id": "a2", "role": "assistant", "toolCalls": [call]},
        {"id": "t2", "role": "tool", "toolCallId": "call_1", "content": "A-2 shipped"},
        {"id": "u3", "role": "user", "content": "thanks"},
    ]


@pytest.mark.parametrize("executor", ["embedded"], indirect=True)
async def test_a_history_reusing_a_tool_call_id_gets_thread_unique_ids_and_keeps_both_results(
    user, answered_thread, executor
):
    """An AG-UI client history whose later assistant message reuses ``call_1`` is
    not a 409: the later call is stored as ``call_1_2`` (the client's id kept),
    both answers are kept, the agent gets unique ids, the client's echo its own,
    and the same history posted again is recognised as an echo."""
    token = (await Token.objects.acreate(user=user)).key

    response = await post(token, run_input("t-ids", "r-2", _reusing_history()))
    events = await drain(response)
    await sync_to_async(executor.settle)(answered_thread)

    assert response.status_code == 200
    calls = {
        c.tool_call_id: c async for c in ToolCall.objects.filter(thread=answered_thread)
    }
    assert set(calls) >= {"call_1", "call_1_2"}
    assert calls["call_1_2"].metadata == {"clientToolCallId": "call_1"}
    assert calls["call_1_2"].parent_message_id == "a2"
    answers = {
        m.tool_call_id: m
        async for m in Message.objects.filter(thread=answered_thread, role="tool")
    }
    assert answers["call_1"].content == "done"
    assert answers["call_1_2"].content == "A-2 shipped"
    assert answers["call_1_2"].metadata == {"clientToolCallId": "call_1"}
    run = await Run.objects.aget(thread=answered_thread, run_id="r-2")
    sent = [m for m in run.input["messages"] if m["role"] in ("assistant", "tool")]
    sent_ids = [
        c["id"]
        for m in sent
        if m["role"] == "assistant"
        for c in m.get("toolCalls", [])
    ]
    assert sorted(sent_ids) == ["call_1", "call_1_2"]
    echo = events[0]["input"]["messages"]
    assert [m.get("toolCallId") for m in echo if m["role"] == "tool"] == [
        "call_1",
        "call_1",
    ]

    again = await post(
        token,
        run_input(
            "t-ids",
            "r-3",
            [*_reusing_history(), {"id": "u4", "role": "user", "content": "bye"}],
        ),
    )
    await drain(again)
    await sync_to_async(executor.settle)(answered_thread)

    assert again.status_code == 200, again.content
    assert await ToolCall.objects.filter(thread=answered_thread).acount() == len(calls)
