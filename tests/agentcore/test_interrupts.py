"""A remote interrupt answered in the remote's own terms: agentcore.interrupts (IR-05, IR-11, IR-18).

The schemas are the ones the frameworks send (Agent Framework's is built by
``agent-framework-ag-ui`` 1.7.0 for ``issue_refund(order_id, amount, reason)``,
Pydantic AI's by its ``AGUIAdapter``); the end-to-end proofs against the running
servers are in tests/api/test_remote_interrupt_interop.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentcore.interrupts import (
    companion_answer,
    companion_call_for,
    edited_args_schema,
    interrupt_tool_call_id,
    is_tool_approval,
    raw_mentions_interrupt,
    relayed_custom_name,
    resume_payload,
)

PROPOSED = {"order_id": "A-1001", "amount": 25.0, "reason": "customer request"}
AGENT_FRAMEWORK: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean"},
        "accepted": {"type": "boolean"},
        "order_id": {"type": "string"},
        "amount": {"type": "number"},
        "reason": {"type": "string"},
        "editedArgs": {
            "type": "object",
            "properties": {
                "order_id": {"type": "string"},
                "amount": {"type": "number"},
                "reason": {"type": "string"},
            },
            "required": ["order_id", "amount", "reason"],
            "additionalProperties": False,
        },
    },
    "anyOf": [{"required": ["approved"]}, {"required": ["accepted"]}],
    "additionalProperties": False,
}
PYDANTIC_AI: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean"},
        "editedArgs": {"type": "object"},
        "reason": {"type": "string"},
    },
    "required": ["approved"],
}
LANGGRAPH: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean"},
        "editedArgs": AGENT_FRAMEWORK["properties"]["editedArgs"],
        "reason": {"type": "string"},
    },
    "required": ["approved"],
}


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        (AGENT_FRAMEWORK, {"approved": True}),
        (PYDANTIC_AI, {"approved": True, "reason": "looks fine"}),
        (LANGGRAPH, {"approved": True, "reason": "looks fine"}),
        (
            {"type": "object", "properties": {"accepted": {"type": "boolean"}}},
            {"accepted": True},
        ),
        ({"type": "object", "properties": {"carrier": {"type": "string"}}}, None),
    ],
    ids=["agent-framework", "pydantic-ai", "langgraph", "accepted-only", "question"],
)
def test_the_note_goes_only_where_the_schema_reads_it_as_a_note(
    schema: dict[str, Any], expected: dict[str, Any] | None
) -> None:
    payload = resume_payload(
        schema=schema, approved=True, reason="looks fine", tool_arguments=PROPOSED
    )
    assert payload == expected


def test_an_edit_goes_as_edited_args_and_is_refused_where_none_is_offered() -> None:
    edit = {**PROPOSED, "amount": 10.0}
    assert resume_payload(
        schema=AGENT_FRAMEWORK, approved=True, edited_args=edit, tool_arguments=PROPOSED
    ) == {"approved": True, "editedArgs": edit}
    with pytest.raises(ValueError, match="offers no 'editedArgs'"):
        resume_payload(
            schema={"type": "object", "properties": {"approved": {"type": "boolean"}}},
            approved=True,
            edited_args=edit,
        )
    assert resume_payload(
        schema=PYDANTIC_AI, approved=False, reason="no", tool_arguments={"path": "/a"}
    ) == {"approved": False, "reason": "no"}


def test_declared_arguments_come_from_edited_args() -> None:
    assert edited_args_schema(AGENT_FRAMEWORK)["required"] == [
        "order_id",
        "amount",
        "reason",
    ]
    assert edited_args_schema(PYDANTIC_AI) is None
    assert edited_args_schema("not a schema") is None


@pytest.mark.parametrize(
    "reason",
    [
        "tool_call",
        "tool_approval",
        "approval",
        "human_approval",
        "confirmation",
        "tool_confirmation",
        "Human_Approval",
        "langgraph:approval",
    ],
)
def test_the_fields_reason_spellings_for_a_tool_approval(reason: str) -> None:
    assert is_tool_approval(reason)


@pytest.mark.parametrize("reason", ["input_required", "langgraph:interrupt", "", None])
def test_other_reasons_are_not_tool_approvals(reason: Any) -> None:
    assert not is_tool_approval(reason)


def test_the_held_call_id_is_found_where_each_framework_keeps_it() -> None:
    assert interrupt_tool_call_id({"toolCallId": "c1", "reason": "x"}) == "c1"
    framework = {"function_call": {"call_id": "af_1", "name": "issue_refund"}}
    assert (
        interrupt_tool_call_id(
            {"reason": "confirmation", "metadata": {"agent_framework": framework}}
        )
        == "af_1"
    )
    langgraph = {"raw": {"tool_call": {"id": "lg_1"}}}
    assert (
        interrupt_tool_call_id(
            {"reason": "human_approval", "metadata": {"langgraph": langgraph}}
        )
        == "lg_1"
    )
    assert (
        interrupt_tool_call_id(
            {"reason": "input_required", "metadata": {"toolCallId": "x"}}
        )
        is None
    )


def test_confirm_changes_is_a_companion_answered_by_agent_frameworks_protocol() -> None:
    arguments = json.dumps(
        {
            "function_name": "issue_refund",
            "function_call_id": "af_1",
            "steps": [{"description": "Execute issue_refund", "status": "enabled"}],
        }
    )
    assert (
        companion_call_for(
            name="confirm_changes", arguments=arguments, held_ids=["af_1"]
        )
        == "af_1"
    )
    assert (
        companion_call_for(name="confirm_changes", arguments=arguments, held_ids=["x"])
        is None
    )
    assert (
        companion_call_for(name="other", arguments=arguments, held_ids=["af_1"]) is None
    )
    assert (
        companion_call_for(name="confirm_changes", arguments="{", held_ids=["af_1"])
        is None
    )
    assert json.loads(companion_answer(arguments=arguments, approved=False)) == {
        "accepted": False,
        "steps": [{"description": "Execute issue_refund", "status": "disabled"}],
    }


def test_relayed_custom_events_are_dropped_or_namespaced() -> None:
    assert relayed_custom_name("function_approval_request") is None
    assert relayed_custom_name("on_interrupt") is None
    assert relayed_custom_name("usage") == "remote.usage"
    assert relayed_custom_name("acme.progress") == "acme.progress"
    assert raw_mentions_interrupt({"chunk": {"__interrupt__": [{"id": "x"}]}})
    assert not raw_mentions_interrupt({"event": "on_chain_start"})
