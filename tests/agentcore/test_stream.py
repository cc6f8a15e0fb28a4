"""Tests for the AG-UI streaming-pattern state machine (``agentcore.stream``).

Each test names the rule it checks (RULES.md ids, plus LIFECYCLE for the run lifecycle
of AGUI-1.0.md 2.4) or the case it comes from (cases/tool-calling.jsonl, kind agui.*).
"""

from __future__ import annotations

import json
import pickle
from typing import Any

import pytest

from agentcore.events import (
    AssistantMessage,
    MessagesSnapshotEvent,
    RunFinishedEvent,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    ToolMessage,
    event_to_dict,
    message_to_dict,
)
from agentcore.stream import RunStream, StreamViolation, StreamWarning, ToolCallState
from tests.cases import CASES_FILE as CASES

RS: dict[str, Any] = {"type": "RUN_STARTED", "threadId": "t1", "runId": "r1"}
RF: dict[str, Any] = {"type": "RUN_FINISHED", "threadId": "t1", "runId": "r1"}


def start(call_id: str, name: str = "f", parent: str | None = None) -> dict[str, Any]:
    event = {"type": "TOOL_CALL_START", "toolCallId": call_id, "toolCallName": name}
    if parent is not None:
        event["parentMessageId"] = parent
    return event


def args(call_id: str, delta: str) -> dict[str, Any]:
    return {"type": "TOOL_CALL_ARGS", "toolCallId": call_id, "delta": delta}


def end(call_id: str) -> dict[str, Any]:
    return {"type": "TOOL_CALL_END", "toolCallId": call_id}


def chunk(**fields: Any) -> dict[str, Any]:
    return {"type": "TOOL_CALL_CHUNK", **fields}


def result(
    call_id: str, message_id: str, content: Any = "ok", **extra: Any
) -> dict[str, Any]:
    return {
        "type": "TOOL_CALL_RESULT",
        "messageId": message_id,
        "toolCallId": call_id,
        "content": content,
        **extra,
    }


def finished(pending: list[str] | None = None, **outcome: Any) -> dict[str, Any]:
    if pending is None and not outcome:
        return dict(RF)
    body: dict[str, Any] = {"type": "success", **outcome}
    if pending is not None:
        body["pendingToolCallIds"] = pending
    return {**RF, "outcome": body}


def feed_all(stream: RunStream, events: list[Any]) -> list[dict[str, Any]]:
    """Feed every event and return the normalized output as JSON objects."""
    out: list[dict[str, Any]] = []
    for event in events:
        out.extend(event_to_dict(e) for e in stream.feed(event))
    return out


def run(events: list[Any], **kwargs: Any) -> tuple[RunStream, list[dict[str, Any]]]:
    stream = RunStream(**kwargs)
    return stream, feed_all(stream, events)


def violation(events: list[Any], **kwargs: Any) -> StreamViolation:
    """Feed ``events`` and return the StreamViolation raised by the last one."""
    stream = RunStream(**kwargs)
    for event in events[:-1]:
        stream.feed(event)
    with pytest.raises(StreamViolation) as info:
        stream.feed(events[-1])
    return info.value


def assert_violation(
    exc: StreamViolation, rule: str, index: int, item_id: str | None
) -> None:
    assert (exc.rule, exc.index, exc.item_id) == (rule, index, item_id), str(exc)
    assert str(exc) == f"{rule} at event {index}: {exc.message}"
    assert exc.message


def messages(stream: RunStream) -> list[dict[str, Any]]:
    return [message_to_dict(m) for m in stream.messages]


def load_case(case_id: str) -> dict[str, Any]:
    with open(CASES, encoding="utf-8") as handle:
        for line in handle:
            case = json.loads(line)
            if case["id"] == case_id:
                return case
    raise LookupError(case_id)


# -- TC-01: START / ARGS / END paired by toolCallId ---------------------------------------


def test_tc01_triad_passes_through_unchanged_and_assembles_call() -> None:
    stream = RunStream(thread_id="t1", run_id="r1")
    events = [
        RunStartedEvent(thread_id="t1", run_id="r1"),
        ToolCallStartEvent(
            tool_call_id="tc1", tool_call_name="get_weather", parent_message_id="m1"
        ),
        ToolCallArgsEvent(tool_call_id="tc1", delta='{"city":'),
        ToolCallArgsEvent(tool_call_id="tc1", delta='"Paris"}'),
        ToolCallEndEvent(tool_call_id="tc1"),
        RunFinishedEvent(thread_id="t1", run_id="r1"),
    ]
    for event in events:
        out = stream.feed(event)
        assert len(out) == 1
        assert out[0] is event
    assert stream.status == "finished"
    assert stream.tool_calls == {
        "tc1": ToolCallState(
            tool_call_id="tc1",
            name="get_weather",
            parent_message_id="m1",
            arguments='{"city":"Paris"}',
            open=False,
            ended=True,
            result_message_id=None,
            order=0,
        )
    }
    assert stream.pending_tool_call_ids == ["tc1"]
    assert messages(stream) == [
        {
            "id": "m1",
            "role": "assistant",
            "toolCalls": [
                {
                    "id": "tc1",
                    "type": "function",
                    "function": {
                        "name": "get_weather",
                        "arguments": '{"city":"Paris"}',
                    },
                }
            ],
        }
    ]
    assert stream.warnings == []


def test_tc01_interleaved_calls_keep_their_own_text() -> None:
    stream, out = run(
        [
            RS,
            start("a", "f", "m1"),
            start("b", "g", "m1"),
            args("b", '{"y":'),
            args("a", '{"x":'),
            args("a", "1}"),
            end("a"),
            args("b", "2}"),
            end("b"),
            finished(["a", "b"]),
        ]
    )
    assert [e["type"] for e in out] == [
        "RUN_STARTED",
        "TOOL_CALL_START",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "RUN_FINISHED",
    ]
    assert stream.tool_calls["a"].arguments == '{"x":1}'
    assert stream.tool_calls["b"].arguments == '{"y":2}'
    assert [c.order for c in stream.tool_calls.values()] == [0, 1]
    assert stream.pending_tool_call_ids == ["a", "b"]
    assert messages(stream) == [
        {
            "id": "m1",
            "role": "assistant",
            "toolCalls": [
                {
                    "id": "a",
                    "type": "function",
                    "function": {"name": "f", "arguments": '{"x":1}'},
                },
                {
                    "id": "b",
                    "type": "function",
                    "function": {"name": "g", "arguments": '{"y":2}'},
                },
            ],
        }
    ]


def test_tc01_malformed_start_is_fatal() -> None:
    exc = violation([RS, {"type": "TOOL_CALL_START", "toolCallId": "tc1"}])
    assert_violation(exc, "TC-01", 1, "tc1")
    assert "toolCallName" in exc.message


# -- TC-02: parentMessageId attaches the call to its assistant message ---------------------


def test_tc02_calls_group_under_parent_text_message() -> None:
    stream, _ = run(
        [
            RS,
            {"type": "TEXT_MESSAGE_START", "messageId": "m3", "role": "assistant"},
            {
                "type": "TEXT_MESSAGE_CONTENT",
                "messageId": "m3",
                "delta": "Let me ask you.",
            },
            {"type": "TEXT_MESSAGE_END", "messageId": "m3"},
            start("tc2", "confirm", "m3"),
            args("tc2", '{"question":"Proceed?"}'),
            end("tc2"),
            finished(["tc2"]),
        ]
    )
    assert messages(stream) == [
        {
            "id": "m3",
            "role": "assistant",
            "content": "Let me ask you.",
            "toolCalls": [
                {
                    "id": "tc2",
                    "type": "function",
                    "function": {
                        "name": "confirm",
                        "arguments": '{"question":"Proceed?"}',
                    },
                }
            ],
        }
    ]


def test_tc02_call_without_parent_gets_assistant_message_named_after_it() -> None:
    stream, _ = run([RS, start("tc9", "lookup"), args("tc9", "{}"), end("tc9"), RF])
    assert messages(stream) == [
        {
            "id": "tc9",
            "role": "assistant",
            "toolCalls": [
                {
                    "id": "tc9",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": "{}"},
                }
            ],
        }
    ]


def test_tc02_subagent_attribution_mismatch_is_a_warning() -> None:
    stream, _ = run(
        [
            RS,
            {"type": "TEXT_MESSAGE_START", "messageId": "m1", "subagentRunId": "sub1"},
            {"type": "TEXT_MESSAGE_END", "messageId": "m1", "subagentRunId": "sub1"},
            start("tc1", "f", "m1"),
            end("tc1"),
            RF,
        ]
    )
    assert [(w.index, w.rule, w.item_id) for w in stream.warnings] == [
        (3, "TC-02", "tc1")
    ]
    assert stream.messages[0].tool_calls[0].id == "tc1"


# -- TC-03 / TC-05: argument text is carried verbatim, never validated ---------------------


def test_tc03_unparseable_argument_text_is_kept_verbatim() -> None:
    text = '{"path":"notes.md","content":"# Notes\\n- item tw'
    stream, out = run(
        [RS, start("call_W", "write_file"), args("call_W", text), end("call_W"), RF]
    )
    assert out[1:4] == [
        {
            "type": "TOOL_CALL_START",
            "toolCallId": "call_W",
            "toolCallName": "write_file",
        },
        {"type": "TOOL_CALL_ARGS", "toolCallId": "call_W", "delta": text},
        {"type": "TOOL_CALL_END", "toolCallId": "call_W"},
    ]
    assert stream.tool_calls["call_W"].arguments == text
    assert stream.messages[0].tool_calls[0].function.arguments == text
    assert stream.pending_tool_call_ids == ["call_W"]
    assert stream.warnings == []


def test_tc05_end_marks_complete_not_valid() -> None:
    stream, _ = run([RS, start("c"), args("c", "not json at all"), end("c"), RF])
    call = stream.tool_calls["c"]
    assert call.complete
    assert call.ended
    assert not call.open
    assert call.arguments == "not json at all"


# -- TC-04: arguments are only a prefix until END ------------------------------------------


def test_tc04_call_is_incomplete_until_end_and_after_reopen() -> None:
    stream = RunStream()
    feed_all(stream, [RS, start("c"), args("c", '{"q":')])
    call = stream.tool_calls["c"]
    assert (call.open, call.ended, call.complete) == (True, False, False)
    stream.feed(end("c"))
    assert (call.open, call.ended, call.complete) == (False, True, True)
    stream.feed(start("c"))
    assert (call.open, call.ended, call.complete) == (True, True, False)


# -- TC-06: reopening a closed call ---------------------------------------------------------


def test_tc06_reopen_closed_call_appends_arguments() -> None:
    stream, out = run(
        [
            RS,
            start("tc1", "search"),
            args("tc1", '{"q":'),
            end("tc1"),
            start("tc1", "search"),
            args("tc1", '"x"}'),
            end("tc1"),
            finished(["tc1"]),
        ]
    )
    assert [e["type"] for e in out] == [
        "RUN_STARTED",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "RUN_FINISHED",
    ]
    assert list(stream.tool_calls) == ["tc1"]
    assert stream.tool_calls["tc1"].arguments == '{"q":"x"}'
    assert stream.pending_tool_call_ids == ["tc1"]
    assert messages(stream) == [
        {
            "id": "tc1",
            "role": "assistant",
            "toolCalls": [
                {
                    "id": "tc1",
                    "type": "function",
                    "function": {"name": "search", "arguments": '{"q":"x"}'},
                }
            ],
        }
    ]
    assert stream.warnings == []


def test_tc06_reopen_with_different_name_or_parent_warns_and_keeps_original() -> None:
    stream, out = run(
        [
            RS,
            start("tc1", "search", "m1"),
            end("tc1"),
            start("tc1", "delete_all", "m2"),
            args("tc1", "{}"),
            end("tc1"),
            RF,
        ]
    )
    assert out[3] == {
        "type": "TOOL_CALL_START",
        "toolCallId": "tc1",
        "toolCallName": "delete_all",
        "parentMessageId": "m2",
    }
    assert [(w.index, w.rule, w.item_id) for w in stream.warnings] == [
        (3, "TC-06", "tc1"),
        (3, "TC-06", "tc1"),
    ]
    assert all(isinstance(w, StreamWarning) for w in stream.warnings)
    call = stream.tool_calls["tc1"]
    assert (call.name, call.parent_message_id, call.arguments) == ("search", "m1", "{}")
    assert [m.id for m in stream.messages] == ["m1"]


def test_tc06_er01_reopen_of_open_call_is_fatal() -> None:
    exc = violation([RS, start("tc1"), args("tc1", "{"), start("tc1")])
    assert_violation(exc, "ER-01", 3, "tc1")


def test_tc06_reopen_closed_text_message_appends() -> None:
    stream, _ = run(
        [
            RS,
            {"type": "TEXT_MESSAGE_START", "messageId": "m1"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "Hel"},
            {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
            {"type": "TEXT_MESSAGE_START", "messageId": "m1"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "lo"},
            {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
            RF,
        ]
    )
    assert messages(stream) == [{"id": "m1", "role": "assistant", "content": "Hello"}]


# -- TC-07: TOOL_CALL_CHUNK expansion -------------------------------------------------------


def test_tc07_chunks_expand_with_synthesized_ends_and_metadata() -> None:
    stream, out = run(
        [
            RS,
            chunk(
                toolCallId="a",
                toolCallName="f",
                parentMessageId="m1",
                delta='{"x":',
                metadata={"k": 1},
            ),
            chunk(delta="1}"),
            chunk(metadata={"k": 2}),
            chunk(toolCallId="b", toolCallName="g", delta="{}", timestamp=5),
            finished(["a", "b"]),
        ]
    )
    assert out == [
        {"type": "RUN_STARTED", "threadId": "t1", "runId": "r1"},
        {
            "type": "TOOL_CALL_START",
            "metadata": {"k": 1},
            "toolCallId": "a",
            "toolCallName": "f",
            "parentMessageId": "m1",
        },
        {
            "type": "TOOL_CALL_ARGS",
            "metadata": {"k": 1},
            "toolCallId": "a",
            "delta": '{"x":',
        },
        {"type": "TOOL_CALL_ARGS", "toolCallId": "a", "delta": "1}"},
        {"type": "TOOL_CALL_END", "metadata": {"k": 2}, "toolCallId": "a"},
        {
            "type": "TOOL_CALL_START",
            "timestamp": 5,
            "toolCallId": "b",
            "toolCallName": "g",
        },
        {"type": "TOOL_CALL_ARGS", "timestamp": 5, "toolCallId": "b", "delta": "{}"},
        {"type": "TOOL_CALL_END", "toolCallId": "b"},
        {
            "type": "RUN_FINISHED",
            "threadId": "t1",
            "runId": "r1",
            "outcome": {"type": "success", "pendingToolCallIds": ["a", "b"]},
        },
    ]
    assert stream.pending_tool_call_ids == ["a", "b"]
    assert [(c.arguments, c.open, c.ended) for c in stream.tool_calls.values()] == [
        ('{"x":1}', False, True),
        ("{}", False, True),
    ]
    assert messages(stream) == [
        {
            "id": "m1",
            "role": "assistant",
            "toolCalls": [
                {
                    "id": "a",
                    "type": "function",
                    "function": {"name": "f", "arguments": '{"x":1}'},
                }
            ],
        },
        {
            "id": "b",
            "role": "assistant",
            "toolCalls": [
                {
                    "id": "b",
                    "type": "function",
                    "function": {"name": "g", "arguments": "{}"},
                }
            ],
        },
    ]


def test_tc07_chunk_end_synthesized_when_other_event_arrives_in_lane() -> None:
    stream, out = run(
        [
            RS,
            chunk(toolCallId="a", toolCallName="f", delta="{}"),
            {"type": "CUSTOM", "name": "progress", "value": 1},
            RF,
        ]
    )
    assert [e["type"] for e in out] == [
        "RUN_STARTED",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "CUSTOM",
        "RUN_FINISHED",
    ]


def test_tc07_chunk_survives_lane_neutral_events() -> None:
    _, out = run(
        [
            RS,
            chunk(toolCallId="a", toolCallName="f", delta="{"),
            {"type": "RAW", "event": {"anything": True}},
            chunk(delta="}"),
            RF,
        ]
    )
    assert [e["type"] for e in out] == [
        "RUN_STARTED",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "RAW",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "RUN_FINISHED",
    ]


def test_tc07_chunk_lanes_are_per_subagent() -> None:
    stream, out = run(
        [
            RS,
            chunk(toolCallId="a", toolCallName="f", delta="{"),
            chunk(toolCallId="s1", toolCallName="g", delta="[", subagentRunId="sub"),
            chunk(delta="}"),
            chunk(delta="]", subagentRunId="sub"),
            {"type": "SUBAGENT_FINISHED", "subagentRunId": "sub"},
            RF,
        ]
    )
    assert [(e["type"], e.get("toolCallId")) for e in out] == [
        ("RUN_STARTED", None),
        ("TOOL_CALL_START", "a"),
        ("TOOL_CALL_ARGS", "a"),
        ("TOOL_CALL_START", "s1"),
        ("TOOL_CALL_ARGS", "s1"),
        ("TOOL_CALL_ARGS", "a"),
        ("TOOL_CALL_ARGS", "s1"),
        ("TOOL_CALL_END", "s1"),
        ("SUBAGENT_FINISHED", None),
        ("TOOL_CALL_END", "a"),
        ("RUN_FINISHED", None),
    ]
    assert out[7]["subagentRunId"] == "sub"
    assert stream.tool_calls["a"].arguments == "{}"
    assert stream.tool_calls["s1"].arguments == "[]"


def test_tc07_first_chunk_without_id_is_fatal() -> None:
    exc = violation([RS, chunk(toolCallName="f", delta="{}")])
    assert_violation(exc, "TC-07", 1, None)


def test_tc07_first_chunk_without_name_is_fatal() -> None:
    exc = violation([RS, chunk(toolCallId="a", delta="{}")])
    assert_violation(exc, "TC-07", 1, "a")


def test_tc07_idless_chunk_after_lane_closed_is_fatal() -> None:
    exc = violation(
        [
            RS,
            chunk(toolCallId="a", toolCallName="f"),
            {"type": "STATE_SNAPSHOT", "snapshot": {}},
            chunk(delta="x"),
        ]
    )
    assert_violation(exc, "TC-07", 3, None)


def test_tc07_chunk_conflicting_name_is_fatal() -> None:
    exc = violation(
        [
            RS,
            chunk(toolCallId="a", toolCallName="f"),
            chunk(toolCallName="g", delta="{}"),
        ]
    )
    assert_violation(exc, "TC-07", 2, "a")
    assert "'g'" in exc.message
    assert "'f'" in exc.message


def test_tc07_chunk_conflicting_parent_is_fatal() -> None:
    exc = violation(
        [
            RS,
            chunk(toolCallId="a", toolCallName="f", parentMessageId="m1"),
            chunk(toolCallId="a", parentMessageId="m2"),
        ]
    )
    assert_violation(exc, "TC-07", 2, "a")


def test_tc07_chunk_repeating_same_name_and_parent_is_fine() -> None:
    stream, out = run(
        [
            RS,
            chunk(toolCallId="a", toolCallName="f", parentMessageId="m1"),
            chunk(toolCallId="a", toolCallName="f", parentMessageId="m1", delta="{}"),
            RF,
        ]
    )
    assert [e["type"] for e in out] == [
        "RUN_STARTED",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "RUN_FINISHED",
    ]
    assert stream.tool_calls["a"].arguments == "{}"


def test_tc07_chunk_continuing_explicit_start_is_fatal() -> None:
    exc = violation(
        [RS, start("a", "f"), chunk(toolCallId="a", toolCallName="f", delta="{}")]
    )
    assert_violation(exc, "TC-07", 2, "a")


def test_tc07_explicit_args_on_chunk_opened_call_is_fatal() -> None:
    exc = violation([RS, chunk(toolCallId="a", toolCallName="f"), args("a", "{}")])
    assert_violation(exc, "TC-07", 2, "a")


def test_tc07_explicit_end_on_chunk_opened_call_is_fatal() -> None:
    exc = violation([RS, chunk(toolCallId="a", toolCallName="f", delta="{}"), end("a")])
    assert_violation(exc, "TC-07", 2, "a")


def test_tc07_text_chunks_expand_with_synthesized_end() -> None:
    stream, out = run(
        [
            RS,
            {
                "type": "TEXT_MESSAGE_CHUNK",
                "messageId": "m1",
                "role": "assistant",
                "delta": "Hi",
            },
            {"type": "TEXT_MESSAGE_CHUNK", "delta": " there"},
            chunk(toolCallId="a", toolCallName="f", parentMessageId="m1", delta="{}"),
            RF,
        ]
    )
    assert out[1:-1] == [
        {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "Hi"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": " there"},
        {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
        {
            "type": "TOOL_CALL_START",
            "toolCallId": "a",
            "toolCallName": "f",
            "parentMessageId": "m1",
        },
        {"type": "TOOL_CALL_ARGS", "toolCallId": "a", "delta": "{}"},
        {"type": "TOOL_CALL_END", "toolCallId": "a"},
    ]
    assert messages(stream) == [
        {
            "id": "m1",
            "role": "assistant",
            "content": "Hi there",
            "toolCalls": [
                {
                    "id": "a",
                    "type": "function",
                    "function": {"name": "f", "arguments": "{}"},
                }
            ],
        },
    ]


def test_tc07_text_chunk_without_message_id_is_fatal() -> None:
    exc = violation([RS, {"type": "TEXT_MESSAGE_CHUNK", "delta": "hi"}])
    assert_violation(exc, "ER-01", 1, None)


def test_tc07_explicit_content_on_chunk_opened_text_is_fatal() -> None:
    exc = violation(
        [
            RS,
            {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "a"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "b"},
        ]
    )
    assert_violation(exc, "ER-01", 2, "m1")


# -- TC-08: a result is its own tool message and does not reopen the call -------------------


def test_tc08_result_does_not_reopen_call() -> None:
    exc = violation([RS, start("c"), end("c"), result("c", "m_t"), args("c", "more")])
    assert_violation(exc, "ER-01", 4, "c")
    assert "TOOL_CALL_START" in exc.message


def test_tc08_result_for_open_call_is_accepted() -> None:
    stream, out = run(
        [RS, start("c"), result("c", "m_t", "early"), args("c", "{}"), end("c"), RF]
    )
    assert [e["type"] for e in out] == [
        "RUN_STARTED",
        "TOOL_CALL_START",
        "TOOL_CALL_RESULT",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "RUN_FINISHED",
    ]
    call = stream.tool_calls["c"]
    assert (call.result_message_id, call.arguments, call.complete) == (
        "m_t",
        "{}",
        True,
    )
    assert stream.pending_tool_call_ids == []


def test_tc08_result_for_unknown_call_is_accepted() -> None:
    stream, out = run([RS, result("elsewhere", "m_t", "42"), RF])
    assert out[1] == {
        "type": "TOOL_CALL_RESULT",
        "messageId": "m_t",
        "toolCallId": "elsewhere",
        "content": "42",
    }
    assert messages(stream) == [
        {"id": "m_t", "role": "tool", "content": "42", "toolCallId": "elsewhere"}
    ]
    assert stream.pending_tool_call_ids == []


def test_tc08_result_role_other_than_tool_is_fatal() -> None:
    exc = violation([RS, start("c"), end("c"), result("c", "m_t", role="assistant")])
    assert_violation(exc, "TC-08", 3, "c")


def test_tc08_result_reusing_message_id_is_fatal() -> None:
    exc = violation(
        [RS, start("c"), end("c"), result("c", "m_t"), result("other", "m_t")]
    )
    assert_violation(exc, "LIFECYCLE", 4, "m_t")


def test_tc08_second_result_for_same_call_is_a_warning() -> None:
    stream, _ = run(
        [RS, start("c"), end("c"), result("c", "m1"), result("c", "m2"), RF]
    )
    assert [(w.index, w.rule, w.item_id) for w in stream.warnings] == [
        (4, "TC-08", "c")
    ]
    assert stream.tool_calls["c"].result_message_id == "m1"
    assert [m.id for m in stream.messages] == ["c", "m1", "m2"]


# -- TC-09: results in-stream or never -------------------------------------------------------


def test_tc09_answered_and_unanswered_calls_in_one_run() -> None:
    stream, _ = run(
        [
            RS,
            start("back", "lookup", "m1"),
            end("back"),
            start("front", "confirm", "m1"),
            end("front"),
            result("back", "m_t", "status ok"),
            RF,
        ]
    )
    assert stream.pending_tool_call_ids == ["front"]
    assert stream.tool_calls["back"].result_message_id == "m_t"
    assert stream.tool_calls["front"].result_message_id is None
    assert [m["role"] for m in messages(stream)] == ["assistant", "tool"]


# -- TC-10: result content is a string or a list of content parts ---------------------------


def test_tc10_string_result_becomes_tool_message() -> None:
    stream, out = run(
        [
            RS,
            start("tc1", "get_weather", "m1"),
            args("tc1", '{"city":"Paris"}'),
            end("tc1"),
            result("tc1", "m2", '{"tempC":21}', role="tool"),
            finished(),
        ]
    )
    assert out[4] == {
        "type": "TOOL_CALL_RESULT",
        "messageId": "m2",
        "toolCallId": "tc1",
        "content": '{"tempC":21}',
        "role": "tool",
    }
    assert messages(stream)[1] == {
        "id": "m2",
        "role": "tool",
        "content": '{"tempC":21}',
        "toolCallId": "tc1",
    }
    assert stream.pending_tool_call_ids == []


def test_tc10_part_list_result_becomes_tool_message_unchanged() -> None:
    parts = [
        {"type": "text", "text": "chart:"},
        {
            "type": "image",
            "source": {"type": "data", "value": "aGk=", "mimeType": "image/png"},
        },
    ]
    stream, out = run([RS, start("c", "plot"), end("c"), result("c", "m_t", parts), RF])
    assert out[3]["content"] == parts
    assert messages(stream)[1] == {
        "id": "m_t",
        "role": "tool",
        "content": parts,
        "toolCallId": "c",
    }
    assert stream.pending_tool_call_ids == []


def test_tc10_result_model_with_parts_passes_through_same_object() -> None:
    stream = RunStream()
    stream.feed(RS)
    event = ToolCallResultEvent(
        message_id="m_t", tool_call_id="c", content=[{"type": "text", "text": "yes"}]
    )
    assert stream.feed(event) == [event]
    assert stream.messages == [
        ToolMessage(id="m_t", tool_call_id="c", content=event.content)
    ]


@pytest.mark.parametrize(
    "content",
    [42, {"text": "x"}, None, [{"type": "image"}], [{"type": "text"}], ["plain"]],
)
def test_tc10_malformed_result_content_is_fatal(content: Any) -> None:
    exc = violation([RS, start("c"), end("c"), result("c", "m_t", content)])
    assert_violation(exc, "TC-10", 3, "c")


def test_tc10_malformed_content_on_model_is_fatal() -> None:
    event = ToolCallResultEvent.model_construct(
        message_id="m_t", tool_call_id="c", content=3
    )
    exc = violation([RS, event])
    assert_violation(exc, "TC-10", 1, "c")


# -- TC-11 / TC-12 / TC-13: no JSON part, metadata on parts, opaque file handles -----------


def test_tc11_json_part_is_fatal() -> None:
    exc = violation(
        [
            RS,
            start("c"),
            end("c"),
            result("c", "m_t", [{"type": "json", "value": {"a": 1}}]),
        ]
    )
    assert_violation(exc, "TC-11", 3, "c")


def test_tc11_structured_result_serialized_in_text_part_is_accepted() -> None:
    parts = [{"type": "text", "text": '{"a":1}'}]
    stream, _ = run([RS, start("c"), end("c"), result("c", "m_t", parts), RF])
    assert messages(stream)[1]["content"] == parts


def test_tc12_part_metadata_is_carried_and_provider_blocks_are_fatal() -> None:
    parts = [
        {
            "type": "text",
            "text": "hit",
            "metadata": {"source": "https://x.test", "title": "X"},
        }
    ]
    stream, _ = run([RS, start("c"), end("c"), result("c", "m_t", parts), RF])
    assert messages(stream)[1]["content"] == parts
    exc = violation(
        [
            RS,
            start("c"),
            end("c"),
            result("c", "m_t", [{"type": "search_result", "source": "x"}]),
        ]
    )
    assert_violation(exc, "TC-10", 3, "c")


def test_tc13_file_handle_source_is_kept_opaque() -> None:
    parts = [
        {
            "type": "document",
            "source": {"type": "file", "value": "file-abc123", "provider": "openai"},
        }
    ]
    stream, out = run([RS, start("c"), end("c"), result("c", "m_t", parts), RF])
    assert out[3]["content"] == parts
    assert messages(stream)[1]["content"] == parts


# -- TC-14 / TC-15 / TC-16: content downgrade belongs to other layers -----------------------


def test_tc14_result_whose_parts_were_all_dropped_answers_with_empty_string() -> None:
    stream, _ = run([RS, start("c"), end("c"), result("c", "m_t", ""), RF])
    assert stream.pending_tool_call_ids == []
    assert messages(stream)[1] == {
        "id": "m_t",
        "role": "tool",
        "content": "",
        "toolCallId": "c",
    }


def test_tc15_stream_machine_does_not_flatten_part_lists() -> None:
    parts = [
        {"type": "text", "text": "a"},
        {"type": "audio", "source": {"type": "url", "value": "https://x.test/a.mp3"}},
        {"type": "text", "text": "b"},
    ]
    stream, out = run([RS, start("c"), end("c"), result("c", "m_t", parts), RF])
    assert out[3]["content"] == parts
    assert messages(stream)[1]["content"] == parts
    assert stream.warnings == []


def test_tc16_stream_machine_accepts_results_untouched_without_protocol_version() -> (
    None
):
    parts = [
        {
            "type": "video",
            "source": {
                "type": "url",
                "value": "https://x.test/v.mp4",
                "mimeType": "video/mp4",
            },
        }
    ]
    stream, out = run([RS, start("c"), end("c"), result("c", "m_t", parts), RF])
    assert "protocolVersion" not in out[0]
    assert messages(stream)[1]["content"] == parts


# -- TC-17: reserved names -------------------------------------------------------------------


@pytest.mark.parametrize("name", ["ReasoningPart", "ToolCallPart", "AssistantPart"])
def test_tc17_reserved_event_type_is_fatal(name: str) -> None:
    exc = violation([RS, {"type": name, "toolCallId": "c"}])
    assert_violation(exc, "TC-17", 1, "c")


@pytest.mark.parametrize("name", ["ReasoningPart", "ToolCallPart", "AssistantPart"])
def test_tc17_reserved_part_type_in_result_is_fatal(name: str) -> None:
    exc = violation(
        [RS, start("c"), end("c"), result("c", "m_t", [{"type": name, "text": "x"}])]
    )
    assert_violation(exc, "TC-17", 3, "c")


def test_tc17_reserved_part_type_in_snapshot_is_fatal() -> None:
    snapshot = {
        "type": "MESSAGES_SNAPSHOT",
        "messages": [
            {"id": "u1", "role": "user", "content": [{"type": "ToolCallPart"}]}
        ],
    }
    exc = violation([RS, snapshot])
    assert_violation(exc, "TC-17", 1, "u1")


# -- FT-04 / FT-05: pendingToolCallIds --------------------------------------------------------


def test_ft04_exact_pending_list_is_accepted() -> None:
    stream, out = run(
        [
            RS,
            start("a"),
            end("a"),
            start("b"),
            end("b"),
            start("c"),
            end("c"),
            result("b", "m_t"),
            finished(["a", "c"]),
        ]
    )
    assert out[-1]["outcome"] == {"type": "success", "pendingToolCallIds": ["a", "c"]}
    assert stream.pending_tool_call_ids == ["a", "c"]


def test_ft04_pending_list_with_answered_call_is_fatal() -> None:
    exc = violation(
        [
            RS,
            start("a"),
            end("a"),
            start("b"),
            end("b"),
            result("b", "m_t"),
            finished(["a", "b"]),
        ]
    )
    assert_violation(exc, "FT-04", 6, None)
    assert "['a', 'b']" in exc.message
    assert "['a']" in exc.message


def test_ft04_pending_list_in_wrong_order_is_fatal() -> None:
    exc = violation(
        [RS, start("a"), end("a"), start("b"), end("b"), finished(["b", "a"])]
    )
    assert_violation(exc, "FT-04", 5, None)
    assert "['b', 'a']" in exc.message
    assert "['a', 'b']" in exc.message


def test_ft04_pending_list_missing_a_call_is_fatal() -> None:
    exc = violation([RS, start("a"), end("a"), start("b"), end("b"), finished(["a"])])
    assert_violation(exc, "FT-04", 5, None)


def test_ft04_pending_list_naming_unknown_call_is_fatal_on_model() -> None:
    event = RunFinishedEvent(
        thread_id="t1",
        run_id="r1",
        outcome=RunFinishedSuccessOutcome(pending_tool_call_ids=["ghost"]),
    )
    exc = violation([RS, event])
    assert_violation(exc, "FT-04", 1, None)


@pytest.mark.parametrize(
    "final", [finished(), finished([]), {**RF, "outcome": {"type": "success"}}]
)
def test_ft05_absent_or_empty_pending_list_is_derived(final: dict[str, Any]) -> None:
    stream, _ = run(
        [RS, start("a"), end("a"), start("b"), end("b"), result("a", "m_t"), final]
    )
    assert stream.status == "finished"
    assert stream.pending_tool_call_ids == ["b"]


def test_ft05_interrupt_outcome_derives_pending_the_same_way() -> None:
    final = {
        **RF,
        "outcome": {
            "type": "interrupt",
            "interrupts": [{"id": "i1", "reason": "approval"}],
        },
    }
    stream, _ = run([RS, start("a"), end("a"), final])
    assert stream.pending_tool_call_ids == ["a"]


# -- ER-01: streaming-pattern ordering ---------------------------------------------------------


def test_er01_args_for_unopened_call_is_fatal() -> None:
    exc = violation([RS, args("ghost", "{}")])
    assert_violation(exc, "ER-01", 1, "ghost")
    assert "never opened" in exc.message


def test_er01_end_for_unopened_call_is_fatal() -> None:
    exc = violation([RS, end("ghost")])
    assert_violation(exc, "ER-01", 1, "ghost")


def test_er01_end_twice_is_fatal() -> None:
    exc = violation([RS, start("c"), end("c"), end("c")])
    assert_violation(exc, "ER-01", 3, "c")


def test_er01_call_open_at_run_finished_is_fatal() -> None:
    exc = violation([RS, start("a"), end("a"), start("b"), args("b", "{"), RF])
    assert_violation(exc, "ER-01", 5, "b")


def test_er01_text_message_open_at_run_finished_is_fatal() -> None:
    exc = violation([RS, {"type": "TEXT_MESSAGE_START", "messageId": "m1"}, RF])
    assert_violation(exc, "ER-01", 2, "m1")


def test_er01_step_open_at_run_finished_is_fatal() -> None:
    exc = violation([RS, {"type": "STEP_STARTED", "stepName": "plan"}, RF])
    assert_violation(exc, "ER-01", 2, "plan")


def test_er01_step_finished_without_start_is_fatal() -> None:
    exc = violation([RS, {"type": "STEP_FINISHED", "stepName": "plan"}])
    assert_violation(exc, "ER-01", 1, "plan")


def test_er01_step_started_twice_is_fatal() -> None:
    exc = violation(
        [
            RS,
            {"type": "STEP_STARTED", "stepName": "plan"},
            {"type": "STEP_STARTED", "stepName": "plan"},
        ]
    )
    assert_violation(exc, "ER-01", 2, "plan")


def test_er01_text_content_for_unopened_message_is_fatal() -> None:
    exc = violation(
        [RS, {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "x"}]
    )
    assert_violation(exc, "ER-01", 1, "m1")


def test_er01_text_end_for_closed_message_is_fatal() -> None:
    exc = violation(
        [
            RS,
            {"type": "TEXT_MESSAGE_START", "messageId": "m1"},
            {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
            {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
        ]
    )
    assert_violation(exc, "ER-01", 3, "m1")


def test_er01_text_start_on_open_message_is_fatal() -> None:
    exc = violation(
        [
            RS,
            {"type": "TEXT_MESSAGE_START", "messageId": "m1"},
            {"type": "TEXT_MESSAGE_START", "messageId": "m1"},
        ]
    )
    assert_violation(exc, "ER-01", 2, "m1")


def test_er01_chunk_items_are_closed_before_run_finished() -> None:
    stream, out = run(
        [
            RS,
            {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "x"},
            chunk(toolCallId="a", toolCallName="f"),
            RF,
        ]
    )
    assert [e["type"] for e in out][-2:] == ["TOOL_CALL_END", "RUN_FINISHED"]
    assert stream.status == "finished"


def test_er01_close_open_items_closes_everything_in_opening_order() -> None:
    stream = RunStream()
    feed_all(
        stream,
        [
            RS,
            {"type": "STEP_STARTED", "stepName": "plan"},
            start("a", "f"),
            {"type": "TEXT_MESSAGE_START", "messageId": "m1"},
            chunk(toolCallId="b", toolCallName="g", metadata={"k": 1}),
        ],
    )
    closing = [event_to_dict(e) for e in stream.close_open_items()]
    assert closing == [
        {"type": "STEP_FINISHED", "stepName": "plan"},
        {"type": "TOOL_CALL_END", "toolCallId": "a"},
        {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
        {"type": "TOOL_CALL_END", "metadata": {"k": 1}, "toolCallId": "b"},
    ]
    assert stream.close_open_items() == []
    assert (
        stream.feed({**RF, "outcome": {"type": "cancelled"}})[0].outcome.type
        == "cancelled"
    )
    assert stream.pending_tool_call_ids == ["a", "b"]


def test_er01_close_open_items_after_violation_then_run_error() -> None:
    stream = RunStream()
    feed_all(stream, [RS, start("a")])
    with pytest.raises(StreamViolation):
        stream.feed(args("ghost", "x"))
    assert [event_to_dict(e) for e in stream.close_open_items()] == [
        {"type": "TOOL_CALL_END", "toolCallId": "a"}
    ]
    with pytest.raises(StreamViolation) as info:
        stream.feed({"type": "RUN_ERROR", "message": "boom"})
    assert_violation(info.value, "LIFECYCLE", 3, None)


def test_er01_run_error_with_open_items_is_accepted() -> None:
    stream, out = run(
        [
            RS,
            start("a"),
            chunk(toolCallId="b", toolCallName="g"),
            {"type": "RUN_ERROR", "message": "limit"},
        ]
    )
    assert [e["type"] for e in out][-2:] == ["TOOL_CALL_END", "RUN_ERROR"]
    assert out[-2]["toolCallId"] == "b"
    assert stream.status == "errored"


# -- Run lifecycle ----------------------------------------------------------------------------


def test_lifecycle_first_event_must_be_run_started() -> None:
    exc = violation([start("a")])
    assert_violation(exc, "LIFECYCLE", 0, "a")


def test_lifecycle_run_error_may_come_first_then_only_run_started() -> None:
    stream, _ = run([{"type": "RUN_ERROR", "message": "bad input"}])
    assert stream.status == "errored"
    exc = violation([{"type": "RUN_ERROR", "message": "x"}, start("a")])
    assert_violation(exc, "LIFECYCLE", 1, "a")
    exc = violation(
        [{"type": "RUN_ERROR", "message": "x"}, {"type": "RUN_ERROR", "message": "y"}]
    )
    assert_violation(exc, "LIFECYCLE", 1, None)


def test_lifecycle_nested_run_started_is_fatal() -> None:
    exc = violation([RS, {**RS, "runId": "r2"}])
    assert_violation(exc, "LIFECYCLE", 1, None)


def test_lifecycle_event_after_run_finished_is_fatal() -> None:
    exc = violation([RS, RF, start("a")])
    assert_violation(exc, "LIFECYCLE", 2, "a")


def test_lifecycle_late_run_error_after_finished_is_accepted() -> None:
    stream, _ = run([RS, RF, {"type": "RUN_ERROR", "message": "late"}])
    assert stream.status == "errored"


def test_lifecycle_run_ids_must_agree() -> None:
    exc = violation([RS, {**RF, "runId": "r2"}])
    assert_violation(exc, "LIFECYCLE", 1, None)
    exc = violation([RS, {**RF, "threadId": "t2"}])
    assert_violation(exc, "LIFECYCLE", 1, None)
    exc = violation([RS], thread_id="other")
    assert_violation(exc, "LIFECYCLE", 0, None)
    exc = violation([RS], run_id="r9")
    assert_violation(exc, "LIFECYCLE", 0, None)


def test_lifecycle_new_run_resets_per_run_state_and_keeps_thread_ids() -> None:
    stream, _ = run(
        [
            RS,
            start("a"),
            end("a"),
            finished(["a"]),
            {**RS, "runId": "r2"},
            start("b"),
            end("b"),
            {**RF, "runId": "r2"},
        ],
        thread_id="t1",
    )
    assert list(stream.tool_calls) == ["b"]
    assert stream.pending_tool_call_ids == ["b"]
    assert [m.id for m in stream.messages] == ["b"]
    assert (stream.run_id, stream.status) == ("r2", "finished")
    exc = violation([RS, start("a"), end("a"), RF, {**RS, "runId": "r2"}, start("a")])
    assert_violation(exc, "LIFECYCLE", 5, "a")


def test_lifecycle_reused_run_id_is_fatal() -> None:
    exc = violation([RS, RF, RS])
    assert_violation(exc, "LIFECYCLE", 2, None)


def test_lifecycle_prior_tool_call_id_reuse_is_fatal() -> None:
    exc = violation([RS, start("old")], prior_tool_call_ids=["old"])
    assert_violation(exc, "LIFECYCLE", 1, "old")
    exc = violation(
        [RS, chunk(toolCallId="old", toolCallName="f")], prior_tool_call_ids=["old"]
    )
    assert_violation(exc, "LIFECYCLE", 1, "old")


def test_lifecycle_prior_message_id_reuse_is_fatal() -> None:
    exc = violation(
        [RS, {"type": "TEXT_MESSAGE_START", "messageId": "m0"}],
        prior_message_ids=["m0"],
    )
    assert_violation(exc, "LIFECYCLE", 1, "m0")
    exc = violation([RS, result("c", "m0")], prior_message_ids=["m0"])
    assert_violation(exc, "LIFECYCLE", 1, "m0")


def test_lifecycle_result_for_prior_run_call_is_accepted() -> None:
    stream, _ = run([RS, result("old", "m_t"), RF], prior_tool_call_ids=["old"])
    assert stream.pending_tool_call_ids == []
    assert [m.role for m in stream.messages] == ["tool"]


def test_lifecycle_unknown_event_type_is_dropped_with_warning() -> None:
    stream = RunStream()
    stream.feed(RS)
    assert stream.feed({"type": "TOOL_CALL_PROGRESS", "toolCallId": "c"}) == []
    assert stream.warnings == [
        StreamWarning(
            1,
            "LIFECYCLE",
            "c",
            "dropped an event of unknown type 'TOOL_CALL_PROGRESS' (not in AG-UI 1.0)",
        )
    ]
    stream.feed(RF)
    assert stream.status == "finished"


@pytest.mark.parametrize(
    ("bad", "item_id"),
    [
        ({"type": "RUN_FINISHED", "threadId": "t1"}, None),
        ({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": 5}, "m1"),
        ({"toolCallId": "x"}, "x"),
        ({"type": ""}, None),
        ("TOOL_CALL_END", None),
    ],
)
def test_lifecycle_malformed_known_event_is_fatal(
    bad: Any, item_id: str | None
) -> None:
    exc = violation([RS, bad])
    assert_violation(exc, "LIFECYCLE", 1, item_id)


def test_tc07_malformed_chunk_is_fatal() -> None:
    exc = violation([RS, chunk(toolCallId="a", toolCallName="f", delta=3)])
    assert_violation(exc, "TC-07", 1, "a")


def test_lifecycle_machine_is_unusable_after_violation() -> None:
    stream = RunStream()
    stream.feed(RS)
    with pytest.raises(StreamViolation):
        stream.feed(end("ghost"))
    with pytest.raises(StreamViolation) as info:
        stream.feed(RF)
    assert_violation(info.value, "LIFECYCLE", 2, None)
    assert "event 1" in info.value.message


def test_lifecycle_violation_pickles() -> None:
    exc = StreamViolation(index=3, rule="TC-07", item_id="a", message="m")
    copy = pickle.loads(pickle.dumps(exc))
    assert (copy.index, copy.rule, copy.item_id, copy.message, str(copy)) == (
        3,
        "TC-07",
        "a",
        "m",
        "TC-07 at event 3: m",
    )


def test_lifecycle_accumulates_user_system_developer_text_by_role() -> None:
    stream, _ = run(
        [
            RS,
            {"type": "TEXT_MESSAGE_START", "messageId": "u1", "role": "user"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "u1", "delta": "hi"},
            {"type": "TEXT_MESSAGE_END", "messageId": "u1"},
            {"type": "TEXT_MESSAGE_START", "messageId": "s1", "role": "system"},
            {"type": "TEXT_MESSAGE_END", "messageId": "s1"},
            {
                "type": "TEXT_MESSAGE_START",
                "messageId": "d1",
                "role": "developer",
                "name": "ops",
            },
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "d1", "delta": "be brief"},
            {"type": "TEXT_MESSAGE_END", "messageId": "d1"},
            RF,
        ]
    )
    assert messages(stream) == [
        {"id": "u1", "role": "user", "content": "hi"},
        {"id": "s1", "role": "system", "content": ""},
        {"id": "d1", "role": "developer", "content": "be brief", "name": "ops"},
    ]


# -- Cases of kind agui.* ----------------------------------------------------------------------


def _bc28_events(case: dict[str, Any]) -> list[dict[str, Any]]:
    kinds = {
        "tool_call_start": "TOOL_CALL_START",
        "args_delta": "TOOL_CALL_ARGS",
        "tool_call_end": "TOOL_CALL_END",
    }
    out = []
    for item in case["input"]["provider_events"]:
        event: dict[str, Any] = {"type": kinds[item["kind"]], "toolCallId": item["id"]}
        if "name" in item:
            event["toolCallName"] = item["name"]
        if "delta" in item:
            event["delta"] = item["delta"]
        out.append(event)
    return out


def test_bc28_expected_stream_keeps_late_fragment_inside_start_end() -> None:
    case = load_case("BC28")
    expected = case["expected"]["agui_events"]
    stream, out = run([RS, *expected, finished(["mcp_1"])])
    assert out[1:-1] == expected
    assert (
        stream.tool_calls["mcp_1"].arguments == '{"action":"call_tool","tool_args":{}}'
    )
    assert stream.tool_calls["mcp_1"].complete
    assert stream.pending_tool_call_ids == ["mcp_1"]


def test_bc28_args_after_end_is_fatal_like_the_client_verifier() -> None:
    case = load_case("BC28")
    naive = _bc28_events(
        case
    )  # START, ARGS, ARGS, END, ARGS: the buggy adapter's order
    assert [e["type"] for e in naive][-2:] == ["TOOL_CALL_END", "TOOL_CALL_ARGS"]
    exc = violation([RS, *naive])
    assert_violation(exc, "ER-01", 5, "mcp_1")
    assert (
        "TOOL_CALL_START" in exc.message
    )  # tells the producer how to continue legally


def test_bc30_accumulated_messages_keep_result_a_snapshot_omitted() -> None:
    """MESSAGES_SNAPSHOT is passed through unchanged (same object, a run-level event that
    closes open chunk items) and never replaces the accumulated messages: the tool message
    m_t1 minted by TOOL_CALL_RESULT survives a snapshot that omits it."""
    case = load_case("BC30")
    stream = RunStream(thread_id="t1", run_id="r1")
    for raw in case["input"]["agui_stream"]:
        out = stream.feed(raw)
        assert [event_to_dict(e) for e in out] == [raw]
        if raw["type"] == "MESSAGES_SNAPSHOT":
            assert isinstance(out[0], MessagesSnapshotEvent)
            snapshot = out[0]
    assert stream.status == "finished"
    assert stream.pending_tool_call_ids == []
    assert messages(stream) == [
        {
            "id": "m_a1",
            "role": "assistant",
            "toolCalls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "add", "arguments": '{"a":40,"b":2}'},
                }
            ],
        },
        {"id": "m_t1", "role": "tool", "content": "42", "toolCallId": "call_1"},
    ]
    assert isinstance(stream.messages[0], AssistantMessage)
    # What a snapshot built from the same store must hold: the snapshot's messages plus
    # every accumulated message it omitted, by id.
    snapshot_ids = {m.id for m in snapshot.messages}
    merged = [message_to_dict(m) for m in snapshot.messages] + [
        message_to_dict(m) for m in stream.messages if m.id not in snapshot_ids
    ]
    assert merged == case["expected"]["snapshot_messages"]


def test_tc07_explicit_start_after_chunk_synthesizes_end_then_reopens() -> None:
    """A START is a tool-call event in the lane: the chunk item's END is synthesized
    first, so the START reopens a closed call (TC-06) instead of mixing spellings."""
    stream, out = run(
        [
            RS,
            chunk(toolCallId="a", toolCallName="f", delta="{"),
            start("a", "f"),
            args("a", "}"),
            end("a"),
            RF,
        ]
    )
    assert [e["type"] for e in out] == [
        "RUN_STARTED",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "RUN_FINISHED",
    ]
    assert stream.tool_calls["a"].arguments == "{}"
    assert stream.warnings == []
