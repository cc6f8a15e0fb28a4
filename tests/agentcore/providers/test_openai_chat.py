"""Chat Completions adapter over a local SSE server, through the real ``openai`` SDK."""

from __future__ import annotations

import json
from typing import Any

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
    ToolSpec,
)
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
from tests.agentcore.providers.golden import golden_thread
from tests.agentcore.providers.replies.openai_chat import (
    call_reply,
    chunk,
    error_reply,
    factory,
    from_case,
    text_reply,
)
from tests.agentcore.providers.server import Reply, ScriptServer, sse
from tests.cases import load_case


def expected_calls(case: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"id": c["id"], "name": c["name"], "arguments": c["arguments"]}
        for c in case["expected"]["tool_calls"]
    ]


class TestOpenAIChatContract(ProviderContract):
    provider_factory = staticmethod(factory)
    text_reply = staticmethod(text_reply)
    call_reply = staticmethod(call_reply)
    error_reply = staticmethod(error_reply)


# -- cases -------------------------------------------------------------------


async def test_bc01_interleaved_parallel_deltas(server: ScriptServer) -> None:
    """Interleaved deltas for two calls are merged per (choice, index), never into the last call."""
    case = load_case("BC01")
    server.replies.append(from_case(case["input"]["stream"]))
    events = await collect(factory(server.url), user_request())
    assert tool_calls(events) == expected_calls(case)
    assert turn_end(events).stop_reason == "tool_use"


async def test_bc02_reused_index_new_id_starts_new_call(server: ScriptServer) -> None:
    """A delta at index 0 with a new id starts a new call; '{..}{..}' is never produced."""
    case = load_case("BC02")
    server.replies.append(from_case(case["input"]["stream"]))
    events = await collect(factory(server.url), user_request())
    assert tool_calls(events) == expected_calls(case)
    assert all("}{" not in text for text in raw_arguments(events).values())


async def test_bc02_reused_index_new_name_without_id_starts_new_call(
    server: ScriptServer,
) -> None:
    """Variant: no ids at all, index 0 reused; a new name starts a new call with a unique id."""
    stream = [
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {
                                "index": 0,
                                "function": {
                                    "name": "read_file",
                                    "arguments": '{"path":"a"}',
                                },
                            }
                        ]
                    },
                }
            ]
        },
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {
                                "index": 0,
                                "function": {
                                    "name": "list_dir",
                                    "arguments": '{"path":"."}',
                                },
                            }
                        ]
                    },
                }
            ]
        },
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    ]
    server.replies.append(from_case(stream))
    events = await collect(factory(server.url), user_request())
    calls = tool_calls(events)
    assert [(c["name"], c["arguments"]) for c in calls] == [
        ("read_file", {"path": "a"}),
        ("list_dir", {"path": "."}),
    ]
    assert len({c["id"] for c in calls}) == 2
    assert all(c["id"] not in ("null", "None", c["name"]) for c in calls)


async def test_bc03_id_in_first_chunk_only_and_index_starting_at_1(
    server: ScriptServer,
) -> None:
    """The id and name come from the first chunk; index 1 is a key, no phantom call at index 0."""
    case = load_case("BC03")
    server.replies.append(from_case(case["input"]["stream"]))
    events = await collect(factory(server.url), user_request())
    assert tool_calls(events) == expected_calls(case)


async def test_bc03_id_repeated_in_every_chunk(server: ScriptServer) -> None:
    """Variant: the id and name repeated in every chunk belong to one call."""
    stream = [
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "call_R",
                                "type": "function",
                                "function": {
                                    "name": "get_weather",
                                    "arguments": '{"city":',
                                },
                            }
                        ]
                    },
                }
            ]
        },
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "call_R",
                                "type": "function",
                                "function": {
                                    "name": "get_weather",
                                    "arguments": '"Oslo"}',
                                },
                            }
                        ]
                    },
                }
            ]
        },
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    ]
    server.replies.append(from_case(stream))
    events = await collect(factory(server.url), user_request())
    assert tool_calls(events) == [
        {"id": "call_R", "name": "get_weather", "arguments": {"city": "Oslo"}}
    ]


async def test_bc08_object_arguments_serialized_and_stop_is_tool_use(
    server: ScriptServer,
) -> None:
    """Object-valued arguments become JSON text; tool calls present make it a tool_use turn (LP-09)."""
    case = load_case("BC08")
    server.replies.append(from_case(case["input"]["stream"]))
    events = await collect(factory(server.url), user_request())
    assert tool_calls(events) == expected_calls(case)
    assert raw_arguments(events) == {"call_w1": '{"city":"Paris"}'}
    assert turn_end(events).stop_reason == "tool_use"


async def test_bc11_tool_calls_finish_at_token_cap_is_max_tokens(
    server: ScriptServer,
) -> None:
    """finish_reason 'tool_calls' with completion_tokens == max_tokens is truncation (max_tokens)."""
    case = load_case("BC11")
    server.replies.append(from_case(case["input"]["stream"]))
    events = await collect(factory(server.url), user_request(max_output_tokens=300))
    assert turn_end(events).stop_reason == "max_tokens"
    assert server.last_body["max_completion_tokens"] == 300
    start = [e for e in events if isinstance(e, ToolCallBegin)]
    assert [(e.call_id, e.name) for e in start] == [("call_W", "write_file")]


async def test_truncated_by_finish_reason_length(server: ScriptServer) -> None:
    """finish_reason 'length' maps to max_tokens (LP-09)."""
    server.replies.append(
        Reply(body=sse([chunk({"content": "par"}), chunk(finish="length")], done=True))
    )
    events = await collect(factory(server.url), user_request())
    assert turn_end(events).stop_reason == "max_tokens"


async def test_stream_ending_without_finish_reason_with_open_arguments_is_max_tokens(
    server: ScriptServer,
) -> None:
    """A stream that ends mid-arguments without finish_reason is truncation (BC11 rule 3)."""
    stream = [
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "c1",
                                "function": {
                                    "name": "get_weather",
                                    "arguments": '{"ci',
                                },
                            }
                        ]
                    },
                }
            ]
        }
    ]
    server.replies.append(from_case(stream))
    events = await collect(factory(server.url), user_request())
    assert turn_end(events).stop_reason == "max_tokens"


async def test_error_event_mid_stream_raises_sanitized_provider_error(
    server: ScriptServer,
) -> None:
    """An error object inside the stream raises ProviderError after the events already yielded (SEC-06)."""
    body = sse([chunk({"content": "Hi"})]) + sse(
        [{"error": {"message": "boom sk-test-secret", "type": "server_error"}}]
    )
    server.replies.append(Reply(body=body))
    seen = []
    with pytest.raises(ProviderError) as info:
        await drain(factory(server.url).stream_turn(user_request()), seen)
    assert text_of(seen) == "Hi"
    assert info.value.code == "upstream_unavailable"
    assert "sk-test-secret" not in str(info.value)


async def test_request_body_tools_strict_and_usage_option_lp10(
    server: ScriptServer,
) -> None:
    """The request uses tools[].function (strict when set) and asks for usage (LP-10)."""
    server.replies.append(text_reply(["ok"]))
    strict = ToolSpec(
        name="s",
        description="d",
        parameters={"type": "object", "properties": {}},
        strict=True,
    )
    request = ModelRequest(
        model="gpt-x",
        messages=[UserMessage(id="u", content="hi")],
        tools=[strict],
        system_prompt="be brief",
    )
    events = await collect(factory(server.url), request)
    assert text_of(events) == "ok"
    assert turn_end(events).usage is not None
    assert turn_end(events).usage.output_tokens == 5
    recorded = server.requests[-1]
    assert recorded.path == "/v1/chat/completions"
    assert recorded.headers["Authorization"] == "Bearer sk-test-secret"
    body = recorded.body
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["messages"][0] == {"role": "system", "content": "be brief"}
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "s",
                "description": "d",
                "parameters": {"type": "object", "properties": {}},
                "strict": True,
            },
        }
    ]


async def test_bc20_interrupted_calls_answered_before_next_user_message(
    server: ScriptServer,
) -> None:
    """Unanswered calls get synthetic tool messages right after their assistant message (FT-06)."""
    case = load_case("BC20")
    history = [
        UserMessage(id="u1", content="how long ago was the landing?"),
        AssistantMessage(
            id="a1",
            tool_calls=[
                ToolCall(
                    id="call_X",
                    function=FunctionCall(name="get_current_time", arguments="{}"),
                ),
                ToolCall(
                    id="call_Y",
                    function=FunctionCall(
                        name="get_event_date", arguments='{"event":"landing"}'
                    ),
                ),
            ],
        ),
        UserMessage(id="u2", content="try again"),
    ]
    server.replies.append(text_reply(["ok"]))
    await collect(factory(server.url), ModelRequest(model="m", messages=history))
    sent = server.last_body["messages"]
    expected = case["expected"]["outbound_messages"]
    assert [m["role"] for m in sent] == [m["role"] for m in expected]
    assert [m.get("tool_call_id") for m in sent] == [
        m.get("tool_call_id") for m in expected
    ]
    assert (
        sent[2]["content"]
        == sent[3]["content"]
        == INTERRUPTED_CONTENT
        == expected[2]["content"]
    )
    assert [c["id"] for c in sent[1]["tool_calls"]] == ["call_X", "call_Y"]
    assert sent[1]["content"] is None


async def test_bc21_rejected_parallel_call_still_answered_in_call_order(
    server: ScriptServer,
) -> None:
    """Results stored in completion order are sent in call order, one per id (FT-06)."""
    case = load_case("BC21")
    msgs = case["expected"]["tool_messages"]
    history = [
        UserMessage(id="u1", content="email the team and look up status"),
        AssistantMessage(
            id="a1",
            tool_calls=[
                ToolCall(
                    id="call_S",
                    function=FunctionCall(name="send_email", arguments="{}"),
                ),
                ToolCall(
                    id="call_F", function=FunctionCall(name="lookup", arguments="{}")
                ),
            ],
        ),
        ToolMessage(id="t1", tool_call_id="call_F", content=msgs[1]["content"]),
        ToolMessage(id="t2", tool_call_id="call_S", content=msgs[0]["content"]),
    ]
    server.replies.append(text_reply(["ok"]))
    await collect(factory(server.url), ModelRequest(model="m", messages=history))
    sent = server.last_body["messages"][2:]
    assert sent == [
        {"role": "tool", "tool_call_id": m["tool_call_id"], "content": m["content"]}
        for m in msgs
    ]


async def test_mistral9_ids_are_nine_alphanumerics_and_consistent(
    server: ScriptServer,
) -> None:
    """id_style='mistral9' maps call ids and tool_call_ids to the same 9-char ids, collision-free."""
    history = [
        UserMessage(id="u1", content="x"),
        AssistantMessage(
            id="a1",
            tool_calls=[
                ToolCall(
                    id="call_aaaaaaaaaaaaaaaa",
                    function=FunctionCall(name="f", arguments="{}"),
                ),
                ToolCall(
                    id="abcDEF123", function=FunctionCall(name="f", arguments="{}")
                ),
            ],
        ),
        ToolMessage(id="t1", tool_call_id="call_aaaaaaaaaaaaaaaa", content="1"),
        ToolMessage(id="t2", tool_call_id="abcDEF123", content="2"),
    ]
    server.replies.append(text_reply(["ok"]))
    await collect(
        factory(server.url, id_style="mistral9"),
        ModelRequest(model="m", messages=history),
    )
    sent = server.last_body["messages"]
    ids = [c["id"] for c in sent[1]["tool_calls"]]
    assert ids[1] == "abcDEF123"
    assert all(len(i) == 9 and i.isalnum() for i in ids)
    assert len(set(ids)) == 2
    assert [sent[2]["tool_call_id"], sent[3]["tool_call_id"]] == ids


async def test_golden_thread_tc14_ft06_lp10(server: ScriptServer) -> None:
    """Golden: answered, failed, declined, unanswered and image results become valid Chat messages.

    Every call is answered exactly once in call order (FT-06); the image part is dropped
    with a warning and the call still answered (TC-14); only Chat formats appear (LP-10).
    """
    server.replies.append(text_reply(["ok"]))
    await collect(factory(server.url), golden_thread())
    sent = server.last_body["messages"]
    assert [m["role"] for m in sent] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "tool",
        "tool",
        "tool",
        "user",
    ]
    call_ids = [c["id"] for c in sent[2]["tool_calls"]]
    assert (
        [m["tool_call_id"] for m in sent[3:8]]
        == call_ids
        == ["call_ok", "call_fail", "call_declined", "call_pending", "call_shot"]
    )
    assert sent[3]["content"] == "18C and sunny"
    assert sent[4]["content"] == '{"error":"timeout"}'
    assert "declined" in sent[5]["content"]
    assert sent[6]["content"] == INTERRUPTED_CONTENT
    assert sent[7]["content"] == "chart rendered"  # the image part dropped (TC-14)
    assert sent[2]["tool_calls"][1]["function"]["arguments"] == "{}"  # unparseable → {}
    dumped = json.dumps(sent)
    for foreign in (
        "tool_use",
        "tool_result",
        "function_call_output",
        "functionCall",
        "input_schema",
    ):
        assert foreign not in dumped


def _call_chunk(
    index: int, call_id: str | None, name: str | None, args: str
) -> dict[str, Any]:
    function: dict[str, Any] = {"arguments": args}
    if name is not None:
        function["name"] = name
    call: dict[str, Any] = {"index": index, "type": "function", "function": function}
    if call_id is not None:
        call["id"] = call_id
    return {"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}


@pytest.mark.parametrize(
    "chunks",
    [
        # The whole call sent twice, at the same index.
        [
            _call_chunk(0, "call_R", "refund", '{"order":"A-1"}'),
            _call_chunk(0, "call_R", "refund", '{"order":"A-1"}'),
        ],
        # Sent again at another index, after another call.
        [
            _call_chunk(0, "call_R", "refund", '{"order":"A-1"}'),
            _call_chunk(1, "call_S", "lookup", '{"order":"A-1"}'),
            _call_chunk(2, "call_R", "refund", '{"order":"A-1"}'),
        ],
        # The id on every fragment (a continuation, not a copy).
        [
            _call_chunk(0, "call_R", "refund", '{"order":'),
            _call_chunk(0, "call_R", None, '"A-1"}'),
        ],
    ],
    ids=["same-index", "other-index", "id-on-every-fragment"],
)
async def test_repeated_call_id_across_chunks_is_one_call(
    server: ScriptServer, chunks: list[dict[str, Any]]
) -> None:
    """A call id repeated across chunks is one call: never '{..}{..}', never minted twice."""
    finish = {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}
    server.replies.append(from_case([*chunks, finish]))
    events = await collect(factory(server.url), user_request())
    refunds = [c for c in tool_calls(events) if c["name"] == "refund"]
    assert refunds == [
        {"id": "call_R", "name": "refund", "arguments": {"order": "A-1"}}
    ]
    assert raw_arguments(events)["call_R"] == '{"order":"A-1"}'
