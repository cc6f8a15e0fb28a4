"""GET /metrics: protected, parsed as Prometheus text, values moving with a job, prefork workers included."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from approvals.models import ApprovalRequest, ToolExecution
from orchestration.pipeline import approval_decide
from tests.helpers.api import pending_refund_thread
from tests.helpers.executors import Executor, flush_broker, use_embedded, use_redis
from tests.helpers.prod import free_port
from threads.execution import wait_embedded
from threads.models import Event, ToolCall
from threads.services import message_post, thread_create
from web.metrics import QUEUES

TOKEN = "scrape-token-0123456789"


@pytest.fixture
def scraping(settings):
    settings.COUNTERSIGN = {**settings.COUNTERSIGN, "METRICS_TOKEN": TOKEN}


def _scrape(client) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Return every sample of GET /metrics as {(name, sorted labels): value}."""
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=")
    samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def _value(samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.mark.django_db
def test_metrics_are_off_without_a_token_and_refuse_wrong_credentials(client, settings):
    off = client.get("/metrics")
    assert off.status_code == 404
    assert "set COUNTERSIGN_METRICS_TOKEN" in off.json()["detail"]
    settings.COUNTERSIGN = {**settings.COUNTERSIGN, "METRICS_TOKEN": TOKEN}
    for header in ("", f"Token {TOKEN}", "Bearer wrong", "Bearer", f"Basic {TOKEN}"):
        extra = {"HTTP_AUTHORIZATION": header} if header else {}
        refused = client.get("/metrics", **extra)
        assert refused.status_code == 401, header
        assert refused["WWW-Authenticate"] == 'Bearer realm="metrics"'
        assert refused.json()["type"] == "not_authenticated"
        assert "version=" not in refused["Content-Type"]
    assert (
        client.post("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 405
    )


@pytest.mark.django_db(transaction=True)
def test_scrape_follows_a_refund_from_pending_to_executed(
    client, settings, scraping, user, nonstaff_approver
):
    """Pending by group and risk, the oldest's age, then latency, outcome and events move."""
    use_embedded(settings)
    before = _scrape(client)
    assert _value(before, "countersign_approval_oldest_pending_age_seconds") == 0.0

    pending_refund_thread(user, thread_id="t-metrics")
    approval = ApprovalRequest.objects.get()
    pending = _scrape(client)
    assert (
        _value(pending, "countersign_approvals_pending", group="", risk="medium") == 1
    )
    assert _value(pending, "countersign_approval_oldest_pending_age_seconds") > 0
    assert _value(pending, "countersign_events_appended_total") > _value(
        before, "countersign_events_appended_total"
    )

    approval_decide(
        approval=approval, decided_by=nonstaff_approver, decision="approve", reason="ok"
    )
    wait_embedded()
    after = _scrape(client)
    assert (
        "countersign_approvals_pending",
        (("group", ""), ("risk", "medium")),
    ) not in after
    assert _value(after, "countersign_approval_oldest_pending_age_seconds") == 0.0
    latency = "countersign_approval_decision_latency_seconds_count"
    assert _value(after, latency, decision="approved") == (
        _value(before, latency, decision="approved") + 1
    )
    executions = "countersign_tool_executions_total"
    assert _value(after, executions, outcome="succeeded") == (
        _value(before, executions, outcome="succeeded") + 1
    )


@pytest.mark.django_db(transaction=True)
def test_prefork_worker_counters_are_scraped_in_multiprocess_mode(
    client,
    settings,
    scraping,
    user,
    nonstaff_approver,
    redis_url,
    celery_worker_factory,
    tmp_path: Path,
    monkeypatch,
):
    """A prefork worker's children write to PROMETHEUS_MULTIPROC_DIR; the scrape adds them up."""
    folder = tmp_path / "prometheus"
    folder.mkdir()
    flush_broker(redis_url)
    use_redis(settings, redis_url)
    worker = celery_worker_factory()
    worker.pool = "prefork"
    port = free_port()
    worker.start(
        PROMETHEUS_MULTIPROC_DIR=str(folder),
        COUNTERSIGN_WORKER_METRICS_PORT=str(port),
        COUNTERSIGN_METRICS_TOKEN=TOKEN,
    )
    executor = Executor(mode="celery", worker=worker)
    here_before = REGISTRY.get_sample_value("countersign_events_appended_total") or 0
    try:
        thread = thread_create(owner=user, title="refund")
        message_post(thread=thread, content="refund order A-1001 25.00")
        executor.settle(thread)
        call = ToolCall.objects.get(thread=thread, name="refund_order")
        approval_decide(
            approval=ApprovalRequest.objects.get(tool_call=call),
            decided_by=nonstaff_approver,
            decision="approve",
        )
        executor.settle(thread)
        master = worker.process.pid
        # lookup_order (auto) and the approved refund_order, each run by a child.
        succeeded = ToolExecution.objects.filter(state="succeeded").count()
        assert succeeded == 2
        here = (
            REGISTRY.get_sample_value("countersign_events_appended_total") - here_before
        )
        logged = Event.objects.count()
        # The worker's own endpoint (its main process) serves its children's values.
        served = httpx.get(
            f"http://127.0.0.1:{port}/metrics",
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout=10,
        )
        assert served.status_code == 200
        from_worker = {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(served.text)
            for s in f.samples
        }
        refused = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10)
        assert (refused.status_code, refused.headers["WWW-Authenticate"]) == (
            401,
            'Bearer realm="metrics"',
        )
    finally:
        worker.stop()

    # The pool's children wrote there (this test process keeps its own values).
    pids = {int(path.stem.rsplit("_", 1)[1]) for path in folder.glob("*.db")}
    assert pids - {master}
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(folder))
    samples = _scrape(client)
    assert (
        _value(samples, "countersign_tool_executions_total", outcome="succeeded")
        == succeeded
    )
    # Every event the log holds was counted once: by a worker child or by this process.
    assert _value(samples, "countersign_events_appended_total") == logged - here > 0
    assert _value(from_worker, "countersign_events_appended_total") == logged - here
    assert (
        _value(from_worker, "countersign_tool_executions_total", outcome="succeeded")
        == succeeded
    )


@pytest.mark.django_db
def test_dashboard_queries_only_metrics_the_endpoint_exposes(client, scraping):
    """Every PromQL expression in the example Grafana dashboard names a family /metrics serves."""
    import json
    import re

    from core import metrics
    from web.metrics import ApprovalQueueCollector

    path = (
        Path(__file__).resolve().parents[2]
        / "deploy/grafana/countersign-dashboard.json"
    )
    dashboard = json.loads(path.read_text())
    families = {
        family.name
        for metric in (
            metrics.EVENTS_APPENDED,
            metrics.TOOL_EXECUTIONS,
            metrics.DECISION_LATENCY,
            metrics.JANITOR_RECOVERIES,
            metrics.NOTIFICATION_FAILURES,
            metrics.OPEN_STREAMS,
        )
        for family in metric.describe()
    } | {family.name for family in ApprovalQueueCollector().collect()}
    served = {
        f"{name}{suffix}"
        for name in families
        for suffix in ("", "_total", "_bucket", "_count", "_sum")
    }
    named = set()
    for panel in dashboard["panels"]:
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            named.update(re.findall(r"countersign_[a-z_]+", target["expr"]))
    assert len(dashboard["panels"]) == 8
    assert named <= served, named - served
    # Each family the dashboard needs is one the scrape shows once it has values.
    scraped = {
        f.name
        for f in text_string_to_metric_families(
            client.get(
                "/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}"
            ).content.decode()
        )
    }
    assert {"countersign_approvals_pending", "countersign_events_appended"} <= scraped


@pytest.mark.django_db
def test_queue_depth_counts_waiting_celery_messages_per_queue(
    client, settings, scraping, redis_url, monkeypatch
):
    """Messages sent to a queue no worker consumes show as its depth (autoscaling input)."""
    from config.celery import app

    flush_broker(redis_url)
    use_redis(settings, redis_url)
    # As config/settings.py reads CELERY_BROKER_PREFIX (set after it, for the tests).
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = app.conf.broker_transport_options
    with app.connection_for_write() as connection:
        for queue, count in (("tools", 3), ("runs", 1)):
            for _ in range(count):
                app.send_task(
                    "tests.never_consumed", queue=queue, connection=connection
                )
    samples = _scrape(client)
    depths = {q: _value(samples, "countersign_queue_depth", queue=q) for q in QUEUES}
    assert depths == {"runs": 1, "tools": 3, "countersign": 0}
    assert _value(samples, "countersign_queue_depth_up") == 1
    flush_broker(redis_url)

    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    down = _scrape(client)
    assert ("countersign_queue_depth_up", ()) in down
    assert _value(down, "countersign_queue_depth_up") == 0
    assert not any(name == "countersign_queue_depth" for name, _ in down)


@pytest.mark.django_db(transaction=True)
def test_janitor_recoveries_and_notification_failures_are_counted(
    client, settings, scraping, user
):
    """A lost run the janitor requeues and a delivery to a dead webhook move their counters."""
    from datetime import timedelta

    from django.utils import timezone

    from orchestration.janitor import runs_reap
    from threads.models import Run

    use_embedded(settings)
    settings.COUNTERSIGN = {
        **settings.COUNTERSIGN,
        "NOTIFICATIONS": [
            {
                "name": "dead-hook",
                "kind": "webhook",
                "events": ["requested"],
                "url": f"http://127.0.0.1:{free_port()}/nobody-listens",
                "secret": "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            }
        ],
        "NOTIFY_MAX_ATTEMPTS": 1,
        "NOTIFY_TIMEOUT_SECONDS": 2.0,
    }
    before = _scrape(client)

    thread = thread_create(owner=user, title="lost")
    run = Run.objects.create(thread=thread, status=Run.Status.QUEUED)
    Run.objects.filter(pk=run.pk).update(
        created_at=timezone.now() - timedelta(minutes=5)
    )
    assert runs_reap()["runs_requeued"] == 1
    pending_refund_thread(user, thread_id="t-notify")
    wait_embedded()

    after = _scrape(client)
    recoveries = "countersign_janitor_recoveries_total"
    assert _value(after, recoveries, kind="runs_requeued") == (
        _value(before, recoveries, kind="runs_requeued") + 1
    )
    failures = "countersign_notification_failures_total"
    assert _value(after, failures, target="dead-hook", final="true") == (
        _value(before, failures, target="dead-hook", final="true") + 1
    )
