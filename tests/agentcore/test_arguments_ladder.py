"""Hypothesis properties, one set per rung: every rung of the ladder preserves meaning (RT-05, SEC-01).

For each rung there is a *writer* that spells a JSON object ``V`` in the rung's
dialect. The properties say:

- completeness: the writer's text is accepted as exactly ``V``, named by the rung;
- never a prefix: any prefix of that text is either refused or accepted as exactly
  ``V`` (a prefix that cuts into the JSON itself is always refused, and answered
  ``arguments_truncated``), so no rung completes what the model did not say;
- never a guess: what ``python_literals`` accepts is what Python itself reads;
- escapes and control characters JSON does not allow are refused with
  ``invalid_arguments_json`` naming the offset (RT-09).
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from agentcore.arguments import parse_arguments
from agentcore.tools import ToolContext, define_tool


def _noop(params: dict[str, Any], context: ToolContext) -> str:
    return "ok"


ANY = define_tool(
    name="anything",
    description="Any object.",
    parameters={"type": "object"},
    execute=_noop,
)

#: Characters a value may hold: no surrogates, no control characters but \t \n \r.
_REFUSED = [chr(c) for c in range(0x20) if chr(c) not in "\t\n\r"]
safe_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters=_REFUSED),
    max_size=12,
)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(10**12), 10**12)
    | st.floats(allow_nan=False, allow_infinity=False, width=32)
    | safe_text
)
values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(safe_text, children, max_size=3)
    ),
    max_leaves=8,
)
objects = st.dictionaries(safe_text, values, min_size=1, max_size=4)
#: Prose that cannot be mistaken for JSON structure or a fence.
prose = st.text(
    alphabet=st.sampled_from(list("abcdefghij ,.:!?'-\n")), min_size=1, max_size=20
).filter(lambda s: s.strip())

SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


# --- the writers ---------------------------------------------------------------------


def write_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def write_fenced(value: Any, tag: str = "json") -> str:
    return f"```{tag}\n{json.dumps(value, indent=2)}\n```"


def write_trailing_commas(value: Any) -> str:
    """JSON with a comma after the last member of every non-empty object and array."""
    if isinstance(value, dict):
        if not value:
            return "{}"
        inner = ", ".join(
            f"{json.dumps(k)}: {write_trailing_commas(v)}" for k, v in value.items()
        )
        return "{" + inner + ",}"
    if isinstance(value, list):
        if not value:
            return "[]"
        return "[" + ", ".join(write_trailing_commas(v) for v in value) + ",]"
    return json.dumps(value)


def _single_quoted(text: str) -> str:
    body = json.dumps(text, ensure_ascii=False)[1:-1]
    body = body.replace('\\"', '"').replace("'", "\\'")
    return "'" + body + "'"


def write_python(value: Any) -> str:
    """Single-quoted strings and True/False/None (what a model writing Python sends)."""
    if isinstance(value, dict):
        return (
            "{"
            + ", ".join(
                f"{_single_quoted(k)}: {write_python(v)}" for k, v in value.items()
            )
            + "}"
        )
    if isinstance(value, list):
        return "[" + ", ".join(write_python(v) for v in value) + "]"
    if isinstance(value, str):
        return _single_quoted(value)
    if value is True:
        return "True"
    if value is False:
        return "False"
    if value is None:
        return "None"
    return json.dumps(value)


def accepted(raw: str) -> tuple[dict[str, Any] | None, str | None, str | None]:
    parsed = parse_arguments(raw, tool=ANY)
    return parsed.params, parsed.repair, parsed.error_type


def same(a: Any, b: Any) -> bool:
    """Equal as JSON (so 1 == 1.0 is not confused with True == 1)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


# --- completeness: each writer's text is read as exactly V, by its rung --------------


@SETTINGS
@given(value=objects)
def test_exact_json_is_read_as_written(value: dict[str, Any]) -> None:
    params, repair, _ = accepted(write_json(value))
    assert same(params, value)
    assert repair is None


@SETTINGS
@given(value=objects, tag=st.sampled_from(["json", "JSON", "", "jsonc"]))
def test_strip_code_fence_reads_the_fenced_json(
    value: dict[str, Any], tag: str
) -> None:
    text = write_fenced(value, tag)
    assume("```" not in json.dumps(value) and "~~~" not in json.dumps(value))
    params, repair, _ = accepted(text)
    assert same(params, value)
    assert repair == "strip_code_fence"


@SETTINGS
@given(value=objects, before=prose, after=prose)
def test_leading_json_value_reads_the_one_object_in_prose(
    value: dict[str, Any], before: str, after: str
) -> None:
    params, repair, _ = accepted(f"{before} {write_json(value)} {after}")
    assert same(params, value)
    assert repair == "leading_json_value"


@SETTINGS
@given(value=objects)
def test_trailing_commas_only_drop_the_commas(value: dict[str, Any]) -> None:
    params, repair, _ = accepted(write_trailing_commas(value))
    assert same(params, value)
    assert repair == "trailing_commas"


@SETTINGS
@given(value=objects)
# An escaped backslash before a slash is no "\/" escape (hypothesis found it).
@example(value={"\\/": None, "a\\": "\\/x"})
def test_python_literals_read_single_quotes_and_python_names(
    value: dict[str, Any],
) -> None:
    text = write_python(value)
    params, repair, _ = accepted(text)
    assert same(params, value)
    assert repair == "python_literals"


# --- never a prefix --------------------------------------------------------------------

WRITERS: dict[str, Callable[[Any], str]] = {
    "json": write_json,
    "fenced": write_fenced,
    "trailing_commas": write_trailing_commas,
    "python": write_python,
}


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=objects, writer=st.sampled_from(sorted(WRITERS)))
def test_no_rung_accepts_a_prefix_as_anything_but_v(
    value: dict[str, Any], writer: str
) -> None:
    """Every prefix is refused or read as exactly V; cut inside the JSON, it is truncated."""
    text = WRITERS[writer](value)
    assume("```" not in json.dumps(value) and "~~~" not in json.dumps(value))
    json_end = text.rindex("}") + 1
    for cut in range(1, len(text)):
        prefix = text[:cut]
        if not prefix.strip():
            continue
        params, _, error_type = accepted(prefix)
        if params is not None:
            assert same(params, value), (prefix, params)
        if cut < json_end and prefix.lstrip().startswith("{"):
            assert params is None, prefix
            assert error_type == "arguments_truncated", (prefix, error_type)


@SETTINGS
@given(value=objects)
def test_truncated_text_is_never_executed_whatever_the_stop_reason(
    value: dict[str, Any],
) -> None:
    """BC11: ``truncated=False`` (a normal stop reason) does not make a prefix whole."""
    text = write_json(value)
    for cut in range(1, len(text) - 1):
        parsed = parse_arguments(text[:cut], tool=ANY, truncated=False)
        assert not parsed.ok
        assert parsed.error_type == "arguments_truncated"
        assert "nothing was executed" in (parsed.error or "")


# --- never a guess ---------------------------------------------------------------------

python_damage = st.sampled_from(
    [
        lambda s: s,
        lambda s: s.replace("'", '"', 1),
        lambda s: s.replace(": ", ": 'x' + ", 1),
        lambda s: s.replace(": ", ": 'x' ", 1),
        lambda s: s.replace("'", "r'", 1),
        lambda s: s.replace("}", ",)}", 1),
        lambda s: s.replace("\\\\", "\\", 1),
        lambda s: s.replace("1", "1_0", 1),
        lambda s: s.replace("None", "none", 1),
    ]
)


@SETTINGS
@given(value=objects, hurt=python_damage)
def test_python_literals_accepts_only_what_python_reads_the_same(
    value: dict[str, Any], hurt: Callable[[str], str]
) -> None:
    """Whatever python_literals accepts, Python's own parser reads as the same value."""
    text = hurt(write_python(value))
    parsed = parse_arguments(text, tool=ANY)
    if parsed.ok and parsed.repair == "python_literals":
        python = ast.literal_eval(text)
        assert same(python, parsed.params)


def test_an_expression_is_not_a_literal() -> None:
    """``{'path': 'a' + 'b'}`` is an expression; it is refused, never run."""
    for text in [
        "{'path': 'a' + 'b'}",
        "{'path': 'a' 'b'}",
        "{'path': ('a',)}",
        "{'n': 1_000}",
        "{'path': r'C:\\x'}",
        "{'path': f'{x}'}",
        "{'s': {1, 2}}",
    ]:
        parsed = parse_arguments(text, tool=ANY)
        assert not parsed.ok, text
        assert parsed.params is None


# --- escapes and control characters (RT-09) -------------------------------------------

bad_escapes = st.characters(
    blacklist_categories=("Cs",),
    # \' is Python's escape for a quote: python_literals reads it (tested below).
    blacklist_characters=list("\"\\/nrtu'") + _REFUSED,
)


@SETTINGS
@given(
    value=st.dictionaries(safe_text, safe_text, min_size=1, max_size=3),
    escape=bad_escapes,
)
def test_invalid_escape_is_refused_naming_offset_and_character(
    value: dict[str, str], escape: str
) -> None:
    """A backslash before anything JSON does not allow is refused, with where and what."""
    key = next(iter(value))
    text = json.dumps({key: "a"}, ensure_ascii=False)
    offset = text.rindex('"a"') + 2
    broken = text[:offset] + "\\" + escape + text[offset:]
    parsed = parse_arguments(broken, tool=ANY)
    assert not parsed.ok
    # \b and \f are JSON: the value holds a control character (a Windows path
    # whose backslash was not doubled, usually), refused as invalid_arguments.
    assert parsed.error_type == (
        "invalid_arguments" if escape in "bf" else "invalid_arguments_json"
    )
    assert f"at offset {offset} " in (parsed.error or "")
    if escape in "bf":
        assert f"\\{escape}" in (parsed.error or "")
        assert "string value contains control character U+000" in (parsed.error or "")
    elif escape.isprintable():
        assert f"escape \\{escape}" in (parsed.error or "")


def test_escaped_quote_is_pythons_quote() -> None:
    """``\\'`` is not JSON but is Python's spelling of a quote, in either quoting."""
    for text in ['{"note": "it\\\'s"}', "{'note': 'it\\'s'}"]:
        parsed = parse_arguments(text, tool=ANY)
        assert parsed.params == {"note": "it's"}
        assert parsed.repair == "python_literals"


@SETTINGS
@given(code=st.sampled_from([c for c in range(0x20) if chr(c) not in "\t\n\r"]))
def test_control_characters_are_refused_raw_or_escaped(code: int) -> None:
    """U+0000 to U+001F other than tab/newline/CR never reach a tool, however spelled.

    Raw in a string the text is not JSON (``invalid_arguments_json``); escaped
    (``\\u0007``, ``\\b``) or in a decoded object the JSON is valid and its value is
    not (``invalid_arguments``, "string value contains control character U+0007").
    """
    char = chr(code)
    escaped = json.dumps({"text": f"a{char}b"})  # \u0007, or \b / \f
    raw = '{"text": "a' + char + 'b"}'
    for text, error_type in (
        (escaped, "invalid_arguments"),
        (raw, "invalid_arguments_json"),
    ):
        parsed = parse_arguments(text, tool=ANY)
        assert not parsed.ok, text
        assert parsed.error_type == error_type
        assert "at offset 11 " in (parsed.error or "")
        assert f"U+{code:04X}" in (parsed.error or "")
    decoded = parse_arguments({"text": f"a{char}b"}, tool=ANY)
    assert not decoded.ok
    assert decoded.error_type == "invalid_arguments"
    assert f"string value contains control character U+{code:04X}" in (
        decoded.error or ""
    )


def test_tab_newline_and_return_are_accepted_as_escapes_refused_raw_in_strings() -> (
    None
):
    """The three whitespace controls keep their JSON escapes; raw inside a string they are named."""
    parsed = parse_arguments('{"text": "a\\tb\\nc\\rd"}', tool=ANY)
    assert parsed.params == {"text": "a\tb\nc\rd"}
    assert parse_arguments('{\n\t"text": "x"\r\n}', tool=ANY).params == {"text": "x"}
    raw = parse_arguments('{"text": "a\nb"}', tool=ANY)
    assert raw.error_type == "invalid_arguments_json"
    assert "write it as \\n" in (raw.error or "")


def test_python_quoting_is_not_mistaken_for_a_bad_json_escape() -> None:
    """Read as JSON, ``'"'`` opens a string and ``\\'`` looks like a bad escape; it is Python quoting.

    Found by the prefix property: the cut-off text is truncated, the whole text is read.
    """
    cut = parse_arguments("{'\"': ['\\'", tool=ANY)
    assert cut.error_type == "arguments_truncated"
    whole = parse_arguments("{'\"': ['\\'']}", tool=ANY)
    assert whole.params == {'"': ["'"]}
    assert whole.repair == "python_literals"


@pytest.mark.parametrize(
    "raw",
    ['{"note": "a\\u0000b"}', {"note": "a\x00b"}, '{"note": "a\\u001fb"}'],
    ids=["escaped-nul", "decoded-nul", "escaped-unit-separator"],
)
def test_control_character_in_valid_json_is_a_value_error(raw: Any) -> None:
    """Arguments ``{"note":"a\\u0000b"}`` are valid JSON with a refused value: the
    error is ``invalid_arguments``, "string value contains control character U+0000"."""
    parsed = parse_arguments(raw, tool=ANY)
    code = "U+001F" if "001f" in str(raw) else "U+0000"
    assert (parsed.ok, parsed.error_type) == (False, "invalid_arguments")
    assert f"string value contains control character {code}" in (parsed.error or "")
