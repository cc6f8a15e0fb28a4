"""WebSocket routes."""

from __future__ import annotations

from django.urls import path

from threads.consumers import ApprovalsConsumer, ThreadEventsConsumer

websocket_urlpatterns = [
    path("ws/threads/<str:thread_id>/", ThreadEventsConsumer.as_asgi()),
    path("ws/approvals/", ApprovalsConsumer.as_asgi()),
]
