"""The Celery app. Workers: ``celery -A config worker -Q runs,tools``."""

from __future__ import annotations

import os

from celery import Celery
from celery.signals import worker_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("countersign")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_init.connect(dispatch_uid="countersign.check_configuration")
def _check_configuration(**kwargs: object) -> None:
    """Refuse to start a worker with a misconfigured Countersign (system checks)."""
    # Deferred: config.celery is imported by config/__init__ before Django's apps
    # are ready; the checks import models.
    from threads.checks import raise_on_configuration_errors

    raise_on_configuration_errors()
