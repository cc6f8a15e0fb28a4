"""URLs of the REST API, mounted at ``/api/``; the schema and its docs page too.

Public ids are used in paths: AG-UI's ``threadId``, ``runId`` and ``toolCallId``;
approvals use their numeric id. Implements DC-05.
"""

from __future__ import annotations

from django.urls import path, re_path, register_converter
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from web.api import approvals as approvals_api
from web.api import external as external_api
from web.api import threads as threads_api


class PkConverter:
    """A positive database id of at most 18 digits (larger ones answer 404, not 500)."""

    regex = "[0-9]{1,18}"

    def to_python(self, value: str) -> int:
        return int(value)

    def to_url(self, value: int) -> str:
        return str(value)


register_converter(PkConverter, "pk")

urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path(
        "docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"
    ),
    path("threads/", threads_api.ThreadListCreateApi.as_view(), name="api-threads"),
    path(
        "threads/<str:thread_id>/",
        threads_api.ThreadDetailApi.as_view(),
        name="api-thread",
    ),
    path(
        "threads/<str:thread_id>/archive/",
        threads_api.ThreadArchiveApi.as_view(),
        name="api-thread-archive",
    ),
    path(
        "threads/<str:thread_id>/cancel-pending/",
        threads_api.ThreadCancelPendingApi.as_view(),
        name="api-thread-cancel-pending",
    ),
    path(
        "threads/<str:thread_id>/messages/",
        threads_api.ThreadMessagesApi.as_view(),
        name="api-thread-messages",
    ),
    path(
        "threads/<str:thread_id>/events/",
        threads_api.ThreadEventsApi.as_view(),
        name="api-thread-events",
    ),
    path(
        "threads/<str:thread_id>/runs/",
        threads_api.ThreadRunsApi.as_view(),
        name="api-thread-runs",
    ),
    path("runs/<str:run_id>/", threads_api.RunDetailApi.as_view(), name="api-run"),
    path(
        "runs/<str:run_id>/cancel/",
        threads_api.RunCancelApi.as_view(),
        name="api-run-cancel",
    ),
    path("tool-calls/", threads_api.ToolCallListApi.as_view(), name="api-tool-calls"),
    path(
        "tool-calls/<str:tool_call_id>/",
        threads_api.ToolCallDetailApi.as_view(),
        name="api-tool-call",
    ),
    path("approvals/", approvals_api.ApprovalListApi.as_view(), name="api-approvals"),
    path(
        "approvals/decisions.csv",
        approvals_api.ApprovalDecisionsCsvApi.as_view(),
        name="api-approval-decisions-csv",
    ),
    path(
        "approvals/<pk:pk>/",
        approvals_api.ApprovalDetailApi.as_view(),
        name="api-approval",
    ),
    path(
        "approvals/<pk:pk>/approve/",
        approvals_api.ApprovalApproveApi.as_view(),
        name="api-approval-approve",
    ),
    path(
        "approvals/<pk:pk>/reject/",
        approvals_api.ApprovalRejectApi.as_view(),
        name="api-approval-reject",
    ),
    path(
        "approvals/<pk:pk>/respond/",
        approvals_api.ApprovalRespondApi.as_view(),
        name="api-approval-respond",
    ),
    path(
        "approvals/<pk:pk>/snooze/",
        approvals_api.ApprovalSnoozeApi.as_view(),
        name="api-approval-snooze",
    ),
    path(
        "approvals/<pk:pk>/undo/",
        approvals_api.ApprovalUndoApi.as_view(),
        name="api-approval-undo",
    ),
    path(
        "approvals/<pk:pk>/resolve/",
        approvals_api.ApprovalResolveApi.as_view(),
        name="api-approval-resolve",
    ),
    path(
        "approvals/<pk:pk>/claim/",
        approvals_api.ApprovalClaimApi.as_view(),
        name="api-approval-claim",
    ),
    path(
        "approvals/<pk:pk>/release/",
        approvals_api.ApprovalReleaseApi.as_view(),
        name="api-approval-release",
    ),
    path("grants/", approvals_api.GrantListApi.as_view(), name="api-grants"),
    path("grants/<pk:pk>/", approvals_api.GrantDetailApi.as_view(), name="api-grant"),
    path(
        "grants/<pk:pk>/revoke/",
        approvals_api.GrantRevokeApi.as_view(),
        name="api-grant-revoke",
    ),
    path(
        "external/tool-calls/",
        external_api.ExternalCallDeclareApi.as_view(),
        name="api-external-calls",
    ),
    path(
        "external/tool-calls/<str:tool_call_id>/",
        external_api.external_call_detail,
        name="api-external-call",
    ),
    path(
        "external/tool-calls/<str:tool_call_id>/events/",
        external_api.external_call_events,
        name="api-external-call-events",
    ),
    path(
        "external/tool-calls/<str:tool_call_id>/claim/",
        external_api.ExternalCallClaimApi.as_view(),
        name="api-external-call-claim",
    ),
    path(
        "external/tool-calls/<str:tool_call_id>/outcome/",
        external_api.ExternalCallOutcomeApi.as_view(),
        name="api-external-call-outcome",
    ),
    path("tools/", threads_api.ToolListApi.as_view(), name="api-tools"),
    path("agents/", threads_api.AgentListApi.as_view(), name="api-agents"),
    # (?s): a path holding a newline (an id with one) is an unknown endpoint too,
    # answered with the JSON 404, not Django's HTML page.
    re_path(r"^(?P<path>(?s:.*))\Z", threads_api.api_not_found),
]
