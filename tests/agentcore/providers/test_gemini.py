"""Gemini adapter over a local ``alt=sse`` server, through the real ``google-genai`` SDK."""

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
from agentcore.providers.base import ModelRequest, ProviderError, ToolCallBegin
from agentcore.providers.gemini import GeminiProvider
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
from tests.agentcore.providers.server import Reply, ScriptServer, json_reply, sse
from tests.cases import load_case

USAGE = {"promptTokenCount": 9, "candidatesTokenCount": 4, "totalTokenCount": 13}


def chunk(
    parts: list[dict[str, Any]], finish: str | None = None, usage: bool = False
) -> dict[str, Any]:
    candidate: dict[str, Any] = {
        "content": {"role": "model", "parts": parts},
        "index": 0,
    }
    if finish:
        candidate["finishReason"] = finish
    out: dict[str, Any] = {"candidates": [candidate], "modelVersion": "gemini-test"}
    if usage:
        out["usageMetadata"] = USAGE
    return out


def text_reply(parts: list[str]) -> Reply:
    chunks = [chunk([{"text": p}]) for p in parts]
    chunks[-1] = chunk([{"text": parts[-1]}], "STOP", usage=True)
    return Reply(body=sse(chunks))


def call_reply(name: str, call_id: str, args: list[str]) -> Reply:
    # Gemini sends args whole, as an object; the contract's fragments are joined here.
    return Reply(
        body=sse(
            [
                chunk(
                    [
                        {
                            "functionCall": {
                                "name": name,
                                "args": json.loads("".join(args)),
                            }
                        }
                    ],
                    "STOP",
                    usage=True,
                )
            ]
        )
    )


def error_reply(status: int) -> Reply:
    return json_reply(
        status,
        {
            "error": {
                "code": status,
                "message": "internal detail sk-test-secret",
                "status": "X",
            }
        },
    )


def either(obj: dict[str, Any], camel: str, snake: str) -> Any:
    """Return ``obj[camel]`` or ``obj[snake]``: proto JSON accepts both spellings."""
    return obj[camel] if camel in obj else obj[snake]


def factory(url: str, **options: Any) -> GeminiProvider:
    return GeminiProvider(
        model="gemini-test", api_key="sk-test-secret", base_url=url, **options
    )


class TestGeminiContract(ProviderContract):
    provider_factory = staticmethod(factory)
    text_reply = staticmethod(text_reply)
    call_reply = staticmethod(call_reply)
    error_reply = staticmethod(error_reply)


async def test_bc18_missing_ids_synthesized_unique_and_marked(
    server: ScriptServer,
) -> None:
    """Id-less functionCall parts in separate chunks become two calls with unique, non-'null' ids marked synthetic."""
    case = load_case("BC18")
    server.replies.append(Reply(body=sse(case["input"]["stream"])))
    events = await collect(factory(server.url), user_request())
    calls = tool_calls(events)
    assert [(c["name"], c["arguments"]) for c in calls] == [
        (c["name"], c["arguments"]) for c in case["expected"]["tool_calls"]
    ]
    ids = [c["id"] for c in calls]
    assert len(set(ids)) == 2
    assert not {"null", "None", "get_weather"} & set(ids)
    begins = [e for e in events if isinstance(e, ToolCallBegin)]
    assert all(b.metadata == {"gemini": {"synthetic_id": True}} for b in begins)
    assert turn_end(events).stop_reason == "tool_use"


async def test_bc18_gemini_id_kept_verbatim_and_replayed(server: ScriptServer) -> None:
    """A Gemini-provided id is kept verbatim and sent back on functionCall and functionResponse."""
    server.replies.append(
        Reply(
            body=sse(
                [
                    chunk(
                        [
                            {
                                "functionCall": {
                                    "id": "g-1",
                                    "name": "get_weather",
                                    "args": {"city": "Oslo"},
                                }
                            }
                        ],
                        "STOP",
                    )
                ]
            )
        )
    )
    events = await collect(factory(server.url), user_request())
    [begin] = [e for e in events if isinstance(e, ToolCallBegin)]
    assert (begin.call_id, begin.metadata) == ("g-1", {"gemini": {"id": "g-1"}})
    history = [
        UserMessage(id="u", content="x"),
        AssistantMessage(
            id="a",
            tool_calls=[
                ToolCall(
                    id="g-1",
                    function=FunctionCall(
                        name="get_weather", arguments='{"city":"Oslo"}'
                    ),
                    metadata=begin.metadata,
                )
            ],
        ),
        ToolMessage(id="t", tool_call_id="g-1", content="sunny"),
    ]
    server.replies.append(text_reply(["ok"]))
    await collect(
        factory(server.url), ModelRequest(model="gemini-test", messages=history)
    )
    contents = server.last_body["contents"]
    assert contents[1]["parts"][0]["functionCall"]["id"] == "g-1"
    assert contents[2]["parts"][0]["functionResponse"] == {
        "id": "g-1",
        "name": "get_weather",
        "response": {"result": "sunny"},
    }


async def test_bc18_replay_omits_synthetic_ids_and_names_each_response(
    server: ScriptServer,
) -> None:
    """Synthetic ids never reach Gemini; responses go in call order, each with the call's name (BC18 replay)."""
    case = load_case("BC18")
    meta = {"gemini": {"synthetic_id": True}}
    history = [
        UserMessage(id="u", content="weather in Denver and Moab"),
        AssistantMessage(
            id="a",
            tool_calls=[
                ToolCall(
                    id="gemini_call_2",
                    function=FunctionCall(
                        name="get_weather", arguments='{"city":"Denver"}'
                    ),
                    metadata=meta,
                ),
                ToolCall(
                    id="gemini_call_3",
                    function=FunctionCall(
                        name="get_weather", arguments='{"city":"Moab"}'
                    ),
                    metadata=meta,
                ),
            ],
        ),
        ToolMessage(id="t2", tool_call_id="gemini_call_3", content="<Moab result>"),
        ToolMessage(id="t1", tool_call_id="gemini_call_2", content="<Denver result>"),
    ]
    server.replies.append(text_reply(["ok"]))
    await collect(
        factory(server.url), ModelRequest(model="gemini-test", messages=history)
    )
    contents = server.last_body["contents"]
    assert contents[2] == case["expected"]["gemini_replay"]
    assert "gemini_call" not in json.dumps(contents)


async def test_bc23_missing_response_filled_same_count_and_order(
    server: ScriptServer,
) -> None:
    """N functionCall parts are answered by exactly N functionResponse parts in one user content (BC23).

    The synthetic answer's detail is BC20's canonical text, not BC23's; the rule (count, order, names) holds.
    """
    history = [
        UserMessage(id="u", content="read both files"),
        AssistantMessage(
            id="a",
            tool_calls=[
                ToolCall(
                    id="c1",
                    function=FunctionCall(
                        name="read_file", arguments='{"path":"a.md"}'
                    ),
                ),
                ToolCall(
                    id="c2",
                    function=FunctionCall(
                        name="read_file", arguments='{"path":"b.md"}'
                    ),
                ),
            ],
        ),
        ToolMessage(id="t1", tool_call_id="c1", content="A"),
    ]
    server.replies.append(text_reply(["ok"]))
    await collect(
        factory(server.url), ModelRequest(model="gemini-test", messages=history)
    )
    contents = server.last_body["contents"]
    assert [c["role"] for c in contents] == ["user", "model", "user"]
    assert len(contents[1]["parts"]) == len(contents[2]["parts"]) == 2
    assert contents[2]["parts"] == [
        {"functionResponse": {"name": "read_file", "response": {"result": "A"}}},
        {
            "functionResponse": {
                "name": "read_file",
                "response": json.loads(INTERRUPTED_CONTENT),
            }
        },
    ]


async def test_bc25_thought_signature_stored_and_replayed_byte_for_byte(
    server: ScriptServer,
) -> None:
    """A functionCall's thoughtSignature is stored in metadata and replayed on the same part (BC25)."""
    case = load_case("BC25")
    part = case["input"]["model_stream_part"]
    server.replies.append(Reply(body=sse([chunk([part], "STOP")])))
    events = await collect(factory(server.url), user_request())
    [begin] = [e for e in events if isinstance(e, ToolCallBegin)]
    assert begin.metadata is not None
    assert begin.metadata["gemini"]["thought_signature"] == part["thoughtSignature"]
    history = [
        UserMessage(id="u", content="list"),
        AssistantMessage(
            id="a",
            tool_calls=[
                ToolCall(
                    id=begin.call_id,
                    function=FunctionCall(
                        name="run_shell", arguments='{"command":"ls"}'
                    ),
                    metadata=begin.metadata,
                )
            ],
        ),
        ToolMessage(id="t", tool_call_id=begin.call_id, content="a.txt"),
    ]
    server.replies.append(text_reply(["ok"]))
    await collect(
        factory(server.url), ModelRequest(model="gemini-test", messages=history)
    )
    assert server.last_body["contents"][1] == case["expected"]["replay"]


async def test_bc25_signature_from_encrypted_value(server: ScriptServer) -> None:
    """A signature stored as the AG-UI ToolCall encrypted_value is replayed too (BC25)."""
    history = [
        UserMessage(id="u", content="list"),
        AssistantMessage(
            id="a",
            tool_calls=[
                ToolCall(
                    id="c",
                    function=FunctionCall(name="run_shell", arguments="{}"),
                    encrypted_value="c2lnLW9wYXF1ZS0x",
                )
            ],
        ),
        ToolMessage(id="t", tool_call_id="c", content="a.txt"),
    ]
    server.replies.append(text_reply(["ok"]))
    await collect(
        factory(server.url), ModelRequest(model="gemini-test", messages=history)
    )
    assert (
        server.last_body["contents"][1]["parts"][0]["thoughtSignature"]
        == "c2lnLW9wYXF1ZS0x"
    )


async def test_parallel_calls_in_one_chunk_and_max_tokens(server: ScriptServer) -> None:
    """Two calls in one chunk are two calls; finishReason MAX_TOKENS maps to max_tokens (LP-09)."""
    parts = [
        {"functionCall": {"name": "get_weather", "args": {"city": "A"}}},
        {"functionCall": {"name": "get_weather", "args": {"city": "B"}}},
    ]
    server.replies.append(Reply(body=sse([chunk(parts, "MAX_TOKENS", usage=True)])))
    events = await collect(factory(server.url), user_request(max_output_tokens=10))
    assert [c["arguments"] for c in tool_calls(events)] == [
        {"city": "A"},
        {"city": "B"},
    ]
    assert turn_end(events).stop_reason == "max_tokens"
    assert server.last_body["generationConfig"]["maxOutputTokens"] == 10


async def test_stream_cut_before_finish_reason_raises_malformed_stream(
    server: ScriptServer,
) -> None:
    """A stream that stops without a finishReason raises ProviderError(malformed_stream) after the text."""
    server.replies.append(Reply(body=sse([chunk([{"text": "Hi"}])])))
    seen = []
    with pytest.raises(ProviderError) as info:
        await drain(factory(server.url).stream_turn(user_request()), seen)
    assert text_of(seen) == "Hi"
    assert info.value.code == "malformed_stream"


async def test_request_body_function_declarations_lp10(server: ScriptServer) -> None:
    """The request carries functionDeclarations with the schema unchanged, system instruction, and alt=sse (LP-10)."""
    server.replies.append(text_reply(["o", "k"]))
    events = await collect(factory(server.url), user_request(system_prompt="be brief"))
    assert text_of(events) == "ok"
    assert turn_end(events).usage is not None
    assert turn_end(events).usage.total_tokens == 13
    recorded = server.requests[-1]
    assert recorded.path.endswith(
        "/v1beta/models/test-model:streamGenerateContent?alt=sse"
    )
    assert recorded.headers["x-goog-api-key"] == "sk-test-secret"
    body = recorded.body
    assert body["systemInstruction"]["parts"] == [{"text": "be brief"}]
    [decl] = body["tools"][0]["functionDeclarations"]
    assert decl["name"] == "get_weather"
    # the SDK writes this field and FunctionResponse.parts in snake_case, which the
    # API's proto-JSON parser accepts alongside camelCase
    assert either(decl, "parametersJsonSchema", "parameters_json_schema") == {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    }
    assert body["contents"] == [{"role": "user", "parts": [{"text": "hi"}]}]


async def test_golden_thread_tc14_ft06_lp10(server: ScriptServer) -> None:
    """Golden: one model turn of 5 functionCalls answered by 5 named functionResponses in order; image as inline data."""
    server.replies.append(text_reply(["ok"]))
    await collect(factory(server.url), golden_thread())
    contents = server.last_body["contents"]
    assert [c["role"] for c in contents] == ["user", "model", "user", "user"]
    calls = [p["functionCall"] for p in contents[1]["parts"] if "functionCall" in p]
    responses = [p["functionResponse"] for p in contents[2]["parts"]]
    assert len(calls) == len(responses) == len(GOLDEN_CALLS)
    assert [r["name"] for r in responses] == [c["name"] for c in calls]
    assert calls[1]["args"] == {}
    assert responses[0]["response"] == {"result": "18C and sunny"}
    assert responses[1]["response"] == {"error": "timeout"}
    assert "declined" in responses[2]["response"]["result"]
    assert responses[3]["response"] == json.loads(INTERRUPTED_CONTENT)
    assert responses[4]["response"] == {"result": "chart rendered"}
    [image] = responses[4]["parts"]
    blob = either(image, "inlineData", "inline_data")
    assert (either(blob, "mimeType", "mime_type"), blob["data"]) == (
        "image/png",
        PNG_B64,
    )
    assert all("id" not in c for c in calls)  # ids not from Gemini are never sent
    dumped = json.dumps(server.last_body)
    for foreign in (
        '"tool_calls"',
        "tool_result",
        "function_call_output",
        "input_schema",
    ):
        assert foreign not in dumped


async def test_error_object_mid_stream_raises_sanitized_provider_error(
    server: ScriptServer,
) -> None:
    """An error object inside the SSE stream raises ProviderError after the text already yielded (SEC-06)."""
    error = {
        "error": {
            "code": 503,
            "message": "overloaded sk-test-secret",
            "status": "UNAVAILABLE",
        }
    }
    server.replies.append(Reply(body=sse([chunk([{"text": "Hi"}]), error])))
    seen = []
    with pytest.raises(ProviderError) as info:
        await drain(factory(server.url).stream_turn(user_request()), seen)
    assert text_of(seen) == "Hi"
    assert info.value.code == "upstream_unavailable"
    assert "sk-test-secret" not in str(info.value)


async def test_repeated_function_call_id_in_two_chunks_is_one_call(
    server: ScriptServer,
) -> None:
    """One functionCall id in two stream chunks is one call (it ran twice, the
    second copy minted ``<id>_2``); a call without id beside it stays its own."""
    part = {"functionCall": {"id": "g-1", "name": "refund", "args": {"order": "A-1"}}}
    other = {"functionCall": {"name": "refund", "args": {"order": "B-2"}}}
    server.replies.append(
        Reply(body=sse([chunk([part]), chunk([part, other]), chunk([part], "STOP")]))
    )
    events = await collect(factory(server.url), user_request())
    calls = tool_calls(events)
    assert calls[0]["id"] == "g-1"
    assert [c["arguments"] for c in calls] == [{"order": "A-1"}, {"order": "B-2"}]
    assert "g-1_2" not in {c["id"] for c in calls}
    assert turn_end(events).stop_reason == "tool_use"
