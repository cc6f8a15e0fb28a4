from __future__ import annotations

from django.db import connection
from django.http import JsonResponse
from django.urls import path


def healthz(request):
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"status": "ok"})


urlpatterns = [path("healthz", healthz)]
