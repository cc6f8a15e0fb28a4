"""ASGI routes outside Django's URL conf: WebSocket routes and the MCP gateway's paths.

An unknown WebSocket path is closed with code 4404 (web.consumers). The consumers'
module and the MCP gateway (the ``mcp`` SDK) are imported on their first
connection (``web.lazy``), not when the server starts.
"""

from __future__ import annotations

from django.urls import path, re_path

from web.lazy import lazy_asgi

# django-stubs types path()'s target as a view; Channels' URLRouter routes ASGI
# apps through the same function (as ``Consumer.as_asgi()``, untyped, always did).
websocket_urlpatterns = [
    path(
        "ws/threads/<str:thread_id>/",
        lazy_asgi("web.consumers.ThreadEventsConsumer"),  # type: ignore[arg-type]
    ),
    path(
        "ws/approvals/",
        lazy_asgi("web.consumers.ApprovalsConsumer"),  # type: ignore[arg-type]
    ),
    # Any other path: closed with 4404 after the handshake, not an ASGI error.
    re_path(
        r"(?s:.*)",
        lazy_asgi("web.consumers.NotFoundConsumer"),  # type: ignore[arg-type]
    ),
]

mcp_gateway_app = lazy_asgi("web.mcp_gateway.application")


def mcp_gateway_handles(path: str) -> bool:
    """Return whether ``path`` belongs to the MCP gateway (``config.asgi``'s router)."""
    return path.startswith(("/mcp/", "/.well-known/oauth-protected-resource/mcp/"))
