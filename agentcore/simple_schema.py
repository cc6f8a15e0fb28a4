"""A fast acceptance check for the flat parameter schemas most tools declare.

:func:`quick_check` compiles a JSON Schema of the common flat shape — an object
root with ``properties`` whose schemas only name a ``type``, ``required`` names
and a boolean ``additionalProperties`` (annotations such as ``description``,
``title``, ``default`` and ``examples`` allowed) — into a plain Python predicate.
It is a shortcut, never the judge: the predicate returns ``True`` only for a value
the Draft 2020-12 validator accepts too, and ``False`` whenever it is not sure (an
``integer`` given as ``2.0``, a ``str`` subclass), so the caller then asks the
full validator. A schema of any other shape compiles to ``None``.

jsonschema's ``is_valid`` builds a validator per property it descends into; for a
two-field object that is most of a tool call's validation time (B3).

This module never imports Django.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

__all__ = ["quick_check"]

_ROOT_KEYS: Final = frozenset(
    {"type", "properties", "required", "additionalProperties", "description", "title"}
)
#: Keywords of a property schema that never constrain the value (2020-12 annotations).
_ANNOTATIONS: Final = frozenset({"description", "title", "default", "examples"})


def _is_integer(value: Any) -> bool:
    return type(value) is int


def _is_number(value: Any) -> bool:
    return type(value) is int or type(value) is float


_TYPE_CHECKS: Final[dict[str, Callable[[Any], bool]]] = {
    "string": lambda value: type(value) is str,
    "integer": _is_integer,
    "number": _is_number,
    "boolean": lambda value: type(value) is bool,
    "null": lambda value: value is None,
    "array": lambda value: type(value) is list,
    "object": lambda value: type(value) is dict,
}


def _property_check(schema: Any) -> Callable[[Any], bool] | None:
    """Return the check for one property schema, or ``None`` when it is not a bare type."""
    if schema is True or (isinstance(schema, Mapping) and not schema):
        return lambda value: True
    if not isinstance(schema, Mapping) or not set(schema) <= _ANNOTATIONS | {"type"}:
        return None
    wanted = schema.get("type")
    if wanted is None:
        return lambda value: True
    names = [wanted] if isinstance(wanted, str) else wanted
    if not isinstance(names, list) or not names:
        return None
    checks = []
    for name in names:
        check = _TYPE_CHECKS.get(name) if isinstance(name, str) else None
        if check is None:
            return None
        checks.append(check)
    if len(checks) == 1:
        return checks[0]
    return lambda value: any(check(value) for check in checks)


def quick_check(schema: Any) -> Callable[[dict[str, Any]], bool] | None:
    """Return a predicate accepting what ``schema`` surely accepts, or ``None`` for other shapes.

    ``schema`` is a tool's parameter schema (a JSON Schema dict with an object root).
    The predicate takes a decoded arguments ``dict``; ``True`` means the Draft
    2020-12 validator accepts it, ``False`` means "ask the validator". Raises
    nothing.
    """
    if not isinstance(schema, Mapping) or not set(schema) <= _ROOT_KEYS:
        return None
    if schema.get("type") != "object":
        return None
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    extra = schema.get("additionalProperties", True)
    if not isinstance(properties, Mapping) or not isinstance(required, list):
        return None
    if not all(isinstance(name, str) for name in required) or type(extra) is not bool:
        return None
    checks: dict[str, Callable[[Any], bool]] = {}
    for name, prop in properties.items():
        check = _property_check(prop)
        if not isinstance(name, str) or check is None:
            return None
        checks[name] = check
    needed = tuple(dict.fromkeys(required))

    def accepts(value: dict[str, Any]) -> bool:
        if type(value) is not dict:
            return False
        for name in needed:
            if name not in value:
                return False
        for key, item in value.items():
            check = checks.get(key)
            if check is None:
                if not extra:
                    return False
            elif not check(item):
                return False
        return True

    return accepts
