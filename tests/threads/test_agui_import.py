"""An imported conversation on a new AG-UI thread: assistant tool calls with their results.

A client may start a thread with history it brings from elsewhere: assistant
messages carrying tool calls, each answered by a tool message (distinct ids). The
thread never made those calls, but the input carries them, so they are stored and
the run continues from them. A result whose call is nowhere (not in the input, not
on the thread) is still refused with a 400 naming its id. Implements FT-06.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from django.test import AsyncClient

from threads.models import Message, Run, Thread, ToolCall

pytestmark = pytest.mark.django_db(transaction=True)

IMPORTED = [
    {"id": "u1", "role": "user", "content": "What is the weather in Oslo and Bergen?"},
    {
        "id": "a1",
        "role": "assistant",
        "toolCalls": [
            {
                "id": "imp_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
            },
            {
                "id": "imp_2",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Bergen"}'},
            },
        ],
    },
    {"id": "t1", "role": "tool", "toolCallId": "imp_1", "content": "Oslo: 4 C"},
    {"id": "t2", "role": "tool", "toolCallId": "imp_2", "content": "Bergen: 7 C"},
    {"id": "u2", "role": "user", "content": "Thanks. And now?"},
]


def body(messages: list[dict[str, Any]], **overrides: Any) -> dict[str, Any]:
    data = {
        "threadId": "t-import",
        "runId": "r-import",
        "protocolVersion": "1.0",
        "state": {},
        "messages": messages,
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }
    data.update(overrides)
    return data


async def post(payload: Any, *, token: str) -> Any:
    return await AsyncClient().post(
        "/agui/demo/",
        data=json.dumps(payload),
        content_type="application/json",
        headers={"Authorization": f"Token {token}"},
    )


async def read_stream(response: Any) -> str:
    """Read the SSE body up to the run's terminal event."""
    chunks: list[str] = []

    async def consume() -> None:
        async for chunk in response.streaming_content:
            chunks.append(chunk.decode("utf-8"))
            joined = "".join(chunks)
            if '"RUN_FINISHED"' in joined or '"RUN_ERROR"' in joined:
                return

    await asyncio.wait_for(consume(), timeout=30)
    return "".join(chunks)


async def test_imported_conversation_with_tool_results_is_accepted_on_a_new_thread(
    token, executor
):
    """A new thread whose first input carries answered tool calls starts its run."""
    response = await post(body(IMPORTED), token=token)

    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/event-stream")
    stream = await read_stream(response)
    assert '"RUN_FINISHED"' in stream
    assert '"RUN_ERROR"' not in stream
    thread = await Thread.objects.aget(client_thread_id="t-import")
    calls = [
        (c.tool_call_id, c.parent_message_id, c.arguments_text, c.state)
        async for c in ToolCall.objects.filter(
            thread=thread, tool_call_id__startswith="imp_"
        ).order_by("position")
    ]
    assert calls == [
        ("imp_1", "a1", '{"city": "Oslo"}', ToolCall.State.SUCCEEDED),
        ("imp_2", "a1", '{"city": "Bergen"}', ToolCall.State.SUCCEEDED),
    ]
    results = {
        m.tool_call_id: m.content
        async for m in Message.objects.filter(thread=thread, role="tool")
    }
    assert results["imp_1"] == "Oslo: 4 C"
    assert results["imp_2"] == "Bergen: 7 C"
    run = await Run.objects.aget(thread=thread, run_id="r-import")
    assert run.parent_run_id is None
    # The run's input (what the agent got) carries the imported calls and results.
    history = run.input["messages"]
    assert [m["id"] for m in history[:5]] == ["u1", "a1", "t1", "t2", "u2"]
    assert [c["id"] for c in history[1]["toolCalls"]] == ["imp_1", "imp_2"]


async def test_result_for_a_call_nobody_made_is_still_400_naming_the_id(token):
    """A tool message answering a call neither the input nor the thread has is refused."""
    stray = [
        {"id": "u1", "role": "user", "content": "hi"},
        {"id": "t9", "role": "tool", "toolCallId": "ghost_1", "content": "orphan"},
    ]

    response = await post(body(stray, threadId="t-stray"), token=token)

    assert response.status_code == 400
    assert "'ghost_1'" in response.json()["detail"]
    assert "'t9'" in response.json()["detail"]
    assert not await Message.objects.filter(
        thread__client_thread_id="t-stray"
    ).aexists()
