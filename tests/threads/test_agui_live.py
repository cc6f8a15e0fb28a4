"""AG-UI over HTTP against a running server, with a plain HTTP client (httpx).

``POST /agui/demo/`` answers ``200 text/event-stream`` with one LF-framed ``data:``
frame per event, from ``RUN_STARTED`` (protocolVersion "1.0") to the run's
``RUN_FINISHED``; ``GET /agui/threads/<id>/events`` follows the thread's log across
runs, resuming after ``?after=`` or ``Last-Event-ID``. Both modes (embedded pool,
Celery worker) through the ``live`` fixture. Implements DC-01, DC-02, FT-04, FT-06.
"""

from __future__ import annotations

import json
import re

import httpx
import pytest
from asgiref.sync import sync_to_async

from tests.agentcore.helpers import coalesced
from tests.helpers.agui import REFUND_RUN_TYPES, bearer, parse_stream, read_until
from tests.helpers.live import run_input, token_for
from threads.models import Event, Message, Run, Thread, ToolCall

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("close_thread_connections"),
]

WEATHER_TYPES = [
    "RUN_STARTED",
    "TOOL_CALL_START",
    "TOOL_CALL_ARGS",
    "TOOL_CALL_END",
    "TOOL_CALL_RESULT",
    "TEXT_MESSAGE_START",
    "TEXT_MESSAGE_CONTENT",
    "TEXT_MESSAGE_END",
    "RUN_FINISHED",
]
PENDING_RUN_TYPES = [
    "RUN_STARTED",
    "TOOL_CALL_START",
    "TOOL_CALL_ARGS",
    "TOOL_CALL_END",
    "RUN_FINISHED",
]


async def test_dc01_agui_post_streams_the_weather_run_as_sse(user, live):
    """One LF-framed data: frame per event, RUN_STARTED (1.0) … RUN_FINISHED, equal to the log."""
    token = await sync_to_async(token_for)(user)
    thread_id = f"agui-weather-{live.mode}"
    async with httpx.AsyncClient(base_url=live.url, timeout=30) as http:
        response = await http.post(
            "/agui/demo/",
            json=run_input(
                thread_id,
                "run-1",
                [
                    {
                        "id": "u1",
                        "role": "user",
                        "content": "What is the weather in Oslo?",
                    }
                ],
            ),
            headers=bearer(token),
        )

    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "text/event-stream"
    assert response.headers["cache-control"] == "no-cache"
    raw_events, comments, ids = parse_stream(response.content)
    events = coalesced(raw_events)
    assert [e["type"] for e in events] == WEATHER_TYPES
    assert comments == [": keep-alive"]
    assert ids == list(range(1, len(raw_events) + 1))
    assert events[0] == {
        "type": "RUN_STARTED",
        "threadId": thread_id,
        "runId": "run-1",
        "protocolVersion": "1.0",
        "input": events[0]["input"],
        "timestamp": events[0]["timestamp"],
    }
    assert events[-1]["type"] == "RUN_FINISHED"
    assert events[-1]["runId"] == "run-1"
    assert events[-1]["outcome"] == {"type": "success"}
    observation = json.loads(events[4]["content"])
    assert (
        observation["city"],
        observation["temperature"],
        observation["conditions"],
    ) == ("Oslo", 4.0, "light rain")
    thread = await Thread.objects.aget(client_thread_id=thread_id)
    log = await sync_to_async(list)(
        Event.objects.filter(thread=thread)
        .order_by("seq")
        .values_list("payload", flat=True)
    )
    # The wire stamps each event with AG-UI's timestamp (web.sse); the log keeps
    # the payload as produced.
    assert all("timestamp" in event for event in raw_events)
    assert [
        {k: v for k, v in event.items() if k != "timestamp"} for event in raw_events
    ] == log


async def test_ir01_agui_post_refund_is_one_run_ending_in_an_interrupt(user, live):
    """IR-01, IR-03, IR-04, FT-09: one POST streams one run ending in an interrupt.

    lookup_order is answered in it, the refund is an interrupt with reason
    ``tool_call`` naming the call streamed in that run (IR-03), and every message
    and call the run opened is closed before the interrupting RUN_FINISHED (IR-04).

    Countersign executes lookup_order itself (auto policy), so its result is in the
    run and the agent goes on inside it; the refund is held for an operator, so the
    run ends with ``{type:"interrupt"}`` naming the approval request, never with
    lookup_order pending for the client. Following the thread replays exactly the
    POST's stream (one RUN_STARTED/RUN_FINISHED pair, the same ids).
    """
    token = await sync_to_async(token_for)(user)
    thread_id = f"agui-refund-{live.mode}"
    async with httpx.AsyncClient(base_url=live.url, timeout=30) as http:
        response = await http.post(
            "/agui/demo/",
            json=run_input(
                thread_id,
                "run-1",
                [{"id": "u1", "role": "user", "content": "refund order A-1001 25.00"}],
            ),
            headers=bearer(token),
        )
        assert response.status_code == 200, response.text
        events, _, ids = parse_stream(response.content)
        async with http.stream(
            "GET", f"/agui/threads/{thread_id}/events?after=0", headers=bearer(token)
        ) as follow:
            raw = await read_until(
                follow,
                lambda evs: any(e["type"] == "RUN_FINISHED" for e in evs),
                timeout=30,
                what="the followed RUN_FINISHED",
                server=live,
            )
        followed, _, followed_ids = parse_stream(raw)

    assert followed == events
    assert followed_ids == ids == list(range(1, len(events) + 1))
    events = coalesced(events)
    assert [e["type"] for e in events] == REFUND_RUN_TYPES
    assert (events[1]["toolCallName"], events[5]["toolCallName"]) == (
        "lookup_order",
        "refund_order",
    )
    assert events[2]["delta"] == '{"order_id": "A-1001"}'
    lookup = await ToolCall.objects.aget(
        thread__client_thread_id=thread_id, name="lookup_order"
    )
    refund = await ToolCall.objects.select_related("approval").aget(
        thread__client_thread_id=thread_id, name="refund_order"
    )
    answer = await Message.objects.aget(
        thread__client_thread_id=thread_id,
        role="tool",
        tool_call_id=lookup.tool_call_id,
    )
    assert (events[4]["toolCallId"], events[4]["messageId"]) == (
        lookup.tool_call_id,
        answer.message_id,
    )
    # Countersign mints the answer's id in its own namespace (threads.ids).
    assert re.fullmatch(r"cs-tool-[0-9a-f]{32}", events[4]["messageId"])
    assert json.loads(events[4]["content"])["order_id"] == "A-1001"
    finished = dict(events[-1])
    usage = finished.pop("usage")
    assert isinstance(finished.pop("timestamp"), int)
    (interrupt,) = finished["outcome"]["interrupts"]
    assert finished == {
        "type": "RUN_FINISHED",
        "threadId": thread_id,
        "runId": "run-1",
        "outcome": {"type": "interrupt", "interrupts": [interrupt]},
    }
    assert (interrupt["id"], interrupt["reason"], interrupt["toolCallId"]) == (
        f"cs-approval-{refund.approval.pk}",
        "tool_call",
        refund.tool_call_id,
    )
    # IR-03: the held call was streamed in this very run, before the interrupt.
    assert interrupt["toolCallId"] == events[5]["toolCallId"]
    # IR-04: nothing the run opened is still open at its RUN_FINISHED.
    opened: set[tuple[str, str]] = set()
    for event in events[:-1]:
        kind = event["type"]
        if kind in ("TEXT_MESSAGE_START", "TOOL_CALL_START"):
            opened.add((kind[:4], event.get("messageId") or event["toolCallId"]))
        elif kind in ("TEXT_MESSAGE_END", "TOOL_CALL_END"):
            opened.discard((kind[:4], event.get("messageId") or event["toolCallId"]))
    assert opened == set()
    # Both model turns, one usage entry per model.
    assert [(u["provider"], u["model"]) for u in usage] == [("scripted", "scripted")]
    assert refund.state == ToolCall.State.AWAITING_APPROVAL
    assert lookup.state == ToolCall.State.SUCCEEDED
    runs = await sync_to_async(list)(
        Run.objects.filter(thread__client_thread_id=thread_id).values_list(
            "wire_state", flat=True
        )
    )
    assert runs == ["closed", "segment"]


async def test_ft06_agui_resent_history_is_not_duplicated(user, live):
    """A client resending the full history (as HttpAgent does) adds only its new message."""
    token = await sync_to_async(token_for)(user)
    thread_id = f"agui-history-{live.mode}"
    first_user = {"id": "u1", "role": "user", "content": "What is the weather in Oslo?"}
    async with httpx.AsyncClient(base_url=live.url, timeout=30) as http:
        first = await http.post(
            "/agui/demo/",
            json=run_input(thread_id, "run-1", [first_user]),
            headers=bearer(token),
        )
        assert first.status_code == 200, first.text
        first_events, _, first_ids = parse_stream(first.content)
        events = coalesced(first_events)
        call_start, args, _, result, text_start, text, _ = events[1:8]
        history = [
            first_user,
            {
                "id": call_start["parentMessageId"],
                "role": "assistant",
                "toolCalls": [
                    {
                        "id": call_start["toolCallId"],
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": args["delta"]},
                    }
                ],
            },
            {
                "id": result["messageId"],
                "role": "tool",
                "toolCallId": result["toolCallId"],
                "content": result["content"],
            },
            {
                "id": text_start["messageId"],
                "role": "assistant",
                "content": text["delta"],
            },
            {"id": "u2", "role": "user", "content": "What is the weather in Paris?"},
        ]
        second = await http.post(
            "/agui/demo/",
            json=run_input(thread_id, "run-2", history),
            headers=bearer(token),
        )

    assert second.status_code == 200, second.text
    raw_second, _, ids = parse_stream(second.content)
    second_events = coalesced(raw_second)
    assert [e["type"] for e in second_events] == WEATHER_TYPES
    # The thread's log goes on where the first run's ended.
    assert ids == list(range(first_ids[-1] + 1, first_ids[-1] + 1 + len(raw_second)))
    messages = await sync_to_async(list)(
        Message.objects.filter(thread__client_thread_id=thread_id)
        .order_by("position", "id")
        .values_list("message_id", "role")
    )
    assert messages[:5] == [(m["id"], m["role"]) for m in history]
    assert len(messages) == 8  # + the second call's assistant, tool and text messages
    assert "Paris" in second_events[6]["delta"]
