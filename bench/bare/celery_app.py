"""A bare Celery app with one no-op task (B6 baseline): ``celery -A bench.bare.celery_app``."""

from __future__ import annotations

import os
import time

import redis
from celery import Celery

app = Celery("bare", broker=os.environ["REDIS_URL"])
app.conf.update(
    task_ignore_result=True, worker_prefetch_multiplier=1, task_default_queue="bare"
)


@app.task(name="bare.noop")
def noop(*, key: str) -> None:
    redis.Redis.from_url(os.environ["REDIS_URL"]).rpush(key, time.time())
