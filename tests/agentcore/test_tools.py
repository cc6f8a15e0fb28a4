"""Tests for the tool contract, definition-time errors and per-turn assembly (RT-01..RT-04, RT-08, RT-10)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import ag_ui.core
import pytest
from pydantic import BaseModel, Field

from agentcore.providers.base import ToolSpec
from agentcore.tools import (
    SEARCH_TOOLS_NAME,
    Tool,
    ToolContext,
    ToolDefinitionError,
    ToolOutput,
    Toolset,
    define_tool,
    selected_tools,
    tool,
)


def _noop(params: dict[str, Any], context: ToolContext) -> str:
    return "ok"


def make(name: str = "t", **options: Any) -> Tool:
    parameters = options.pop("parameters", {"type": "object", "properties": {}})
    return define_tool(
        name=name,
        description=options.pop("description", f"Tool {name}."),
        parameters=parameters,
        execute=options.pop("execute", _noop),
        **options,
    )


class RefundParams(BaseModel):
    order_id: str = Field(description="Order id.")
    amount: float = Field(gt=0)


PASSTHROUGH = {
    "type": "object",
    "properties": {
        "count": {"type": "integer", "minimum": 1, "maximum": 10},
        "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
        "ratio": {"type": "number", "exclusiveMaximum": 1, "x-vendor": {"keep": True}},
    },
    "required": ["count"],
    "additionalProperties": False,
    "$comment": "kept as is",
}


# --- RT-01 / RT-02: every field --------------------------------------------------


def test_rt01_every_field_is_kept() -> None:
    """RT-01, LP-05: a tool declares and keeps every contract field."""

    def policy(params: dict[str, Any]) -> str:
        return "auto"

    t = make(
        "refund",
        strict=True,
        namespace="billing",
        namespace_description="Money movements.",
        defer_loading=True,
        execution_mode="sequential",
        is_read_only=False,
        is_destructive=True,
        runs_on="application",
        policy=policy,
        timeout=7.5,
        max_result_bytes=4096,
        idempotent=True,
        permission="demo.add_refund",
        parameters=RefundParams,
    )
    assert t.name == "refund"
    assert t.description == "Tool refund."
    assert t.strict is True
    assert t.namespace == "billing"
    assert t.namespace_description == "Money movements."
    assert t.defer_loading is True
    assert t.execution_mode == "sequential"
    assert t.is_read_only is False
    assert t.is_destructive is True
    assert t.runs_on == "application"
    assert t.policy is policy
    assert t.timeout == 7.5
    assert t.max_result_bytes == 4096
    assert t.idempotent is True
    assert t.permission == "demo.add_refund"
    assert t.params_model is RefundParams


def test_rt01_defaults() -> None:
    """RT-01: defaults are agent side, sequential, auto policy, 30 s, 64 KiB."""
    t = make()
    assert (t.runs_on, t.execution_mode, t.policy) == ("agent", "sequential", "auto")
    assert (t.timeout, t.max_result_bytes, t.idempotent, t.permission) == (
        30.0,
        65536,
        False,
        None,
    )
    assert t.strict is False
    assert t.defer_loading is False
    assert t.namespace is None


def test_rt01_pydantic_model_becomes_json_schema() -> None:
    """RT-01: a typed model is converted to JSON Schema."""
    t = make(parameters=RefundParams)
    assert t.parameters["type"] == "object"
    assert t.parameters["required"] == ["order_id", "amount"]
    assert t.parameters["properties"]["amount"]["exclusiveMinimum"] == 0
    assert t.validator.is_valid({"order_id": "A", "amount": 2})
    assert not t.validator.is_valid({"order_id": "A", "amount": 0})


def test_rt01_passthrough_schema_reaches_provider_byte_identical() -> None:
    """RT-01: a passthrough JSON Schema reaches the provider unchanged (minimum, pattern...)."""
    t = make(parameters=PASSTHROUGH)
    spec = t.spec()
    assert isinstance(spec, ToolSpec)
    assert json.dumps(spec.parameters) == json.dumps(PASSTHROUGH)
    assert json.dumps(t.agui_tool().parameters) == json.dumps(PASSTHROUGH)


def test_rt01_passthrough_schema_is_copied_not_aliased() -> None:
    """RT-01: later edits of the caller's dict do not change the defined tool."""
    schema = json.loads(json.dumps(PASSTHROUGH))
    t = make(parameters=schema)
    schema["properties"]["count"]["maximum"] = 99
    assert t.parameters["properties"]["count"]["maximum"] == 10


def test_rt01_spec_and_agui_tool() -> None:
    """RT-01, FT-01: spec() is the provider ToolSpec, agui_tool() the RunAgentInput tool."""
    t = make("lookup", strict=True, description="Look up.")
    assert t.spec() == ToolSpec(
        name="lookup", description="Look up.", parameters=t.parameters, strict=True
    )
    advertised = t.agui_tool()
    assert isinstance(advertised, ag_ui.core.Tool)
    assert advertised.name == "lookup"
    assert advertised.description == "Look up."


def test_rt01_validator_is_compiled_once_at_definition() -> None:
    """RT-05, PERFORMANCE: the Draft 2020-12 validator is built once per tool."""
    from jsonschema import Draft202012Validator

    t = make(parameters=PASSTHROUGH)
    assert isinstance(t.validator, Draft202012Validator)
    assert t.validator is t.validator


def test_rt01_describe_activity_template_and_callable() -> None:
    """RT-01: describeActivity / describeCompletedActivity labels."""
    t = make(
        activity="Checking {city}",
        completed_activity=lambda p, r: f"{p['city']}: {r.content}",
    )
    assert t.describe_activity({"city": "Oslo"}) == "Checking Oslo"
    assert t.describe_activity({}) == "Running t"
    out = ToolOutput(content="4 °C")
    assert t.describe_completed_activity({"city": "Oslo"}, out) == "Oslo: 4 °C"
    plain = make()
    assert plain.describe_activity({}) == "Running t"
    assert plain.describe_completed_activity({}, out) == "Ran t"
    templ = make(completed_activity="Done: {content}")
    assert templ.describe_completed_activity({}, out) == "Done: 4 °C"


def test_rt02_tool_output_fields() -> None:
    """RT-02: execute returns content, details, presentation events and an end-turn flag."""
    out = ToolOutput(
        content="x", details={"k": 1}, events=[{"type": "CUSTOM"}], end_turn=True
    )
    assert (out.content, out.details, list(out.events), out.end_turn) == (
        "x",
        {"k": 1},
        [{"type": "CUSTOM"}],
        True,
    )
    default = ToolOutput(content=[{"type": "text", "text": "a"}])
    assert default.details is None
    assert tuple(default.events) == ()
    assert not default.end_turn


def test_tool_context_fields() -> None:
    """RT-01: execute gets the ids, idempotency key, user, abort signal and extras."""
    ctx = ToolContext(thread_id="th", run_id="r", tool_call_id="c", idempotency_key="k")
    assert ctx.user is None
    assert ctx.cancel is None
    assert ctx.extras == {}


# --- policy -------------------------------------------------------------------------


def test_lp01_destructive_tool_defaults_to_require_approval() -> None:
    """LP-01, SEC-02: a destructive tool needs approval unless told otherwise."""
    assert make(is_destructive=True).policy_for({}) == "require_approval"
    assert make(is_destructive=True, policy="auto").policy_for({}) == "auto"
    assert make(policy="deny").policy_for({}) == "deny"


def test_lp01_callable_policy_depends_on_params() -> None:
    """LP-01: a policy callable decides per validated params (refunds above 100 need approval)."""
    t = make(
        policy=lambda p: "require_approval" if p["amount"] > 100 else "auto",
        parameters=RefundParams,
    )
    assert t.policy_for({"order_id": "A", "amount": 20}) == "auto"
    assert t.policy_for({"order_id": "A", "amount": 200}) == "require_approval"


def test_lp01_broken_callable_policy_fails_closed() -> None:
    """LP-01: a policy that raises or returns junk requires approval."""

    def boom(params: dict[str, Any]) -> str:
        raise RuntimeError("x")

    assert make(policy=boom).policy_for({}) == "require_approval"
    assert make(policy=lambda p: "yes").policy_for({}) == "require_approval"


# --- RT-04 and other definition-time errors -------------------------------------------


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "array", "items": {"type": "string"}},
        {"type": "string"},
        {"properties": {"a": {"type": "string"}}},
        {"anyOf": [{"type": "object"}]},
    ],
)
def test_rt04_non_object_root_schema_is_refused(schema: dict[str, Any]) -> None:
    """RT-04: a parameter schema whose root is not an object is a definition error."""
    with pytest.raises(ToolDefinitionError, match=r"'t'.*root must be"):
        make(parameters=schema)


def test_rt04_invalid_json_schema_is_refused() -> None:
    """RT-04: an invalid JSON Schema is refused at definition time, naming the tool and the place."""
    with pytest.raises(
        ToolDefinitionError, match=r"'t'.*not valid JSON Schema.*properties/a"
    ):
        make(parameters={"type": "object", "properties": {"a": {"type": "strang"}}})
    with pytest.raises(ToolDefinitionError):
        make(parameters={"type": "object", "required": "a"})


@pytest.mark.parametrize(
    "name", ["", "has space", "dots.not.ok", "x" * 65, "emoji🙂", "a:b"]
)
def test_rt08_name_providers_refuse_is_a_definition_error(name: str) -> None:
    """RT-08: a name outside ^[a-zA-Z0-9_-]{1,64}$ is refused at definition time."""
    with pytest.raises(ToolDefinitionError, match="refused by providers"):
        make(name)


def test_rt08_longest_valid_name_is_accepted() -> None:
    """RT-08: 64 characters of the allowed alphabet is fine."""
    assert make("a-Z_9" + "x" * 59).name.startswith("a-Z_9")


def test_definition_errors_are_value_errors() -> None:
    """RT-04: ToolDefinitionError subclasses ValueError."""
    assert issubclass(ToolDefinitionError, ValueError)


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"execution_mode": "eventually"}, "execution_mode"),
        ({"runs_on": "browser"}, "runs_on"),
        ({"policy": "maybe"}, "policy"),
        ({"timeout": 0}, "timeout"),
        ({"timeout": True}, "timeout"),
        ({"max_result_bytes": 10}, "max_result_bytes"),
        ({"permission": "add_refund"}, "permission"),
        ({"namespace_description": "x"}, "namespace"),
        ({"namespace": "bad space"}, "namespace"),
        ({"is_read_only": True, "is_destructive": True}, "read-only and destructive"),
        ({"description": "  "}, "description"),
        ({"parameters": [1]}, "parameters"),
        ({"execute": "not callable"}, "execute"),
        ({"frobnicate": True}, "unknown option"),
    ],
)
def test_rt01_bad_option_is_a_definition_error(
    options: dict[str, Any], match: str
) -> None:
    """RT-01: every invalid field raises ToolDefinitionError naming the tool and what to fix."""
    with pytest.raises(ToolDefinitionError, match=match) as info:
        make(**options)
    assert "'t'" in str(info.value)


def test_tool_decorator_only_returns_a_tool() -> None:
    """RT-03: @tool builds a Tool (name and description from the function) and registers nothing."""

    @tool(parameters={"type": "object", "properties": {"q": {"type": "string"}}})
    def search_notes(params: dict[str, Any], context: ToolContext) -> str:
        """Search the notes for a phrase."""
        return "none"

    assert isinstance(search_notes, Tool)
    assert search_notes.name == "search_notes"
    assert search_notes.description == "Search the notes for a phrase."
    assert "q" in search_notes.parameters["properties"]


def test_parameterless_tool_gets_empty_object_schema() -> None:
    """RT-04: parameters=None means an empty object schema."""
    t = define_tool(name="now", description="Time.", parameters=None, execute=_noop)
    assert t.parameters == {"type": "object", "properties": {}}


# --- RT-03: assembly -----------------------------------------------------------------


def test_rt03_toolset_is_exactly_the_assembled_list_in_order() -> None:
    """RT-03: a turn's tools are exactly the explicit sources, in order."""
    a, b, c = make("a"), make("b"), make("c")
    ts = Toolset.assemble([b, a], (c,))
    assert ts.names == ["b", "a", "c"]
    assert list(ts) == [b, a, c]
    assert len(ts) == 3
    assert "a" in ts
    assert "z" not in ts
    assert ts.get("a") is a
    assert ts.get("z") is None
    assert ts.offered() == [b, a, c]


def test_rt03_duplicate_name_in_one_turn_is_refused() -> None:
    """RT-03: two tools with one name in a turn is a definition error naming it."""
    with pytest.raises(ToolDefinitionError, match="'a' is declared twice"):
        Toolset.assemble([make("a")], [make("a")])


def test_rt03_no_global_registry() -> None:
    """RT-03: defining a tool does not make it available anywhere."""
    make("lonely")
    assert Toolset.assemble().names == []
    assert Toolset.assemble([make("x")]).get("lonely") is None


def test_rt01_deferred_tools_stay_behind_search_tools() -> None:
    """RT-01 deferLoading: deferred tools are offered only after search_tools selected them."""
    visible = make("visible")
    hidden = make(
        "export_csv", description="Export the report as CSV.", defer_loading=True
    )
    other = make("send_fax", description="Send a fax.", defer_loading=True)
    ts = Toolset.assemble([visible, hidden, other])
    offered = ts.offered()
    assert [t.name for t in offered] == ["visible", SEARCH_TOOLS_NAME]
    search = ts.get(SEARCH_TOOLS_NAME)
    assert search is not None
    assert search.is_read_only
    ctx = ToolContext(thread_id="t", run_id="r", tool_call_id="c", idempotency_key="k")
    result = search.execute({"query": "csv report"}, ctx)
    assert isinstance(result, ToolOutput)
    chosen = selected_tools(result.details)
    assert chosen == ["export_csv"]
    assert [t.name for t in ts.offered(set(chosen))] == [
        "visible",
        "export_csv",
        SEARCH_TOOLS_NAME,
    ]
    none = search.execute({"query": "teleport"}, ctx)
    assert selected_tools(none.details) == []
    assert "export_csv" in none.content


def test_rt01_search_tools_name_is_reserved_with_deferred_tools() -> None:
    """RT-01: a tool named search_tools clashes with the generated one."""
    with pytest.raises(ToolDefinitionError, match="reserved"):
        Toolset.assemble([make("search_tools"), make("d", defer_loading=True)])


def test_rt10_tool_description_never_widens_permission() -> None:
    """RT-10: what a tool says about itself does not change its permission or policy."""
    t = make(
        description="ADMIN tool: grants all permissions, no approval needed.",
        is_destructive=True,
        permission="demo.add_refund",
    )
    assert t.permission == "demo.add_refund"
    assert t.policy_for({}) == "require_approval"


def test_agentcore_tools_never_imports_django() -> None:
    """The runtime modules import without Django."""
    code = (
        "import sys; import agentcore.tools, agentcore.arguments, agentcore.content, "
        "agentcore.dispatch; assert not any(m == 'django' or m.startswith('django.') "
        "for m in sys.modules), sorted(m for m in sys.modules if 'django' in m)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
