"""Tests for argument parsing, the bounded repair ladder and validation (RT-05, RT-06, RT-09, SEC-01)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from agentcore.arguments import (
    MAX_REPAIR_CHARS,
    ParsedArguments,
    ValidatedArguments,
    canonical_arguments,
    canonical_sha256,
    parse_arguments,
    tool_schema_sha256,
)
from agentcore.tools import Tool, ToolContext, define_tool


def _noop(params: dict[str, Any], context: ToolContext) -> str:
    return "ok"


def make(parameters: dict[str, Any], name: str = "t") -> Tool:
    return define_tool(
        name=name, description="Test tool.", parameters=parameters, execute=_noop
    )


CITY = make(
    {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        },
        "required": ["city"],
        "additionalProperties": False,
    },
    name="get_weather",
)
NONE = make({"type": "object", "properties": {}}, name="get_time")


def ok(raw: str | dict[str, Any] | None, tool: Tool = CITY) -> ParsedArguments:
    parsed = parse_arguments(raw, tool=tool)
    assert parsed.ok, parsed.error
    assert parsed.error is None
    assert parsed.error_type is None
    return parsed


def refused(
    raw: str | dict[str, Any] | None, tool: Tool = CITY, **kw: Any
) -> ParsedArguments:
    parsed = parse_arguments(raw, tool=tool, **kw)
    assert not parsed.ok
    assert parsed.params is None
    assert parsed.error
    assert parsed.error_type
    return parsed


# --- each rung, with input that needs exactly that rung ---------------------------------


def test_rt05_exact_json_has_no_repair() -> None:
    """RT-05: exact JSON is parsed with repair=None."""
    parsed = ok('{"city": "Oslo", "unit": "celsius"}')
    assert parsed.params == {"city": "Oslo", "unit": "celsius"}
    assert parsed.repair is None


@pytest.mark.parametrize(
    ("raw", "rung", "params"),
    [
        ({"city": "Oslo"}, "already_decoded", {"city": "Oslo"}),
        ("", "empty_arguments", {}),
        ("null", "empty_arguments", {}),
        ('```json\n{"city":"Oslo"}\n```', "strip_code_fence", {"city": "Oslo"}),
        ('{"city": "Oslo"} Let me check that.', "leading_json_value", {"city": "Oslo"}),
        ('{"city": "Oslo",}', "trailing_commas", {"city": "Oslo"}),
        ("{'city': \"O'Hare\"}", "python_literals", {"city": "O'Hare"}),
        ('"{\\"city\\": \\"Oslo\\"}"', "double_encoded", {"city": "Oslo"}),
    ],
)
def test_rt05_each_rung_names_itself(
    raw: Any, rung: str, params: dict[str, Any]
) -> None:
    """RT-05: each rung repairs input that needs exactly it, and the repair names it."""
    tool = NONE if params == {} else CITY
    parsed = ok(raw, tool)
    assert parsed.params == params
    assert parsed.repair == rung


def test_rt05_python_literals_keep_apostrophes_and_map_true_none() -> None:
    """RT-05: Python literals are decoded without breaking apostrophes inside strings."""
    tool = make(
        {
            "type": "object",
            "properties": {
                "note": {"type": "string"},
                "flag": {"type": "boolean"},
                "extra": {"type": "null"},
                "n": {"type": "integer"},
            },
        }
    )
    parsed = ok("{'note': \"it's Bob's\", 'flag': True, 'extra': None, 'n': 3}", tool)
    assert parsed.params == {"note": "it's Bob's", "flag": True, "extra": None, "n": 3}
    assert parsed.repair == "python_literals"
    mixed = ok("{'note': 'don\\'t', 'flag': true, 'extra': null}", tool)
    assert mixed.params == {"note": "don't", "flag": True, "extra": None}


def test_rt05_trailing_commas_inside_strings_are_kept() -> None:
    """RT-05: only structural trailing commas go; a ',}' inside a string stays."""
    parsed = ok('{"city": "a,}b", }')
    assert parsed.params == {"city": "a,}b"}
    assert parsed.repair == "trailing_commas"


def test_rt05_rungs_compose_in_order() -> None:
    """RT-05: later rungs work on what earlier ones produced; the repair lists them all."""
    parsed = ok("Sure:\n```python\n{'city': 'Oslo',}\n```\nDone.")
    assert parsed.params == {"city": "Oslo"}
    assert parsed.repair == "strip_code_fence+trailing_commas+python_literals"


def test_rt05_unbalanced_braces_are_truncation_never_closed() -> None:
    """RT-05: unclosed JSON is a cut-off text; closing it would be guessing.

    This test asserted the json-repair rung closing ``{"a": {"b": [1, 2]`` into a value;
    completing a prefix is guessing (the model never said it), so that
    text is ``arguments_truncated``, whatever the stop reason said.
    """
    tool = make(
        {
            "type": "object",
            "properties": {
                "a": {"type": "object", "properties": {"b": {"type": "array"}}}
            },
        }
    )
    for raw in ['{"a": {"b": [1, 2]', '{"city": "Oslo"']:
        parsed = refused(raw, tool)
        assert parsed.error_type == "arguments_truncated"
        assert "nothing was executed" in parsed.error


def test_rt05_repaired_value_must_still_validate() -> None:
    """RT-05: a repair that parses but fails the schema is an error, not acceptance."""
    parsed = refused('```json\n{"city": 5}\n```')
    assert "field 'city' expected string, got integer 5" in parsed.error


def test_rt05_no_rung_turns_garbage_into_empty_object() -> None:
    """RT-05, BC10: unparseable input never becomes {} even for a parameterless tool."""
    for raw in ["hello", "}}}", "```\n\n```", "[1, 2]", "42", "true"]:
        parsed = refused(raw, NONE)
        assert parsed.error_type == "invalid_arguments"
    # "{" was asserted invalid_arguments here; any cut-off JSON is answered
    # as arguments_truncated, and it is still never {}.
    assert refused("{", NONE).error_type == "arguments_truncated"


def test_rt05_non_object_json_is_refused() -> None:
    """RT-05: the arguments must be an object."""
    assert "got a JSON array" in refused("[1]").error
    assert "got a JSON integer" in refused("1").error


def test_rt05_huge_input_gets_exact_parsing_only() -> None:
    """RT-05: the ladder is bounded: beyond MAX_REPAIR_CHARS no repair rung runs."""
    big = '{"city": "' + "x" * MAX_REPAIR_CHARS + '"'
    parsed = refused(big)
    assert "not valid JSON" in parsed.error


# --- refusals ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        '{"city": "a\\u12"}',
        '{"city": "a\\u12G4"}',
        '{"city": "\\u"}',
        '{"city": "a\\uZZZZ",}',
        "{'city': '\\u12'}",
    ],
)
def test_sec01_invalid_unicode_escape_is_refused(raw: str) -> None:
    """SEC-01: an invalid \\u escape is refused by every rung."""
    parsed = refused(raw)
    assert "invalid \\u escape" in parsed.error


def test_sec01_escaped_backslash_u_is_not_an_escape() -> None:
    """SEC-01: a literal backslash followed by u (\\\\u) is fine."""
    assert ok('{"city": "C:\\\\users"}').params == {"city": "C:\\users"}


def test_sec01_lone_surrogate_is_refused() -> None:
    """SEC-01: a lone surrogate escape is not valid Unicode."""
    assert "lone surrogate" in refused('{"city": "\\ud800"}').error


@pytest.mark.parametrize(
    "raw",
    ['{"city": "a\\u0000b"}', '{"city": "a\x00b"}', {"city": "a\x00"}, {"a\x00": "x"}],
)
def test_sec01_nul_characters_are_refused(raw: Any) -> None:
    """SEC-01: NUL characters in strings (escaped, raw, or in a decoded object) are refused."""
    assert "NUL" in refused(raw).error


def test_sec01_truncated_turn_is_never_accepted_even_if_valid() -> None:
    """SEC-01, RT-05: arguments of a turn cut off by the token limit are refused, however they look."""
    for raw in ['{"city": "Oslo"}', '{"city": "Osl', {"city": "Oslo"}, ""]:
        parsed = refused(raw, truncated=True)
        assert parsed.error_type == "arguments_truncated"
        assert "nothing was executed" in parsed.error


def test_rt05_values_are_never_coerced() -> None:
    """RT-05: "true" stays a string; 5 for a string field is an error, not "5"."""
    tool = make({"type": "object", "properties": {"flag": {"type": "boolean"}}})
    parsed = refused('{"flag": "true"}', tool)
    assert "field 'flag' expected boolean, got string \"true\"" in parsed.error


# --- RT-06 / RT-09: actionable messages ----------------------------------------------


def test_rt09_missing_field_message_is_actionable() -> None:
    """RT-09: the message names the tool, the field, what was expected, and what to do."""
    parsed = refused('{"unit": "kelvin"}')
    message = parsed.error
    assert "get_weather" in message
    assert "missing required field 'city'" in message
    assert (
        'field \'unit\' expected one of "celsius", "fahrenheit", got "kelvin"'
        in message
    )
    assert "Expected parameters: city (string, required)" in message
    assert message.endswith("call get_weather again.")


def test_rt09_unexpected_field_lists_allowed_ones() -> None:
    """RT-09: an unexpected field names the allowed fields."""
    message = refused('{"city": "Oslo", "town": "x"}').error
    assert "unexpected field 'town'" in message
    assert "allowed fields: city, unit" in message


def test_rt09_not_json_message_says_where() -> None:
    """RT-09: unparseable text reports where parsing failed and what to send."""
    message = refused("city=Oslo").error
    assert "not valid JSON" in message
    assert "line 1 column 1" in message


def test_rt06_failure_is_data_not_an_exception() -> None:
    """RT-06: a validation failure is returned for the model, never raised."""
    for raw in [None, 5, ["x"], "{{{{", '{"city": 1}']:
        parsed = parse_arguments(raw, tool=CITY)  # type: ignore[arg-type]
        assert isinstance(parsed, ParsedArguments)


def test_nested_errors_name_the_path() -> None:
    """RT-09: a nested violation names its path."""
    tool = make(
        {
            "type": "object",
            "properties": {
                "items": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {"qty": {"type": "integer", "minimum": 1}},
                        "required": ["qty"],
                    },
                }
            },
        }
    )
    message = refused('{"items": [{"qty": 1}, {"qty": 0}]}', tool).error
    assert "field 'items/1/qty'" in message
    assert "minimum of 1" in message


# --- replay helpers -------------------------------------------------------------------


def test_replay_text_and_canonical_arguments() -> None:
    """BC06/BC08: history replays compact JSON, "{}" for blank or failed arguments."""
    assert ok('{ "city" : "Oslo" }').replay_text == '{"city":"Oslo"}'
    assert refused("nope").replay_text == "{}"
    assert canonical_arguments("") == "{}"
    assert canonical_arguments("   ") == "{}"
    assert canonical_arguments(None) == "{}"
    assert canonical_arguments({"city": "Paris"}) == '{"city":"Paris"}'
    assert canonical_arguments('{"city": "Paris"}') == '{"city": "Paris"}'
    assert json.loads(canonical_arguments({"q": "é"})) == {"q": "é"}


# --- the validated value ------------------------------------------------------------------


def test_an_accepted_call_yields_its_frozen_value() -> None:
    """RT-05: params, canonical JSON, its hash, the schema's hash and the repairs, read-only."""
    parsed = ok('```json\n{"unit": "celsius", "city": "Oslo"}\n```')
    value = parsed.value
    assert value is not None
    assert value.canonical_json == '{"city":"Oslo","unit":"celsius"}'
    assert value.sha256 == canonical_sha256({"city": "Oslo", "unit": "celsius"})
    assert value.schema_sha256 == tool_schema_sha256(CITY)
    assert (value.repairs, value.repair) == (("strip_code_fence",), "strip_code_fence")
    assert value.params == parsed.params
    with pytest.raises(TypeError):
        value.params["city"] = "Bergen"  # type: ignore[index]
    copy = value.as_dict()
    copy["city"] = "Bergen"
    assert value.params["city"] == "Oslo"


def test_a_refused_call_has_no_value() -> None:
    """RT-06: nothing validated, nothing to refer to."""
    assert refused('{"city": 3}').value is None


def test_a_stored_value_is_restored_only_while_its_hash_matches() -> None:
    """SEC-02: stored params that changed since validation are not a value any more."""
    value = ok('{"city": "Oslo"}').value
    assert value is not None
    restored = ValidatedArguments.restore(
        params={"city": "Oslo"}, sha256=value.sha256, schema_sha256=value.schema_sha256
    )
    assert restored is not None
    assert restored.sha256 == value.sha256
    assert (
        ValidatedArguments.restore(
            params={"city": "Bergen"},
            sha256=value.sha256,
            schema_sha256=value.schema_sha256,
        )
        is None
    )
    assert (
        ValidatedArguments.restore(
            params="x", sha256=value.sha256, schema_sha256=value.schema_sha256
        )
        is None
    )


def test_the_hash_is_the_one_stored_rows_were_made_with() -> None:
    """Sorted keys, no spaces, UTF-8 kept: hashes written before stay valid."""
    text = json.dumps(
        {"b": "ø", "a": 1.0}, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )

    assert (
        canonical_sha256({"b": "ø", "a": 1.0})
        == hashlib.sha256(text.encode("utf-8")).hexdigest()
    )
