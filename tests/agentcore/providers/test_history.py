"""prepare_history and the call-id helpers (FT-06, BC06, BC11, BC18, BC20, BC21)."""

from __future__ import annotations

from agentcore.events import (
    AssistantMessage,
    FunctionCall,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from agentcore.history import (
    INTERRUPTED_CONTENT,
    map_mistral_ids,
    prepare_history,
    replay_arguments,
    replay_arguments_text,
    unique_call_id,
)


def call(call_id: str, name: str = "f", arguments: str = "{}") -> ToolCall:
    return ToolCall(id=call_id, function=FunctionCall(name=name, arguments=arguments))


def shape(messages: list) -> list[tuple[str, str | None]]:
    return [(m.role, getattr(m, "tool_call_id", None)) for m in messages]


def test_bc20_unanswered_calls_get_synthetic_error_after_their_assistant_message() -> (
    None
):
    """Calls without results are answered right after their assistant message, before the next user message."""
    history = [
        UserMessage(id="u1", content="q"),
        AssistantMessage(id="a1", tool_calls=[call("call_X"), call("call_Y")]),
        UserMessage(id="u2", content="try again"),
    ]
    prepared = prepare_history(history)
    assert shape(prepared) == [
        ("user", None),
        ("assistant", None),
        ("tool", "call_X"),
        ("tool", "call_Y"),
        ("user", None),
    ]
    synthetic = prepared[2]
    assert synthetic.content == INTERRUPTED_CONTENT
    assert synthetic.error == "interrupted"
    assert synthetic.id == "synthetic-call_X"
    assert prepare_history(history) == prepared  # deterministic
    assert len(history) == 3  # input untouched


def test_bc21_results_reordered_to_call_order_and_one_per_call_ft06() -> None:
    """Results stored out of order follow call order; duplicates keep the first; orphans are dropped."""
    history = [
        SystemMessage(id="s", content="sys"),
        UserMessage(id="u1", content="q"),
        AssistantMessage(id="a1", tool_calls=[call("call_S"), call("call_F")]),
        ToolMessage(id="t1", tool_call_id="call_F", content="status ok"),
        ToolMessage(id="t9", tool_call_id="call_ghost", content="orphan"),
        ToolMessage(id="t2", tool_call_id="call_S", content="rejected"),
        ToolMessage(id="t3", tool_call_id="call_F", content="second answer"),
    ]
    prepared = prepare_history(history)
    assert shape(prepared) == [
        ("system", None),
        ("user", None),
        ("assistant", None),
        ("tool", "call_S"),
        ("tool", "call_F"),
    ]
    assert [m.content for m in prepared[3:]] == ["rejected", "status ok"]


def test_result_stored_after_later_user_message_moves_before_it() -> None:
    """A result recorded after the next user message is placed back right after its assistant message."""
    history = [
        AssistantMessage(id="a1", tool_calls=[call("c1")]),
        UserMessage(id="u2", content="next"),
        ToolMessage(id="t1", tool_call_id="c1", content="late"),
    ]
    assert shape(prepare_history(history)) == [
        ("assistant", None),
        ("tool", "c1"),
        ("user", None),
    ]


def test_reused_call_id_in_later_turn_is_answered_once_each() -> None:
    """A call id reused by a later assistant message still gets exactly one tool message there.

    This asserted the reused id ``c1`` going out twice; duplicate ids must not go
    out on the wire, which makes the later call ``c1_2`` on the wire, call and answer alike.
    """
    history = [
        AssistantMessage(id="a1", tool_calls=[call("c1")]),
        ToolMessage(id="t1", tool_call_id="c1", content="one"),
        AssistantMessage(id="a2", tool_calls=[call("c1")]),
    ]
    prepared = prepare_history(history)
    assert shape(prepared) == [
        ("assistant", None),
        ("tool", "c1"),
        ("assistant", None),
        ("tool", "c1_2"),
    ]
    assert prepared[1].content == "one"
    assert prepared[2].tool_calls[0].id == "c1_2"
    assert prepared[3].content == INTERRUPTED_CONTENT


def test_custom_not_executed_content() -> None:
    """not_executed_content replaces the synthetic answer's content."""
    prepared = prepare_history(
        [AssistantMessage(id="a", tool_calls=[call("c")])], not_executed_content="gone"
    )
    assert prepared[1].content == "gone"


def test_bc18_unique_call_id_never_null_or_name() -> None:
    """Missing or null ids are generated; reused ids are suffixed; real new ids are kept (BC18, BC02)."""
    seen: set[str] = set()
    first = unique_call_id(None, seen=seen)
    second = unique_call_id("null", seen=seen)
    third = unique_call_id("None", seen=seen, prefix="gemini_call_")
    assert len({first, second, third}) == 3
    assert not {"null", "None", ""} & {first, second, third}
    assert unique_call_id("call_A", seen=seen) == "call_A"
    assert unique_call_id("call_A", seen=seen) == "call_A_2"
    assert seen == {first, second, third, "call_A", "call_A_2"}


def test_mistral_ids_nine_alnum_deterministic_collision_free() -> None:
    """Every id maps to 9 alphanumerics; valid ids map to themselves; the mapping is stable."""
    ids = [f"call_{i}" for i in range(200)] + ["Abc123xyz"]
    mapping = map_mistral_ids(ids)
    assert mapping["Abc123xyz"] == "Abc123xyz"
    assert all(len(v) == 9 and v.isalnum() and v.isascii() for v in mapping.values())
    assert len(set(mapping.values())) == len(ids)
    assert map_mistral_ids(ids) == mapping


def test_bc06_bc11_replay_arguments_never_sends_unparseable_text() -> None:
    """'' and truncated text replay as {}; objects are kept byte-for-byte; double-encoded objects decode."""
    assert replay_arguments_text("") == "{}"
    assert (
        replay_arguments_text('{"path":"notes.md","content":"# Notes\\n- item tw')
        == "{}"
    )
    assert replay_arguments_text('{ "a" : 1 }') == '{ "a" : 1 }'
    assert replay_arguments_text("[1, 2]") == "{}"
    assert replay_arguments('"{\\"a\\": 1}"') == {"a": 1}
    assert replay_arguments("not json") == {}
