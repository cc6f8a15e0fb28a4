"""OpenAI Responses adapter over a local SSE server, through the real ``openai`` SDK."""

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
from agentcore.providers.base import (
    ModelRequest,
    ProviderError,
    ToolCallBegin,
    ToolCallDelta,
)
from tests.agentcore.providers.contract import (
    ProviderContract,
    collect,
    drain,
    text_of,
    tool_calls,
    turn_end,
    user_request,
)
from tests.agentcore.providers.golden import GOLDEN_CALLS, PNG_B64, golden_thread
from tests.agentcore.providers.replies.openai_responses import (
    call_events,
    call_reply,
    completed,
    created,
    error_reply,
    factory,
    response,
    text_events,
    text_reply,
)
from tests.agentcore.providers.server import Reply, ScriptServer, named_sse
from tests.cases import load_case


class TestOpenAIResponsesContract(ProviderContract):
    provider_factory = staticmethod(factory)
    text_reply = staticmethod(text_reply)
    call_reply = staticmethod(call_reply)
    error_reply = staticmethod(error_reply)


async def test_bc05_deltas_routed_by_item_id_call_exposed_by_call_id(
    server: ScriptServer,
) -> None:
    """Argument deltas keyed by item_id (fc_) land on the call whose id is the call_id (call_)."""
    case = load_case("BC05")
    server.replies.append(
        Reply(body=named_sse([created(), *case["input"]["stream"], completed()]))
    )
    events = await collect(factory(server.url), user_request())
    assert tool_calls(events) == [
        {"id": c["id"], "name": c["name"], "arguments": c["arguments"]}
        for c in case["expected"]["tool_calls"]
    ]
    expected = [
        (e["type"], e.get("delta"))
        for e in case["expected"]["agui_events"]
        if e["type"] != "TOOL_CALL_END"
    ]
    got = [
        (
            "TOOL_CALL_START" if isinstance(e, ToolCallBegin) else "TOOL_CALL_ARGS",
            getattr(e, "delta", None),
        )
        for e in events
        if isinstance(e, ToolCallBegin | ToolCallDelta)
    ]
    assert got == expected  # .done does not repeat the arguments
    assert [
        e.call_id for e in events if isinstance(e, ToolCallBegin | ToolCallDelta)
    ] == ["call_01"] * 3
    assert turn_end(events).stop_reason == "tool_use"


async def test_bc05_function_call_output_pairs_by_call_id(server: ScriptServer) -> None:
    """The next request answers the call with a function_call_output keyed by call_id (BC05, LP-10)."""
    case = load_case("BC05")
    history = [
        UserMessage(id="u", content="weather?"),
        AssistantMessage(
            id="a",
            tool_calls=[
                ToolCall(
                    id="call_01",
                    function=FunctionCall(
                        name="lookup", arguments='{"query":"weather"}'
                    ),
                )
            ],
        ),
        ToolMessage(id="t", tool_call_id="call_01", content="<tool result>"),
    ]
    server.replies.append(text_reply(["ok"]))
    await collect(factory(server.url), ModelRequest(model="m", messages=history))
    items = server.last_body["input"]
    assert items[1] == {
        "type": "function_call",
        "call_id": "call_01",
        "name": "lookup",
        "arguments": '{"query":"weather"}',
    }
    assert items[2] == case["expected"]["next_request_input_item"]


async def test_parallel_interleaved_calls(server: ScriptServer) -> None:
    """Two function calls whose argument deltas interleave are kept apart by item_id (LP-02)."""
    a = call_events(0, "fc_a", "call_a", "get_weather", ['{"city":', '"Oslo"}'])
    b = call_events(1, "fc_b", "call_b", "get_weather", ['{"city":', '"Rome"}'])
    stream = [
        created(),
        *(e for pair in zip(a, b, strict=True) for e in pair),
        completed(),
    ]
    server.replies.append(Reply(body=named_sse(stream)))
    events = await collect(factory(server.url), user_request())
    assert tool_calls(events) == [
        {"id": "call_a", "name": "get_weather", "arguments": {"city": "Oslo"}},
        {"id": "call_b", "name": "get_weather", "arguments": {"city": "Rome"}},
    ]


async def test_arguments_only_in_done_event(server: ScriptServer) -> None:
    """A server that sends no deltas but the whole text in .done still yields the arguments once."""
    evs = call_events(0, "fc_1", "call_1", "get_weather", ['{"city":"Oslo"}'])
    del evs[1]
    server.replies.append(Reply(body=named_sse([created(), *evs, completed()])))
    events = await collect(factory(server.url), user_request())
    assert tool_calls(events) == [
        {"id": "call_1", "name": "get_weather", "arguments": {"city": "Oslo"}}
    ]


async def test_incomplete_max_output_tokens_is_max_tokens(server: ScriptServer) -> None:
    """response.incomplete with reason max_output_tokens maps to max_tokens (LP-09, BC11)."""
    evs = call_events(0, "fc_1", "call_1", "write_file", ['{"path":"a","content":"ab'])[
        :2
    ]
    incomplete = {
        "type": "response.incomplete",
        "sequence_number": 9,
        "response": response(
            "incomplete", incomplete_details={"reason": "max_output_tokens"}
        ),
    }
    server.replies.append(Reply(body=named_sse([created(), *evs, incomplete])))
    events = await collect(factory(server.url), user_request(max_output_tokens=40))
    assert turn_end(events).stop_reason == "max_tokens"
    assert server.last_body["max_output_tokens"] == 40


async def test_error_event_mid_stream_raises_sanitized_provider_error(
    server: ScriptServer,
) -> None:
    """An 'error' event after text raises ProviderError with a sanitized code (SEC-06)."""
    err = {
        "type": "error",
        "code": "rate_limit_exceeded",
        "message": "slow down sk-test-secret",
        "param": None,
        "sequence_number": 5,
    }
    server.replies.append(Reply(body=named_sse([created(), *text_events(["Hi"]), err])))
    seen = []
    with pytest.raises(ProviderError) as info:
        await drain(factory(server.url).stream_turn(user_request()), seen)
    assert text_of(seen) == "Hi"
    assert info.value.code == "rate_limited"
    assert "sk-test-secret" not in str(info.value)


async def test_request_body_function_tools_lp10(server: ScriptServer) -> None:
    """Tools are flat function tools with strict sent; the system prompt is instructions (LP-10)."""
    server.replies.append(text_reply(["ok"]))
    events = await collect(factory(server.url), user_request(system_prompt="be brief"))
    assert turn_end(events).usage is not None
    assert turn_end(events).usage.total_tokens == 18
    recorded = server.requests[-1]
    assert recorded.path == "/v1/responses"
    body = recorded.body
    assert body["stream"] is True
    assert body["instructions"] == "be brief"
    assert body["store"] is False
    assert body["tools"][0] == {
        "type": "function",
        "name": "get_weather",
        "description": "Return the weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
        "strict": False,
    }
    assert body["input"] == [{"role": "user", "content": "hi"}]


async def test_golden_thread_tc14_ft06_lp10(server: ScriptServer) -> None:
    """Golden: function_call items each followed by exactly one function_call_output, in call order; image kept."""
    server.replies.append(text_reply(["ok"]))
    await collect(factory(server.url), golden_thread())
    items = server.last_body["input"]
    kinds = [i.get("type", i.get("role")) for i in items]
    assert kinds == ["user", "assistant"] + ["function_call"] * 5 + [
        "function_call_output"
    ] * 5 + ["user"]
    assert [i["call_id"] for i in items[2:7]] == GOLDEN_CALLS
    assert [i["call_id"] for i in items[7:12]] == GOLDEN_CALLS
    assert items[3]["arguments"] == "{}"
    outputs = [i["output"] for i in items[7:12]]
    assert outputs[0] == "18C and sunny"
    assert outputs[3] == INTERRUPTED_CONTENT
    assert outputs[4] == [
        {"type": "input_text", "text": "chart rendered"},
        {"type": "input_image", "image_url": f"data:image/png;base64,{PNG_B64}"},
    ]
    dumped = json.dumps(server.last_body)
    for foreign in (
        '"tool_calls"',
        '"role": "tool"',
        "tool_result",
        "functionCall",
        "input_schema",
    ):
        assert foreign not in dumped


async def test_repeated_call_id_in_a_second_item_is_one_call(
    server: ScriptServer,
) -> None:
    """Two function_call items with one call_id (a proxy's replay) are one call."""
    server.replies.append(
        Reply(
            body=named_sse(
                [
                    created(),
                    *call_events(
                        0, "fc_1", "call_R", "refund", ['{"order":', '"A-1"}']
                    ),
                    *call_events(1, "fc_2", "call_R", "refund", ['{"order":"A-1"}']),
                    completed(),
                ]
            )
        )
    )
    events = await collect(factory(server.url), user_request())
    assert tool_calls(events) == [
        {"id": "call_R", "name": "refund", "arguments": {"order": "A-1"}}
    ]
    begins = [e for e in events if isinstance(e, ToolCallBegin)]
    assert [b.call_id for b in begins] == ["call_R"]
    deltas = "".join(e.delta for e in events if isinstance(e, ToolCallDelta))
    assert deltas == '{"order":"A-1"}'
