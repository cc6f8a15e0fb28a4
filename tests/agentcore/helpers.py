"""Helpers shared by the agent tests: stream validation and run plumbing."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from typing import Any

from agentcore.agents import Agent
from agentcore.events import (
    BaseEvent,
    RunAgentInput,
    Tool,
    UserMessage,
    event_from_dict,
    event_to_dict,
)
from agentcore.stream import RunStream

TERMINAL = {"RUN_FINISHED", "RUN_ERROR"}


def assert_valid_stream(
    events: Sequence[BaseEvent], *, run_input: RunAgentInput | None = None
) -> RunStream:
    """Feed ``events`` through :class:`RunStream` and return it; fail on any violation.

    Also checks what every agent promises (ER-01): the run starts with RUN_STARTED,
    ends with exactly one RUN_FINISHED or RUN_ERROR, leaves nothing open, and every
    event survives a JSON round trip with no ``null`` for absent fields.
    """
    assert events, "the agent emitted nothing"
    kwargs: dict[str, Any] = {}
    if run_input is not None:
        kwargs = {
            "thread_id": run_input.thread_id,
            "run_id": run_input.run_id,
            "prior_message_ids": [m.id for m in run_input.messages],
            "prior_tool_call_ids": [
                c.id
                for m in run_input.messages
                for c in (getattr(m, "tool_calls", None) or ())
            ],
        }
    stream = RunStream(**kwargs)
    for event in events:
        stream.feed(event)  # raises StreamViolation
        data = event_to_dict(event)
        assert None not in data.values(), data
        assert event_from_dict(data).type == event.type
    kinds = types(events)
    assert kinds[0] == "RUN_STARTED", kinds
    assert kinds[-1] in TERMINAL, kinds
    assert sum(k in TERMINAL for k in kinds) == 1, kinds
    assert stream.close_open_items() == [], "items left open at the end of the run"
    return stream


def types(events: Iterable[BaseEvent]) -> list[str]:
    """Return the ``type`` of each event, as strings."""
    return [str(e.type.value) for e in events]


def collapsed(events: Iterable[BaseEvent | dict[str, Any] | str]) -> list[str]:
    """Return the event types with runs of ARGS / CONTENT deltas collapsed to one.

    ``events`` are events, their wire dicts or their type strings. How many rows a
    streamed burst of deltas becomes depends on timing (coalescing windows, a
    paused producer): compare live runs collapsed unless the test sets the timing.
    """
    kinds = [
        e if isinstance(e, str) else e["type"] if isinstance(e, dict) else e.type.value
        for e in events
    ]
    result: list[str] = []
    for kind in kinds:
        if result and result[-1] == kind and kind.endswith(("_ARGS", "_CONTENT")):
            continue
        result.append(kind)
    return result


def of_type(events: Iterable[BaseEvent], kind: str) -> list[Any]:
    """Return the events whose type is ``kind``."""
    return [e for e in events if e.type.value == kind]


def make_input(
    text: str = "hi",
    *,
    messages: list[Any] | None = None,
    tools: list[Tool] | None = None,
    thread_id: str = "thread-1",
    run_id: str = "run-1",
) -> RunAgentInput:
    """Return a run input with one user message (or ``messages``) and advertised ``tools``."""
    return RunAgentInput(
        thread_id=thread_id,
        run_id=run_id,
        messages=messages
        if messages is not None
        else [UserMessage(id=f"user-{run_id}", content=text)],
        tools=tools or [],
        context=[],
        state={},
        forwarded_props={},
    )


async def collect(
    agent: Agent, run_input: RunAgentInput, *, cancel: asyncio.Event | None = None
) -> list[BaseEvent]:
    """Return every event of one run of ``agent``."""
    return [event async for event in agent.run(run_input, cancel=cancel)]


def coalesced(events: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Return wire events with consecutive deltas of one item merged into one event.

    ``TOOL_CALL_ARGS`` of one ``toolCallId`` and ``TEXT_MESSAGE_CONTENT`` of one
    ``messageId`` in a row become one event whose ``delta`` is their concatenation
    (what any AG-UI reader makes of them), so a test of a live run does not depend
    on how many rows the coalescing windows made of a burst (:func:`collapsed`).
    """
    result: list[dict[str, Any]] = []
    for event in events:
        kind = event.get("type")
        key = {"TOOL_CALL_ARGS": "toolCallId", "TEXT_MESSAGE_CONTENT": "messageId"}.get(
            str(kind)
        )
        if (
            key is not None
            and result
            and result[-1].get("type") == kind
            and result[-1].get(key) == event.get(key)
        ):
            result[-1] = {**result[-1], "delta": result[-1]["delta"] + event["delta"]}
            continue
        result.append(event)
    return result
