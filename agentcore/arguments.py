"""Turn a tool call's argument text into validated params, through a bounded repair ladder.

The ladder, tried in this order, each rung at most once, stopping at the first rung
that yields a JSON object (later rungs work on the text earlier rungs produced):

1. exact JSON (``repair=None``); a dict that arrives already decoded is
   ``already_decoded``;
2. ``empty_arguments``: ``""``, whitespace or ``null`` become ``{}``;
3. ``strip_code_fence``: the content of the first fence (any tag, prose around it);
4. ``leading_json_value``: the first JSON object in the text, prose before/after dropped;
5. ``trailing_commas``: commas before ``}``/``]`` outside strings removed;
6. ``python_literals``: single quotes, ``True``/``False``/``None`` (strings untouched);
7. ``json_repair``: unbalanced or truncated JSON closed by the ``json-repair`` library.

Whatever rung parsed it, a JSON *string* holding an object is decoded once more
(``double_encoded``), and a top-level field holding a JSON string where the schema
wants an array or object is decoded once (``double_encoded``). Nothing else is ever
rewritten: ``"true"`` stays a string. A value is accepted only if the tool's compiled
Draft 2020-12 validator accepts it. Refused outright, before any rung: arguments of a
turn cut off by the output-token limit, NUL characters, invalid ``\\u`` escapes and
lone surrogates.

This module never imports Django.
"""

from __future__ import annotations

import ast
import io
import json
import logging
import math
import re
import token
import tokenize
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import json_repair
from jsonschema.exceptions import ValidationError, relevance

if TYPE_CHECKING:
    from agentcore.tools import Tool

__all__ = [
    "MAX_REPAIR_CHARS",
    "ParsedArguments",
    "canonical_arguments",
    "parse_arguments",
]

logger = logging.getLogger(__name__)

#: Argument texts longer than this (characters) get exact parsing only: the repair
#: rungs are not run on them, which bounds the work per call.
MAX_REPAIR_CHARS: Final = 256 * 1024

_TRUNCATED_DETAIL: Final = (
    "the response hit the output token limit before this tool call finished; "
    "nothing was executed; retry with a smaller payload or split the content"
)
# A backslash-u not followed by four hex digits, not itself escaped (\\u is fine).
_BAD_U_ESCAPE: Final = re.compile(r"(?<!\\)(?:\\\\)*\\u(?![0-9a-fA-F]{4})")
_FENCE: Final = re.compile(
    r"(?P<fence>```|~~~)[ \t]*[A-Za-z0-9_+.\-]*[ \t]*\r?\n?(?P<body>.*?)(?:(?P=fence)|\Z)",
    re.DOTALL,
)
_LITERAL_NAMES: Final = {"true": "True", "false": "False", "null": "None"}
_DECODER: Final = json.JSONDecoder()


@dataclass(frozen=True)
class ParsedArguments:
    """The outcome of :func:`parse_arguments`.

    ``ok`` with ``params`` (a dict that passed the schema) and ``repair`` (the rung
    names joined with ``+``, ``None`` for exact JSON); or not ``ok`` with ``error``
    (an actionable sentence for the model, RT-09) and ``error_type``
    (``invalid_arguments`` or ``arguments_truncated``). Implements RT-05, RT-06.
    """

    ok: bool
    params: dict[str, Any] | None
    repair: str | None = None
    error: str | None = None
    error_type: str | None = None

    @property
    def replay_text(self) -> str:
        """Return the argument text to replay to a provider: compact params JSON, or ``"{}"``.

        A call whose arguments failed is replayed as ``"{}"`` beside its error
        result, so unparseable or truncated text never goes back to a provider.
        """
        if not self.ok or self.params is None:
            return "{}"
        return json.dumps(self.params, ensure_ascii=False, separators=(",", ":"))


def canonical_arguments(raw: str | dict[str, Any] | None) -> str:
    """Return the argument *text* for ``raw``: a decoded object as compact JSON, blank as ``"{}"``.

    Text is returned unchanged (never JSON-encoded a second time). Used for
    ``TOOL_CALL_ARGS`` deltas and history when a provider sent an object (BC08) or
    nothing (BC06).
    """
    if raw is None:
        return "{}"
    if isinstance(raw, dict):
        return json.dumps(raw, ensure_ascii=False, separators=(",", ":"))
    return raw if raw.strip() else "{}"


class _Refused(Exception):
    """The input is refused outright; the message is for the model."""


def parse_arguments(
    raw: str | dict[str, Any] | None, *, tool: Tool, truncated: bool = False
) -> ParsedArguments:
    """Parse and validate ``raw`` for ``tool`` through the bounded repair ladder.

    ``raw`` is the joined argument text (or an object some providers send already
    decoded, or ``None``). ``truncated`` means the turn was cut off by the output
    token limit: the call is then refused whatever the text, since a repaired prefix
    is not what the model meant. Never raises for bad input: the outcome says what
    went wrong. Implements RT-05, RT-06, RT-09, SEC-01.
    """
    if truncated:
        return ParsedArguments(
            ok=False,
            params=None,
            error=_TRUNCATED_DETAIL,
            error_type="arguments_truncated",
        )
    try:
        return _ladder(raw, tool)
    except _Refused as refused:
        return _failure(tool, str(refused))


def _ladder(raw: str | dict[str, Any] | None, tool: Tool) -> ParsedArguments:
    """Run the rungs in order and return the first accepted (or the deciding) outcome."""
    if isinstance(raw, dict):
        return _accept(raw, tool, ["already_decoded"])
    if raw is None:
        return _accept(None, tool, [])
    if not isinstance(raw, str):
        return _failure(
            tool,
            f"arguments must be a JSON object text, got {type(raw).__name__}",
        )
    if "\x00" in raw:
        raise _Refused("the arguments contain a NUL character; send plain JSON text")
    if _BAD_U_ESCAPE.search(raw):
        raise _Refused(
            "the arguments contain an invalid \\u escape (it needs four hex digits); "
            "escape a literal backslash as \\\\"
        )
    try:
        return _accept(json.loads(raw), tool, [])
    except json.JSONDecodeError as error:
        first_error = error
    if not raw.strip():
        return _accept(None, tool, [])
    if len(raw) > MAX_REPAIR_CHARS:
        return _failure(tool, _not_json_message(first_error))
    text = raw
    repairs: list[str] = []
    for name, rung in _RUNGS:
        produced = rung(text)
        if produced is None:
            continue
        repairs.append(name)
        if isinstance(produced, _Text):
            text = produced.text
            try:
                value = json.loads(text)
            except json.JSONDecodeError:
                continue
        else:
            value = produced.value
        return _accept(value, tool, repairs)
    return _failure(tool, _not_json_message(first_error))


@dataclass(frozen=True, slots=True)
class _Text:
    """A rung's rewritten text, parsed by the next step."""

    text: str


@dataclass(frozen=True, slots=True)
class _Value:
    """A rung's decoded value."""

    value: Any


def _accept(value: Any, tool: Tool, repairs: list[str]) -> ParsedArguments:
    """Validate a decoded ``value`` after the post-parse rungs; return the outcome."""
    if value is None or (isinstance(value, str) and not value.strip()):
        value = {}
        repairs = [*repairs, "empty_arguments"]
    elif isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return _failure(
                tool,
                "the arguments are a JSON string, not a JSON object; send the object "
                'itself, e.g. {"field": "value"}',
            )
        repairs = [*repairs, "double_encoded"]
    if not isinstance(value, dict):
        return _failure(
            tool,
            f"the arguments must be a JSON object, got a JSON {_json_type(value)}",
        )
    _screen(value)
    validator = tool.validator
    if validator.is_valid(value):
        return _success(tool, value, repairs)
    decoded = _decode_nested(value, tool.parameters)
    if decoded is not None and validator.is_valid(decoded):
        _screen(decoded)
        return _success(tool, decoded, [*repairs, "double_encoded"])
    if "empty_arguments" in repairs:
        return _failure(
            tool, "the arguments were empty; " + _schema_errors(tool, value)
        )
    return _failure(tool, _schema_errors(tool, value))


def _success(tool: Tool, params: dict[str, Any], repairs: list[str]) -> ParsedArguments:
    """Return an accepted outcome, logging any repair that was needed."""
    repair = "+".join(repairs) or None
    if repair is not None:
        logger.info("arguments for tool %r repaired by %s", tool.name, repair)
    return ParsedArguments(ok=True, params=params, repair=repair)


def _failure(tool: Tool, detail: str) -> ParsedArguments:
    """Return a refused outcome whose message says what to do next (RT-09)."""
    message = (
        f"Invalid arguments for tool {tool.name!r}: {detail}. "
        f"Expected parameters: {_describe_parameters(tool.parameters)}. "
        f"Correct the arguments and call {tool.name} again."
    )
    return ParsedArguments(
        ok=False, params=None, error=message, error_type="invalid_arguments"
    )


def _screen(value: Any) -> None:
    """Raise :class:`_Refused` when any key or string holds NUL or a lone surrogate. Implements SEC-01."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                raise _Refused("a string in the arguments contains a NUL character")
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as error:
                raise _Refused(
                    "a string in the arguments contains an invalid \\u escape "
                    "(a lone surrogate); send valid Unicode"
                ) from error
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _decode_nested(
    value: dict[str, Any], schema: dict[str, Any]
) -> dict[str, Any] | None:
    """Decode top-level string fields once where the schema wants only an array/object.

    Returns the new dict, or ``None`` when nothing qualified. Genuine string fields
    are never touched.
    """
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return None
    changed = False
    result = dict(value)
    for key, item in value.items():
        prop = properties.get(key)
        if not isinstance(item, str) or not isinstance(prop, dict):
            continue
        wanted = prop.get("type")
        kinds = set(wanted) if isinstance(wanted, list) else {wanted}
        if not kinds or "string" in kinds or not kinds <= {"array", "object", "null"}:
            continue
        try:
            decoded = json.loads(item)
        except json.JSONDecodeError:
            continue
        if (isinstance(decoded, list) and "array" in kinds) or (
            isinstance(decoded, dict) and "object" in kinds
        ):
            result[key] = decoded
            changed = True
    return result if changed else None


# --- the text rungs -------------------------------------------------------------


def _strip_code_fence(text: str) -> _Text | None:
    """Return the content of the first code fence in ``text``, or ``None``."""
    match = _FENCE.search(text)
    if match is None:
        return None
    body = match.group("body").strip()
    return _Text(body) if body else None


def _leading_json_value(text: str) -> _Value | None:
    """Return the first JSON object in ``text`` when prose surrounds it, or ``None``."""
    start = text.find("{")
    if start < 0:
        return None
    try:
        value, end = _DECODER.raw_decode(text, start)
    except json.JSONDecodeError:
        return None
    if not isinstance(value, dict):
        return None
    return _Value(value)


def _tokens(text: str) -> list[tokenize.TokenInfo] | None:
    """Return Python tokens of ``text`` (JSON and Python literals tokenize alike), or ``None``."""
    try:
        return list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError, ValueError):
        return None


def _trailing_commas(text: str) -> _Text | None:
    """Return ``text`` without commas that precede ``}`` or ``]`` outside strings."""
    tokens = _tokens(text)
    if tokens is None:
        return None
    skip = {token.NL, token.NEWLINE, token.COMMENT, token.INDENT, token.DEDENT}
    significant = [t for t in tokens if t.type not in skip]
    drops = [
        tok.start
        for tok, nxt in zip(significant, significant[1:], strict=False)
        if tok.type == token.OP and tok.string == "," and nxt.string in ("}", "]")
    ]
    if not drops:
        return None
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    cut = {offsets[row - 1] + col for row, col in drops}
    return _Text("".join(ch for i, ch in enumerate(text) if i not in cut))


def _python_literals(text: str) -> _Value | None:
    """Evaluate ``text`` as a Python literal (single quotes, True/None, JSON true/null)."""
    tokens = _tokens(text)
    if tokens is None:
        return None
    rewritten = [
        t._replace(string=_LITERAL_NAMES[t.string])
        if t.type == token.NAME and t.string in _LITERAL_NAMES
        else t
        for t in tokens
    ]
    try:
        source = tokenize.untokenize(rewritten)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            value = ast.literal_eval(source.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    try:
        value = _jsonable(value)
    except ValueError:
        return None
    return _Value(value) if isinstance(value, dict) else None


def _jsonable(value: Any) -> Any:
    """Return ``value`` as JSON data (tuples become lists). Raises ValueError otherwise."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("non-finite number")
        return value
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise ValueError("non-string key")
        return {k: _jsonable(v) for k, v in value.items()}
    raise ValueError(f"not JSON: {type(value).__name__}")


def _json_repair(text: str) -> _Value | None:
    """Close unbalanced or truncated JSON with ``json-repair``; never invent ``{}``."""
    start = text.find("{")
    if start < 0:
        return None
    try:
        value = json_repair.repair_json(text[start:], return_objects=True)
    except Exception:
        return None
    if not isinstance(value, dict) or not value:
        return None
    return _Value(value)


_RUNGS: Final[tuple[tuple[str, Callable[[str], _Text | _Value | None]], ...]] = (
    ("strip_code_fence", _strip_code_fence),
    ("leading_json_value", _leading_json_value),
    ("trailing_commas", _trailing_commas),
    ("python_literals", _python_literals),
    ("json_repair", _json_repair),
)

#: The rung names, in ladder order (post-parse rungs included).
RUNG_NAMES: Final = (
    "already_decoded",
    "empty_arguments",
    *(name for name, _ in _RUNGS),
    "double_encoded",
)


# --- messages ---------------------------------------------------------------------


def _json_type(value: Any) -> str:
    """Return the JSON type name of a decoded value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _short(value: Any, limit: int = 60) -> str:
    """Return a JSON rendering of ``value`` cut to ``limit`` characters."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _not_json_message(error: json.JSONDecodeError) -> str:
    """Return the detail for text that no rung could parse."""
    return (
        f"they are not valid JSON ({error.msg} at line {error.lineno} column "
        f"{error.colno}); send one JSON object with double-quoted keys and strings"
    )


def _describe_parameters(schema: dict[str, Any]) -> str:
    """Return ``"city (string, required), unit (one of 'c', 'f')"`` for a schema."""
    properties = schema.get("properties") or {}
    if not isinstance(properties, dict) or not properties:
        return "none (send {})"
    required = set(schema.get("required") or ())
    parts = []
    for name, prop in properties.items():
        prop = prop if isinstance(prop, dict) else {}
        if "enum" in prop:
            kind = "one of " + ", ".join(_short(v, 30) for v in prop["enum"])
        elif "type" in prop:
            kind = (
                "/".join(prop["type"])
                if isinstance(prop["type"], list)
                else str(prop["type"])
            )
        else:
            kind = "any"
        parts.append(f"{name} ({kind}{', required' if name in required else ''})")
    return ", ".join(parts)


def _field(path: Iterable[Any]) -> str:
    """Return a JSON-pointer-like field name such as ``items/0/sku``, or ``(root)``."""
    return "/".join(str(p) for p in path) or "(root)"


def _schema_errors(tool: Tool, value: dict[str, Any]) -> str:
    """Describe up to three schema violations: which field, what was expected, what came."""
    errors = sorted(tool.validator.iter_errors(value), key=relevance)
    described = [_describe_error(e) for e in errors[:3]]
    more = len(errors) - len(described)
    text = "; ".join(described)
    return text + (f" (and {more} more)" if more > 0 else "")


def _describe_error(error: ValidationError) -> str:
    """Return one violation as a sentence fragment."""
    where = _field(error.absolute_path)
    kind = error.validator
    instance = error.instance
    if kind == "required" and isinstance(instance, dict):
        missing = [r for r in error.validator_value if r not in instance]
        names = ", ".join(repr(m) for m in missing)
        prefix = "" if where == "(root)" else f" in {where!r}"
        return f"missing required field {names}{prefix}"
    if kind == "additionalProperties" and isinstance(instance, dict):
        allowed = list((error.schema.get("properties") or {}).keys())
        extra = [k for k in instance if k not in allowed]
        return (
            f"unexpected field {', '.join(repr(k) for k in extra)} at {where!r}; "
            f"allowed fields: {', '.join(allowed) or 'none'}"
        )
    if kind == "type":
        return (
            f"field {where!r} expected {error.validator_value}, got "
            f"{_json_type(instance)} {_short(instance)}"
        )
    if kind == "enum":
        options = ", ".join(_short(v, 30) for v in error.validator_value)
        return f"field {where!r} expected one of {options}, got {_short(instance)}"
    message = error.message
    if len(message) > 200:
        message = message[:199] + "…"
    return f"field {where!r}: {message}"
