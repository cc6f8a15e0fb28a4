"""The baselines' views, imported on their first request (``bench.urls``).

B2: a DRF view updating one row. B10: a bare paginated list of the pending requests
(Django's ``ListView``, 25 a page, one line each), what a queue page costs at least.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import QuerySet
from django.http import HttpResponse
from django.template import engines
from django.utils import timezone
from django.views.generic import ListView
from rest_framework.exceptions import NotAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from approvals.models import ApprovalRequest

_BARE_LIST = engines["django"].from_string(
    "<ol>{% for a in page_obj %}<li>{{ a.tool_name }} {{ a.thread.title }} "
    "{{ a.requested_by.username }} {{ a.expires_at|date:'c' }}</li>{% endfor %}</ol>"
    "<p>page {{ page_obj.number }} of {{ paginator.num_pages }}</p>"
)


class BarePendingList(ListView):
    """``GET /bench/pending/``: the pending requests, 25 a page, soonest expiry first."""

    paginate_by = 25

    def get_queryset(self) -> QuerySet[ApprovalRequest]:
        return (
            ApprovalRequest.objects.filter(status=ApprovalRequest.Status.PENDING)
            .select_related("thread", "requested_by")
            .order_by("expires_at", "id")
        )

    def get_template_names(self) -> list[str]:
        return []

    def render_to_response(
        self, context: dict[str, Any], **kwargs: Any
    ) -> HttpResponse:
        return HttpResponse(_BARE_LIST.render(context))


class TouchApi(APIView):
    """``POST /bench/touch/``: update one row (the caller's last_login) and answer 200."""

    def post(self, request: Request) -> Response:
        user_pk = request.user.pk
        if user_pk is None:
            raise NotAuthenticated
        get_user_model().objects.filter(pk=user_pk).update(last_login=timezone.now())
        return Response({"ok": True})
