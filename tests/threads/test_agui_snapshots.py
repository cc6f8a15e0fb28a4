"""A real LangGraph agent (``ag-ui-langgraph``, fake model) behind ``agui_http``: snapshots reconciled.

The remote agent runs in this process (``tests/langgraph_refund_agent.py``, uvicorn in a
thread); Countersign runs in the ``live`` fixture's uvicorn (embedded pool, or a
Celery worker) with two ``agui_http`` agents pointing at it. Both are given the demo
toolset, so ``lookup_order`` / ``refund_order`` are application tools advertised
in ``RunAgentInput.tools`` and ``refund_order`` needs an operator's approval.

- ``lg`` streams its tool calls. ``ag-ui-langgraph`` names its own tool's
  ``TOOL_CALL_RESULT`` by the call id, while the ``MESSAGES_SNAPSHOT`` it sends
  next carries the ``ToolMessage`` under LangGraph's uuid: relayed as is, an AG-UI
  client's history (replaced by the snapshot) and the thread disagree, and the
  client's next POST of that history is refused with 409.
- ``lg_snapshot``'s model does not stream, so its call to ``refund_order`` appears
  only in ``MESSAGES_SNAPSHOT``: unreconciled, no call is recorded and nobody is
  asked.

Implements TC-08, TC-09, FT-06, SEC-02.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from asgiref.sync import sync_to_async

from approvals.models import ApprovalRequest
from demo.models import Refund
from tests.helpers.agui import (
    REFUND,
    agents_env,
    approve_refund,
    approver_token,
    bearer,
    follow_raw,
    parse_stream,
    remote_agents_config,
)
from tests.helpers.live import run_input, token_for, wait_until
from tests.langgraph_refund_agent import serve, tool_messages_by_call
from threads.models import Message, Run, Thread, ToolCall

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("close_thread_connections"),
]


@pytest.fixture(scope="module", autouse=True)
def langgraph_agents() -> Iterator[str]:
    """Serve the LangGraph agents; configure ``lg`` and ``lg_snapshot`` for the live server.

    Autouse and module-scoped, so it runs before the module's ``live`` fixture
    reads the environment (the server and the Celery worker inherit it).
    """
    url, stop = serve()
    try:
        with agents_env(remote_agents_config(url)):
            yield url
    finally:
        stop()


def snapshots_of(events: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    return [e["messages"] for e in events if e["type"] == "MESSAGES_SNAPSHOT"]


def thread_message_ids(thread_id: str) -> set[str]:
    return set(
        Message.objects.filter(thread__client_thread_id=thread_id).values_list(
            "message_id", flat=True
        )
    )


async def test_tc08_langgraph_snapshot_tool_message_keeps_the_streamed_result_id(
    user, live, django_user_model
):
    """The relayed MESSAGES_SNAPSHOT names each message as the thread does; the history posts back.

    ``ag-ui-langgraph`` gives ``order_status``'s result ``messageId`` = the call id in
    ``TOOL_CALL_RESULT`` and LangGraph's uuid in ``MESSAGES_SNAPSHOT``. Countersign
    maps the snapshot's tool message onto the streamed one (by ``toolCallId``), so a
    client that replaces its history with the snapshot (as ``HttpAgent`` does) holds
    the thread's ids, and its next POST (that history plus a new question) is
    accepted instead of answered 409. The remote's own id is remembered and used in
    its next input, so LangGraph does not store the answer a second time.
    """
    token = await sync_to_async(token_for)(user)
    decider = await sync_to_async(approver_token)(django_user_model)
    thread_id = f"lg-ids-{live.mode}"
    async with httpx.AsyncClient(base_url=live.url, timeout=60) as http:
        response = await http.post(
            "/agui/lg/",
            json=run_input(
                thread_id, "run-1", [{"id": "u1", "role": "user", "content": REFUND}]
            ),
            headers=bearer(token),
        )
        assert response.status_code == 200, response.text
        events, _, _ = parse_stream(response.content)
        result = next(e for e in events if e["type"] == "TOOL_CALL_RESULT")
        assert result["toolCallId"] == "lg_status_1"
        snapshot = snapshots_of(events)[-1]
        tool_messages = [m for m in snapshot if m["role"] == "tool"]
        assert [(m["toolCallId"], m["id"]) for m in tool_messages] == [
            ("lg_status_1", result["messageId"])
        ]
        known = await sync_to_async(thread_message_ids)(thread_id)
        assert {m["id"] for m in snapshot} <= known

        # The refund is the operator's: approved, executed once, the agent continues.
        await approve_refund(http, thread_id, decider, live)
        followed = parse_stream(await follow_raw(http, thread_id, token, 2, live))[0]
        history = snapshots_of(followed)[-1]
        assert {m["id"] for m in history} <= await sync_to_async(thread_message_ids)(
            thread_id
        )
        assert [m["toolCallId"] for m in history if m["role"] == "tool"] == [
            "lg_status_1",
            "lg_refund_1",
        ]

        again = await http.post(
            "/agui/lg/",
            json=run_input(
                thread_id,
                "run-3",
                [*history, {"id": "u2", "role": "user", "content": "thanks"}],
            ),
            headers=bearer(token),
        )
        assert again.status_code == 200, again.text
        assert parse_stream(again.content)[0][-1]["type"] == "RUN_FINISHED"

    assert (
        await Message.objects.filter(
            thread__client_thread_id=thread_id, role="tool", tool_call_id="lg_status_1"
        ).acount()
        == 1
    )
    # The remote got its own ids back in its next input: LangGraph's history, too,
    # holds one answer per call. The remote knows the thread by its global id.
    thread = await Thread.objects.aget(client_thread_id=thread_id)
    assert tool_messages_by_call("/streaming", thread.thread_id) == {
        "lg_status_1": 1,
        "lg_refund_1": 1,
    }
    assert await Refund.objects.filter(order_id="A-1001").acount() == 1
    await sync_to_async(Refund.objects.all().delete)()


async def test_sec02_langgraph_call_only_in_snapshot_is_recorded_and_needs_approval(
    user, live, django_user_model
):
    """A call the remote shows only in MESSAGES_SNAPSHOT is a call: streamed, recorded, queued.

    The non-streaming LangGraph model's ``refund_order`` call reaches Countersign
    only inside the snapshot. Countersign streams it as ``TOOL_CALL_START/ARGS/END``
    before the snapshot, so the thread, the log and the client all hold it, the run
    ends with it pending, and policy puts it in the approval queue like a streamed
    call. After approval the continuation's answer, also only in a snapshot, is
    recorded as the assistant's text.
    """
    token = await sync_to_async(token_for)(user)
    decider = await sync_to_async(approver_token)(django_user_model)
    thread_id = f"lg-snapshot-{live.mode}"
    async with httpx.AsyncClient(base_url=live.url, timeout=60) as http:
        response = await http.post(
            "/agui/lg_snapshot/",
            json=run_input(
                thread_id, "run-1", [{"id": "u1", "role": "user", "content": REFUND}]
            ),
            headers=bearer(token),
        )
        assert response.status_code == 200, response.text
        events, _, _ = parse_stream(response.content)
        types = [e["type"] for e in events]
        start = next(
            i
            for i, e in enumerate(events)
            if e["type"] == "TOOL_CALL_START" and e["toolCallId"] == "lg_refund_1"
        )
        assert events[start]["toolCallName"] == "refund_order"
        assert json.loads(events[start + 1]["delta"]) == {
            "order_id": "A-1001",
            "amount": 25.0,
            "reason": "customer request",
        }
        assert events[start + 2] == {
            "type": "TOOL_CALL_END",
            "toolCallId": "lg_refund_1",
            "timestamp": events[start + 2]["timestamp"],
        }
        assert start < types.index("MESSAGES_SNAPSHOT")
        # The remote's RUN_FINISHED names no pending calls; the run's record does (FT-05).
        assert "lg_refund_1" not in {
            e.get("toolCallId") for e in events if e["type"] == "TOOL_CALL_RESULT"
        }
        first = await Run.objects.aget(
            thread__client_thread_id=thread_id, run_id="run-1"
        )
        assert first.pending_tool_call_ids == ["lg_refund_1"]

        pending = ApprovalRequest.objects.filter(
            thread__client_thread_id=thread_id, tool_call__tool_call_id="lg_refund_1"
        )
        await wait_until(pending.exists, what="the refund approval", server=live)
        refund = await ToolCall.objects.aget(
            thread__client_thread_id=thread_id, tool_call_id="lg_refund_1"
        )
        assert refund.name == "refund_order"
        assert refund.arguments == {
            "order_id": "A-1001",
            "amount": 25.0,
            "reason": "customer request",
        }
        assert await Refund.objects.filter(order_id="A-1001").acount() == 0

        await approve_refund(http, thread_id, decider, live)
        followed = parse_stream(await follow_raw(http, thread_id, token, 2, live))[0]

    continuation = await Run.objects.aget(
        thread__client_thread_id=thread_id, continues__isnull=False
    )
    texts = [
        e
        for e in followed
        if e["type"] == "TEXT_MESSAGE_CONTENT"
        and e["messageId"]
        in {m["id"] for m in snapshots_of(followed)[-1] if m["role"] == "assistant"}
    ]
    assert texts
    assert texts[-1]["delta"].startswith("Refund done: ")
    answer = await Message.objects.aget(
        thread__client_thread_id=thread_id, message_id=texts[-1]["messageId"]
    )
    assert answer.run_id == continuation.pk
    assert str(answer.content).startswith("Refund done: ")
    assert await Refund.objects.filter(order_id="A-1001").acount() == 1
    await sync_to_async(Refund.objects.all().delete)()
