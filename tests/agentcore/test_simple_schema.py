"""The quick schema check never accepts what the Draft 2020-12 validator refuses (RT-05)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from agentcore.arguments import parse_arguments
from agentcore.simple_schema import quick_check
from agentcore.tools import define_tool

FLAT = {
    "title": "Params",
    "type": "object",
    "properties": {
        "i": {"type": "integer", "description": "an index"},
        "x": {"type": "number"},
        "s": {"type": "string", "default": "a"},
        "b": {"type": "boolean"},
        "n": {"type": "null"},
        "l": {"type": "array"},
        "o": {"type": "object"},
        "u": {"type": ["string", "null"]},
        "any": {},
    },
    "required": ["i", "s"],
}
CLOSED = {**FLAT, "additionalProperties": False}

VALUES: list[Any] = [
    0,
    -3,
    2.0,
    2.5,
    float("inf"),
    True,
    False,
    None,
    "",
    "x",
    [],
    [1, "a"],
    {},
    {"k": 1},
]


def _cases() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = [{}, {"i": 1}, {"s": "a"}, {"i": 1, "s": "a"}]
    for key in ("i", "x", "s", "b", "n", "l", "o", "u", "any", "extra"):
        for value in VALUES:
            cases.append({"i": 1, "s": "a", key: value})
    return cases


@pytest.mark.parametrize("schema", [FLAT, CLOSED], ids=["open", "closed"])
def test_quick_check_agrees_with_the_validator_when_it_accepts(
    schema: dict[str, Any],
) -> None:
    """RT-05: every value the quick check accepts is valid; it accepts the plainly valid ones."""
    check = quick_check(schema)
    assert check is not None
    validator = Draft202012Validator(schema)
    accepted = 0
    for value in _cases():
        if check(value):
            accepted += 1
            assert validator.is_valid(value), value
    assert check({"i": 1, "s": "a", "x": 2.5, "u": None, "l": [1]}) is True
    assert check({"i": True, "s": "a"}) is False  # a bool is no integer
    assert check({"i": 1}) is False  # "s" is required
    assert accepted == (48 if schema is FLAT else 34)


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["i", "x", "s", "b", "n", "l", "o", "u", "any", "zz"]),
        st.recursive(
            st.none()
            | st.booleans()
            | st.integers()
            | st.floats(allow_nan=False)
            | st.text(max_size=3),
            lambda inner: (
                st.lists(inner, max_size=2)
                | st.dictionaries(st.text(max_size=2), inner, max_size=2)
            ),
            max_leaves=4,
        ),
        max_size=5,
    )
)
def test_quick_check_never_accepts_an_invalid_value(value: dict[str, Any]) -> None:
    """RT-05: quick acceptance implies the full validator's acceptance."""
    for schema in (FLAT, CLOSED):
        check = quick_check(schema)
        assert check is not None
        if check(value):
            assert Draft202012Validator(schema).is_valid(value)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"type": "string", "minLength": 2}}},
        {"type": "object", "properties": {"a": {"enum": [1, 2]}}},
        {"type": "object", "additionalProperties": {"type": "string"}},
        {"type": "object", "patternProperties": {"^a": {}}},
        {"type": "object", "$defs": {}, "properties": {}},
        {"type": "object", "properties": {"a": False}},
        {"type": "object", "properties": {"a": {"type": "decimal"}}},
    ],
)
def test_other_shapes_have_no_quick_check(schema: dict[str, Any]) -> None:
    """RT-05: any constraint beyond bare types leaves validation to jsonschema alone."""
    assert quick_check(schema) is None


def test_parse_arguments_refuses_what_the_quick_check_does_not_know() -> None:
    """RT-05: an integer-valued float passes (the validator says so); a bool does not."""
    tool = define_tool(
        name="flat",
        description="Flat params.",
        parameters=CLOSED,
        execute=lambda params, context: "ok",
    )
    ok = parse_arguments('{"i": 2.0, "s": "a"}', tool=tool)
    assert ok.ok
    assert ok.params == {"i": 2.0, "s": "a"}
    refused = parse_arguments('{"i": true, "s": "a"}', tool=tool)
    assert not refused.ok
    assert refused.error_type == "invalid_arguments"
    extra = parse_arguments('{"i": 1, "s": "a", "zz": 1}', tool=tool)
    assert not extra.ok
    assert "zz" in (extra.error or "")
