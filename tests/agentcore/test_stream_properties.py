"""Property tests for ``agentcore.stream``: well-formed interleavings never raise."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agentcore.events import (
    BaseEvent,
    RunFinishedEvent,
    RunStartedEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)
from agentcore.stream import RunStream

_deltas = st.lists(st.text(max_size=8), max_size=6)


@settings(max_examples=200, deadline=None)
@given(calls=st.lists(_deltas, min_size=1, max_size=5), data=st.data())
def test_tc01_er01_any_interleaving_of_triads_never_raises(
    calls: list[list[str]], data: st.DataObject
) -> None:
    """Interleave START/ARGS*/END triads of several calls, then RUN_FINISHED.

    Whatever the interleaving, the stream is well formed (TC-01, ER-01): nothing raises,
    every event passes through unchanged, and each call's arguments are its deltas
    joined in order (TC-03). Pending is every call, in creation (START) order (FT-05).
    """
    queues: list[list[BaseEvent]] = []
    for number, deltas in enumerate(calls):
        call_id = f"call_{number}"
        queues.append(
            [
                ToolCallStartEvent(
                    tool_call_id=call_id, tool_call_name=f"tool_{number}"
                ),
                *(ToolCallArgsEvent(tool_call_id=call_id, delta=d) for d in deltas),
                ToolCallEndEvent(tool_call_id=call_id),
            ]
        )
    sequence: list[BaseEvent] = [RunStartedEvent(thread_id="t", run_id="r")]
    started: list[str] = []
    while any(queues):
        choices = [i for i, queue in enumerate(queues) if queue]
        pick = data.draw(st.sampled_from(choices))
        event = queues[pick].pop(0)
        if isinstance(event, ToolCallStartEvent):
            started.append(event.tool_call_id)
        sequence.append(event)
    sequence.append(RunFinishedEvent(thread_id="t", run_id="r"))

    stream = RunStream(thread_id="t", run_id="r")
    for event in sequence:
        assert stream.feed(event) == [event]

    assert stream.status == "finished"
    assert stream.warnings == []
    for number, deltas in enumerate(calls):
        call = stream.tool_calls[f"call_{number}"]
        assert call.arguments == "".join(deltas)
        assert call.complete
    assert list(stream.tool_calls) == started
    assert stream.pending_tool_call_ids == started
