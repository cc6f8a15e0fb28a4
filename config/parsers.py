"""The REST API's JSON parser: strict JSON, finite numbers only.

Python's ``json`` turns ``1e999`` into ``inf``, which no JSON document can carry
back out (the renderer refuses it, a JSON column stores ``Infinity``). Such a
number is refused as a parse error (HTTP 400), like ``NaN`` already is.
"""

from __future__ import annotations

import codecs
import json
import math
from typing import Any

from rest_framework.exceptions import ParseError

# get_encoding is public in DRF but missing from djangorestframework-stubs.
from rest_framework.parsers import JSONParser, get_encoding  # type: ignore[attr-defined]


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text!r} is too large for a JSON number")
    return value


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name!r} is not valid JSON")


class StrictJSONParser(JSONParser):
    """Parse a JSON body, refusing ``NaN``, ``Infinity`` and numbers that overflow."""

    def parse(
        self, stream: Any, media_type: str | None = None, parser_context: Any = None
    ) -> Any:
        encoding = get_encoding(parser_context or {})
        try:
            decoded = codecs.getreader(encoding)(stream)
            return json.load(
                decoded, parse_constant=_refuse_constant, parse_float=_finite_float
            )
        except (ValueError, RecursionError) as error:
            raise ParseError(f"JSON parse error - {error}") from error
