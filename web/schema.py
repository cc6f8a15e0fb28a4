"""OpenAPI schema generation for the REST API (drf-spectacular).

Views nest their ``InputSerializer`` / ``OutputSerializer`` (STYLE.md 3), so
component names come from the qualified name: ``ApprovalRejectApi.InputSerializer``
becomes ``ApprovalRejectInput``.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema

import web.authentication  # noqa: F401 - registers the bearer security scheme


class ApiAutoSchema(AutoSchema):
    """Name nested serializers after the view that holds them; strict bodies are closed.

    A request body read by a :class:`web.serializers.threads.StrictInputMixin`
    serializer refuses undeclared fields, so its schema says
    ``additionalProperties: false``; request strings say they hold no NUL.
    """

    def get_serializer_name(self, serializer: Any, direction: Any) -> str:
        qualname = type(serializer).__qualname__
        if "." not in qualname:
            return super().get_serializer_name(serializer, direction)
        outer, inner = qualname.rsplit(".", 1)
        outer = outer.replace(".", "").removesuffix("Api")
        return outer + inner.removesuffix("Serializer")

    def _map_basic_serializer(self, serializer: Any, direction: Any) -> Any:
        # Deferred: this module is named in settings (REST_FRAMEWORK's
        # DEFAULT_SCHEMA_CLASS) and may load before the app registry is ready;
        # serializers import models.
        from web.serializers.threads import StrictInputMixin

        result = super()._map_basic_serializer(serializer, direction)
        if direction == "request":
            _refuse_nul(result)
            if isinstance(serializer, StrictInputMixin):
                result["additionalProperties"] = False
        return result


#: Request strings hold no NUL (threads.validation refuses it on every entry point).
NO_NUL_PATTERN = r"^[^\u0000]*$"


def _refuse_nul(schema: Any) -> None:
    """Add :data:`NO_NUL_PATTERN` to every free-text string schema inside ``schema``."""
    if isinstance(schema, dict):
        if schema.get("type") == "string" and not (
            {"pattern", "enum", "format"} & schema.keys()
        ):
            schema["pattern"] = NO_NUL_PATTERN
        for value in schema.values():
            _refuse_nul(value)
    elif isinstance(schema, list):
        for item in schema:
            _refuse_nul(item)
