"""Anthropic Messages adapter over a local SSE server, through the real ``anthropic`` SDK."""

from __future__ import annotations

import json

import pytest

from agentcore.events import (
    AssistantMessage,
    FunctionCall,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from agentcore.history import INTERRUPTED_CONTENT
from agentcore.providers.base import ModelRequest, ProviderError
from tests.agentcore.providers.contract import (
    ProviderContract,
    collect,
    drain,
    raw_arguments,
    text_of,
    tool_calls,
    turn_end,
    user_request,
)
from tests.agentcore.providers.golden import GOLDEN_CALLS, PNG_B64, golden_thread
from tests.agentcore.providers.replies.anthropic import (
    call_reply,
    end,
    error_reply,
    factory,
    start,
    text_block,
    text_reply,
    tool_block_events,
)
from tests.agentcore.providers.server import Reply, ScriptServer, named_sse


class TestAnthropicContract(ProviderContract):
    provider_factory = staticmethod(factory)
    text_reply = staticmethod(text_reply)
    call_reply = staticmethod(call_reply)
    error_reply = staticmethod(error_reply)


async def test_parallel_calls_with_text_and_usage_lp02(server: ScriptServer) -> None:
    """Text plus two tool_use blocks yield two calls in block order, tool_use stop, usage (LP-02, LP-09)."""
    events_in = [
        start(30),
        *text_block(0, ["Let me ", "check."]),
        *tool_block_events(1, "toolu_A", "get_weather", ["", '{"city":', ' "Oslo"}']),
        *tool_block_events(2, "toolu_B", "get_weather", ['{"city": "Rome"}']),
        *end("tool_use", 44),
    ]
    server.replies.append(Reply(body=named_sse(events_in)))
    events = await collect(factory(server.url), user_request())
    assert text_of(events) == "Let me check."
    assert tool_calls(events) == [
        {"id": "toolu_A", "name": "get_weather", "arguments": {"city": "Oslo"}},
        {"id": "toolu_B", "name": "get_weather", "arguments": {"city": "Rome"}},
    ]
    end_event = turn_end(events)
    assert end_event.stop_reason == "tool_use"
    assert end_event.usage is not None
    assert (end_event.usage.input_tokens, end_event.usage.output_tokens) == (30, 44)


async def test_empty_input_json_delta_only_gives_empty_arguments(
    server: ScriptServer,
) -> None:
    """A parameterless call streams only an empty partial_json; its argument text is '' (BC06 is the executor's)."""
    server.replies.append(
        Reply(
            body=named_sse(
                [
                    start(),
                    *tool_block_events(0, "toolu_T", "get_time", [""]),
                    *end("tool_use"),
                ]
            )
        )
    )
    events = await collect(factory(server.url), user_request())
    assert raw_arguments(events) == {"toolu_T": ""}


async def test_reused_tool_use_id_from_history_gets_unique_id(
    server: ScriptServer,
) -> None:
    """A tool_use id already used in the thread is made unique (BC18 rule: ids unique within the thread)."""
    history = [
        UserMessage(id="u", content="x"),
        AssistantMessage(
            id="a",
            tool_calls=[
                ToolCall(
                    id="toolu_A",
                    function=FunctionCall(name="get_weather", arguments="{}"),
                )
            ],
        ),
        ToolMessage(id="t", tool_call_id="toolu_A", content="ok"),
    ]
    server.replies.append(call_reply("get_weather", "toolu_A", ['{"city":"Oslo"}']))
    events = await collect(
        factory(server.url), ModelRequest(model="m", messages=history)
    )
    [call] = tool_calls(events)
    assert call["id"] != "toolu_A"
    assert call["id"].startswith("toolu_A")


async def test_truncated_at_max_tokens(server: ScriptServer) -> None:
    """stop_reason max_tokens with unterminated input maps to max_tokens (LP-09, BC11)."""
    server.replies.append(
        Reply(
            body=named_sse(
                [
                    start(),
                    *tool_block_events(
                        0, "toolu_W", "write_file", ['{"path":"a.md","content":"abc']
                    ),
                    *end("max_tokens"),
                ]
            )
        )
    )
    events = await collect(factory(server.url), user_request(max_output_tokens=50))
    assert turn_end(events).stop_reason == "max_tokens"
    assert server.last_body["max_tokens"] == 50


async def test_error_event_mid_stream_raises_sanitized_provider_error(
    server: ScriptServer,
) -> None:
    """An 'error' SSE event after some text raises ProviderError(upstream_unavailable) without upstream text (SEC-06)."""
    events_in = [
        start(),
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "text", "text": ""},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": "Hi"},
        },
        {
            "type": "error",
            "error": {
                "type": "overloaded_error",
                "message": "Overloaded sk-test-secret",
            },
        },
    ]
    server.replies.append(Reply(body=named_sse(events_in)))
    seen = []
    with pytest.raises(ProviderError) as info:
        await drain(factory(server.url).stream_turn(user_request()), seen)
    assert text_of(seen) == "Hi"
    assert info.value.code == "upstream_unavailable"
    assert "sk-test-secret" not in str(info.value)


async def test_request_body_tools_input_schema_and_system_lp10(
    server: ScriptServer,
) -> None:
    """Tools are sent with input_schema and the system prompt at top level (LP-10)."""
    server.replies.append(text_reply(["ok"]))
    await collect(factory(server.url), user_request(system_prompt="be brief"))
    recorded = server.requests[-1]
    assert recorded.path == "/v1/messages"
    assert recorded.headers["X-Api-Key"] == "sk-test-secret"
    body = recorded.body
    assert body["stream"] is True
    assert body["system"] == "be brief"
    assert body["max_tokens"] == 4096
    assert body["tools"][0]["input_schema"]["required"] == ["city"]
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]}
    ]


async def test_bc22_tool_result_first_in_next_user_turn(server: ScriptServer) -> None:
    """An unanswered tool_use gets an is_error tool_result placed before the user's text (BC22, FT-06).

    Our synthetic content is BC20's JSON (one canonical interrupted answer for every
    provider) rather than BC22's prose; the case's rule (placement, is_error) holds.
    """
    history = [
        UserMessage(id="u1", content="list the files"),
        AssistantMessage(
            id="a1",
            content="Let me look.",
            tool_calls=[
                ToolCall(
                    id="toolu_A",
                    function=FunctionCall(name="list_dir", arguments='{"path":"."}'),
                )
            ],
        ),
        UserMessage(id="u2", content="never mind, show README instead"),
    ]
    server.replies.append(text_reply(["ok"]))
    await collect(factory(server.url), ModelRequest(model="m", messages=history))
    third = server.last_body["messages"][2]
    assert third == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_A",
                "is_error": True,
                "content": INTERRUPTED_CONTENT,
            },
            {"type": "text", "text": "never mind, show README instead"},
        ],
    }
    assert server.last_body["messages"][1]["content"][1] == {
        "type": "tool_use",
        "id": "toolu_A",
        "name": "list_dir",
        "input": {"path": "."},
    }


async def test_bc22_variant_text_before_result_is_reordered(
    server: ScriptServer,
) -> None:
    """A result stored after the user's text is still sent first in that user turn (BC22 variant)."""
    history = [
        UserMessage(id="u1", content="list the files"),
        AssistantMessage(
            id="a1",
            tool_calls=[
                ToolCall(
                    id="toolu_A", function=FunctionCall(name="list_dir", arguments="{}")
                )
            ],
        ),
        UserMessage(id="u2", content="here you go"),
        ToolMessage(id="t1", tool_call_id="toolu_A", content="a.txt"),
    ]
    server.replies.append(text_reply(["ok"]))
    await collect(factory(server.url), ModelRequest(model="m", messages=history))
    assert server.last_body["messages"][2] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_A", "content": "a.txt"},
            {"type": "text", "text": "here you go"},
        ],
    }


async def test_golden_thread_tc14_ft06_lp10(server: ScriptServer) -> None:
    """Golden: every call answered once, in call order, in one user turn; image kept as an image block; errors flagged."""
    server.replies.append(text_reply(["ok"]))
    await collect(factory(server.url), golden_thread())
    body = server.last_body
    msgs = body["messages"]
    assert body["system"] == "You are careful."
    assert [m["role"] for m in msgs] == ["user", "assistant", "user"]
    uses = [b for b in msgs[1]["content"] if b["type"] == "tool_use"]
    assert [b["id"] for b in uses] == GOLDEN_CALLS
    assert uses[1]["input"] == {}  # unparseable argument text → {}
    results = msgs[2]["content"]
    assert [b["type"] for b in results] == ["tool_result"] * 5 + ["text"]
    assert [b["tool_use_id"] for b in results[:5]] == GOLDEN_CALLS
    assert results[0]["content"] == "18C and sunny"
    assert "is_error" not in results[0]
    assert results[1]["is_error"] is True
    assert "is_error" not in results[2]
    assert "declined" in results[2]["content"]
    assert results[3]["is_error"] is True
    assert results[3]["content"] == INTERRUPTED_CONTENT
    assert results[4]["content"] == [
        {"type": "text", "text": "chart rendered"},
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64},
        },
    ]
    assert results[5] == {"type": "text", "text": "thanks, continue"}
    dumped = json.dumps(body)
    for foreign in (
        '"tool_calls"',
        '"role": "tool"',
        "function_call_output",
        "functionCall",
        '"parameters"',
    ):
        assert foreign not in dumped


async def test_repeated_tool_use_id_in_a_second_block_is_one_call(
    server: ScriptServer,
) -> None:
    """The same tool_use id in two blocks of one turn is one call, its input once."""
    events_in = [
        start(),
        *tool_block_events(0, "toolu_R", "refund", ['{"order":', ' "A-1"}']),
        *tool_block_events(1, "toolu_R", "refund", ['{"order": "A-1"}']),
        *end("tool_use"),
    ]
    server.replies.append(Reply(body=named_sse(events_in)))
    events = await collect(factory(server.url), user_request())
    assert tool_calls(events) == [
        {"id": "toolu_R", "name": "refund", "arguments": {"order": "A-1"}}
    ]
    assert raw_arguments(events) == {"toolu_R": '{"order": "A-1"}'}
