"""The application's URLs plus B2's baseline view (a DRF view updating one row)."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.urls import path
from django.utils import timezone
from rest_framework.exceptions import NotAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from config.urls import urlpatterns as app_urlpatterns


class TouchApi(APIView):
    """``POST /bench/touch/``: update one row (the caller's last_login) and answer 200."""

    def post(self, request: Request) -> Response:
        user_pk = request.user.pk
        if user_pk is None:
            raise NotAuthenticated
        get_user_model().objects.filter(pk=user_pk).update(last_login=timezone.now())
        return Response({"ok": True})


urlpatterns = [path("bench/touch/", TouchApi.as_view()), *app_urlpatterns]
