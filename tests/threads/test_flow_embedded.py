"""A user message runs the demo agent end to end, on the embedded pool and on Celery."""

from __future__ import annotations

from threads.models import Event, Message, Run, ToolCall
from threads.services import message_post, thread_create


def test_dc01_weather_run_answers_agent_side_call_in_stream(user, executor):
    """user message → streamed get_weather call answered in-stream → final text (DC-01, TC-09)."""
    thread = thread_create(owner=user, title="weather")
    _, run = message_post(thread=thread, content="What is the weather in Oslo?")

    executor.settle(thread)

    run.refresh_from_db()
    assert run.status == Run.Status.FINISHED, run.error_message
    types = list(Event.objects.filter(thread=thread).values_list("type", flat=True))
    assert types[0] == "RUN_STARTED"
    assert types[-1] == "RUN_FINISHED"
    assert types.count("TOOL_CALL_START") == types.count("TOOL_CALL_END") == 1
    assert types.index("TOOL_CALL_END") < types.index("TOOL_CALL_RESULT")
    seqs = list(Event.objects.filter(thread=thread).values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))
    call = ToolCall.objects.get(thread=thread)
    assert (call.name, call.arguments, call.state) == (
        "get_weather",
        {"city": "Oslo"},
        "succeeded",
    )
    result = Message.objects.get(thread=thread, role="tool")
    assert result.tool_call_id == call.tool_call_id
    assert '"city":"Oslo"' in result.content
    final = (
        Message.objects.filter(thread=thread, role="assistant")
        .exclude(content="")
        .last()
    )
    assert "Oslo" in final.content
    assert "light rain" in final.content
    started = Event.objects.get(thread=thread, type="RUN_STARTED").payload
    assert started["protocolVersion"] == "1.0"
    assert started["input"]["messages"][0]["content"] == "What is the weather in Oslo?"


def test_refund_flow_reaches_approval_after_auto_lookup(user, executor):
    """lookup_order (auto) runs at once; refund_order waits for an operator (DC-03)."""
    thread = thread_create(owner=user, title="refund")
    message_post(thread=thread, content="refund order A-1001 25.00")

    executor.settle(thread)

    runs = list(Run.objects.filter(thread=thread).order_by("created_at", "id"))
    assert len(runs) == 2
    assert runs[1].continues_id == runs[0].pk
    lookup = ToolCall.objects.get(thread=thread, name="lookup_order")
    refund = ToolCall.objects.get(thread=thread, name="refund_order")
    assert lookup.state == "succeeded"
    assert refund.state == "awaiting_approval"
    assert refund.arguments == {
        "order_id": "A-1001",
        "amount": 25.0,
        "reason": "customer request",
    }
    assert runs[1].pending_tool_call_ids == [refund.tool_call_id]
    # The continuation's input carried exactly one tool message for the lookup (FT-06).
    tool_messages = [m for m in runs[1].input["messages"] if m["role"] == "tool"]
    assert [m["toolCallId"] for m in tool_messages] == [lookup.tool_call_id]
