"""/healthz, the JSON log format with run context, and the janitor's decisions (in-process)."""

from __future__ import annotations

import json
import logging
from datetime import timedelta

import pytest
from django.utils import timezone

from core.logging import ContextFilter, JsonFormatter, log_context
from threads.models import Event, Run
from threads.services import thread_create


def _closed_port_url() -> str:
    from tests.helpers.prod import free_port

    return f"redis://127.0.0.1:{free_port()}/0"


@pytest.mark.django_db
def test_healthz_ok_without_redis_configured(client, settings):
    """Embedded mode: database ok, Redis 'not configured', 200."""
    settings.REDIS_URL = ""

    response = client.get("/healthz")

    assert response.status_code == 200
    assert response.json() == {
        "status": "ok",
        "database": "ok",
        "redis": "not configured",
    }


@pytest.mark.django_db
def test_healthz_503_names_unreachable_redis(client, settings):
    """Redis configured but down: 503, the failed dependency named, no URL leaked."""
    settings.REDIS_URL = _closed_port_url()

    response = client.get("/healthz")

    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "error"
    assert body["database"] == "ok"
    assert body["failed"] == ["redis"]
    assert body["redis"].startswith("error: ")
    assert "127.0.0.1" not in json.dumps(body)


@pytest.mark.django_db
def test_healthz_ok_with_redis(client, settings, redis_url):
    settings.REDIS_URL = redis_url

    response = client.get("/healthz")

    assert response.status_code == 200
    assert response.json() == {"status": "ok", "database": "ok", "redis": "ok"}


def test_json_log_lines_carry_run_thread_and_call():
    """Every line is one JSON object; the context is added inside log_context only."""
    records: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(self.format(record))

    handler = Collect()
    handler.setFormatter(JsonFormatter())
    handler.addFilter(ContextFilter())
    log = logging.getLogger("tests.prod.json")
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        with log_context(run="r-1", thread="t-1"), log_context(toolCallId="c-1"):
            log.info("inside %s", "call", extra={"attempt": 2})
        log.info("outside")
        try:
            raise ValueError("boom")
        except ValueError:
            log.exception("failed")
    finally:
        log.removeHandler(handler)

    inside, outside, failed = (json.loads(r) for r in records)
    assert inside["message"] == "inside call"
    assert inside["attempt"] == 2
    assert (inside["run"], inside["thread"], inside["toolCallId"]) == (
        "r-1",
        "t-1",
        "c-1",
    )
    assert inside["level"] == "INFO"
    assert inside["logger"] == "tests.prod.json"
    assert "run" not in outside
    assert "thread" not in outside
    assert "ValueError: boom" in failed["exc"]


def _stale_running_run(user, *, seconds: int = 600) -> Run:
    thread = thread_create(owner=user, title="stale")
    run = Run.objects.create(thread=thread, status=Run.Status.RUNNING)
    Run.objects.filter(pk=run.pk).update(
        started_at=timezone.now() - timedelta(seconds=seconds)
    )
    Event.objects.create(
        thread=thread,
        run=run,
        seq=1,
        type="RUN_STARTED",
        payload={
            "type": "RUN_STARTED",
            "threadId": thread.thread_id,
            "runId": run.run_id,
        },
    )
    Event.objects.filter(run=run).update(
        created_at=timezone.now() - timedelta(seconds=seconds)
    )
    thread.next_seq = 2
    thread.save(update_fields=["next_seq"])
    return run


@pytest.mark.django_db
def test_janitor_ends_stale_run_without_heartbeat(user, settings):
    """No heartbeat, no event for the window: RUN_ERROR worker_lost, run in error."""
    from orchestration.janitor import runs_reap

    settings.REDIS_URL = ""
    run = _stale_running_run(user)
    fresh = _stale_running_run(user, seconds=1)

    done = runs_reap(stale_seconds=60)

    assert done == {
        "worker_lost": 1,
        "dispatched": 0,
        "runs_requeued": 0,
        "executions_requeued": 0,
        "leases_expired": 0,
    }
    run.refresh_from_db()
    fresh.refresh_from_db()
    assert (run.status, run.error_code) == (Run.Status.ERROR, "worker_lost")
    assert fresh.status == Run.Status.RUNNING
    assert list(run.events.order_by("seq").values_list("type", flat=True)) == [
        "RUN_STARTED",
        "RUN_ERROR",
    ]


@pytest.mark.django_db
def test_janitor_spares_quiet_run_with_live_heartbeat(user, settings, redis_url):
    """A live heartbeat (a slow tool on a live worker) keeps a quiet run alive."""
    from orchestration.janitor import runs_reap
    from orchestration.supervision import run_heartbeat

    settings.REDIS_URL = redis_url
    run = _stale_running_run(user)

    with run_heartbeat(run_pk=run.pk):
        assert runs_reap(stale_seconds=60) == {
            "worker_lost": 0,
            "dispatched": 0,
            "runs_requeued": 0,
            "executions_requeued": 0,
            "leases_expired": 0,
        }
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING

    assert runs_reap(stale_seconds=60)["worker_lost"] == 1
