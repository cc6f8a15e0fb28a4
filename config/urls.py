"""URL configuration."""

from __future__ import annotations

from django.contrib import admin
from django.urls import path

from threads import agui

urlpatterns = [
    path("admin/", admin.site.urls),
    path("agui/threads/<str:thread_id>/events", agui.agui_thread_events, name="agui-thread-events"),
    path("agui/<str:agent>/", agui.agui_run, name="agui-run"),
]
