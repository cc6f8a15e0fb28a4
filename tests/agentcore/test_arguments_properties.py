"""Property tests for the repair ladder: it always terminates and never accepts a schema-invalid value (RT-05, SEC-01)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentcore.arguments import parse_arguments
from agentcore.tools import ToolContext, define_tool


def _noop(params: dict[str, Any], context: ToolContext) -> str:
    return "ok"


TOOL = define_tool(
    name="order",
    description="Property-test tool.",
    parameters={
        "type": "object",
        "properties": {
            "order_id": {"type": "string", "pattern": "^A-[0-9]{4}$"},
            "amount": {"type": "number", "exclusiveMinimum": 0, "maximum": 1000},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
            "note": {"type": "string"},
        },
        "required": ["order_id", "amount"],
        "additionalProperties": False,
    },
    execute=_noop,
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
near_valid = st.fixed_dictionaries(
    {
        "order_id": st.sampled_from(["A-1001", "A-12", "B-1001", ""])
        | st.text(max_size=8),
        "amount": st.integers(-5, 2000)
        | st.floats(allow_nan=False)
        | st.text(max_size=4),
    },
    optional={"tags": st.lists(st.text(max_size=4), max_size=5), "note": json_values},
)

# Texts built from valid-ish JSON with the kinds of damage models do.
damage = st.sampled_from(
    [
        lambda s: s,
        lambda s: s[: len(s) // 2],
        lambda s: "```json\n" + s + "\n```",
        lambda s: s + " hope that helps",
        lambda s: s.replace('"', "'"),
        lambda s: s.replace("}", ",}"),
        lambda s: json.dumps(s),
        lambda s: s.replace("true", "True").replace("null", "None"),
        lambda s: s.rstrip("}"),
        lambda s: "{" + s,
    ]
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=near_valid, hurt=damage)
def test_rt05_ladder_never_accepts_schema_invalid_values(
    value: dict[str, Any], hurt: Any
) -> None:
    """RT-05: whatever the damage, an accepted value always validates against the schema."""
    raw = hurt(json.dumps(value))
    parsed = parse_arguments(raw, tool=TOOL)
    if parsed.ok:
        assert TOOL.validator.is_valid(parsed.params)
    else:
        assert parsed.params is None
        assert parsed.error


@settings(max_examples=400, deadline=None)
@given(
    raw=st.text(max_size=300)
    | st.binary(max_size=200).map(lambda b: b.decode("latin-1"))
)
def test_rt05_ladder_terminates_on_arbitrary_text(raw: str) -> None:
    """RT-05, SEC-01: arbitrary text terminates with a result; an accepted value validates."""
    parsed = parse_arguments(raw, tool=TOOL)
    assert parsed.ok is (parsed.params is not None)
    if parsed.ok:
        assert TOOL.validator.is_valid(parsed.params)


@settings(max_examples=200, deadline=None)
@given(value=json_values)
def test_sec01_decoded_objects_are_validated_too(value: Any) -> None:
    """SEC-01: an already-decoded object is validated like text."""
    if not isinstance(value, dict):
        value = {"note": value}
    parsed = parse_arguments(value, tool=TOOL)
    if parsed.ok:
        assert TOOL.validator.is_valid(parsed.params)


@settings(max_examples=200, deadline=None)
@given(value=near_valid, hurt=damage)
def test_sec01_truncated_turn_never_accepted(value: dict[str, Any], hurt: Any) -> None:
    """SEC-01: nothing from a truncated turn is ever accepted."""
    parsed = parse_arguments(hurt(json.dumps(value)), tool=TOOL, truncated=True)
    assert not parsed.ok
    assert parsed.error_type == "arguments_truncated"
