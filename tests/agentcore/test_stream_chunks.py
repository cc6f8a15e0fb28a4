"""Chunk events expanded into their START / ARGS|CONTENT / END form (TC-07).

Each test names the rule it checks (RULES.md ids, plus LIFECYCLE for the run lifecycle
of AGUI-1.0.md 2.4) or the case it comes from (cases/tool-calling.jsonl, kind agui.*).
"""

from __future__ import annotations

from tests.agentcore.stream_helpers import (
    RF,
    RS,
    args,
    assert_violation,
    chunk,
    end,
    finished,
    messages,
    run,
    start,
    text_chunk,
    text_content,
    text_end,
    text_start,
    violation,
)

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
        end("b"),
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
    _stream, out = run(
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
            text_chunk(delta=" there"),
            chunk(toolCallId="a", toolCallName="f", parentMessageId="m1", delta="{}"),
            RF,
        ]
    )
    assert out[1:-1] == [
        text_start("m1", role="assistant"),
        text_content("m1", "Hi"),
        text_content("m1", " there"),
        text_end("m1"),
        {
            "type": "TOOL_CALL_START",
            "toolCallId": "a",
            "toolCallName": "f",
            "parentMessageId": "m1",
        },
        {"type": "TOOL_CALL_ARGS", "toolCallId": "a", "delta": "{}"},
        end("a"),
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
    exc = violation([RS, text_chunk(delta="hi")])
    assert_violation(exc, "ER-01", 1, None)


def test_tc07_explicit_content_on_chunk_opened_text_is_fatal() -> None:
    exc = violation(
        [
            RS,
            text_chunk(messageId="m1", delta="a"),
            text_content("m1", "b"),
        ]
    )
    assert_violation(exc, "ER-01", 2, "m1")
