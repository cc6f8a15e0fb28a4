"""WebSocket routes; an unknown path is closed with code 4404 (web.consumers)."""

from __future__ import annotations

from django.urls import path, re_path

from web.consumers import ApprovalsConsumer, NotFoundConsumer, ThreadEventsConsumer

websocket_urlpatterns = [
    path("ws/threads/<str:thread_id>/", ThreadEventsConsumer.as_asgi()),
    path("ws/approvals/", ApprovalsConsumer.as_asgi()),
    # Any other path: closed with 4404 after the handshake, not an ASGI error.
    re_path(r"(?s:.*)", NotFoundConsumer.as_asgi()),
]
