"""OpenAPI schema generation for the REST API (drf-spectacular).

Views nest their ``InputSerializer`` / ``OutputSerializer`` (STYLE.md 3), so
component names come from the qualified name: ``ApprovalRejectApi.InputSerializer``
becomes ``ApprovalRejectInput``.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema


class ApiAutoSchema(AutoSchema):
    """Name nested serializers after the view that holds them."""

    def get_serializer_name(self, serializer: Any, direction: Any) -> str:
        qualname = type(serializer).__qualname__
        if "." not in qualname:
            return super().get_serializer_name(serializer, direction)
        outer, inner = qualname.rsplit(".", 1)
        outer = outer.replace(".", "").removesuffix("Api")
        return outer + inner.removesuffix("Serializer")
