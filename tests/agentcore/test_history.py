"""History end to end: every call and result kept, unique ids on the wire, nothing unencodable sent.

Each case goes through the real path: the loop (driven by the scripted provider),
then the request the next model turn gets, translated by all four adapters'
``build_request`` (LP-10), and encoded as UTF-8 the way an HTTP client would.
"""

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
from agentcore.history import (
    INTERRUPTED_CONTENT,
    UnknownToolResult,
    check_tool_results,
    prepare_history,
    replay_arguments,
    replay_arguments_text,
)
from agentcore.loop import LoopAgent
from agentcore.providers.anthropic import AnthropicProvider
from agentcore.providers.base import (
    ModelRequest,
    ToolCallBegin,
    ToolCallDelta,
    TurnEnd,
)
from agentcore.providers.gemini import GeminiProvider
from agentcore.providers.openai_chat import OpenAIChatProvider
from agentcore.providers.openai_responses import OpenAIResponsesProvider
from agentcore.providers.scripted import ScriptedProvider, raw, text
from agentcore.tools import Tool, ToolContext, Toolset, define_tool
from tests.agentcore.helpers import assert_valid_stream, collect, make_input, of_type

ECHO_SCHEMA = {
    "type": "object",
    "properties": {"text": {"type": "string"}},
    "required": ["text"],
    "additionalProperties": False,
}


def echo_tool(seen: list[dict[str, Any]]) -> Tool:
    def echo(params: dict[str, Any], context: ToolContext) -> str:
        seen.append(params)
        return f"echo: {params['text']}"

    return define_tool(
        name="echo", description="Echo text.", parameters=ECHO_SCHEMA, execute=echo
    )


def call(call_id: str, arguments: str = '{"text": "x"}') -> ToolCall:
    return ToolCall(id=call_id, function=FunctionCall(name="echo", arguments=arguments))


# --- the four wire formats, reduced to (calls, results) --------------------------------


def wire_chat(
    request: ModelRequest,
) -> tuple[list[tuple[str, Any]], list[tuple[str, Any]]]:
    body = OpenAIChatProvider(model="m", api_key="k").build_request(request)
    encoded(body)
    calls = [
        (c["id"], c["function"]["arguments"])
        for m in body["messages"]
        if m["role"] == "assistant"
        for c in m.get("tool_calls") or ()
    ]
    results = [
        (m["tool_call_id"], m["content"])
        for m in body["messages"]
        if m["role"] == "tool"
    ]
    return calls, results


def wire_responses(
    request: ModelRequest,
) -> tuple[list[tuple[str, Any]], list[tuple[str, Any]]]:
    body = OpenAIResponsesProvider(model="m", api_key="k").build_request(request)
    encoded(body)
    items = body["input"]
    calls = [
        (i["call_id"], i["arguments"])
        for i in items
        if i.get("type") == "function_call"
    ]
    results = [
        (i["call_id"], i["output"])
        for i in items
        if i.get("type") == "function_call_output"
    ]
    return calls, results


def wire_anthropic(
    request: ModelRequest,
) -> tuple[list[tuple[str, Any]], list[tuple[str, Any]]]:
    body = AnthropicProvider(model="m", api_key="k").build_request(request)
    encoded(body)
    blocks = [
        b
        for m in body["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
    ]
    calls = [(b["id"], b["input"]) for b in blocks if b["type"] == "tool_use"]
    results = [
        (b["tool_use_id"], b["content"]) for b in blocks if b["type"] == "tool_result"
    ]
    return calls, results


def wire_gemini(
    request: ModelRequest,
) -> tuple[list[tuple[str, Any]], list[tuple[str, Any]]]:
    contents, _ = GeminiProvider(model="m", api_key="k").build_request(request)
    dumped = [c.model_dump(mode="json", exclude_none=True) for c in contents]
    encoded(dumped)
    parts = [p for c in dumped for p in c["parts"]]
    # Gemini pairs calls and responses by position and name, not by id (BC23).
    calls = [
        (p["function_call"]["name"], p["function_call"]["args"])
        for p in parts
        if "function_call" in p
    ]
    results = [
        (p["function_response"]["name"], p["function_response"]["response"])
        for p in parts
        if "function_response" in p
    ]
    return calls, results


WIRES = {
    "openai_chat": wire_chat,
    "openai_responses": wire_responses,
    "anthropic": wire_anthropic,
    "gemini": wire_gemini,
}


def encoded(body: Any) -> bytes:
    """Encode ``body`` the way the SDKs' HTTP clients do; raises on a lone surrogate."""
    return json.dumps(body, ensure_ascii=False).encode("utf-8")


def request_of(messages: list[Any]) -> ModelRequest:
    return ModelRequest(model="m", messages=messages, tools=[])


# --- a reused call id keeps every call and result -----------------------------------


REUSED = [
    UserMessage(id="u1", content="first"),
    AssistantMessage(id="a1", tool_calls=[call("call_1", '{"text": "one"}')]),
    ToolMessage(id="t1", tool_call_id="call_1", content="echo: one"),
    UserMessage(id="u2", content="second"),
    AssistantMessage(id="a2", tool_calls=[call("call_1", '{"text": "two"}')]),
    ToolMessage(id="t2", tool_call_id="call_1", content="echo: two"),
]


def test_reused_call_id_keeps_both_results_with_unique_wire_ids() -> None:
    """A provider that reused ``call_1`` gets both calls back, each with its own result."""
    wire_ids: dict[str, str] = {}
    prepared = prepare_history(REUSED, wire_ids=wire_ids)
    pairs = [
        (m.tool_calls[0].id, m.tool_calls[0].function.arguments)
        for m in prepared
        if isinstance(m, AssistantMessage)
    ]
    answers = [
        (m.tool_call_id, m.content) for m in prepared if isinstance(m, ToolMessage)
    ]
    assert pairs == [("call_1", '{"text": "one"}'), ("call_1_2", '{"text": "two"}')]
    assert answers == [("call_1", "echo: one"), ("call_1_2", "echo: two")]
    assert INTERRUPTED_CONTENT not in [content for _, content in answers]
    assert wire_ids == {"call_1_2": "call_1"}
    assert [m.id for m in REUSED][-1] == "t2"  # input untouched
    assert REUSED[4].tool_calls[0].id == "call_1"


@pytest.mark.parametrize("wire", ["openai_chat", "openai_responses", "anthropic"])
def test_reused_call_id_unique_on_the_wire_per_provider(wire: str) -> None:
    """LP-10: every id-carrying format gets distinct ids, each result under its own call."""
    calls, results = WIRES[wire](request_of(REUSED))
    ids = [call_id for call_id, _ in calls]
    assert len(set(ids)) == 2
    assert [call_id for call_id, _ in results] == ids
    assert [json.dumps(content) for _, content in results] == [
        json.dumps(content) for content in ("echo: one", "echo: two")
    ]


def test_reused_call_id_gemini_keeps_both_responses() -> None:
    """Gemini (no ids on the wire) gets both calls and both responses, in order (BC23)."""
    calls, results = wire_gemini(request_of(REUSED))
    assert calls == [("echo", {"text": "one"}), ("echo", {"text": "two"})]
    assert [r for _, r in results] == [{"result": "echo: one"}, {"result": "echo: two"}]


def test_two_results_after_two_calls_with_one_id_answer_them_in_order() -> None:
    """Results stored after both calls answer the earliest unanswered call first."""
    history = [
        AssistantMessage(id="a1", tool_calls=[call("c")]),
        AssistantMessage(id="a2", tool_calls=[call("c")]),
        ToolMessage(id="t1", tool_call_id="c", content="first"),
        ToolMessage(id="t2", tool_call_id="c", content="second"),
    ]
    prepared = prepare_history(history)
    assert [
        (m.role, getattr(m, "tool_call_id", None), m.content) for m in prepared
    ] == [
        ("assistant", None, None),
        ("tool", "c", "first"),
        ("assistant", None, None),
        ("tool", "c_2", "second"),
    ]


def test_one_message_calling_one_id_twice_gets_distinct_wire_ids() -> None:
    """Two calls with one id in one assistant message are two calls on the wire."""
    history = [
        AssistantMessage(id="a1", tool_calls=[call("c"), call("c")]),
        ToolMessage(id="t1", tool_call_id="c", content="first"),
        ToolMessage(id="t2", tool_call_id="c", content="second"),
    ]
    calls, results = wire_chat(request_of(history))
    assert [i for i, _ in calls] == ["c", "c_2"]
    assert results == [("c", "first"), ("c_2", "second")]


def test_wire_id_never_collides_with_an_existing_id() -> None:
    """The minted wire id skips ids the history already uses."""
    history = [
        AssistantMessage(id="a1", tool_calls=[call("c"), call("c_2")]),
        AssistantMessage(id="a2", tool_calls=[call("c")]),
    ]
    calls, results = wire_chat(request_of(history))
    assert [i for i, _ in calls] == ["c", "c_2", "c_3"]
    assert [i for i, _ in results] == ["c", "c_2", "c_3"]


async def test_imported_history_with_reused_ids_reaches_the_provider_whole() -> None:
    """A run whose input history reuses an id sends both calls and both results to the model."""
    provider = ScriptedProvider([text("done")])
    agent = LoopAgent(provider, toolset=Toolset([echo_tool([])]), model="m")
    events = await collect(
        agent, make_input(messages=[*REUSED, UserMessage(id="u3", content="and?")])
    )
    assert_valid_stream(events)
    calls, results = wire_chat(provider.requests[0])
    assert len({i for i, _ in calls}) == 2
    assert [content for _, content in results] == ["echo: one", "echo: two"]


# --- check_tool_results: a stray result is refused where it enters --------------------


def test_check_tool_results_names_the_stray_id() -> None:
    """A tool message answering no call raises, naming the message and the id (RT-09)."""
    history = [
        AssistantMessage(id="a1", tool_calls=[call("call_A")]),
        ToolMessage(id="t1", tool_call_id="call_A", content="ok"),
        ToolMessage(id="t9", tool_call_id="call_ghost", content="orphan"),
    ]
    with pytest.raises(UnknownToolResult) as raised:
        check_tool_results(history)
    assert raised.value.tool_call_id == "call_ghost"
    assert raised.value.message_id == "t9"
    assert "'call_ghost'" in str(raised.value)
    assert "send the assistant message carrying that tool call" in str(raised.value)


def test_check_tool_results_accepts_known_and_stored_calls() -> None:
    """Results for calls in the input, or already stored on the thread, pass."""
    check_tool_results(
        [
            {"id": "a1", "role": "assistant", "toolCalls": [{"id": "c1"}]},
            {"id": "t1", "role": "tool", "toolCallId": "c1", "content": "x"},
            {"id": "t2", "role": "tool", "toolCallId": "stored", "content": "y"},
        ],
        known_call_ids={"stored"},
    )
    with pytest.raises(UnknownToolResult, match="'nope'"):
        check_tool_results(
            [{"id": "t3", "role": "tool", "toolCallId": "nope", "content": "z"}]
        )


# --- unicode end to end --------------------------------------------------------------


async def test_surrogate_pair_split_across_deltas_is_one_character() -> None:
    """LP-04, TC-03: deltas are joined as text; a pair split in two arrives as one character."""
    seen: list[dict[str, Any]] = []
    provider = ScriptedProvider(
        [
            raw(
                ToolCallBegin(call_id="c1", name="echo"),
                ToolCallDelta(call_id="c1", delta='{"text": "smile \ud83d'),
                ToolCallDelta(call_id="c1", delta='\ude00"}'),
                TurnEnd(stop_reason="tool_use"),
            ),
            text("done"),
        ]
    )
    agent = LoopAgent(provider, toolset=Toolset([echo_tool(seen)]), model="m")
    events = await collect(agent, make_input("go"))
    assert_valid_stream(events)
    assert seen == [{"text": "smile 😀"}]
    deltas = [e.delta for e in of_type(events, "TOOL_CALL_ARGS")]
    assert deltas == ['{"text": "smile ', '😀"}']
    for wire in WIRES.values():
        calls, _ = wire(provider.requests[1])
        assert len(calls) == 1


async def test_text_delta_split_surrogate_pair_is_one_character() -> None:
    """Assistant text split inside a surrogate pair streams and replays whole."""
    provider = ScriptedProvider(
        [
            raw(
                _text_delta("a\ud83d"),
                _text_delta("\ude00b"),
                TurnEnd(stop_reason="end_turn"),
            )
        ]
    )
    agent = LoopAgent(provider, toolset=Toolset(), model="m")
    events = await collect(agent, make_input("go"))
    assert_valid_stream(events)
    assert "".join(e.delta for e in of_type(events, "TEXT_MESSAGE_CONTENT")) == "a😀b"


def _text_delta(value: str) -> Any:
    from agentcore.providers.base import TextDelta

    return TextDelta(text=value)


LONE = [
    # A high surrogate whose low half never came (the provider's stream was cut).
    ('{"text": "a\ud83d', '"}'),
    # A lone low surrogate.
    ('{"text": "\ude00', '"}'),
    # An escaped lone surrogate: valid JSON syntax, not valid Unicode.
    ('{"text": "\\ud800', '"}'),
]


@pytest.mark.parametrize(("first", "second"), LONE)
async def test_lone_surrogate_is_refused_and_the_next_request_encodes(
    first: str, second: str
) -> None:
    """A lone surrogate never reaches a tool nor a provider; the model sees ``{}`` and the error.

    The call is answered ``invalid_arguments_json``; the next request replays its
    arguments as the empty object in all four formats, and every body encodes.
    """
    seen: list[dict[str, Any]] = []
    provider = ScriptedProvider(
        [
            raw(
                ToolCallBegin(call_id="c1", name="echo"),
                ToolCallDelta(call_id="c1", delta=first),
                ToolCallDelta(call_id="c1", delta=second),
                TurnEnd(stop_reason="tool_use"),
            ),
            text("sorry"),
        ]
    )
    agent = LoopAgent(provider, toolset=Toolset([echo_tool(seen)]), model="m")
    events = await collect(agent, make_input("go"))
    assert_valid_stream(events)
    assert seen == []
    [result] = of_type(events, "TOOL_CALL_RESULT")
    body = json.loads(result.content)
    assert body["error"] == "invalid_arguments_json"
    assert "surrogate" in body["detail"]
    assert "at offset 11" in body["detail"] or "at offset 10" in body["detail"]
    for event in of_type(events, "TOOL_CALL_ARGS"):
        encoded(event.delta)  # what is logged and streamed encodes too
    assert of_type(events, "RUN_FINISHED")
    follow_up = provider.requests[1]
    expected = {
        "openai_chat": "{}",
        "openai_responses": "{}",
        "anthropic": {},
        "gemini": {},
    }
    for name, wire in WIRES.items():
        calls, results = wire(follow_up)
        assert [arguments for _, arguments in calls] == [expected[name]], name
        assert len(results) == 1, name


def test_replay_defined_for_every_refused_text() -> None:
    """What a refused call's arguments replay as: the text if it is an encodable object, else ``{}``."""
    assert replay_arguments_text('{"text": "\\u0007"}') == '{"text": "\\u0007"}'
    assert replay_arguments_text('{"text": "\\ud800"}') == "{}"
    assert replay_arguments_text('{"text": "\ud800"}') == "{}"
    assert replay_arguments_text('{"n": NaN}') == "{}"
    assert replay_arguments_text('{"text": "a\\qb"}') == "{}"
    assert replay_arguments_text('{"city": "') == "{}"
    assert replay_arguments('{"text": "\\udc00"}') == {}
    assert replay_arguments('"{\\"a\\": \\"\\\\ud800\\"}"') == {}
    assert replay_arguments('{"text": "😀"}') == {"text": "😀"}


def test_message_text_with_lone_surrogate_is_sent_with_replacement() -> None:
    """User and tool text holding a lone surrogate goes out with U+FFFD in all four formats."""
    history = [
        UserMessage(id="u1", content="hi \ud800"),
        AssistantMessage(id="a1", content="ok \udfff", tool_calls=[call("c1")]),
        ToolMessage(id="t1", tool_call_id="c1", content="res \ud83d"),
    ]
    for wire in WIRES.values():
        _, results = wire(request_of(history))
        assert "\ufffd" in json.dumps(results, ensure_ascii=False)


def test_gemini_reused_call_id_gets_a_unique_wire_id_too() -> None:
    """Gemini echoes its own call id on the wire: a reused one is renamed on call and response."""

    def gemini_call(arguments: str) -> ToolCall:
        return ToolCall(
            id="g1",
            function=FunctionCall(name="echo", arguments=arguments),
            metadata={"gemini": {"id": "g1"}},
        )

    history = [
        AssistantMessage(id="a1", tool_calls=[gemini_call('{"text": "one"}')]),
        ToolMessage(id="t1", tool_call_id="g1", content="echo: one"),
        AssistantMessage(id="a2", tool_calls=[gemini_call('{"text": "two"}')]),
        ToolMessage(id="t2", tool_call_id="g1", content="echo: two"),
    ]
    contents, _ = GeminiProvider(model="m", api_key="k").build_request(
        request_of(history)
    )
    parts = [p for c in contents for p in c.parts or ()]
    call_ids = [p.function_call.id for p in parts if p.function_call]
    response_ids = [p.function_response.id for p in parts if p.function_response]
    assert call_ids == ["g1", "g1_2"]
    assert response_ids == ["g1", "g1_2"]
    assert history[2].tool_calls[0].metadata == {"gemini": {"id": "g1"}}


async def test_escaped_nul_in_valid_json_is_answered_invalid_arguments() -> None:
    """``{"note":"a\\u0000b"}`` is valid JSON with a refused value: the call is
    answered ``invalid_arguments``, "string value contains control character
    U+0000", and the tool never runs."""
    seen: list[dict[str, Any]] = []
    provider = ScriptedProvider(
        [
            raw(
                ToolCallBegin(call_id="c1", name="echo"),
                ToolCallDelta(call_id="c1", delta='{"note":"a\\u0000b"}'),
                TurnEnd(stop_reason="tool_use"),
            ),
            text("sorry"),
        ]
    )
    agent = LoopAgent(provider, toolset=Toolset([echo_tool(seen)]), model="m")
    events = await collect(agent, make_input("go"))
    assert_valid_stream(events)
    assert seen == []
    [result] = of_type(events, "TOOL_CALL_RESULT")
    body = json.loads(result.content)
    assert body["error"] == "invalid_arguments"
    assert "string value contains control character U+0000" in body["detail"]
