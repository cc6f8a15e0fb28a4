"""URLs of the operator web UI (mounted at the site root by ``config.urls``)."""

from __future__ import annotations

from django.urls import path

from web.ui import threads as ui

urlpatterns = [
    path("", ui.thread_list, name="ui-thread-list"),
    path("threads.json", ui.thread_list_json, name="ui-thread-list-json"),
    path("threads/<str:thread_id>/", ui.thread_detail, name="ui-thread"),
    path(
        "threads/<str:thread_id>/state.json",
        ui.thread_state_json,
        name="ui-thread-state",
    ),
    path("attention.json", ui.attention_json, name="ui-attention"),
    path("favicon.ico", ui.favicon, name="favicon"),
]
