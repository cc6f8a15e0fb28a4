"""The run lifecycle: RUN_STARTED / RUN_FINISHED / RUN_ERROR, ids across runs, malformed events (LIFECYCLE).

Each test names the rule it checks (RULES.md ids, plus LIFECYCLE for the run lifecycle
of AGUI-1.0.md 2.4) or the case it comes from (cases/tool-calling.jsonl, kind agui.*).
"""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from agentcore.stream import RunStream, StreamViolation, StreamWarning
from tests.agentcore.stream_helpers import (
    RF,
    RS,
    assert_violation,
    chunk,
    end,
    finished,
    messages,
    result,
    run,
    start,
    text_content,
    text_end,
    text_start,
    violation,
)

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
        [RS, text_start("m0")],
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
        (text_content("m1", 5), "m1"),
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
            text_start("u1", role="user"),
            text_content("u1", "hi"),
            text_end("u1"),
            text_start("s1", role="system"),
            text_end("s1"),
            {
                "type": "TEXT_MESSAGE_START",
                "messageId": "d1",
                "role": "developer",
                "name": "ops",
            },
            text_content("d1", "be brief"),
            text_end("d1"),
            RF,
        ]
    )
    assert messages(stream) == [
        {"id": "u1", "role": "user", "content": "hi"},
        {"id": "s1", "role": "system", "content": ""},
        {"id": "d1", "role": "developer", "content": "be brief", "name": "ops"},
    ]
