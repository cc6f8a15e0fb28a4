"""The ``args.*`` cases of shared/cases/tool-calling.jsonl, through the real validator and executor.

Each kind is fixed as a whole: the case's own input plus other variants of the same kind.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentcore.arguments import canonical_arguments, parse_arguments
from agentcore.dispatch import ToolCallRequest, dispatch
from agentcore.tools import Tool, ToolContext, Toolset, define_tool


def _context(call: ToolCallRequest) -> ToolContext:
    return ToolContext(
        thread_id="t",
        run_id="r",
        tool_call_id=call.tool_call_id,
        idempotency_key=call.tool_call_id,
    )


def recording_tool(
    name: str, parameters: dict[str, Any]
) -> tuple[Tool, list[dict[str, Any]]]:
    seen: list[dict[str, Any]] = []

    def execute(params: dict[str, Any], context: ToolContext) -> str:
        seen.append(params)
        return "done"

    tool = define_tool(
        name=name,
        description=f"{name} for tests.",
        parameters=parameters,
        execute=execute,
        is_read_only=True,
        execution_mode="parallel",
    )
    return tool, seen


# --- BC06 args.empty_string -------------------------------------------------------------


@pytest.mark.parametrize("raw", ["", "   ", "\n\t", None, "null", " null "])
async def test_bc06_empty_string_parameterless_tool(raw: str | None) -> None:
    """BC06, RT-05: '' (and whitespace, null) for a parameterless tool is {} and the tool runs."""
    tool, seen = recording_tool("get_time", {"type": "object", "properties": {}})
    parsed = parse_arguments(raw, tool=tool)
    assert parsed.ok
    assert parsed.params == {}
    assert parsed.repair == "empty_arguments"
    assert parsed.replay_text == "{}"
    assert canonical_arguments(raw if raw is None or not raw.strip() else "{}") == "{}"
    [result] = await dispatch(
        [ToolCallRequest("call_T1", "get_time", raw)],
        toolset=Toolset([tool]),
        context_factory=_context,
    )
    assert result.error is None
    assert result.content == "done"
    assert seen == [{}]


def test_bc06_empty_string_for_tool_with_required_field_is_an_error() -> None:
    """BC06, RT-06: '' is {} before validation; a required field then makes it an error result."""
    tool, _ = recording_tool(
        "get_city",
        {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    )
    parsed = parse_arguments("", tool=tool)
    assert not parsed.ok
    assert "empty" in parsed.error
    assert "missing required field 'city'" in parsed.error


# --- BC08 args.object_not_string ----------------------------------------------------------


def test_bc08_object_arguments_are_accepted_and_canonicalised() -> None:
    """BC08: an object-valued arguments field is accepted and canonicalised to compact JSON text."""
    tool, _ = recording_tool(
        "get_weather", {"type": "object", "properties": {"city": {"type": "string"}}}
    )
    parsed = parse_arguments({"city": "Paris"}, tool=tool)
    assert parsed.ok
    assert parsed.params == {"city": "Paris"}
    assert parsed.repair == "already_decoded"
    assert canonical_arguments({"city": "Paris"}) == '{"city":"Paris"}'
    assert parsed.replay_text == '{"city":"Paris"}'


async def test_bc08_object_arguments_execute() -> None:
    """BC08: a call whose arguments arrived as an object runs with those params."""
    tool, seen = recording_tool(
        "get_weather", {"type": "object", "properties": {"city": {"type": "string"}}}
    )
    [result] = await dispatch(
        [ToolCallRequest("call_w1", "get_weather", {"city": "Paris"})],
        toolset=Toolset([tool]),
        context_factory=_context,
    )
    assert result.error is None
    assert seen == [{"city": "Paris"}]


# --- BC09 args.double_encoded -----------------------------------------------------------

SALES = {
    "type": "object",
    "properties": {"shop": {"type": "string"}, "start_date": {"type": "string"}},
    "required": ["shop", "start_date"],
}
TODOS = {
    "type": "object",
    "properties": {
        "todos": {"type": "array", "items": {"type": "object"}},
        "note": {"type": "string"},
    },
}


def test_bc09_double_encoded_arguments() -> None:
    """BC09: a JSON string holding the object is decoded once more."""
    tool, _ = recording_tool("sales_data", SALES)
    raw = '"{\\"shop\\": \\"S1\\", \\"start_date\\": \\"2025-03-23\\"}"'
    parsed = parse_arguments(raw, tool=tool)
    assert parsed.ok
    assert parsed.params == {"shop": "S1", "start_date": "2025-03-23"}
    assert parsed.repair == "double_encoded"


def test_bc09_nested_variant_decodes_only_where_schema_wants_array() -> None:
    """BC09: a nested string is decoded only where the schema expects array/object."""
    tool, _ = recording_tool("set_todos", TODOS)
    raw = '{"todos": "[{\\"t\\": \\"a\\"}]", "note": "{not json}"}'
    parsed = parse_arguments(raw, tool=tool)
    assert parsed.ok
    assert parsed.params == {"todos": [{"t": "a"}], "note": "{not json}"}
    assert parsed.repair == "double_encoded"


def test_bc09_genuine_json_looking_string_field_is_left_alone() -> None:
    """BC09: a string field whose value happens to be JSON stays a string."""
    tool, _ = recording_tool("set_todos", TODOS)
    parsed = parse_arguments('{"note": "[1, 2]"}', tool=tool)
    assert parsed.ok
    assert parsed.params == {"note": "[1, 2]"}
    assert parsed.repair is None


def test_bc09_at_most_one_extra_decode() -> None:
    """BC09: triple encoding is not unwrapped further; it is an error result."""
    tool, _ = recording_tool("sales_data", SALES)
    inner = json.dumps({"shop": "S1", "start_date": "d"})
    triple = json.dumps(json.dumps(inner))
    parsed = parse_arguments(triple, tool=tool)
    assert not parsed.ok
    assert "must be a JSON object, got a JSON string" in parsed.error


def test_bc09_double_encoded_decoded_object_variant() -> None:
    """BC09: a fenced double-encoded object is decoded after the fence is stripped."""
    tool, _ = recording_tool("sales_data", SALES)
    raw = '```json\n"{\\"shop\\": \\"S1\\", \\"start_date\\": \\"d\\"}"\n```'
    parsed = parse_arguments(raw, tool=tool)
    assert parsed.ok
    assert parsed.repair == "strip_code_fence+double_encoded"


# --- BC10 args.code_fence -------------------------------------------------------------

CITY_REQUIRED = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}


@pytest.mark.parametrize(
    ("raw", "rung"),
    [
        ('```json\n{"city":"paris"}\n```', "strip_code_fence"),
        ('```\n{"city":"paris"}\n```', "strip_code_fence"),
        ('{"city": "paris"} I will now look this up.', "leading_json_value"),
        # Other variants of the same kind.
        ('```JSON\n{"city":"paris"}\n```', "strip_code_fence"),
        ('```jsonc\r\n{"city":"paris"}\r\n```', "strip_code_fence"),
        ('```json {"city":"paris"} ```', "strip_code_fence"),
        ('```{"city":"paris"}```', "strip_code_fence"),
        (
            'Here you go:\n```json\n{"city":"paris"}\n```\nLet me know.',
            "strip_code_fence",
        ),
        (
            '```json\n{"city":"paris"}\n```\nI will now look this up.',
            "strip_code_fence",
        ),
        ('```json\n{"city":"paris"}', "strip_code_fence"),
        ('~~~json\n{"city":"paris"}\n~~~', "strip_code_fence"),
        ('  ```json\n  {"city": "paris"}\n  ```  ', "strip_code_fence"),
        ('Arguments: {"city": "paris"}', "leading_json_value"),
        ('{"city": "paris"}\n\nThanks!', "leading_json_value"),
    ],
)
def test_bc10_code_fence(raw: str, rung: str) -> None:
    """BC10, RT-05: fenced JSON (any tag, prose around it) and JSON followed by prose parse, flagged with the rung."""
    tool, _ = recording_tool("get_time", CITY_REQUIRED)
    parsed = parse_arguments(raw, tool=tool)
    assert parsed.ok, parsed.error
    assert parsed.params == {"city": "paris"}
    assert parsed.repair == rung


@pytest.mark.parametrize(
    "raw", ["```json\n```", "```\nnot json at all\n```", "I cannot do that."]
)
async def test_bc10_unparseable_is_an_error_never_empty_object(raw: str) -> None:
    """BC10: if nothing parses, the model gets an error result and the tool is not executed."""
    tool, seen = recording_tool("get_time", CITY_REQUIRED)
    [result] = await dispatch(
        [ToolCallRequest("c1", "get_time", raw)],
        toolset=Toolset([tool]),
        context_factory=_context,
    )
    assert result.error == "invalid_arguments"
    assert seen == []
    assert json.loads(result.content)["error"] == "invalid_arguments"


# --- BC11 / BC12 args.truncated.* ------------------------------------------------------

WRITE_FILE = {
    "type": "object",
    "properties": {"file_path": {"type": "string"}, "content": {"type": "string"}},
    "required": ["file_path", "content"],
}


async def test_bc11_truncated_finish_reason_mislabeled_is_not_executed() -> None:
    """BC11: a call classified truncated is never executed; the model gets arguments_truncated."""
    tool, seen = recording_tool(
        "write_file",
        {
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
        },
    )
    raw = '{"path":"notes.md","content":"# Notes\\n- item one\\n- item tw'
    [result] = await dispatch(
        [ToolCallRequest("call_W", "write_file", raw, truncated=True)],
        toolset=Toolset([tool]),
        context_factory=_context,
    )
    assert seen == []
    assert result.error == "arguments_truncated"
    body = json.loads(result.content)
    assert body["error"] == "arguments_truncated"
    assert "output token limit" in body["detail"]
    assert "retry with a smaller payload" in body["detail"]
    assert parse_arguments(raw, tool=tool, truncated=True).replay_text == "{}"


async def test_bc12_truncated_repairable_prefix_is_not_executed() -> None:
    """BC12: a schema-valid object from closing a truncated string is still rejected."""
    tool, seen = recording_tool("write_file", WRITE_FILE)
    raw = '{"file_path": "src/app.py", "content": "def main():\\n    print('
    # This asserted that the ladder closes the string into a schema-valid value;
    # completing a prefix is guessing, so the text itself is
    # arguments_truncated, whatever the stop reason says ...
    alone = parse_arguments(raw, tool=tool)
    assert alone.params is None
    assert alone.error_type == "arguments_truncated"
    # ... and a truncated turn is refused with the token-limit detail.
    [result] = await dispatch(
        [ToolCallRequest("c", "write_file", raw, truncated=True)],
        toolset=Toolset([tool]),
        context_factory=_context,
    )
    assert seen == []
    assert json.loads(result.content) == {
        "error": "arguments_truncated",
        "detail": "the response hit the output token limit before this tool call "
        "finished; nothing was executed; retry with a smaller payload or split the content",
    }


# --- BC14 args.no_type_coercion --------------------------------------------------------

RUN = {
    "type": "object",
    "properties": {"command": {"type": "string"}},
    "required": ["command"],
}


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"command": "true"}', {"command": "true"}),
        ('{"command": "null"}', {"command": "null"}),
        ('{"command": " FALSE "}', {"command": " FALSE "}),
        ('{"command": "0"}', {"command": "0"}),
        ('{"command": "[]"}', {"command": "[]"}),
        ("{'command': 'None'}", {"command": "None"}),
    ],
)
def test_bc14_no_type_coercion(raw: str, expected: dict[str, Any]) -> None:
    """BC14: no value is rewritten after a successful parse."""
    tool, _ = recording_tool("run", RUN)
    parsed = parse_arguments(raw, tool=tool)
    assert parsed.ok
    assert parsed.params == expected


def test_bc14_type_mismatch_is_an_error_not_a_coercion() -> None:
    """BC14: a boolean for a string field is an error result, not a silent coercion."""
    tool, _ = recording_tool("run", RUN)
    parsed = parse_arguments('{"command": true}', tool=tool)
    assert not parsed.ok
    assert "expected string, got boolean true" in parsed.error


def test_bc14_groq_null_for_parameterless_tool() -> None:
    """BC14: the literal top-level 'null' for a parameterless tool is {}."""
    tool, _ = recording_tool("get_time", {"type": "object", "properties": {}})
    parsed = parse_arguments("null", tool=tool)
    assert parsed.ok
    assert parsed.params == {}
