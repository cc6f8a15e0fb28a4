"""One thread exercising every way a call can be answered, for each adapter's golden test."""

from __future__ import annotations

from ag_ui.core import DataSource, ImagePart, TextPart

from agentcore.events import (
    AssistantMessage,
    FunctionCall,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from agentcore.providers.base import ModelRequest, ToolSpec

PNG_B64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="

GOLDEN_CALLS = ["call_ok", "call_fail", "call_declined", "call_pending", "call_shot"]


def golden_thread() -> ModelRequest:
    """Return a request whose history has answered, failed, declined, unanswered and image-result calls.

    Results are stored out of call order, ``call_ok`` is answered twice (the first
    wins), a result answers an unknown call (dropped), ``call_pending`` has no result,
    and ``call_fail``'s argument text is unparseable.
    """
    return ModelRequest(
        model="test-model",
        system_prompt="You are careful.",
        tools=[
            ToolSpec(
                name="get_weather",
                description="Weather for a city.",
                parameters={
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                },
            )
        ],
        messages=[
            UserMessage(id="u1", content="weather, email, refund, chart"),
            AssistantMessage(
                id="a1",
                content="Checking.",
                tool_calls=[
                    ToolCall(
                        id="call_ok",
                        function=FunctionCall(
                            name="get_weather", arguments='{"city":"Oslo"}'
                        ),
                    ),
                    ToolCall(
                        id="call_fail",
                        function=FunctionCall(name="get_weather", arguments='{"city":'),
                    ),
                    ToolCall(
                        id="call_declined",
                        function=FunctionCall(
                            name="send_email", arguments='{"to":"a@b.test"}'
                        ),
                    ),
                    ToolCall(
                        id="call_pending",
                        function=FunctionCall(
                            name="refund_order", arguments='{"order":"o1"}'
                        ),
                    ),
                    ToolCall(
                        id="call_shot",
                        function=FunctionCall(
                            name="render_chart", arguments='{"kind":"bar"}'
                        ),
                    ),
                ],
            ),
            ToolMessage(
                id="t5",
                tool_call_id="call_shot",
                content=[
                    TextPart(text="chart rendered"),
                    ImagePart(source=DataSource(value=PNG_B64, mime_type="image/png")),
                ],
            ),
            ToolMessage(id="t1", tool_call_id="call_ok", content="18C and sunny"),
            ToolMessage(id="t1b", tool_call_id="call_ok", content="duplicate answer"),
            ToolMessage(
                id="t2",
                tool_call_id="call_fail",
                content='{"error":"timeout"}',
                error="timeout",
            ),
            ToolMessage(
                id="t3",
                tool_call_id="call_declined",
                content='{"status":"declined","reason":"not now","executed":false}',
            ),
            ToolMessage(id="tx", tool_call_id="call_ghost", content="orphan"),
            UserMessage(id="u2", content="thanks, continue"),
        ],
    )
