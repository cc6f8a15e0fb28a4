"""The scripted provider: its rules over the demo tools, and explicit scripts (STYLE 16)."""

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
from agentcore.loop import LoopAgent
from agentcore.providers.base import (
    ModelEvent,
    ModelRequest,
    ProviderError,
    TextDelta,
    ToolCallBegin,
    ToolCallDelta,
    TurnEnd,
    Usage,
)
from agentcore.providers.scripted import (
    REFUND_REASON,
    ScriptedProvider,
    raise_error,
    split_fragments,
    text,
    tool_call,
    turn,
)
from agentcore.tools import Toolset
from demo.tools import DEMO_TOOLS, ORDERS, lookup_order, refund_order
from tests.agentcore.helpers import (
    assert_valid_stream,
    collapsed,
    collect,
    make_input,
    of_type,
)
from tests.agentcore.providers.contract import drain

APPLICATION_TOOLS = [lookup_order.agui_tool(), refund_order.agui_tool()]


async def play(provider: ScriptedProvider, request: ModelRequest) -> list[ModelEvent]:
    return [event async for event in provider.stream_turn(request)]


def request(text_: str, *, tools: Any = (), messages: Any = None) -> ModelRequest:
    specs = [t.spec() for t in DEMO_TOOLS] if tools == () else tools
    return ModelRequest(
        model="scripted",
        messages=messages or [UserMessage(id="u1", content=text_)],
        tools=specs,
    )


def calls_of(events: list[ModelEvent]) -> list[tuple[str, dict[str, Any]]]:
    names: dict[str, str] = {}
    args: dict[str, str] = {}
    for event in events:
        if isinstance(event, ToolCallBegin):
            names[event.call_id] = event.name
            args[event.call_id] = ""
        elif isinstance(event, ToolCallDelta):
            args[event.call_id] += event.delta
    return [(names[c], json.loads(args[c])) for c in names]


def text_of(events: list[ModelEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def agent() -> LoopAgent:
    return LoopAgent(ScriptedProvider(), toolset=Toolset(DEMO_TOOLS), model="scripted")


# --- rules -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "city"),
    [
        ("What's the weather in Oslo?", "Oslo"),
        ("weather in New York!", "New York"),
        ("WEATHER IN paris. Thanks", "paris"),
        ("Tell me the weather in Tokyo, please", "Tokyo"),
    ],
)
async def test_weather_rule_calls_get_weather(message: str, city: str) -> None:
    """ "weather in <city>" calls get_weather with the city, arguments streamed in pieces (LP-09)."""
    events = await play(ScriptedProvider(), request(message))
    assert calls_of(events) == [("get_weather", {"city": city})]
    assert sum(isinstance(e, ToolCallDelta) for e in events) > 1
    assert isinstance(events[-1], TurnEnd)
    assert events[-1].stop_reason == "tool_use"


async def test_weather_rule_through_the_loop_quotes_the_result() -> None:
    """In the loop, get_weather runs agent-side and the final text quotes its result (RT-07)."""
    run_input = make_input("What's the weather in Oslo?")
    events = await collect(agent(), run_input)
    assert_valid_stream(events, run_input=run_input)
    assert collapsed(events) == [
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
    (result,) = of_type(events, "TOOL_CALL_RESULT")
    assert json.loads(result.content)["city"] == "Oslo"
    answer = "".join(e.delta for e in of_type(events, "TEXT_MESSAGE_CONTENT"))
    assert answer == "Weather in Oslo: 4.0 °C and light rain, humidity 81%."
    assert events[-1].usage  # the rules report (approximate) usage


async def test_refund_rule_step_by_step_with_application_tools() -> None:
    """refund order <id> <amount>: lookup_order, then refund_order, each left pending; then "Refund done" quoting the result (FT-03, FT-06)."""
    # run 1: the model looks the order up; the application tool is left pending
    run1 = make_input("Please refund order A-1001 12.50", tools=APPLICATION_TOOLS)
    events1 = await collect(agent(), run1)
    stream1 = assert_valid_stream(events1, run_input=run1)
    (start1,) = of_type(events1, "TOOL_CALL_START")
    assert start1.tool_call_name == "lookup_order"
    assert events1[-1].outcome.pending_tool_call_ids == [start1.tool_call_id]
    args1 = "".join(e.delta for e in of_type(events1, "TOOL_CALL_ARGS"))
    assert json.loads(args1) == {"order_id": "A-1001"}

    # run 2: the application answered lookup_order; the model asks for the refund
    lookup_answer = ToolMessage(
        id="tm1",
        tool_call_id=start1.tool_call_id,
        content=json.dumps(ORDERS["A-1001"]),
    )
    run2 = make_input(
        messages=[*run1.messages, *stream1.messages, lookup_answer],
        tools=APPLICATION_TOOLS,
        run_id="run-2",
    )
    events2 = await collect(agent(), run2)
    stream2 = assert_valid_stream(events2, run_input=run2)
    (start2,) = of_type(events2, "TOOL_CALL_START")
    assert start2.tool_call_name == "refund_order"
    assert start2.tool_call_id != start1.tool_call_id
    args2 = "".join(e.delta for e in of_type(events2, "TOOL_CALL_ARGS"))
    assert json.loads(args2) == {
        "order_id": "A-1001",
        "amount": 12.5,
        "reason": REFUND_REASON,
    }
    assert events2[-1].outcome.pending_tool_call_ids == [start2.tool_call_id]
    assert of_type(events2, "TOOL_CALL_RESULT") == []

    # run 3: the refund was executed; the model reports it, quoting the result
    refund_content = (
        '{"status":"refunded","refund_id":1,"order_id":"A-1001","amount":"12.50",'
        '"reason":"customer request"}'
    )
    run3 = make_input(
        messages=[
            *run2.messages,
            *stream2.messages,
            ToolMessage(
                id="tm2", tool_call_id=start2.tool_call_id, content=refund_content
            ),
        ],
        tools=APPLICATION_TOOLS,
        run_id="run-3",
    )
    events3 = await collect(agent(), run3)
    assert_valid_stream(events3, run_input=run3)
    answer = "".join(e.delta for e in of_type(events3, "TEXT_MESSAGE_CONTENT"))
    assert answer == "Refund done: 12.50 EUR refunded on order A-1001 (refund #1)."
    assert events3[-1].outcome.pending_tool_call_ids is None


async def test_refund_rule_declined_quotes_why() -> None:
    """A refund answered with an error (declined) is reported as failed/declined, quoting why (FT-06)."""
    provider = ScriptedProvider()
    first = await play(provider, request("refund order A-1002 5"))
    assert calls_of(first) == [("lookup_order", {"order_id": "A-1002"})]
    assert first[0].call_id == "call_1"
    history = [
        UserMessage(id="u1", content="refund order A-1002 5"),
        AssistantMessage(
            id="a1",
            tool_calls=[
                ToolCall(
                    id="c1",
                    function=FunctionCall(
                        name="lookup_order", arguments='{"order_id":"A-1002"}'
                    ),
                )
            ],
        ),
        ToolMessage(id="t1", tool_call_id="c1", content='{"order_id":"A-1002"}'),
    ]
    second = await play(provider, request("", messages=history))
    assert calls_of(second) == [
        ("refund_order", {"order_id": "A-1002", "amount": 5, "reason": REFUND_REASON})
    ]
    history += [
        AssistantMessage(
            id="a2",
            tool_calls=[
                ToolCall(
                    id="c2",
                    function=FunctionCall(name="refund_order", arguments="{}"),
                )
            ],
        ),
        ToolMessage(
            id="t2",
            tool_call_id="c2",
            content="The operator declined: amount above policy.",
            error="declined",
        ),
    ]
    third = await play(provider, request("", messages=history))
    answer = text_of(third)
    assert "declined" in answer
    assert "The operator declined: amount above policy." in answer
    assert third[-1].stop_reason == "end_turn"


async def test_refund_rule_lookup_failure_is_reported() -> None:
    """A failed lookup (error tool message) ends in text quoting the detail."""
    history = [
        UserMessage(id="u1", content="refund order Z-9 5"),
        AssistantMessage(
            id="a1",
            tool_calls=[
                ToolCall(
                    id="c1", function=FunctionCall(name="lookup_order", arguments="{}")
                )
            ],
        ),
        ToolMessage(
            id="t1",
            tool_call_id="c1",
            content='{"error":"invalid_arguments","detail":"no order \'Z-9\' exists"}',
            error="invalid_arguments",
        ),
    ]
    events = await play(ScriptedProvider(), request("", messages=history))
    assert text_of(events) == (
        "I couldn't look up order Z-9: no order 'Z-9' exists (invalid_arguments)"
    )


async def test_rules_without_the_tool_answer_in_text() -> None:
    """When the needed tool is not offered, the rules say so instead of calling it (SEC-05)."""
    events = await play(ScriptedProvider(), request("weather in Oslo", tools=[]))
    assert "get_weather tool is not available" in text_of(events)
    assert not any(isinstance(e, ToolCallBegin) for e in events)


async def test_anything_else_gets_a_short_streamed_text_reply() -> None:
    """Other messages get a short help text in several fragments, ending end_turn (LP-09)."""
    events = await play(ScriptedProvider(), request("hello"))
    assert sum(isinstance(e, TextDelta) for e in events) > 1
    assert "weather in <city>" in text_of(events)
    assert isinstance(events[-1], TurnEnd)
    assert events[-1].stop_reason == "end_turn"
    assert events[-1].provider == "scripted"


# --- scripts ------------------------------------------------------------------------------


async def test_script_turns_are_consumed_in_order_and_recorded() -> None:
    """Each stream_turn plays the next scripted turn; requests are kept; the end is an error."""
    provider = ScriptedProvider(
        [tool_call("get_weather", {"city": "Oslo"}, call_id="c9"), text("Sunny.")]
    )
    first = await play(provider, request("x"))
    assert first[0] == ToolCallBegin(call_id="c9", name="get_weather")
    assert calls_of(first) == [("get_weather", {"city": "Oslo"})]
    second = await play(provider, request("y"))
    assert text_of(second) == "Sunny."
    assert [r.messages[0].content for r in provider.requests] == ["x", "y"]
    assert provider.remaining == 0
    with pytest.raises(ProviderError) as info:
        await play(provider, request("z"))
    assert info.value.code == "script_exhausted"


async def test_script_raw_text_truncation_usage_and_errors() -> None:
    """Raw argument text is sent verbatim; truncated → max_tokens; usage on TurnEnd; errors raise mid-turn."""
    usage = Usage(input_tokens=3, output_tokens=4, total_tokens=7)
    provider = ScriptedProvider(
        [
            tool_call("f", '{"a": tru', truncated=True, usage=usage),
            turn(
                text("Hel"),
                raise_error(ProviderError("down", code="upstream_unavailable")),
            ),
        ]
    )
    first = await play(provider, request("x"))
    joined = "".join(e.delta for e in first if isinstance(e, ToolCallDelta))
    assert joined == '{"a": tru'
    assert first[-1] == TurnEnd(
        stop_reason="max_tokens", usage=usage, provider="scripted", model="scripted"
    )
    seen: list[ModelEvent] = []
    with pytest.raises(ProviderError, match="down"):
        await drain(provider.stream_turn(request("y")), seen)
    assert text_of(seen) == "Hel"


def test_split_fragments_joins_back() -> None:
    """Fragments join back to the text and there are several of them."""
    for value in ("a", "ab", "Hello, world!", "x" * 100):
        pieces = split_fragments(value)
        assert "".join(pieces) == value
        assert len(pieces) >= min(3, len(value))
    assert split_fragments("") == []


def test_registry_builds_the_scripted_provider() -> None:
    """The provider registry can build it with no key (the embedded default)."""
    from agentcore.providers.registry import get_provider

    provider = get_provider("scripted", model="scripted-demo")
    assert isinstance(provider, ScriptedProvider)
    assert provider.name == "scripted"
    assert provider.model == "scripted-demo"


def _refund_history(result: str, *, error: str | None = None) -> list[Any]:
    """A refund of 25 on A-1001: looked up (the real order), then answered with ``result``."""
    return [
        UserMessage(id="u1", content="refund order A-1001 25"),
        AssistantMessage(
            id="a1",
            tool_calls=[
                ToolCall(
                    id="c1",
                    function=FunctionCall(
                        name="lookup_order", arguments='{"order_id":"A-1001"}'
                    ),
                )
            ],
        ),
        ToolMessage(id="t1", tool_call_id="c1", content=json.dumps(ORDERS["A-1001"])),
        AssistantMessage(
            id="a2",
            tool_calls=[
                ToolCall(
                    id="c2",
                    function=FunctionCall(
                        name="refund_order",
                        arguments='{"order_id":"A-1001","amount":25,'
                        '"reason":"customer request"}',
                    ),
                )
            ],
        ),
        ToolMessage(id="t2", tool_call_id="c2", content=result, error=error),
    ]


async def test_refund_follow_up_says_what_ran_not_what_was_proposed() -> None:
    """An approver's edit (20.00, another reason) is what the follow-up reports (IR-11)."""
    result = (
        '{"status":"refunded","refund_id":7,"order_id":"A-1001","amount":"20.00",'
        '"reason":"goodwill, partial"}'
    )
    events = await play(
        ScriptedProvider(), request("", messages=_refund_history(result))
    )
    assert text_of(events) == (
        "Refund done: 20.00 EUR refunded on order A-1001 (refund #7). The approver "
        'changed the amount: I had proposed 25.00 EUR. Reason recorded: "goodwill, '
        'partial".'
    )


@pytest.mark.parametrize(
    ("error", "content", "answer"),
    [
        (
            "declined_by_operator",
            '{"status":"rejected","reason":"duplicate claim","executed":false}',
            "I did not refund 25.00 EUR on order A-1001: an approver declined it, "
            "saying: duplicate claim.",
        ),
        (
            "approval_expired",
            '{"status":"expired","reason":"no operator decided","executed":false}',
            "I did not refund 25.00 EUR on order A-1001: nobody approved it before "
            "the request expired.",
        ),
        (
            "invalid_arguments",
            '{"error":"invalid_arguments","detail":"amount exceeds what is left"}',
            # It may have run edited: the proposed 25.00 is not named.
            "The refund on order A-1001 failed: amount exceeds what is "
            "left (invalid_arguments)",
        ),
    ],
)
async def test_refund_refusals_are_sentences(error, content, answer) -> None:
    """A declined, expired or failed refund is told in a sentence, not raw JSON."""
    events = await play(
        ScriptedProvider(),
        request("", messages=_refund_history(content, error=error)),
    )
    assert text_of(events) == answer


async def test_lookup_rule_answers_in_a_sentence() -> None:
    """ "look up order <id>" calls lookup_order, then describes the order in a sentence."""
    provider = ScriptedProvider()
    first = await play(provider, request("Please look up order A-1002"))
    assert calls_of(first) == [("lookup_order", {"order_id": "A-1002"})]
    history = [
        UserMessage(id="u1", content="Please look up order A-1002"),
        AssistantMessage(
            id="a1",
            tool_calls=[
                ToolCall(
                    id="c1",
                    function=FunctionCall(
                        name="lookup_order", arguments='{"order_id":"A-1002"}'
                    ),
                )
            ],
        ),
        ToolMessage(id="t1", tool_call_id="c1", content=json.dumps(ORDERS["A-1002"])),
    ]
    second = await play(provider, request("", messages=history))
    assert text_of(second) == (
        "Order A-1002 for Grace Hopper: 1 item, total 19.99 EUR, shipped."
    )


async def test_pace_streams_word_by_word_and_zero_is_the_default() -> None:
    """With a pace the text streams one word per delta; the default (0) keeps a few fragments."""
    paced = await play(ScriptedProvider(pace=10_000), request("hello"))
    words = [e.text for e in paced if isinstance(e, TextDelta)]
    assert "".join(words) == text_of(paced)
    assert words[:4] == ["I'm ", "the ", "scripted ", "demo "]
    assert ScriptedProvider().pace == 0.0
    instant = await play(ScriptedProvider(), request("hello"))
    assert len([e for e in instant if isinstance(e, TextDelta)]) < len(words)
