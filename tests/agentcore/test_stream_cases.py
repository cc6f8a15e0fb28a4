"""The cases of kind agui.* from cases/tool-calling.jsonl, replayed through the machine.

Each test names the rule it checks (RULES.md ids, plus LIFECYCLE for the run lifecycle
of AGUI-1.0.md 2.4) or the case it comes from (cases/tool-calling.jsonl, kind agui.*).
"""

from __future__ import annotations

from typing import Any

from agentcore.events import (
    AssistantMessage,
    MessagesSnapshotEvent,
    event_to_dict,
    message_to_dict,
)
from agentcore.stream import RunStream
from tests.agentcore.stream_helpers import (
    RF,
    RS,
    args,
    assert_violation,
    chunk,
    end,
    finished,
    load_case,
    messages,
    run,
    start,
    violation,
)

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
