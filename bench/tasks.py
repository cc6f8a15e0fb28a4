"""B2/B6 baseline tasks: a no-op whose start time is pushed to a Redis list."""

from __future__ import annotations

import time

from celery import shared_task


@shared_task(name="bench.tasks.noop", ignore_result=True)
def noop(*, sent: float, key: str) -> None:
    """Push (start - sent) seconds to the Redis list ``key``."""
    import redis
    from django.conf import settings

    started = time.time()
    redis.Redis.from_url(settings.REDIS_URL).rpush(key, started - sent)
