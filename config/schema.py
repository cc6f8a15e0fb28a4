"""OpenAPI schema generation for the REST API (drf-spectacular).

Views nest their ``InputSerializer`` / ``OutputSerializer`` (STYLE.md 3), so
component names come from the qualified name: ``ApprovalRejectApi.InputSerializer``
becomes ``ApprovalRejectInput``.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema


class ApiAutoSchema(AutoSchema):
    """Name nested serializers after the view that holds them; strict bodies are closed.

    A request body read by a :class:`threads.serializers.StrictInputMixin`
    serializer refuses undeclared fields, so its schema says
    ``additionalProperties: false``.
    """

    def _map_basic_serializer(self, serializer: Any, direction: Any) -> Any:
        from threads.serializers import StrictInputMixin

        result = super()._map_basic_serializer(serializer, direction)
        if direction == "request" and isinstance(serializer, StrictInputMixin):
            result["additionalProperties"] = False
        return result

    def get_serializer_name(self, serializer: Any, direction: Any) -> str:
        qualname = type(serializer).__qualname__
        if "." not in qualname:
            return super().get_serializer_name(serializer, direction)
        outer, inner = qualname.rsplit(".", 1)
        outer = outer.replace(".", "").removesuffix("Api")
        return outer + inner.removesuffix("Serializer")
