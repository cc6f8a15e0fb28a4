"""URL configuration."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path, re_path

from web import agui, chat, health
from web.api.threads import api_not_found
from web.metrics import metrics_view
from web.ui import approvals as approval_views

# Outside DEBUG, errors Django answers itself are JSON for the API and AG-UI paths.
handler400 = "web.exception_handler.bad_request_view"
handler404 = "web.exception_handler.not_found_view"
handler500 = "web.exception_handler.server_error_view"

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", metrics_view, name="metrics"),
    path("admin/", admin.site.urls),
    path("api/", include("web.api.urls")),
    path("accounts/login/", approval_views.LoginView.as_view(), name="login"),
    path(
        "accounts/logout/",
        auth_views.LogoutView.as_view(next_page="login"),
        name="logout",
    ),
    path(
        "agui/threads/<str:thread_id>/events",
        agui.agui_thread_events,
        name="agui-thread-events",
    ),
    path(
        "agui/<str:agent>/capabilities",
        agui.agui_capabilities,
        name="agui-capabilities",
    ),
    path("agui/<str:agent>/", agui.agui_run, name="agui-run"),
    re_path(r"^agui/(?P<path>(?s:.*))\Z", api_not_found),
    path("approvals/", approval_views.approval_queue_page, name="ui-approvals"),
    path(
        "approvals/<int:pk>/context.json",
        approval_views.approval_context_json,
        name="ui-approval-context",
    ),
    path(
        "approvals/<int:pk>/preview.json",
        approval_views.approval_preview_json,
        name="ui-approval-preview",
    ),
    # The signed link every notification carries (approvals.notifications.links).
    path(
        "approvals/link/<str:token>/",
        approval_views.approval_link,
        name="approval-link",
    ),
    # Chat surfaces (docs/slack.md): Slack's interactivity Request URL, and the
    # page where a chat user links their account.
    path(
        "integrations/slack/interactions/",
        chat.slack_interactions,
        name="slack-interactions",
    ),
    path(
        "integrations/chat/link/<str:token>/",
        chat.chat_user_link_page,
        name="chat-user-link",
    ),
    path("", include("web.ui.urls")),
]
