"""The streaming pattern's ordering rules for calls, text messages and steps (ER-01).

Each test names the rule it checks (RULES.md ids, plus LIFECYCLE for the run lifecycle
of AGUI-1.0.md 2.4) or the case it comes from (cases/tool-calling.jsonl, kind agui.*).
"""

from __future__ import annotations

import pytest

from agentcore.events import (
    event_to_dict,
)
from agentcore.stream import RunStream, StreamViolation
from tests.agentcore.stream_helpers import (
    RF,
    RS,
    args,
    assert_violation,
    chunk,
    end,
    feed_all,
    run,
    start,
    step_finished,
    step_started,
    text_chunk,
    text_content,
    text_end,
    text_start,
    violation,
)

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
    exc = violation([RS, text_start("m1"), RF])
    assert_violation(exc, "ER-01", 2, "m1")


def test_er01_step_open_at_run_finished_is_fatal() -> None:
    exc = violation([RS, step_started("plan"), RF])
    assert_violation(exc, "ER-01", 2, "plan")


def test_er01_step_finished_without_start_is_fatal() -> None:
    exc = violation([RS, step_finished("plan")])
    assert_violation(exc, "ER-01", 1, "plan")


def test_er01_step_started_twice_is_fatal() -> None:
    exc = violation(
        [
            RS,
            step_started("plan"),
            step_started("plan"),
        ]
    )
    assert_violation(exc, "ER-01", 2, "plan")


def test_er01_text_content_for_unopened_message_is_fatal() -> None:
    exc = violation([RS, text_content("m1", "x")])
    assert_violation(exc, "ER-01", 1, "m1")


def test_er01_text_end_for_closed_message_is_fatal() -> None:
    exc = violation(
        [
            RS,
            text_start("m1"),
            text_end("m1"),
            text_end("m1"),
        ]
    )
    assert_violation(exc, "ER-01", 3, "m1")


def test_er01_text_start_on_open_message_is_fatal() -> None:
    exc = violation(
        [
            RS,
            text_start("m1"),
            text_start("m1"),
        ]
    )
    assert_violation(exc, "ER-01", 2, "m1")


def test_er01_chunk_items_are_closed_before_run_finished() -> None:
    stream, out = run(
        [
            RS,
            text_chunk(messageId="m1", delta="x"),
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
            step_started("plan"),
            start("a", "f"),
            text_start("m1"),
            chunk(toolCallId="b", toolCallName="g", metadata={"k": 1}),
        ],
    )
    closing = [event_to_dict(e) for e in stream.close_open_items()]
    assert closing == [
        step_finished("plan"),
        end("a"),
        text_end("m1"),
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
    assert [event_to_dict(e) for e in stream.close_open_items()] == [end("a")]
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
