"""Tool-call events: START / ARGS / END, parents, verbatim arguments, reopening (TC-01..TC-06).

Each test names the rule it checks (RULES.md ids, plus LIFECYCLE for the run lifecycle
of AGUI-1.0.md 2.4) or the case it comes from (cases/tool-calling.jsonl, kind agui.*).
"""

from __future__ import annotations

from agentcore.events import (
    RunFinishedEvent,
    RunStartedEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)
from agentcore.stream import RunStream, StreamWarning, ToolCallState
from tests.agentcore.stream_helpers import (
    RF,
    RS,
    args,
    assert_violation,
    end,
    feed_all,
    finished,
    messages,
    run,
    start,
    text_content,
    text_end,
    text_start,
    violation,
)

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
            text_start("m3", role="assistant"),
            {
                "type": "TEXT_MESSAGE_CONTENT",
                "messageId": "m3",
                "delta": "Let me ask you.",
            },
            text_end("m3"),
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
            text_start("m1", subagentRunId="sub1"),
            text_end("m1", subagentRunId="sub1"),
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
        end("call_W"),
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
            text_start("m1"),
            text_content("m1", "Hel"),
            text_end("m1"),
            text_start("m1"),
            text_content("m1", "lo"),
            text_end("m1"),
            RF,
        ]
    )
    assert messages(stream) == [{"id": "m1", "role": "assistant", "content": "Hello"}]
