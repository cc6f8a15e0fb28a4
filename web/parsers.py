"""The REST API's JSON parser: the strict JSON every entry point accepts.

Parsing and checking are :func:`threads.validation.parse_json`, shared with AG-UI,
the admin forms and WebSocket frames: ``NaN``, ``Infinity``, numbers that overflow
(``1e999``), NUL, lone surrogates and nesting deeper than
:data:`threads.validation.MAX_JSON_DEPTH` are refused as a parse error (HTTP 400): a
body that is not JSON as ``type: "parse_error"``, a value that cannot be stored as
``type: "validation_error"`` with ``fields`` naming its JSON path. Implements SEC-06.
"""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import ParseError, ValidationError

# get_encoding is public in DRF but missing from djangorestframework-stubs.
from rest_framework.parsers import JSONParser, get_encoding  # type: ignore[attr-defined]

from threads.validation import JSONInputError, parse_json


class StrictJSONParser(JSONParser):
    """Parse a JSON body with :func:`threads.validation.parse_json`."""

    def parse(
        self, stream: Any, media_type: str | None = None, parser_context: Any = None
    ) -> Any:
        encoding = get_encoding(parser_context or {})
        raw = stream.read() if stream is not None else b""
        try:
            text = raw.decode(encoding) if isinstance(raw, bytes) else raw
            return parse_json(text)
        except JSONInputError as error:
            if error.field is not None:
                # A value that parsed but cannot be stored: a validation error
                # naming its field, like the serializers' own.
                raise ValidationError({error.field: [str(error)]}) from error
            raise ParseError(f"JSON parse error - {error}") from error
        except (UnicodeDecodeError, LookupError) as error:
            raise ParseError(f"JSON parse error - {error}") from error
