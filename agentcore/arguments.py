"""Turn a tool call's argument text into validated params, through a strict repair ladder.

Every rung of the ladder preserves meaning: a rung accepts text ``T`` as value ``V``
only when ``T`` *is* ``V`` written in the dialect the rung names. No rung completes a
prefix, closes a bracket, drops an escape or guesses (RT-05, SEC-01). The rungs, tried
in this order, each at most once, stopping at the first that yields a JSON object
(later rungs work on the text earlier rungs produced):

1. exact JSON (``repair=None``); a dict that arrives already decoded is
   ``already_decoded``;
2. ``empty_arguments``: ``""``, whitespace or ``null`` become ``{}``;
3. ``strip_code_fence``: the content of the one code fence in the text (any tag,
   prose around it, the closing fence may be missing); a second fence makes the
   text ambiguous and the rung declines;
4. ``leading_json_value``: exactly one complete JSON object with prose before or
   after it; the prose may hold no ``{ } [ ]``, so a piece of JSON structure is
   never taken for prose;
5. ``trailing_commas``: a comma directly before ``}`` or ``]`` (outside strings) is
   removed; nothing else changes;
6. ``python_literals``: strings in single quotes (``\\'`` inside them) and the
   names ``True``/``False``/``None`` are rewritten as JSON; the escapes inside the
   strings keep their JSON meaning. Anything else Python has (``+``, adjacent
   strings, tuples, ``1_000``, prefixes such as ``r''``) stays invalid, so
   ``{'path': 'a' + 'b'}`` is refused: it is an expression, not a literal.

Every text a rung hands to the JSON decoder is screened first (RT-09: the model is
told the offset, the character and what to send instead, error type
``invalid_arguments_json``):

- an escape JSON does not have (``\\q``, a backslash before a non-ASCII letter, a
  ``\\u`` without four hex digits);
- a control character U+0000 to U+001F, raw anywhere. Tab, newline and carriage
  return are accepted raw between tokens; raw inside a string they are refused
  ("write it as \\n");
- a control character *escaped* inside a string (``\\u0000``; ``\\b`` and ``\\f``,
  nearly always a Windows path whose backslash was not doubled, ``C:\\folder``):
  valid JSON whose value is refused, error type ``invalid_arguments`` ("string
  value contains control character U+0000"), as is a decoded object holding one.
  Tab, newline and carriage return are accepted as ``\\t``, ``\\n``, ``\\r``;
- an unpaired UTF-16 surrogate, raw or as a ``\\uD800`` escape.

The JSON decoder refuses ``NaN`` and ``Infinity``. Text none of the rungs accepts is
refused: ``arguments_truncated`` when it is a prefix of JSON (it ends inside a string,
an object, a number or a literal, whatever the stop reason said: ``{"city": "``
after ``finish_reason: "tool_calls"`` was not finished), ``invalid_arguments``
otherwise. The ``json-repair`` library is not used: closing a truncated text cannot be
told apart from guessing, so it never decides execution.

Whatever rung parsed it, a JSON *string* holding an object is decoded once more
(``double_encoded``), and a top-level field holding a JSON string where the schema
wants an array or object is decoded once (``double_encoded``). Nothing else is ever
rewritten: ``"true"`` stays a string. A value is accepted only if the tool's compiled
Draft 2020-12 validator accepts it. Arguments of a turn cut off by the output-token
limit are refused before any rung. ``docs/arguments.md`` describes the ladder for
readers outside the code.

An accepted call yields a :class:`ValidatedArguments`: the frozen value (params,
canonical JSON, its SHA-256, the schema's SHA-256, the repairs applied) that every
later step refers to by hash instead of validating the arguments again.

This module never imports Django.

Over 400 lines because it holds the repair ladder, rung by rung, with the screens
and error messages each rung needs (docs/arguments.md); a rung is meaningless alone.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import math
import re
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final

from agentcore.simple_schema import quick_check

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError

    from agentcore.tools import Tool

__all__ = [
    "MAX_REPAIR_CHARS",
    "RUNG_NAMES",
    "ParsedArguments",
    "ValidatedArguments",
    "canonical_arguments",
    "canonical_json",
    "canonical_sha256",
    "parse_arguments",
    "tool_schema_sha256",
]

logger = logging.getLogger(__name__)

#: Argument texts longer than this (characters) get exact parsing only: the repair
#: rungs are not run on them, which bounds the work per call.
MAX_REPAIR_CHARS: Final = 256 * 1024

_TRUNCATED_DETAIL: Final = (
    "the response hit the output token limit before this tool call finished; "
    "nothing was executed; retry with a smaller payload or split the content"
)
# A fence opens a line (markdown), so one inside a JSON string is never taken for it.
_FENCE: Final = re.compile(
    r"(?:^|(?<=\n))[ \t]*(?P<fence>```|~~~)[ \t]*[A-Za-z0-9_+.\-]*[ \t]*\r?\n?(?P<body>.*?)(?:(?P=fence)|\Z)",
    re.DOTALL,
)
_PYTHON_NAMES: Final = {"True": "true", "False": "false", "None": "null"}
_WORD: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_HEX4: Final = re.compile(r"[0-9a-fA-F]{4}")
_HEX_PREFIX: Final = re.compile(r"[0-9a-fA-F]{0,3}")
_LOW_SURROGATE_ESCAPE: Final = re.compile(r"\\u[dD][c-fC-F][0-9a-fA-F]{2}")
_LOW_SURROGATE_PREFIX: Final = re.compile(
    r"(?:\\(?:u(?:[dD](?:[c-fC-F][0-9a-fA-F]?)?)?)?)?"
)
#: Escapes whose JSON meaning is accepted; ``\b`` and ``\f`` are refused (see docstring).
_PLAIN_ESCAPES: Final = frozenset('"\\/nrt')
_ALLOWED_CONTROLS: Final = frozenset("\t\n\r")
_CONTROL_NAMES: Final = {
    0x00: "NUL",
    0x07: "bell",
    0x08: "backspace",
    0x09: "tab",
    0x0A: "newline",
    0x0C: "form feed",
    0x0D: "carriage return",
    0x1B: "escape",
}
_ESCAPE_FOR: Final = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}
_RAW_FAULT: Final = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff]")
#: In a decoded string: the refused controls (``\\b`` and ``\\f`` too) and surrogates.
_VALUE_FAULT: Final = re.compile("[\x00-\x08\x0b-\x0c\x0e-\x1f\ud800-\udfff]")
_OPENING: Final = {quotes: re.compile(f"[{quotes}]") for quotes in ('"', "\"'")}
#: Per quote character: the run of string content that needs no further look (plain
#: characters and the escapes that are always fine), matched at C speed.
_PLAIN_RUN: Final = {
    '"': re.compile('(?:[^"\\\\\x00-\x1f]+|\\\\["\\\\/nrt])*'),
    "'": re.compile("(?:[^'\\\\\x00-\x1f]+|\\\\['\"\\\\/nrt])*"),
}
_MAYBE_FAULT: Final = re.compile("[\\\\\x00-\x1f]")
#: What a JSON number that overflows a float needs: an exponent or 300+ digits.
_MAY_OVERFLOW: Final = re.compile(r"\d[eE]|\d{300}")
_NOTHING: Final = object()


def _no_constant(name: str) -> Any:
    """Refuse ``NaN``, ``Infinity`` and ``-Infinity``, which JSON does not have."""
    raise ValueError(f"{name} is not JSON")


_DECODER: Final = json.JSONDecoder(parse_constant=_no_constant)


def canonical_json(value: Any) -> str:
    """Return ``value`` as canonical JSON: sorted keys, no spaces, UTF-8 kept as is."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_sha256(value: Any) -> str:
    """Return the SHA-256 hex digest of ``value``'s canonical JSON.

    The digest of argument params and of parameter schemas; the stored hashes of
    approvals, votes and executions were made with it, so it never changes.
    """
    return hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()


#: Per tool, the SHA-256 of its parameter schema as ``RunAgentInput.tools`` carries it.
_SCHEMA_SHA256: weakref.WeakKeyDictionary[Tool, str] = weakref.WeakKeyDictionary()


def tool_schema_sha256(tool: Tool) -> str:
    """Return the SHA-256 of ``tool``'s parameter schema in its advertised (AG-UI) form.

    Computed once per tool object: a tool whose schema changes (an MCP server's)
    is a new object.
    """
    digest = _SCHEMA_SHA256.get(tool)
    if digest is None:
        dumped = tool.agui_tool().model_dump(
            mode="json", by_alias=True, exclude_none=True
        )
        digest = canonical_sha256(dumped.get("parameters"))
        _SCHEMA_SHA256[tool] = digest
    return digest


@dataclass(frozen=True, slots=True)
class ValidatedArguments:
    """Arguments that passed a tool's schema: the one value every later step refers to.

    ``params`` is a read-only view of the validated object; ``canonical_json`` its
    canonical JSON (:func:`canonical_json`) and ``sha256`` that text's digest (what
    approvals, votes and executions store); ``schema_sha256`` the digest of the
    schema it was validated against (:func:`tool_schema_sha256`); ``repairs`` the
    rung names the ladder applied (empty for exact JSON). Built only by
    :func:`parse_arguments` (validation), :meth:`restore` (a stored value whose
    hash still matches) and :meth:`stored` (a stored value validated when it was
    written). Implements RT-05, SEC-02.
    """

    params: Mapping[str, Any]
    canonical_json: str
    sha256: str
    schema_sha256: str
    repairs: tuple[str, ...] = ()

    @classmethod
    def _of(
        cls, params: dict[str, Any], *, schema_sha256: str, repairs: Sequence[str] = ()
    ) -> ValidatedArguments:
        """Wrap ``params`` (owned by the value from now on) with its canonical text and hash."""
        text = canonical_json(params)
        return cls(
            params=MappingProxyType(params),
            canonical_json=text,
            sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(),
            schema_sha256=schema_sha256,
            repairs=tuple(repairs),
        )

    @classmethod
    def restore(
        cls, *, params: Any, sha256: str, schema_sha256: str
    ) -> ValidatedArguments | None:
        """Return the stored value ``params`` validated earlier, or ``None`` if it changed.

        ``params`` (a JSON object as stored) must hash to ``sha256``, the digest
        recorded when it was validated against the schema ``schema_sha256``; the
        caller compares that schema hash with the tool's current one. Nothing is
        validated again. ``None`` when ``params`` is not an object or its hash is
        not ``sha256`` (the stored arguments were changed).
        """
        if not isinstance(params, dict):
            return None
        value = cls._of(copy.deepcopy(params), schema_sha256=schema_sha256)
        return value if value.sha256 == sha256 else None

    @classmethod
    def stored(
        cls, *, params: Mapping[str, Any], schema_sha256: str
    ) -> ValidatedArguments:
        """Return the value of ``params`` that an earlier step validated and stored without a hash.

        For an approval's proposed arguments (validated when the call was
        dispatched) and an approver's edit (validated when it was voted): the
        params are hashed, not validated again.
        """
        return cls._of(copy.deepcopy(dict(params)), schema_sha256=schema_sha256)

    @property
    def repair(self) -> str | None:
        """The rung names joined with ``+``, ``None`` for exact JSON."""
        return "+".join(self.repairs) or None

    def as_dict(self) -> dict[str, Any]:
        """Return a fresh, mutable copy of ``params`` (for a JSON column or a tool)."""
        return copy.deepcopy(dict(self.params))


@dataclass(frozen=True)
class ParsedArguments:
    """The outcome of :func:`parse_arguments`.

    ``ok`` with ``params`` (a dict that passed the schema), ``repair`` (the rung
    names joined with ``+``, ``None`` for exact JSON) and ``value`` (the
    :class:`ValidatedArguments` later steps refer to); or not ``ok`` with ``error``
    (an actionable sentence for the model, RT-09) and ``error_type``:
    ``invalid_arguments_json`` (a character or escape JSON does not allow there; the
    message names the offset and the character), ``arguments_truncated`` (the text
    stops before the JSON is complete, or the turn hit the token limit) or
    ``invalid_arguments`` (no rung parsed it, or the value fails the schema).
    Implements RT-05, RT-06, RT-09.
    """

    ok: bool
    params: dict[str, Any] | None
    repair: str | None = None
    error: str | None = None
    error_type: str | None = None
    value: ValidatedArguments | None = None

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


class _ValueRefused(_Refused):
    """Valid JSON whose value is refused (a control character in a string): ``invalid_arguments``."""


def parse_arguments(
    raw: str | dict[str, Any] | None, *, tool: Tool, truncated: bool = False
) -> ParsedArguments:
    """Parse and validate ``raw`` for ``tool`` through the strict repair ladder.

    ``raw`` is the joined argument text (or an object some providers send already
    decoded, or ``None``). ``truncated`` means the turn was cut off by the output
    token limit: the call is then refused whatever the text, since a repaired prefix
    is not what the model meant. Text that is itself a prefix of JSON is refused as
    ``arguments_truncated`` whatever the stop reason. Never raises for bad input:
    the outcome says what went wrong. Implements RT-05, RT-06, RT-09, SEC-01, TC-05.
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
    except _ValueRefused as refused:
        return _failure(tool, str(refused), error_type="invalid_arguments")
    except _Refused as refused:
        return _failure(tool, str(refused), error_type="invalid_arguments_json")


# --- screening (SEC-01, RT-09) ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Problem:
    """A character-level fault: where (in the screened text), what, and what to send instead."""

    offset: int
    what: str
    fix: str
    #: A fault of the value valid JSON spells (an escaped control character), not
    #: of the text: refused as ``invalid_arguments``.
    value: bool = False

    def sentence(self, offset: int) -> str:
        """Return the fault as a sentence fragment naming ``offset`` of the argument text."""
        return f"{self.what} at offset {offset} of the argument text; {self.fix}"


def _codepoint(code: int) -> str:
    """Return ``U+0007 (bell)``-style text for a code point (never the raw character)."""
    name = _CONTROL_NAMES.get(code)
    return f"U+{code:04X}" + (f" ({name})" if name else "")


def _control_problem(offset: int, code: int, *, escaped: bool) -> _Problem:
    """Return the problem for control character ``code`` (raw or as a ``\\u`` escape)."""
    if escaped:
        # Valid JSON (\u0000): the string value holds the character, the text is fine.
        return _Problem(
            offset,
            f"string value contains control character U+{code:04X}"
            + (f" ({_CONTROL_NAMES[code]})" if code in _CONTROL_NAMES else "")
            + f", written \\u{code:04x}",
            "control characters other than tab, newline and carriage return are not "
            "accepted in tool arguments; remove it",
            value=True,
        )
    if code == 0:
        return _Problem(
            offset,
            "the NUL character (U+0000)",
            "remove it; NUL cannot be stored or passed to a tool",
        )
    char = chr(code)
    if not escaped and char in _ESCAPE_FOR:
        return _Problem(
            offset,
            f"a raw {_codepoint(code)} inside a string",
            f"JSON strings cannot hold raw control characters; write it as {_ESCAPE_FOR[char]}",
        )
    return _Problem(
        offset,
        f"the control character {_codepoint(code)}",
        "control characters other than tab, newline and carriage return are not "
        "accepted in tool arguments; remove it",
    )


def _surrogate_problem(offset: int, code: int, *, escaped: bool) -> _Problem:
    """Return the problem for an unpaired UTF-16 surrogate."""
    spelled = f"\\u{code:04x}" if escaped else f"U+{code:04X}"
    return _Problem(
        offset,
        f"an unpaired UTF-16 surrogate {spelled}",
        "send the character itself, or a complete surrogate pair such as "
        "\\ud83d\\ude00; a lone surrogate is not valid Unicode",
    )


def _screen_raw(raw: str) -> _Problem | None:
    """Return the first character that is wrong wherever it stands: a control or a lone surrogate.

    Tab, newline and carriage return are left to :func:`_screen_text`, which knows
    whether they stand inside a string.
    """
    match = _RAW_FAULT.search(raw)
    if match is None:
        return None
    offset, code = match.start(), ord(match.group())
    if code < 0x20:
        return _control_problem(offset, code, escaped=False)
    return _surrogate_problem(offset, code, escaped=False)


def _screen_text(text: str, *, quotes: str = '"') -> _Problem | None:
    """Return the first fault inside the strings of ``text`` (delimited by ``quotes``), or ``None``.

    A fault is a raw control character, an escape JSON does not have (``\\q``, ``\\é``,
    ``\\x41``; ``\\'`` is allowed when ``'`` delimits strings), an escaped control
    character other than ``\\t \\n \\r``, or an unpaired surrogate escape. Text that
    ends inside an escape is not a fault here: it is truncated. Regular expressions
    jump between the characters that matter, so long texts screen quickly.
    """
    if _MAYBE_FAULT.search(text) is None:
        return None  # no backslash, no control character: nothing to find
    opening = _OPENING[quotes]
    index, size = 0, len(text)
    while index < size:
        start = opening.search(text, index)
        if start is None:
            return None
        quote = start.group()
        plain = _PLAIN_RUN[quote]
        index = start.end()
        while True:
            # Each pattern matches the empty string, so a match always exists.
            run = plain.match(text, index)
            assert run is not None
            index = run.end()
            if index >= size:
                return None
            char = text[index]
            if char == quote:
                index += 1
                break
            if char != "\\":
                return _control_problem(index, ord(char), escaped=False)
            problem, index = _screen_escape(text, index, quotes)
            if problem is not None or index < 0:
                return problem
    return None


def _screen_escape(text: str, index: int, quotes: str) -> tuple[_Problem | None, int]:
    """Check the escape at ``index``; return ``(problem, next index)``, ``-1`` at a truncated end."""
    if index + 1 >= len(text):
        return None, -1
    escape = text[index + 1]
    if escape in _PLAIN_ESCAPES or (escape == "'" and "'" in quotes):
        return None, index + 2
    if escape in "bf":
        code = 0x08 if escape == "b" else 0x0C
        return (
            _Problem(
                index,
                f"string value contains control character U+{code:04X} "
                f"({_CONTROL_NAMES[code]}), written \\{escape}",
                f"if you meant a backslash followed by {escape!r} (a Windows path), "
                f"write \\\\{escape}; control characters are not accepted in tool arguments",
                value=True,
            ),
            index,
        )
    if escape != "u":
        shown = escape if escape.isprintable() else _codepoint(ord(escape))
        return (
            _Problem(
                index,
                f"the invalid JSON escape \\{shown}",
                'JSON allows only \\" \\\\ \\/ \\n \\r \\t and \\uXXXX after a '
                "backslash; write a literal backslash as \\\\, and send other "
                "characters as themselves",
            ),
            index,
        )
    return _screen_u_escape(text, index)


def _screen_u_escape(text: str, index: int) -> tuple[_Problem | None, int]:
    """Check the ``\\u`` escape at ``index``; return ``(problem, next index)``, ``-1`` at a truncated end."""
    size = len(text)
    digits = text[index + 2 : index + 6]
    if _HEX4.fullmatch(digits) is None:
        if index + 2 + len(digits) == size and _HEX_PREFIX.fullmatch(digits):
            return None, -1
        return (
            _Problem(
                index,
                "an invalid \\u escape (it needs four hex digits)",
                "escape a literal backslash as \\\\",
            ),
            index,
        )
    code = int(digits, 16)
    if code < 0x20 and chr(code) not in _ALLOWED_CONTROLS:
        return _control_problem(index, code, escaped=True), index
    if 0xDC00 <= code <= 0xDFFF:
        return _surrogate_problem(index, code, escaped=True), index
    if 0xD800 <= code <= 0xDBFF:
        following = text[index + 6 : index + 12]
        if _LOW_SURROGATE_ESCAPE.fullmatch(following):
            return None, index + 12
        if index + 6 + len(following) == size and _LOW_SURROGATE_PREFIX.fullmatch(
            following
        ):
            return None, -1
        return _surrogate_problem(index, code, escaped=True), index
    return None, index + 6


# --- the ladder -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Text:
    """A candidate text and, per character, its offset in the raw argument text."""

    text: str
    origin: Sequence[int]

    def raw_offset(self, offset: int) -> int:
        """Return the raw offset of ``offset`` in this text."""
        if offset < len(self.origin):
            return self.origin[offset]
        return self.origin[-1] + 1 if self.origin else 0

    def slice(self, start: int, end: int | None = None) -> _Text:
        """Return ``text[start:end]`` with its origins."""
        return _Text(self.text[start:end], self.origin[start:end])


@dataclass(frozen=True, slots=True)
class _Value:
    """A rung's decoded value."""

    value: Any


@dataclass
class _Attempt:
    """What the rungs learned while failing: the first fault, the texts they tried.

    A fault found by a double-quote-only screen in a text that also holds single
    quotes is *weak*: it may be an artefact of reading Python-style quoting as JSON
    (``{'"': 'it\\'s'}``). ``python_literals`` screens such text with both quotes and
    records a real fault as strong; a weak one is reported only when nothing better
    (a strong fault, a truncation) explains the refusal.
    """

    problem: str | None = None
    weak_problem: str | None = None
    #: Whether ``problem`` / ``weak_problem`` is a fault of the value (see _Problem).
    problem_value: bool = False
    weak_value: bool = False
    tried: list[str] = field(default_factory=list)

    def note(self, problem: _Problem, text: _Text, *, quotes: str = "\"'") -> None:
        """Keep the first fault (strong or weak, see the class docstring), located in the raw text."""
        sentence = problem.sentence(text.raw_offset(problem.offset))
        if quotes == '"' and "'" in text.text:
            if self.weak_problem is None:
                self.weak_problem = sentence
                self.weak_value = problem.value
            self.tried.append(text.text)
        elif self.problem is None:
            self.problem = sentence
            self.problem_value = problem.value

    def loads(self, text: _Text, *, quotes: str = '"') -> Any:
        """Screen and decode ``text`` as strict JSON; return the value or ``_NOTHING``."""
        problem = _screen_text(text.text, quotes=quotes)
        if problem is not None:
            self.note(problem, text, quotes=quotes)
            return _NOTHING
        self.tried.append(text.text)
        try:
            return _DECODER.decode(text.text)
        except (ValueError, RecursionError):
            return _NOTHING


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
    if _RAW_FAULT.search(raw) is None and _MAYBE_FAULT.search(raw) is None:
        # The common case, strict JSON with nothing to screen: decoded without
        # the bookkeeping the rungs need (B3). Anything else takes the ladder.
        try:
            value = _DECODER.decode(raw)
        except (ValueError, RecursionError):
            pass
        else:
            # Its strings are slices of the screened text: only a float that
            # overflows to infinity is left for the walk of the value to find.
            return _accept(value, tool, [], screened=_MAY_OVERFLOW.search(raw) is None)
    problem = _screen_raw(raw)
    if problem is not None:
        raise _Refused(problem.sentence(problem.offset))
    attempt = _Attempt()
    text = _Text(raw, range(len(raw)))
    value = attempt.loads(text)
    if value is not _NOTHING:
        return _accept(value, tool, [])
    if not raw.strip():
        return _accept(None, tool, [])
    if len(raw) <= MAX_REPAIR_CHARS:
        repairs: list[str] = []
        for name, rung in _RUNGS:
            produced = rung(text, attempt)
            if produced is None:
                continue
            repairs.append(name)
            if isinstance(produced, _Text):
                text = produced
                value = attempt.loads(text)
                if value is _NOTHING:
                    continue
            else:
                value = produced.value
            return _accept(value, tool, repairs)
    return _refusal(raw, tool, attempt)


def _refusal(raw: str, tool: Tool, attempt: _Attempt) -> ParsedArguments:
    """Return the refusal for text no rung accepted: a fault, a truncation, or not JSON."""
    if attempt.problem is not None:
        raise (_ValueRefused if attempt.problem_value else _Refused)(attempt.problem)
    if any(_is_json_prefix(text) for text in attempt.tried):
        return _failure(
            tool,
            "the argument text is not valid JSON: it ends before its JSON is complete (inside a string, an "
            "object, a number or a literal), so it was cut off; nothing was executed. "
            "Send the complete arguments again; if they were long, send a smaller "
            "payload or split the content",
            error_type="arguments_truncated",
        )
    if attempt.weak_problem is not None:
        raise (_ValueRefused if attempt.weak_value else _Refused)(attempt.weak_problem)
    try:
        json.loads(raw)
    except json.JSONDecodeError as error:
        return _failure(tool, _not_json_message(error))
    except (ValueError, RecursionError):
        pass
    return _failure(
        tool,
        "they are not valid JSON; send one JSON object with double-quoted keys and strings",
    )


def _is_json_prefix(text: str) -> bool:
    """Return whether ``text`` is a proper prefix of a JSON object or string text.

    The decoder reads left to right, so a failure *at the end* of the text (or an
    unterminated string, a literal or number cut short there) means every character
    before it was consistent with JSON: the text was cut off, not mistaken.
    """
    stripped = text.strip()
    if not stripped.startswith(("{", '"')):
        return False
    try:
        _DECODER.decode(stripped)
    except json.JSONDecodeError as error:
        rest = stripped[error.pos :]
        if error.pos >= len(stripped) or error.msg.startswith("Unterminated string"):
            return True
        if error.msg == "Expecting value":
            return rest == "-" or any(
                word.startswith(rest)
                for word in ("true", "false", "null", "True", "False", "None")
            )
        if error.msg.startswith("Expecting ',' delimiter"):
            return (
                bool(re.fullmatch(r"\.|[eE][+-]?", rest))
                and stripped[error.pos - 1].isdigit()
            )
        if error.msg.startswith("Invalid \\uXXXX escape"):
            # A \u escape cut short, or complete but the last thing in the text.
            return re.search(r"\\u[0-9a-fA-F]{0,4}\Z", stripped) is not None
        return False
    except (ValueError, RecursionError):
        return False
    return False


def _accept(
    value: Any, tool: Tool, repairs: list[str], *, screened: bool = False
) -> ParsedArguments:
    """Validate a decoded ``value`` after the post-parse rungs; return the outcome.

    ``screened`` says ``value`` holds no refused character nor non-finite number
    already, so :func:`_screen` need not walk it.
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        value = {}
        repairs = [*repairs, "empty_arguments"]
    elif isinstance(value, str):
        inner = _Text(value, ())
        attempt = _Attempt()
        decoded = attempt.loads(inner)
        fault = attempt.problem or attempt.weak_problem
        if fault is not None:
            raise _Refused(
                fault.replace(
                    "of the argument text", "of the JSON string the arguments hold"
                )
            )
        if decoded is _NOTHING:
            return _failure(
                tool,
                "the arguments are a JSON string, not a JSON object; send the object "
                'itself, e.g. {"field": "value"}',
            )
        value = decoded
        repairs = [*repairs, "double_encoded"]
    if not isinstance(value, dict):
        return _failure(
            tool,
            f"the arguments must be a JSON object, got a JSON {_json_type(value)}",
        )
    if not screened:
        _screen(value)
    if _schema_accepts(tool, value):
        return _success(tool, value, repairs)
    decoded = _decode_nested(value, tool.parameters)
    if decoded is not None and tool.validator.is_valid(decoded):
        _screen(decoded)
        return _success(tool, decoded, [*repairs, "double_encoded"])
    if "empty_arguments" in repairs:
        return _failure(
            tool, "the arguments were empty; " + _schema_errors(tool, value)
        )
    return _failure(tool, _schema_errors(tool, value))


#: Per tool, its schema's :func:`quick_check` (``False`` when the schema has none).
_QUICK: weakref.WeakKeyDictionary[Tool, Callable[[dict[str, Any]], bool] | bool] = (
    weakref.WeakKeyDictionary()
)


def _schema_accepts(tool: Tool, value: dict[str, Any]) -> bool:
    """Return whether ``tool``'s schema accepts ``value``: the one schema validation of a call."""
    return _quick_accepts(tool, value) or tool.validator.is_valid(value)


def _quick_accepts(tool: Tool, value: dict[str, Any]) -> bool:
    """Return ``True`` when ``tool``'s schema surely accepts ``value`` (else ask the validator)."""
    check = _QUICK.get(tool)
    if check is None:
        check = quick_check(tool.parameters) or False
        _QUICK[tool] = check
    return callable(check) and check(value)


def _success(tool: Tool, params: dict[str, Any], repairs: list[str]) -> ParsedArguments:
    """Return an accepted outcome, logging any repair that was needed."""
    repair = "+".join(repairs) or None
    if repair is not None:
        logger.info("arguments for tool %r repaired by %s", tool.name, repair)
    value = ValidatedArguments._of(
        params, schema_sha256=tool_schema_sha256(tool), repairs=repairs
    )
    return ParsedArguments(ok=True, params=params, repair=repair, value=value)


def _failure(
    tool: Tool, detail: str, *, error_type: str = "invalid_arguments"
) -> ParsedArguments:
    """Return a refused outcome whose message says what to do next (RT-09)."""
    message = (
        f"Invalid arguments for tool {tool.name!r}: {detail}. "
        f"Expected parameters: {_describe_parameters(tool.parameters)}. "
        f"Correct the arguments and call {tool.name} again."
    )
    return ParsedArguments(ok=False, params=None, error=message, error_type=error_type)


def _screen(value: Any) -> None:
    """Raise :class:`_Refused` when a key or string holds a refused control character or a lone surrogate.

    Text arguments were screened character by character already; this catches the
    objects some providers send decoded. Implements SEC-01.
    """
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            fault = _VALUE_FAULT.search(item)
            if fault is not None:
                code = ord(fault.group())
                name = (
                    "a key"
                    if where.endswith("#key")
                    else f"field {where or '(root)'!r}"
                )
                if code < 0x20:
                    # A decoded object: the value holds it, whatever the text was.
                    problem = _control_problem(0, code, escaped=True)
                    raise _ValueRefused(
                        f"{name}: {problem.what.split(', written')[0]}; {problem.fix}"
                    )
                problem = _surrogate_problem(0, code, escaped=False)
                raise _Refused(f"{name} holds {problem.what}; {problem.fix}")
        elif isinstance(item, dict):
            for key, child in item.items():
                path = f"{where}/{key}" if where else str(key)
                stack.append((key, f"{path}#key"))
                stack.append((child, path))
        elif isinstance(item, list):
            stack.extend(
                (child, f"{where}/{index}" if where else str(index))
                for index, child in enumerate(item)
            )
        elif isinstance(item, float) and not math.isfinite(item):
            raise _Refused(
                f"field {where or '(root)'!r} holds a non-finite number, which JSON "
                "does not have; send a finite number"
            )


def _decode_nested(
    value: dict[str, Any], schema: dict[str, Any]
) -> dict[str, Any] | None:
    """Decode top-level string fields once where the schema wants only an array/object.

    Returns the new dict, or ``None`` when nothing qualified. Genuine string fields
    are never touched; a field whose text has a fault is left as it is.
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
        decoded = _Attempt().loads(_Text(item, ()))
        if (isinstance(decoded, list) and "array" in kinds) or (
            isinstance(decoded, dict) and "object" in kinds
        ):
            result[key] = decoded
            changed = True
    return result if changed else None


# --- the text rungs -------------------------------------------------------------


def _strip_code_fence(text: _Text, attempt: _Attempt) -> _Text | None:
    """Return the content of the one code fence in ``text``, or ``None``."""
    match = _FENCE.search(text.text)
    if match is None:
        return None
    if "```" in text.text[match.end() :] or "~~~" in text.text[match.end() :]:
        return None  # a second fence: which one was meant would be a guess
    start, end = match.span("body")
    body = match.group("body")
    start += len(body) - len(body.lstrip())
    end -= len(body) - len(body.rstrip())
    return text.slice(start, end) if end > start else None


def _leading_json_value(text: _Text, attempt: _Attempt) -> _Value | None:
    """Return the one JSON object in ``text`` when brace-free prose surrounds it, or ``None``."""
    start = text.text.find("{")
    if start < 0:
        return None
    rest = text.slice(start)
    try:
        value, end = _DECODER.raw_decode(rest.text)
    except (ValueError, RecursionError):
        problem = _screen_text(rest.text)
        if problem is not None:
            attempt.note(problem, rest, quotes='"')
        else:
            attempt.tried.append(rest.text)
        return None
    problem = _screen_text(rest.text[:end])
    if problem is not None:
        attempt.note(problem, rest, quotes='"')
        return None
    prose = text.text[:start] + rest.text[end:]
    if not isinstance(value, dict) or any(c in prose for c in "{}[]"):
        return None
    return _Value(value)


def _string_spans(text: str, quotes: str) -> Iterable[tuple[int, int]]:
    """Yield ``(start, end)`` of each string in ``text`` (quotes included; an unterminated one runs to the end)."""
    index, size = 0, len(text)
    while index < size:
        char = text[index]
        if char not in quotes:
            index += 1
            continue
        start = index
        index += 1
        while index < size and text[index] != char:
            index += 2 if text[index] == "\\" else 1
        index = min(index + 1, size)
        yield start, index


def _trailing_commas(text: _Text, attempt: _Attempt) -> _Text | None:
    """Return ``text`` without the commas that directly precede ``}`` or ``]`` outside strings."""
    source = text.text
    inside = bytearray(len(source))
    for start, end in _string_spans(source, "\"'"):
        inside[start:end] = b"\x01" * (end - start)
    drops: set[int] = set()
    for index, char in enumerate(source):
        if char != "," or inside[index]:
            continue
        after = index + 1
        while after < len(source) and source[after] in " \t\r\n":
            after += 1
        if after < len(source) and source[after] in "}]" and not inside[after]:
            drops.add(index)
    if not drops:
        return None
    kept = [i for i in range(len(source)) if i not in drops]
    return _Text("".join(source[i] for i in kept), [text.origin[i] for i in kept])


def _python_literals(text: _Text, attempt: _Attempt) -> _Value | None:
    """Decode ``text`` written with single-quoted strings and ``True``/``False``/``None``.

    Only the quoting and the three names are rewritten; the result must then be
    strict JSON, so an expression (``'a' + 'b'``), adjacent strings, tuples or
    Python-only numbers stay refused.
    """
    source = text.text
    problem = _screen_text(source, quotes="\"'")
    if problem is not None:
        attempt.note(problem, text)
        return None
    spans = list(_string_spans(source, "\"'"))
    out: list[str] = []
    changed = False
    position = 0
    for start, end in spans:
        changed |= _python_names(source[position:start], out)
        literal = source[start:end]
        if _escapes_slash(literal):
            return (
                None  # \/ means / in JSON but a backslash in Python: a guess either way
            )
        requoted = _requote(literal)
        changed |= requoted != literal
        out.append(requoted)
        position = end
    changed |= _python_names(source[position:], out)
    if not changed:
        return None
    value = attempt.loads(_Text("".join(out), ()))
    if value is _NOTHING or not isinstance(value, dict):
        return None
    return _Value(value)


def _python_names(segment: str, out: list[str]) -> bool:
    """Append ``segment`` (outside strings) with True/False/None as JSON; return whether it changed."""
    rewritten = _WORD.sub(lambda m: _PYTHON_NAMES.get(m.group(), m.group()), segment)
    out.append(rewritten)
    return rewritten != segment


def _escapes_slash(literal: str) -> bool:
    """Return whether quoted ``literal`` holds the escape ``\\/`` (not ``\\\\`` then ``/``)."""
    index = 1
    while index < len(literal) - 1:
        if literal[index] == "\\":
            if literal[index + 1] == "/":
                return True
            index += 2
            continue
        index += 1
    return False


def _requote(literal: str) -> str:
    """Return a quoted string literal (either quote) as a JSON one, escapes kept, ``\\'`` as ``'``."""
    quote = literal[0]
    closed = len(literal) > 1 and literal.endswith(quote) and not _escaped_end(literal)
    body = literal[1:-1] if closed else literal[1:]
    parts: list[str] = []
    index = 0
    while index < len(body):
        char = body[index]
        if char == "\\" and index + 1 < len(body):
            following = body[index + 1]
            parts.append("'" if following == "'" else char + following)
            index += 2
            continue
        parts.append('\\"' if char == '"' else char)
        index += 1
    return '"' + "".join(parts) + ('"' if closed else "")


def _escaped_end(literal: str) -> bool:
    """Return whether the last quote of ``literal`` is escaped (an odd run of backslashes before it)."""
    run = len(literal) - 1 - len(literal[:-1].rstrip("\\"))
    return run % 2 == 1 and len(literal) > 2


_Rung = Callable[[_Text, _Attempt], _Text | _Value | None]
_RUNGS: Final[tuple[tuple[str, _Rung], ...]] = (
    ("strip_code_fence", _strip_code_fence),
    ("leading_json_value", _leading_json_value),
    ("trailing_commas", _trailing_commas),
    ("python_literals", _python_literals),
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
    # Imported here: jsonschema is a large import only a failed validation needs
    # (B6); the tool's compiled validator already holds the rest.
    from jsonschema.exceptions import relevance

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
    # jsonschema types these as "maybe unset"; a reported error always has them.
    value: Any = error.validator_value
    schema: Any = error.schema
    if kind == "required" and isinstance(instance, dict):
        missing = [r for r in value if r not in instance]
        names = ", ".join(repr(m) for m in missing)
        prefix = "" if where == "(root)" else f" in {where!r}"
        return f"missing required field {names}{prefix}"
    if kind == "additionalProperties" and isinstance(instance, dict):
        allowed = list((schema.get("properties") or {}).keys())
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
        options = ", ".join(_short(v, 30) for v in value)
        return f"field {where!r} expected one of {options}, got {_short(instance)}"
    message = error.message
    if len(message) > 200:
        message = message[:199] + "…"
    return f"field {where!r}: {message}"
