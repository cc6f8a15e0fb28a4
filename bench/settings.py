"""Settings of the benchmark processes: production settings plus bench-only routes and tasks."""

from __future__ import annotations

from config.settings import *  # noqa: F403
from config.settings import CELERY_IMPORTS

ROOT_URLCONF = "bench.urls"
CELERY_IMPORTS: tuple[str, ...] = (*CELERY_IMPORTS, "bench.tasks")  # type: ignore[no-redef]
# The beat schedule stays as configured (threads.E032 checks it); no bench runs beat.
