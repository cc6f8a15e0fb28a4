"""URL configuration.

Views other than the probes are named by dotted path and imported on the first
request that reaches them (``web.lazy``): a web process answers ``/healthz`` before
it has imported DRF, the protocol models or the approval stack. A lazy entry
declares what Django reads before the first call (async, CSRF exemption); the first
call checks the declaration against the view.
"""

from __future__ import annotations

from django.contrib import admin
from django.urls import path, re_path

from web import health
from web.lazy import lazy_include, lazy_view

# Outside DEBUG, errors Django answers itself are JSON for the API and AG-UI paths.
handler400 = "web.exception_handler.bad_request_view"
handler404 = "web.exception_handler.not_found_view"
handler500 = "web.exception_handler.server_error_view"

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", lazy_view("web.metrics.metrics_view"), name="metrics"),
    path("admin/", admin.site.urls),
    lazy_include("api/", "web.api.urls"),
    path("accounts/login/", lazy_view("web.ui.approvals.LoginView"), name="login"),
    path(
        "accounts/logout/",
        lazy_view("django.contrib.auth.views.LogoutView", next_page="login"),
        name="logout",
    ),
    path(
        "agui/threads/<str:thread_id>/events",
        lazy_view("web.agui.agui_thread_events", is_async=True),
        name="agui-thread-events",
    ),
    path(
        "agui/<str:agent>/capabilities",
        lazy_view("web.agui.agui_capabilities", is_async=True),
        name="agui-capabilities",
    ),
    path(
        "agui/<str:agent>/",
        lazy_view("web.agui.agui_run", is_async=True, csrf_exempt=True),
        name="agui-run",
    ),
    re_path(
        r"^agui/(?P<path>(?s:.*))\Z",
        lazy_view("web.api.threads.api_not_found", csrf_exempt=True),
    ),
    path(
        "approvals/",
        lazy_view("web.ui.approvals.approval_queue_page"),
        name="ui-approvals",
    ),
    path(
        "approvals/<int:pk>/context.json",
        lazy_view("web.ui.approvals.approval_context_json"),
        name="ui-approval-context",
    ),
    path(
        "approvals/<int:pk>/preview.json",
        lazy_view("web.ui.approvals.approval_preview_json"),
        name="ui-approval-preview",
    ),
    # The signed link every notification carries (approvals.notifications.links).
    path(
        "approvals/link/<str:token>/",
        lazy_view("web.ui.approvals.approval_link"),
        name="approval-link",
    ),
    # Chat surfaces (docs/slack.md): Slack's interactivity Request URL, and the
    # page where a chat user links their account.
    path(
        "integrations/slack/interactions/",
        lazy_view("web.chat.slack_interactions", csrf_exempt=True),
        name="slack-interactions",
    ),
    path(
        "integrations/chat/link/<str:token>/",
        lazy_view("web.chat.chat_user_link_page"),
        name="chat-user-link",
    ),
    lazy_include("", "web.ui.urls"),
]
