"""Tool results, their content, reserved names and pendingToolCallIds (TC-08..TC-17, FT-04, FT-05).

Each test names the rule it checks (RULES.md ids, plus LIFECYCLE for the run lifecycle
of AGUI-1.0.md 2.4) or the case it comes from (cases/tool-calling.jsonl, kind agui.*).
"""

from __future__ import annotations

from typing import Any

import pytest

from agentcore.events import (
    RunFinishedEvent,
    RunFinishedSuccessOutcome,
    ToolCallResultEvent,
    ToolMessage,
)
from agentcore.stream import RunStream
from tests.agentcore.stream_helpers import (
    RF,
    RS,
    args,
    assert_violation,
    end,
    finished,
    messages,
    result,
    run,
    start,
    violation,
)

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
