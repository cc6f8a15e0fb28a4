"""The Celery app. Workers: ``celery -A config worker -Q runs,tools``."""

from __future__ import annotations

import os

from celery import Celery
from celery.signals import worker_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
# Celery's Django fixup runs every system check at worker start and discards the
# result (an error does not stop the worker), importing the URL conf and the views
# behind it (a sixth of the worker's start, bench B6). The checks that must stop a
# worker run in _check_configuration below, raising (as config/asgi.py does for the
# web); ``manage.py check`` and ``manage.py migrate`` still run the whole set. An
# empty CELERY_SKIP_CHECKS in the environment restores Celery's run.
os.environ.setdefault("CELERY_SKIP_CHECKS", "1")

app = Celery("countersign")
# The default app of every thread, even when a shared_task was touched before this
# module was imported (config/__init__ no longer imports it at settings time, so a
# task proxy evaluated first would have made Celery's own default, amqp://localhost,
# the app of every thread but the importing one).
app.set_default()
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_init.connect(dispatch_uid="countersign.check_configuration")
def _check_configuration(**kwargs: object) -> None:
    """Refuse to start a worker with a misconfigured Countersign (system checks)."""
    # Deferred: config.celery is imported by config/__init__ before Django's apps
    # are ready; the checks import models.
    from threads.checks import raise_on_configuration_errors

    raise_on_configuration_errors()


@worker_init.connect(dispatch_uid="countersign.metrics_server")
def _metrics_server(**kwargs: object) -> None:
    """Serve this worker's metrics (its pool's children included) when asked to.

    ``COUNTERSIGN_WORKER_METRICS_PORT`` set: ``GET /metrics`` on that port, behind
    ``COUNTERSIGN_METRICS_TOKEN``, from ``PROMETHEUS_MULTIPROC_DIR`` (core.metrics).
    """
    port = os.environ.get("COUNTERSIGN_WORKER_METRICS_PORT")
    if not port:
        return
    from core.conf import countersign_settings
    from core.metrics import metrics_server_start

    metrics_server_start(port=int(port), token=str(countersign_settings.METRICS_TOKEN))


@worker_init.connect(dispatch_uid="countersign.tracing")
def _tracing(**kwargs: object) -> None:
    """Turn traces on when OTEL_* asks (core.tracing); prefork children inherit it."""
    from core.tracing import tracing_configure

    tracing_configure()
