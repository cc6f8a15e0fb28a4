"""One answer to "can this JSON value be stored and sent back out?", for every entry point.

Untrusted JSON reaches Countersign through AG-UI (``RunAgentInput``), the REST API,
the admin's decision form and WebSocket frames. Each of them parses it with
:func:`parse_json` and checks it with :func:`json_problem`, so that the same input
gets the same answer everywhere:

- **NUL** (``\\u0000``): PostgreSQL stores it in neither ``text`` nor ``jsonb``.
- **Lone surrogates** (``"\\ud800"`` escapes without their pair): not Unicode, so
  neither UTF-8 (the database, the JSON renderer) nor any client can carry them.
- **Non-finite numbers** (``NaN``, ``Infinity``, ``1e999``): not JSON; Python would
  turn them into ``nan``/``inf`` that no JSON document can carry back out.
- **Nesting deeper than** :data:`MAX_JSON_DEPTH`: every walk over the value (the
  models' validation, the serializers, ``jsonb``) recurses, and a deep enough value
  exhausts the stack. Parsing refuses it before anything walks it.

Input carrying any of these is refused (HTTP 400 naming the field, WebSocket error
frame); model or tool output is repaired by :func:`storable` instead (NUL and lone
surrogates become U+FFFD, non-finite numbers ``null``; logged), so a worker never
fails on it. Implements SEC-06 and DC-05.
"""

from __future__ import annotations

import json
import logging
import math
import re
from typing import Any, Final, NamedTuple

logger = logging.getLogger(__name__)

#: Thread and run ids: URL-safe, as they appear in URLs of the UI and the APIs.
PUBLIC_ID: Final = re.compile(r"^[A-Za-z0-9._~:@+-]{1,200}$")
#: Longest message or tool-call id stored.
MAX_ID_LENGTH: Final = 200
#: Deepest nesting of arrays and objects accepted in any input (the document itself
#: is level 1). Generous for state and arguments, far below the stack's limit.
MAX_JSON_DEPTH: Final = 100

REPLACEMENT: Final = "\ufffd"


class Problem(NamedTuple):
    """Why a value cannot be stored: the JSON path (``a.b.0``) and a sentence."""

    field: str
    detail: str


class JSONInputError(ValueError):
    """A request body that is not JSON Countersign accepts (see :func:`parse_json`).

    ``field`` is the JSON path of the refused value, or ``None`` when the body as a
    whole is not JSON (a syntax error, not UTF-8, nested too deep to parse).
    """

    def __init__(self, detail: str, *, field: str | None = None) -> None:
        super().__init__(detail)
        self.field = field


def _has_lone_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _text_problem(text: str, where: str) -> Problem | None:
    if "\x00" in text:
        return Problem(
            where,
            f"{where} contains the NUL character, which cannot be stored; remove it",
        )
    if _has_lone_surrogate(text):
        return Problem(
            where,
            f"{where} contains a lone UTF-16 surrogate (an unpaired \\ud800-\\udfff "
            "escape), which is not Unicode text; send valid UTF-8",
        )
    return None


def _join(path: str, key: object) -> str:
    return f"{path}.{key}" if path else str(key)


def json_problem(
    value: Any, *, path: str = "", max_depth: int = MAX_JSON_DEPTH
) -> Problem | None:
    """Return the first reason ``value`` cannot be stored, or ``None`` if it can.

    ``value`` is parsed JSON (dicts, lists, strings, numbers, booleans, ``None``);
    ``path`` prefixes the reported field (``"content"`` → ``"content.0.text"``); the
    whole value at the top level is reported as ``path`` or ``"$"``. Checks strings
    and keys for NUL and lone surrogates, numbers for ``NaN``/``Infinity``, and the
    nesting depth against ``max_depth``. Walks iteratively (no recursion), so any
    depth is safe to check. Raises nothing.
    """
    stack: list[tuple[Any, str, int]] = [(value, path, 1)]
    while stack:
        item, where, depth = stack.pop()
        if isinstance(item, str):
            problem = _text_problem(item, where or "$")
            if problem is not None:
                return problem
        elif isinstance(item, float):
            if not math.isfinite(item):
                return Problem(
                    where or "$",
                    f"{where or '$'} is {item!r}, which is not a JSON number; send a "
                    "finite number",
                )
        elif isinstance(item, dict | list):
            if depth > max_depth:
                return Problem(
                    where or "$",
                    f"{where or '$'} nests arrays and objects more than {max_depth} "
                    "levels deep; flatten it",
                )
            if isinstance(item, dict):
                children = []
                for key, child in item.items():
                    child_where = _join(where, key)
                    problem = _text_problem(str(key), child_where)
                    if problem is not None:
                        return problem
                    children.append((child, child_where, depth + 1))
            else:
                children = [
                    (child, _join(where, index), depth + 1)
                    for index, child in enumerate(item)
                ]
            # Reversed, so that the first problem in document order is found first.
            stack.extend(reversed(children))
    return None


def find_nul(value: Any, path: str = "") -> str | None:
    """Return the JSON path of the first string (or key) ``json_problem`` refuses, or ``None``.

    Kept for callers of the NUL-only check; it now reports every problem that
    :func:`json_problem` finds.
    """
    problem = json_problem(value, path=path)
    return None if problem is None else problem.field


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name!r} is not valid JSON; send a finite number")


def _finite_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"number {text!r} is too large for a JSON number")
    return number


def parse_json(raw: bytes | str, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Parse a request body as strict JSON and check it with :func:`json_problem`.

    ``raw`` is UTF-8 bytes (or text). Refuses ``NaN``, ``Infinity`` and numbers that
    overflow a float, nesting deeper than ``max_depth``, NUL and lone surrogates.
    Raises :class:`JSONInputError` with a sentence (prefixed by the field for a
    value problem); never ``RecursionError``.
    """
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes | bytearray) else raw
        value = json.loads(
            text, parse_constant=_refuse_constant, parse_float=_finite_float
        )
    except UnicodeDecodeError as error:
        raise JSONInputError(f"the body is not UTF-8: {error}") from error
    except RecursionError as error:
        raise JSONInputError(
            f"the body nests arrays and objects more than {max_depth} levels deep"
        ) from error
    except ValueError as error:
        raise JSONInputError(f"the body is not JSON: {error}") from error
    problem = json_problem(value, max_depth=max_depth)
    if problem is not None:
        raise JSONInputError(problem.detail, field=problem.field)
    return value


def _repair_text(text: str) -> str:
    text = text.replace("\x00", REPLACEMENT)
    if _has_lone_surrogate(text):
        # A pair split over two escapes is joined; a lone half becomes U+FFFD.
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def _repair(value: Any) -> Any:
    if isinstance(value, str):
        return _repair_text(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {_repair_text(str(k)): _repair(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_repair(item) for item in value]
    return value


def replace_nul(value: Any) -> Any:
    """Return ``value`` with NUL and lone surrogates replaced by U+FFFD, non-finite numbers by ``None``."""
    return _repair(value)


def storable(value: Any, *, what: str) -> Any:
    """Return ``value`` safe to store: unchanged, or repaired (and logged).

    For output Countersign did not choose (model text, tool results): NUL and lone
    surrogates become U+FFFD, ``NaN``/``Infinity`` become ``null``. Nesting depth is
    not repaired (the producers are Countersign's own code and the providers' SDKs).
    """
    problem = json_problem(value, max_depth=10_000)
    if problem is None:
        return value
    logger.warning(
        "%s could not be stored as sent (%s); stored with U+FFFD/null instead",
        what,
        problem.detail,
    )
    return _repair(value)
