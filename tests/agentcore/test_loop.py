"""The built-in agent loop, driven by the scripted provider (never a real model, STYLE 16).

Every emitted stream is also checked by ``agentcore.stream.RunStream``
(:func:`assert_valid_stream`).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
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
    ProviderError,
    ToolCallBegin,
    ToolCallDelta,
    TurnEnd,
    Usage,
)
from agentcore.providers.scripted import (
    ScriptedProvider,
    ScriptedTurn,
    pause,
    raise_error,
    raw,
    text,
    tool_call,
    turn,
)
from agentcore.tools import (
    Tool,
    ToolContext,
    Toolset,
    ToolUpstreamUnavailable,
    define_tool,
)
from tests.agentcore.helpers import (
    assert_valid_stream,
    collapsed,
    collect,
    make_input,
    of_type,
    types,
)

ECHO_SCHEMA = {
    "type": "object",
    "properties": {"text": {"type": "string"}},
    "required": ["text"],
    "additionalProperties": False,
}


class Recorder:
    """Records the contexts agent-side tools were executed with."""

    def __init__(self) -> None:
        self.contexts: list[ToolContext] = []
        self.params: list[dict[str, Any]] = []

    def echo(self, params: dict[str, Any], context: ToolContext) -> str:
        self.contexts.append(context)
        self.params.append(params)
        return f"echo: {params['text']}"


def build_tools(recorder: Recorder) -> dict[str, Tool]:
    """Return the test's tools: two agent-side, one failing, two application ones."""

    def boom(params: dict[str, Any], context: ToolContext) -> str:
        raise ToolUpstreamUnavailable(
            "the echo service is down; retry in a minute or tell the user"
        )

    def ping(params: dict[str, Any], context: ToolContext) -> str:
        return "pong"

    def never(params: dict[str, Any], context: ToolContext) -> str:
        raise AssertionError("application tools never run inside the loop")

    return {
        "echo": define_tool(
            name="echo",
            description="Echo the text back.",
            parameters=ECHO_SCHEMA,
            execute=recorder.echo,
            is_read_only=True,
            execution_mode="parallel",
        ),
        "ping": define_tool(
            name="ping",
            description="Answer pong.",
            parameters=None,
            execute=ping,
            is_read_only=True,
        ),
        "boom": define_tool(
            name="boom",
            description="Always fails (upstream down).",
            parameters=None,
            execute=boom,
        ),
        "confirm": define_tool(
            name="confirm",
            description="Ask the user to confirm.",
            parameters={
                "type": "object",
                "properties": {"question": {"type": "string"}},
                "required": ["question"],
            },
            execute=never,
            runs_on="application",
        ),
        "wire_money": define_tool(
            name="wire_money",
            description="Send money (never advertised in these tests).",
            parameters=None,
            execute=never,
            runs_on="application",
            is_destructive=True,
        ),
    }


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def tools(recorder: Recorder) -> dict[str, Tool]:
    return build_tools(recorder)


def make_agent(
    tools: dict[str, Tool], turns: list[ScriptedTurn], **kwargs: Any
) -> tuple[LoopAgent, ScriptedProvider]:
    provider = ScriptedProvider(turns)
    agent = LoopAgent(
        provider, toolset=Toolset(tools.values()), model="test-model", **kwargs
    )
    return agent, provider


def joined_args(events: list[Any], tool_call_id: str) -> str:
    return "".join(
        e.delta
        for e in of_type(events, "TOOL_CALL_ARGS")
        if e.tool_call_id == tool_call_id
    )


def error_of(result: Any) -> str | None:
    return (result.metadata or {}).get("error")


# --- plain runs --------------------------------------------------------------------


async def test_lp09_text_only_run_exact_sequence(tools: dict[str, Tool]) -> None:
    """A turn without calls (end_turn) streams one assistant message and finishes (LP-09)."""
    # given a model that only answers text
    agent, provider = make_agent(tools, [text("Hello there, how can I help?")])
    run_input = make_input("hi")
    # when the run executes
    events = await collect(agent, run_input)
    # then the stream is exactly start, one message, finish
    assert_valid_stream(events, run_input=run_input)
    assert collapsed(events) == [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]
    assert len(of_type(events, "TEXT_MESSAGE_CONTENT")) > 1  # streamed in pieces
    started, finished = events[0], events[-1]
    assert started.protocol_version == "1.0"
    assert (started.thread_id, started.run_id) == ("thread-1", "run-1")
    assert started.input == run_input
    assert (finished.thread_id, finished.run_id) == ("thread-1", "run-1")
    assert finished.outcome.type == "success"
    assert finished.outcome.pending_tool_call_ids is None
    assert "".join(e.delta for e in of_type(events, "TEXT_MESSAGE_CONTENT")) == (
        "Hello there, how can I help?"
    )
    assert of_type(events, "TEXT_MESSAGE_START")[0].role == "assistant"
    assert len(provider.requests) == 1


async def test_rt07_agent_call_answered_in_stream_then_final_text(
    tools: dict[str, Tool], recorder: Recorder
) -> None:
    """An agent-side call is executed and answered with TOOL_CALL_RESULT, then the loop continues (RT-07, LP-09, FT-09)."""
    agent, provider = make_agent(
        tools, [tool_call("echo", {"text": "hi there"}), text("It said hi.")]
    )
    run_input = make_input("echo hi")
    events = await collect(agent, run_input)
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
    start = of_type(events, "TOOL_CALL_START")[0]
    call_id = start.tool_call_id
    assert start.tool_call_name == "echo"
    assert len(of_type(events, "TOOL_CALL_ARGS")) > 1  # streamed in pieces
    assert json.loads(joined_args(events, call_id)) == {"text": "hi there"}
    result = of_type(events, "TOOL_CALL_RESULT")[0]
    assert result.tool_call_id == call_id
    assert result.content == "echo: hi there"
    assert error_of(result) is None
    assert result.role == "tool"
    text_id = of_type(events, "TEXT_MESSAGE_START")[0].message_id
    assert start.parent_message_id
    assert start.parent_message_id != text_id
    assert result.message_id not in {start.parent_message_id, text_id}
    assert events[-1].outcome.pending_tool_call_ids is None
    # the second turn saw the call and its answer, as AG-UI messages
    history = provider.requests[1].messages
    assert isinstance(history[1], AssistantMessage)
    assert history[1].id == start.parent_message_id
    assert history[1].tool_calls[0].id == call_id
    assert history[1].tool_calls[0].function.arguments == joined_args(events, call_id)
    assert isinstance(history[2], ToolMessage)
    assert (history[2].tool_call_id, history[2].content) == (call_id, "echo: hi there")
    assert recorder.params == [{"text": "hi there"}]


async def test_lp07_tool_context_carries_idempotency_key(
    tools: dict[str, Tool], recorder: Recorder
) -> None:
    """The tool context's idempotency key is ``threadId:toolCallId`` (LP-07)."""
    agent, _ = make_agent(
        tools,
        [tool_call("echo", {"text": "x"}), text("ok")],
        context_extras={"user": "alice", "tenant": "t1"},
    )
    events = await collect(agent, make_input("x"))
    call_id = of_type(events, "TOOL_CALL_START")[0].tool_call_id
    (context,) = recorder.contexts
    assert context.idempotency_key == f"thread-1:{call_id}"
    assert (context.thread_id, context.run_id, context.tool_call_id) == (
        "thread-1",
        "run-1",
        call_id,
    )
    assert context.user == "alice"
    assert context.extras == {"tenant": "t1"}


async def test_tool_specs_offer_agent_tools_and_advertised_application_tools(
    tools: dict[str, Tool],
) -> None:
    """Agent-side tools plus the advertised ones are offered; an unadvertised application tool is not (FT-01, RT-03)."""
    agent, provider = make_agent(tools, [text("ok")], system_prompt="Be brief.")
    await collect(agent, make_input("x", tools=[tools["confirm"].agui_tool()]))
    request = provider.requests[0]
    assert [s.name for s in request.tools] == ["echo", "ping", "boom", "confirm"]
    assert request.model == "test-model"
    assert request.system_prompt == "Be brief."


# --- application (frontend) tools ----------------------------------------------------


async def test_ft02_ft03_ft04_ft08_application_call_left_pending(
    tools: dict[str, Tool],
) -> None:
    """An advertised tool's call is never answered; the run completes with the success outcome listing it (FT-02, FT-03, FT-04, FT-08)."""
    agent, provider = make_agent(
        tools, [tool_call("confirm", {"question": "Proceed?"}), text("unused")]
    )
    run_input = make_input("delete it", tools=[tools["confirm"].agui_tool()])
    events = await collect(agent, run_input)
    stream = assert_valid_stream(events, run_input=run_input)
    assert collapsed(events) == [
        "RUN_STARTED",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "RUN_FINISHED",
    ]
    call_id = of_type(events, "TOOL_CALL_START")[0].tool_call_id
    assert json.loads(joined_args(events, call_id)) == {"question": "Proceed?"}
    assert of_type(events, "TOOL_CALL_RESULT") == []
    outcome = events[-1].outcome
    assert outcome.type == "success"
    assert outcome.pending_tool_call_ids == [call_id]
    assert stream.pending_tool_call_ids == [call_id]
    assert of_type(events, "TOOL_CALL_END")[0].metadata is None
    assert len(provider.requests) == 1  # finished promptly, no further turn


async def test_ft04_mixed_agent_and_application_calls_in_one_turn(
    tools: dict[str, Tool], recorder: Recorder
) -> None:
    """Agent-side calls are answered, application calls are left pending in call order (FT-02, FT-04, LP-02)."""
    agent, provider = make_agent(
        tools,
        [
            turn(
                text("Let me check."),
                tool_call("confirm", {"question": "A?"}),
                tool_call("echo", {"text": "b"}),
                tool_call("confirm", {"question": "C?"}),
            ),
            text("unused"),
        ],
    )
    run_input = make_input("go", tools=[tools["confirm"].agui_tool()])
    events = await collect(agent, run_input)
    stream = assert_valid_stream(events, run_input=run_input)
    starts = of_type(events, "TOOL_CALL_START")
    ids = [s.tool_call_id for s in starts]
    assert [s.tool_call_name for s in starts] == ["confirm", "echo", "confirm"]
    assert len(set(ids)) == 3
    message_id = of_type(events, "TEXT_MESSAGE_START")[0].message_id
    assert {s.parent_message_id for s in starts} == {message_id}
    results = of_type(events, "TOOL_CALL_RESULT")
    assert [r.tool_call_id for r in results] == [ids[1]]
    assert results[0].content == "echo: b"
    assert events[-1].outcome.pending_tool_call_ids == [ids[0], ids[2]]
    assert stream.pending_tool_call_ids == [ids[0], ids[2]]
    assert types(events)[-2] == "TOOL_CALL_RESULT"
    assert len(provider.requests) == 1


# --- errors answered in-stream -----------------------------------------------------------


async def test_sec04_unknown_tool_answered_with_error_listing_tools_loop_continues(
    tools: dict[str, Tool],
) -> None:
    """A call naming no offered tool gets an error result listing the tools; the loop goes on (SEC-04, SEC-05, RT-09)."""
    agent, provider = make_agent(
        tools, [tool_call("rm_rf", {"path": "/"}), text("Sorry, I can't do that.")]
    )
    run_input = make_input("x", tools=[tools["confirm"].agui_tool()])
    events = await collect(agent, run_input)
    assert_valid_stream(events, run_input=run_input)
    (result,) = of_type(events, "TOOL_CALL_RESULT")
    assert error_of(result) == "unknown_tool"
    body = json.loads(result.content)
    assert body["error"] == "unknown_tool"
    for name in ("echo", "ping", "boom", "confirm"):
        assert name in body["detail"]
    assert "rm_rf" in body["detail"]
    assert events[-1].type.value == "RUN_FINISHED"
    assert events[-1].outcome.pending_tool_call_ids is None
    assert len(provider.requests) == 2
    tool_message = provider.requests[1].messages[-1]
    assert isinstance(tool_message, ToolMessage)
    assert tool_message.error == "unknown_tool"


async def test_sec05_unadvertised_application_tool_is_not_pending(
    tools: dict[str, Tool],
) -> None:
    """An application tool the input did not advertise is answered as unknown, never left pending (SEC-05, FT-09)."""
    agent, _ = make_agent(tools, [tool_call("wire_money"), text("ok")])
    run_input = make_input("pay")
    events = await collect(agent, run_input)
    assert_valid_stream(events, run_input=run_input)
    (result,) = of_type(events, "TOOL_CALL_RESULT")
    assert error_of(result) == "unknown_tool"
    assert events[-1].outcome.pending_tool_call_ids is None


async def test_rt06_invalid_arguments_answered_and_loop_continues(
    tools: dict[str, Tool], recorder: Recorder
) -> None:
    """Arguments failing the schema become an error result the model can act on; the run continues (RT-06, SEC-01)."""
    agent, provider = make_agent(
        tools,
        [
            tool_call("echo", {"text": 5}),
            tool_call("echo", {"text": "5"}),
            text("Fixed it."),
        ],
    )
    run_input = make_input("x")
    events = await collect(agent, run_input)
    assert_valid_stream(events, run_input=run_input)
    first, second = of_type(events, "TOOL_CALL_RESULT")
    assert error_of(first) == "invalid_arguments"
    assert "text" in json.loads(first.content)["detail"]
    assert error_of(second) is None
    assert second.content == "echo: 5"
    assert recorder.params == [{"text": "5"}]  # the invalid call never executed
    assert len(provider.requests) == 3


async def test_lp08_failing_tool_never_gives_a_success_result(
    tools: dict[str, Tool],
) -> None:
    """A tool that fails is answered with its sanitized error type and message (LP-08, SEC-06)."""
    agent, provider = make_agent(tools, [tool_call("boom"), text("It failed.")])
    events = await collect(agent, make_input("x"))
    assert_valid_stream(events)
    (result,) = of_type(events, "TOOL_CALL_RESULT")
    assert error_of(result) == "upstream_unavailable"
    body = json.loads(result.content)
    assert body == {
        "error": "upstream_unavailable",
        "detail": "the echo service is down; retry in a minute or tell the user",
    }
    assert provider.requests[1].messages[-1].error == "upstream_unavailable"


async def test_call_without_arguments_streams_empty_object(
    tools: dict[str, Tool],
) -> None:
    """A call with no argument fragment still gets one TOOL_CALL_ARGS of ``{}`` (TC-01, TC-03)."""
    agent, _ = make_agent(tools, [tool_call("ping", None), text("pong!")])
    events = await collect(agent, make_input("ping"))
    assert_valid_stream(events)
    call_id = of_type(events, "TOOL_CALL_START")[0].tool_call_id
    assert [e.delta for e in of_type(events, "TOOL_CALL_ARGS")] == ["{}"]
    assert of_type(events, "TOOL_CALL_RESULT")[0].content == "pong"
    assert joined_args(events, call_id) == "{}"


async def test_bc28_late_argument_fragment_lands_before_end(
    tools: dict[str, Tool],
) -> None:
    """ENDs are sent when the turn ends, so a fragment arriving after another call began still precedes its END (TC-04, LP-04)."""
    agent, _ = make_agent(
        tools,
        [
            raw(
                ToolCallBegin(call_id="a", name="echo"),
                ToolCallDelta(call_id="a", delta='{"text":'),
                ToolCallBegin(call_id="b", name="echo"),
                ToolCallDelta(call_id="b", delta='{"text":"b"}'),
                ToolCallDelta(call_id="a", delta=' "a"}'),
                TurnEnd(stop_reason="tool_use"),
            ),
            text("done"),
        ],
    )
    events = await collect(agent, make_input("x"))
    assert_valid_stream(events)
    assert collapsed(events)[:8] == [
        "RUN_STARTED",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
    ]
    a, _b = (s.tool_call_id for s in of_type(events, "TOOL_CALL_START"))
    assert json.loads(joined_args(events, a)) == {"text": "a"}
    assert [r.content for r in of_type(events, "TOOL_CALL_RESULT")] == [
        "echo: a",
        "echo: b",
    ]


async def test_tool_call_ids_are_thread_unique(tools: dict[str, Tool]) -> None:
    """Provider call ids already used in the thread, or reused across turns, are remapped (ER-01, BC18)."""
    history = [
        UserMessage(id="u0", content="earlier"),
        AssistantMessage(
            id="a0",
            tool_calls=[
                ToolCall(id="dup", function=FunctionCall(name="ping", arguments="{}"))
            ],
        ),
        ToolMessage(id="t0", tool_call_id="dup", content="pong"),
        UserMessage(id="u1", content="again"),
    ]
    agent, _ = make_agent(
        tools,
        [
            tool_call("ping", None, call_id="dup"),
            tool_call("ping", None, call_id="dup"),
            text("done"),
        ],
    )
    run_input = make_input(messages=history)
    events = await collect(agent, run_input)
    assert_valid_stream(events, run_input=run_input)
    ids = [s.tool_call_id for s in of_type(events, "TOOL_CALL_START")]
    assert len(ids) == 2
    assert len(set(ids)) == 2
    assert "dup" not in ids


# --- truncation and stop reasons ------------------------------------------------------------


async def test_lp09_truncated_turn_executes_nothing(
    tools: dict[str, Tool], recorder: Recorder
) -> None:
    """A max_tokens turn never runs its calls: agent calls get an error, application calls stay pending flagged truncated (LP-09, LP-01, RT-05)."""
    agent, provider = make_agent(
        tools,
        [
            turn(
                tool_call("echo", '{"text": "a very long'),
                tool_call("confirm", '{"question": "Pro'),
                truncated=True,
            ),
        ],
    )
    run_input = make_input("x", tools=[tools["confirm"].agui_tool()])
    events = await collect(agent, run_input)
    assert_valid_stream(events, run_input=run_input)
    echo_id, confirm_id = (s.tool_call_id for s in of_type(events, "TOOL_CALL_START"))
    assert recorder.params == []
    (result,) = of_type(events, "TOOL_CALL_RESULT")
    assert result.tool_call_id == echo_id
    assert error_of(result) == "arguments_truncated"
    assert "cut off" in json.loads(result.content)["detail"]
    ends = {e.tool_call_id: e for e in of_type(events, "TOOL_CALL_END")}
    assert ends[confirm_id].metadata == {"truncated": True}
    assert joined_args(events, confirm_id) == '{"question": "Pro'
    assert events[-1].outcome.pending_tool_call_ids == [confirm_id]
    assert len(provider.requests) == 1


async def test_lp09_truncated_agent_call_is_reported_and_the_model_retries(
    tools: dict[str, Tool], recorder: Recorder
) -> None:
    """After a cut-off agent-side call the model sees the error and the loop continues."""
    agent, provider = make_agent(
        tools,
        [
            tool_call("echo", '{"text": "lo', truncated=True),
            tool_call("echo", {"text": "short"}),
            text("ok"),
        ],
    )
    events = await collect(agent, make_input("x"))
    assert_valid_stream(events)
    first, second = of_type(events, "TOOL_CALL_RESULT")
    assert error_of(first) == "arguments_truncated"
    assert second.content == "echo: short"
    assert recorder.params == [{"text": "short"}]
    assert provider.requests[1].messages[-1].error == "arguments_truncated"


# --- limits, cancellation, provider failures ----------------------------------------------


async def test_lp06_iteration_cap_ends_with_run_error(tools: dict[str, Tool]) -> None:
    """A model that keeps calling tools is stopped by max_iterations with RUN_ERROR, nothing open (LP-06, ER-01)."""
    agent, provider = make_agent(
        tools, [tool_call("ping") for _ in range(5)], max_iterations=3
    )
    events = await collect(agent, make_input("loop forever"))
    assert_valid_stream(events)
    error = events[-1]
    assert error.type.value == "RUN_ERROR"
    assert error.code == "max_iterations"
    assert "3 model turns" in error.message
    assert len(provider.requests) == 3
    assert len(of_type(events, "TOOL_CALL_RESULT")) == 3


async def test_lp06_deadline_ends_with_run_error_closing_open_items(
    tools: dict[str, Tool],
) -> None:
    """A turn still streaming at the deadline is closed and the run ends with RUN_ERROR (LP-06, ER-01)."""
    agent, _ = make_agent(
        tools,
        [turn(text("Thinking"), tool_call("echo", '{"te'), pause(10))],
        deadline_seconds=0.3,
    )
    events = await asyncio.wait_for(collect(agent, make_input("x")), timeout=5)
    assert_valid_stream(events)
    assert events[-1].type.value == "RUN_ERROR"
    assert events[-1].code == "deadline_exceeded"
    assert "0.3-second" in events[-1].message
    assert collapsed(events)[-4:] == [
        "TOOL_CALL_ARGS",
        "TEXT_MESSAGE_END",
        "TOOL_CALL_END",
        "RUN_ERROR",
    ]
    assert of_type(events, "TOOL_CALL_END")[0].metadata == {"truncated": True}
    assert of_type(events, "TOOL_CALL_RESULT") == []


async def test_lp06_deadline_during_tool_execution(tools: dict[str, Tool]) -> None:
    """A tool still running at the deadline ends the run with RUN_ERROR (LP-06)."""

    async def slow(params: dict[str, Any], context: ToolContext) -> str:
        await asyncio.sleep(10)
        return "late"

    slow_tool = define_tool(
        name="slow", description="Sleeps.", parameters=None, execute=slow, timeout=20
    )
    provider = ScriptedProvider([tool_call("slow"), text("unused")])
    agent = LoopAgent(
        provider, toolset=Toolset([slow_tool]), model="m", deadline_seconds=0.3
    )
    events = await asyncio.wait_for(collect(agent, make_input("x")), timeout=5)
    assert_valid_stream(events)
    assert events[-1].code == "deadline_exceeded"
    assert of_type(events, "TOOL_CALL_RESULT") == []


async def test_cancellation_mid_stream_finishes_cancelled_with_nothing_open(
    tools: dict[str, Tool],
) -> None:
    """Setting cancel closes open items and ends with the cancelled outcome (LP-06, ER-01)."""
    agent, _ = make_agent(
        tools, [turn(text("Hello"), tool_call("confirm", '{"q'), pause(10))]
    )
    cancel = asyncio.Event()
    run_input = make_input("x", tools=[tools["confirm"].agui_tool()])
    events = []

    async def consume() -> None:
        async for event in agent.run(run_input, cancel=cancel):
            events.append(event)
            if event.type.value == "TOOL_CALL_ARGS":
                cancel.set()

    await asyncio.wait_for(consume(), timeout=5)
    assert_valid_stream(events, run_input=run_input)
    assert events[-1].type.value == "RUN_FINISHED"
    assert events[-1].outcome.type == "cancelled"
    assert "TEXT_MESSAGE_END" in types(events)
    assert "TOOL_CALL_END" in types(events)


# --- a tool's timeout is the call's, the run's cancel is every call's (RT-07, LP-05) --


def final_text(events: list[Any]) -> str:
    return "".join(e.delta for e in of_type(events, "TEXT_MESSAGE_CONTENT"))


async def test_rt07_a_timed_out_tool_does_not_cancel_a_run_with_a_cancel_event() -> (
    None
):
    """A call over its timeout answers ``timeout`` and the turn goes on, even when the run has a cancel event (RT-07, LP-05).

    Orchestration always passes a cancel event; the timeout must signal only the
    call (``context.cancel``), never the run's event.
    """
    seen: list[ToolContext] = []

    async def hang(params: dict[str, Any], context: ToolContext) -> str:
        seen.append(context)
        await asyncio.sleep(30)
        return "never"

    hang_tool = define_tool(
        name="hang", description="Hangs.", parameters=None, execute=hang, timeout=0.05
    )
    provider = ScriptedProvider(
        [
            tool_call("hang", call_id="c1"),
            text("The tool timed out; here is my answer."),
        ]
    )
    agent = LoopAgent(provider, toolset=Toolset([hang_tool]), model="m")
    cancel = asyncio.Event()
    events = await asyncio.wait_for(
        collect(agent, make_input("x"), cancel=cancel), timeout=5
    )
    assert_valid_stream(events)
    assert not cancel.is_set()
    assert events[-1].type.value == "RUN_FINISHED"
    assert events[-1].outcome.type == "success"
    assert final_text(events) == "The tool timed out; here is my answer."
    [result] = of_type(events, "TOOL_CALL_RESULT")
    assert result.tool_call_id == "c1"
    assert error_of(result) == "timeout"
    assert len(provider.requests) == 2
    tool_message = provider.requests[1].messages[-1]
    assert (tool_message.tool_call_id, tool_message.error) == ("c1", "timeout")
    assert json.loads(tool_message.content)["error"] == "timeout"
    # the timeout raised the call's own signal (what a cooperative tool reads), not the run's
    [context] = seen
    assert context.cancel is not None
    assert context.cancel is not cancel
    assert context.cancel.is_set()


async def test_lp05_run_cancel_still_stops_a_running_cooperative_tool() -> None:
    """Setting the run's cancel signals the running call's ``context.cancel`` and ends the run cancelled (LP-05, LP-06)."""
    started = threading.Event()
    stopped = threading.Event()
    cancel = asyncio.Event()

    def cooperative(params: dict[str, Any], context: ToolContext) -> str:
        started.set()
        assert context.cancel is not None
        assert context.cancel is not cancel
        deadline = time.monotonic() + 5  # never outlive the test
        while time.monotonic() < deadline:
            if context.cancel is not None and context.cancel.is_set():
                stopped.set()
                return "stopped"
            time.sleep(0.005)
        return "late"

    tool = define_tool(
        name="work",
        description="Works until told to stop.",
        parameters=None,
        execute=cooperative,
        timeout=30,
    )
    provider = ScriptedProvider([tool_call("work"), text("unused")])
    agent = LoopAgent(provider, toolset=Toolset([tool]), model="m")

    async def trip() -> None:
        await asyncio.to_thread(started.wait, 5)
        cancel.set()

    tripper = asyncio.create_task(trip())
    events = await asyncio.wait_for(
        collect(agent, make_input("x"), cancel=cancel), timeout=5
    )
    await tripper
    assert_valid_stream(events)
    assert events[-1].type.value == "RUN_FINISHED"
    assert events[-1].outcome.type == "cancelled"
    assert await asyncio.to_thread(stopped.wait, 2)
    assert len(provider.requests) == 1


async def test_lp05_one_calls_timeout_leaves_its_parallel_neighbour_running() -> None:
    """In one parallel batch, a call's timeout cancels only that call; the other finishes (LP-03, LP-05)."""
    neighbour_signals: list[bool] = []

    async def hang(params: dict[str, Any], context: ToolContext) -> str:
        await asyncio.sleep(30)
        return "never"

    async def steady(params: dict[str, Any], context: ToolContext) -> str:
        await asyncio.sleep(0.3)  # still running when its neighbour times out
        assert context.cancel is not None
        neighbour_signals.append(context.cancel.is_set())
        return "steady done"

    common: dict[str, Any] = {
        "parameters": None,
        "is_read_only": True,
        "execution_mode": "parallel",
    }
    tools = [
        define_tool(
            name="hang", description="Hangs.", execute=hang, timeout=0.05, **common
        ),
        define_tool(
            name="steady", description="Steady.", execute=steady, timeout=10, **common
        ),
    ]
    provider = ScriptedProvider(
        [
            turn(tool_call("hang", call_id="c1"), tool_call("steady", call_id="c2")),
            text("Both answered."),
        ]
    )
    agent = LoopAgent(provider, toolset=Toolset(tools), model="m")
    cancel = asyncio.Event()
    events = await asyncio.wait_for(
        collect(agent, make_input("x"), cancel=cancel), timeout=5
    )
    assert_valid_stream(events)
    assert not cancel.is_set()
    assert events[-1].outcome.type == "success"
    assert final_text(events) == "Both answered."
    results = {r.tool_call_id: r for r in of_type(events, "TOOL_CALL_RESULT")}
    assert error_of(results["c1"]) == "timeout"
    assert error_of(results["c2"]) is None
    assert results["c2"].content == "steady done"
    assert neighbour_signals == [False]


async def test_cancellation_before_start(tools: dict[str, Tool]) -> None:
    """A run cancelled before it starts is RUN_STARTED then the cancelled outcome; the model is never called."""
    agent, provider = make_agent(tools, [text("unused")])
    cancel = asyncio.Event()
    cancel.set()
    events = await collect(agent, make_input("x"), cancel=cancel)
    assert_valid_stream(events)
    assert types(events) == ["RUN_STARTED", "RUN_FINISHED"]
    assert events[-1].outcome.type == "cancelled"
    assert provider.requests == []


async def test_provider_error_mid_stream_closes_open_items_then_run_error(
    tools: dict[str, Tool],
) -> None:
    """A ProviderError mid-turn ends the run with RUN_ERROR carrying its code, after closing everything (ER-01, SEC-06)."""
    agent, _ = make_agent(
        tools,
        [
            turn(
                text("Partial answer"),
                tool_call("echo", '{"text": "x'),
                raise_error(
                    ProviderError(
                        "The provider rate-limited the request.", code="rate_limited"
                    )
                ),
            )
        ],
    )
    events = await collect(agent, make_input("x"))
    assert_valid_stream(events)
    assert collapsed(events)[-4:] == [
        "TOOL_CALL_ARGS",
        "TEXT_MESSAGE_END",
        "TOOL_CALL_END",
        "RUN_ERROR",
    ]
    assert events[-1].code == "rate_limited"
    assert events[-1].message == "The provider rate-limited the request."
    assert of_type(events, "TOOL_CALL_RESULT") == []


async def test_provider_stream_without_turn_end_is_malformed(
    tools: dict[str, Tool],
) -> None:
    """A provider stream that stops without TurnEnd ends the run with RUN_ERROR malformed_stream."""
    agent, _ = make_agent(tools, [turn(text("cut"), end=False)])
    events = await collect(agent, make_input("x"))
    assert_valid_stream(events)
    assert events[-1].code == "malformed_stream"


async def test_unexpected_provider_exception_is_an_internal_error(
    tools: dict[str, Tool],
) -> None:
    """A bug in a provider is reported as internal_error without its details (SEC-06)."""
    agent, _ = make_agent(tools, [raise_error(RuntimeError("secret sk-123456789"))])
    events = await collect(agent, make_input("x"))
    assert_valid_stream(events)
    assert events[-1].code == "internal_error"
    assert "sk-" not in events[-1].message


async def test_script_exhausted_is_a_provider_error(tools: dict[str, Tool]) -> None:
    """Running past the end of a script fails the run with the provider's code."""
    agent, _ = make_agent(tools, [tool_call("ping")])
    events = await collect(agent, make_input("x"))
    assert_valid_stream(events)
    assert events[-1].code == "script_exhausted"


# --- usage --------------------------------------------------------------------------------


async def test_usage_is_summed_over_turns_on_run_finished(
    tools: dict[str, Tool],
) -> None:
    """Reported token usage is summed over the turns onto RUN_FINISHED.usage."""
    agent, _ = make_agent(
        tools,
        [
            tool_call(
                "ping", usage=Usage(input_tokens=10, output_tokens=5, total_tokens=15)
            ),
            text(
                "done", usage=Usage(input_tokens=20, output_tokens=3, total_tokens=23)
            ),
        ],
    )
    events = await collect(agent, make_input("x"))
    assert_valid_stream(events)
    (usage,) = events[-1].usage
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (30, 8, 38)
    assert (usage.provider, usage.model) == ("scripted", "test-model")


async def test_no_usage_reported_means_no_usage_field(tools: dict[str, Tool]) -> None:
    """Without reported usage RUN_FINISHED carries no usage (absent means absent)."""
    agent, _ = make_agent(tools, [text("hi")])
    events = await collect(agent, make_input("x"))
    assert events[-1].usage is None


def test_limits_must_be_positive(tools: dict[str, Tool]) -> None:
    """A non-positive limit is refused at construction (LP-06)."""
    with pytest.raises(ValueError, match="max_iterations"):
        LoopAgent(ScriptedProvider([]), toolset=Toolset(), model="m", max_iterations=0)
    with pytest.raises(ValueError, match="deadline_seconds"):
        LoopAgent(
            ScriptedProvider([]), toolset=Toolset(), model="m", deadline_seconds=0
        )
