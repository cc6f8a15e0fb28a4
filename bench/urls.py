"""The application's URLs plus the baselines' views (``bench.views``).

The baselines' views are lazy entries (``web.lazy``), like the application's: a
DRF view imported here would count in the web process's cold start (B6).
"""

from __future__ import annotations

from django.urls import path

from config.urls import urlpatterns as app_urlpatterns
from web.lazy import lazy_view

urlpatterns = [
    path("bench/touch/", lazy_view("bench.views.TouchApi", csrf_exempt=True)),
    path("bench/pending/", lazy_view("bench.views.BarePendingList")),
    *app_urlpatterns,
]
