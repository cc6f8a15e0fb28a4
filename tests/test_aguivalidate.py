"""The ag-ui-validate harness (tests/aguivalidate.py) fails on what it must, and only that."""

from __future__ import annotations

from typing import Any

import pytest

from tests.aguivalidate import RULES_NARROWED, RULES_OFF, stream_findings


def run(*events: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "type": "RUN_STARTED",
            "threadId": "t",
            "runId": "r",
            "protocolVersion": "1.0",
        },
        *events,
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
    ]


CALL = [
    {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "f"},
    {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '{"q": 1}'},
    {"type": "TOOL_CALL_END", "toolCallId": "c1"},
]


def test_a_1_0_stream_with_what_1_0_changed_has_no_finding() -> None:
    """Argument text that is not JSON (TC-03) and a content-part result (TC-10) are 1.0."""
    stream = run(
        {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "f"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": "{not json"},
        {"type": "TOOL_CALL_END", "toolCallId": "c1"},
        {
            "type": "TOOL_CALL_RESULT",
            "messageId": "m1",
            "toolCallId": "c1",
            "content": [{"type": "text", "text": "ok"}],
            "role": "tool",
        },
    )

    assert stream_findings(stream) == []


def test_reopening_a_closed_call_or_message_is_1_0() -> None:
    """A closed call or message MAY be reopened; further arguments append (TC-06)."""
    text = [
        {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "a"},
        {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
    ]

    assert stream_findings(run(*CALL, *CALL, *text, *text)) == []


def test_a_stream_starting_with_run_error_is_1_0() -> None:
    assert stream_findings([{"type": "RUN_ERROR", "message": "no", "code": "x"}]) == []


@pytest.mark.parametrize(
    ("stream", "rule"),
    [
        (run(*CALL[:2]), "AGUI203"),  # a call left open at RUN_FINISHED (ER-01)
        (run(CALL[1]), "AGUI201"),  # arguments for a call never started
        (
            run(
                {
                    "type": "TOOL_CALL_RESULT",
                    "messageId": "m1",
                    "toolCallId": "elsewhere",
                    "content": "x",
                }
            ),
            "AGUI207",  # a result for a call the run never started (TC-09)
        ),
        (run(CALL[0], *CALL), "AGUI205"),  # a call started while it is open
        (run(*CALL)[:-1], "AGUI003"),  # no terminal event
    ],
)
def test_a_broken_stream_is_a_finding(stream: list[dict[str, Any]], rule: str) -> None:
    assert [line.split(" ")[0] for line in stream_findings(stream)] == [rule]


def test_a_content_part_list_that_is_not_1_0_is_a_finding() -> None:
    """The relaxed schema check is replaced by the 1.0 models, not dropped."""
    findings = stream_findings(
        run(
            *CALL,
            {
                "type": "TOOL_CALL_RESULT",
                "messageId": "m1",
                "toolCallId": "c1",
                "content": [{"type": "json", "value": 1}],
            },
        )
    )

    assert [line.split(" ")[0] for line in findings] == ["AG-UI-1.0-schema"]


def test_sse_body_framing_is_read() -> None:
    body = b'data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\n'

    assert [line.split(" ")[0] for line in stream_findings(body)] == ["AGUI003"]


def test_every_relaxed_rule_says_why_citing_the_1_0_notes() -> None:
    reasons = list(RULES_OFF.values()) + [why for why, _ in RULES_NARROWED.values()]
    assert all("AGUI-1.0.md" in reason for reason in reasons)


RESULT = {
    "type": "TOOL_CALL_RESULT",
    "messageId": "m-r",
    "toolCallId": "c1",
    "content": "done",
    "role": "tool",
}


def test_a_held_call_answered_in_the_next_run_is_1_0_any_other_is_not() -> None:
    """IR-01: a call an interrupt held is answered by a later run; a stray result fails."""
    interrupted = run(*CALL)
    interrupted[-1] = {
        **interrupted[-1],
        "outcome": {
            "type": "interrupt",
            "interrupts": [{"id": "i1", "reason": "tool_call", "toolCallId": "c1"}],
        },
    }
    later = [{**e, "runId": "r2"} for e in run(RESULT)]
    assert stream_findings([*interrupted, *later]) == []

    # A run that finished as a success held nothing: the same result is a finding.
    succeeded = run(*CALL)
    findings = stream_findings([*succeeded, *later])
    assert [f.split(" ")[0] for f in findings] == ["AGUI207"]
