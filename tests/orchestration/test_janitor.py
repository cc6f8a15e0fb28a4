"""The janitor: lost messages enqueued again, expired leases handed back, sweeps kept."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from approvals.models import ApprovalRequest, JanitorSweep, ToolExecution
from demo.models import Refund
from orchestration.janitor import lost_messages_requeue, runs_reap
from orchestration.pipeline import approval_decide
from threads.models import Message, Run
from threads.services import thread_create


def test_lost_run_message_is_enqueued_again(user, executor):
    """A run left ``queued`` (its message lost) runs after the janitor's pass."""
    thread = thread_create(owner=user, title="lost")
    with transaction.atomic():
        Message.objects.create(
            thread=thread, role="user", content="What is the weather in Oslo?"
        )
        run = Run.objects.create(
            thread=thread, status=Run.Status.QUEUED
        )  # never enqueued
    Run.objects.filter(pk=run.pk).update(
        created_at=timezone.now() - timedelta(minutes=5)
    )

    assert lost_messages_requeue(stale_seconds=60) == {
        "runs_requeued": 1,
        "executions_requeued": 0,
    }
    executor.settle(thread)

    run.refresh_from_db()
    assert run.status == Run.Status.FINISHED
    assert Message.objects.filter(thread=thread, role="tool").count() == 1
    # A fresh queued run is left alone.
    assert lost_messages_requeue(stale_seconds=60) == {
        "runs_requeued": 0,
        "executions_requeued": 0,
    }


def _queued_run_lost(user) -> Run:
    """Return a run left ``queued`` five minutes ago whose message never arrived."""
    thread = thread_create(owner=user, title="lost")
    run = Run.objects.create(thread=thread, status=Run.Status.QUEUED)
    Run.objects.filter(pk=run.pk).update(
        created_at=timezone.now() - timedelta(minutes=5)
    )
    return run


def _clear_requeue_keys(settings) -> None:
    """Drop this session's throttle keys: pks repeat across test databases."""
    import redis

    from orchestration.supervision import REQUEUE_KEY

    client = redis.Redis.from_url(settings.REDIS_URL)
    prefix = settings.CELERY_BROKER_TRANSPORT_OPTIONS.get("global_keyprefix", "")
    for key in client.scan_iter(match=prefix + REQUEUE_KEY.format(kind="*", pk="*")):
        client.delete(key)


@pytest.mark.parametrize("executor", ["embedded"], indirect=True)
def test_expired_lease_is_handed_back_and_idempotent_tool_runs_once(
    approver, pending_refund, executor, monkeypatch, caplog
):
    """A reservation left by a dead worker: after its lease the sweep hands it back (BC32)."""
    from approvals import crashpoints
    from threads.execution import wait_embedded

    # given a refund approved whose worker died right after the reservation
    call = pending_refund

    def die(name: crashpoints.CrashPoint) -> None:
        if name == "after_reservation":
            raise RuntimeError("the worker died here")  # no outcome recorded

    monkeypatch.setattr(crashpoints, "crash_point", die)
    approval_decide(
        approval=ApprovalRequest.objects.get(tool_call=call),
        decided_by=approver,
        decision="approve",
    )
    wait_embedded(timeout=30)
    monkeypatch.undo()
    execution = ToolExecution.objects.get(tool_call=call)
    assert (execution.state, execution.attempts) == ("reserved", 1)
    assert Refund.objects.count() == 0

    # when the lease still runs the sweep leaves it; once it ended it is handed back
    assert runs_reap()["leases_expired"] == 0
    ToolExecution.objects.filter(pk=execution.pk).update(
        lease_expires_at=timezone.now() - timedelta(seconds=5)
    )
    with caplog.at_level(logging.WARNING, logger="orchestration.janitor"):
        done = runs_reap()
    executor.settle(call.thread)

    # then the idempotent refund ran again under the same key: one refund, one answer
    assert done["leases_expired"] == 1
    execution.refresh_from_db()
    assert (execution.state, execution.attempts) == ("succeeded", 2)
    assert Refund.objects.count() == 1
    answers = Message.objects.filter(thread=call.thread, role="tool")
    assert answers.filter(tool_call_id=call.tool_call_id).count() == 1
    sweep = JanitorSweep.objects.get()
    assert sweep.counts["leases_expired"] == 1
    assert sweep.total == 1
    (entry,) = sweep.recovered
    assert entry["kind"] == "leases_expired"
    assert entry["toolCallId"] == call.tool_call_id
    assert entry["thread"] == call.thread.thread_id
    assert entry["age_seconds"] >= 5
    (line,) = [r for r in caplog.records if getattr(r, "janitor", None)]
    assert line.janitor == "leases_expired"
    assert line.context["toolCallId"] == call.tool_call_id
    assert line.age_seconds >= 5


@pytest.mark.django_db
def test_sweep_that_recovers_nothing_is_not_kept(settings):
    """Only sweeps that recovered something are recorded."""
    settings.REDIS_URL = ""

    assert set(runs_reap().values()) == {0}
    assert not JanitorSweep.objects.exists()


@pytest.mark.django_db
def test_sweeps_older_than_the_retention_are_dropped(user, settings):
    settings.REDIS_URL = ""
    settings.COUNTERSIGN = {"JANITOR_SWEEP_RETENTION_SECONDS": 60}
    old = JanitorSweep.objects.create(
        started_at=timezone.now() - timedelta(seconds=120), total=1
    )
    run = _queued_run_lost(user)

    runs_reap()

    assert not JanitorSweep.objects.filter(pk=old.pk).exists()
    sweep = JanitorSweep.objects.get()
    assert sweep.counts["runs_requeued"] == 1
    assert sweep.recovered[0]["run"] == run.run_id
    assert sweep.recovered[0]["age_seconds"] >= 300


@pytest.mark.django_db
def test_requeue_is_throttled_per_item_with_redis(user, settings, redis_url):
    """With Redis, one lost item is enqueued again at most once per window."""
    from tests.helpers.executors import use_redis

    use_redis(settings, redis_url)
    _clear_requeue_keys(settings)
    _queued_run_lost(user)
    try:
        assert lost_messages_requeue(stale_seconds=60)["runs_requeued"] == 1
        assert lost_messages_requeue(stale_seconds=60)["runs_requeued"] == 0
    finally:
        _clear_requeue_keys(settings)


def test_janitor_settings_check_passes_with_the_defaults():
    from threads.checks import check_janitor

    assert check_janitor() == []


@pytest.mark.parametrize(
    ("override", "schedule", "expected"),
    [
        ({"QUEUED_STALE_SECONDS": 0}, 10.0, ["threads.E030"]),
        ({"JANITOR_INTERVAL_SECONDS": "10"}, 10.0, ["threads.E030"]),
        ({"RUN_HEARTBEAT_SECONDS": 40.0}, 10.0, ["threads.E031"]),
        # Four intervals (time to live + one refresh) reach RUN_STALE_SECONDS (90).
        ({"RUN_HEARTBEAT_SECONDS": 22.5}, 10.0, ["threads.E031"]),
        ({"JANITOR_INTERVAL_SECONDS": 5.0}, 10.0, ["threads.E032"]),
    ],
)
def test_janitor_settings_check_names_the_bad_setting(
    settings, override, schedule, expected
):
    """A window that is not a positive number, or beat disagreeing, is an error naming it."""
    from threads.checks import check_janitor, raise_on_configuration_errors

    settings.COUNTERSIGN = {"JANITOR_INTERVAL_SECONDS": 10.0, **override}
    settings.CELERY_BEAT_SCHEDULE = {
        "reap-stale-runs": {
            "task": "threads.janitor.reap_stale_runs",
            "schedule": schedule,
        }
    }

    errors = check_janitor()

    assert [e.id for e in errors] == expected
    name = next(iter(override))
    assert name in errors[0].msg or "reap-stale-runs" in errors[0].msg
    with pytest.raises(Exception, match=expected[0]):
        raise_on_configuration_errors()


@pytest.mark.django_db
def test_admin_lists_sweeps_read_only_with_the_days_totals(client, django_user_model):
    """Janitor sweeps in the admin: the last 24 h totals in the title, no add or change."""
    admin_user = django_user_model.objects.create_superuser(
        username="root", password="pw-root-123", email=""
    )
    JanitorSweep.objects.create(
        started_at=timezone.now(),
        total=2,
        counts={"worker_lost": 1, "leases_expired": 1, "dispatched": 0},
        recovered=[
            {"kind": "worker_lost", "run": "run_1", "age_seconds": 95.0},
            {"kind": "leases_expired", "toolCallId": "call_1", "age_seconds": 3.0},
        ],
    )
    client.force_login(admin_user)

    page = client.get("/admin/approvals/janitorsweep/")

    assert page.status_code == 200
    text = page.content.decode()
    assert "Janitor sweeps — last 24 h: leases_expired 1, worker_lost 1" in text
    assert client.get("/admin/approvals/janitorsweep/add/").status_code == 403


@pytest.mark.django_db
def test_duplicate_delivery_of_a_run_a_live_worker_executes_changes_nothing(
    user, settings, redis_url
):
    """The janitor's copy of a message arriving while the run executes elsewhere: left alone."""
    from orchestration.pipeline import run_execute
    from orchestration.supervision import HEARTBEAT_KEY, heartbeat_touch

    settings.REDIS_URL = redis_url
    thread = thread_create(owner=user, title="duplicate")
    run = Run.objects.create(
        thread=thread, status=Run.Status.RUNNING, started_at=timezone.now()
    )
    heartbeat_touch(run.pk)  # the owning worker's heartbeat
    try:
        assert run_execute(run_pk=run.pk).status == Run.Status.RUNNING
        assert not run.events.exists()
    finally:
        import redis

        redis.Redis.from_url(redis_url).delete(HEARTBEAT_KEY.format(pk=run.pk))
    # Without a heartbeat the same delivery is a dead worker's redelivery (ER-01).
    assert run_execute(run_pk=run.pk).error_code == "worker_lost"


def _heartbeat_aged(redis_url: str, run_pk: int, *, seconds: float) -> None:
    """Write run ``run_pk``'s heartbeat as its worker does, then age it by ``seconds``.

    The key's remaining time to live is what tells its age (Redis's clock), so
    shortening it by ``seconds`` is the key a worker that died ``seconds`` after
    its last refresh leaves behind.
    """
    import redis

    from orchestration.supervision import HEARTBEAT_KEY, heartbeat_touch

    heartbeat_touch(run_pk)
    client = redis.Redis.from_url(redis_url)
    key = HEARTBEAT_KEY.format(pk=run_pk)
    assert client.pexpire(key, client.pttl(key) - int(seconds * 1000))


def _heartbeat_drop(redis_url: str, run_pk: int) -> None:
    import redis

    from orchestration.supervision import HEARTBEAT_KEY

    redis.Redis.from_url(redis_url).delete(HEARTBEAT_KEY.format(pk=run_pk))


def _running_run(user) -> Run:
    """Return a run its worker claimed a moment ago (well inside RUN_STALE_SECONDS)."""
    thread = thread_create(owner=user, title="supervised")
    return Run.objects.create(
        thread=thread, status=Run.Status.RUNNING, started_at=timezone.now()
    )


@pytest.mark.django_db
def test_run_whose_heartbeat_outlived_ttl_and_one_refresh_is_reaped_with_reason(
    user, settings, redis_url
):
    """Heartbeat rule: last refresh > 4 intervals ago ends the run within S."""
    from orchestration.pipeline import run_execute
    from orchestration.supervision import heartbeat_alive, heartbeat_read

    settings.REDIS_URL = redis_url
    settings.COUNTERSIGN = {
        **settings.COUNTERSIGN,
        "RUN_HEARTBEAT_SECONDS": 5.0,
        "RUN_STALE_SECONDS": 90.0,
    }
    dead = _running_run(user)
    quiet = _running_run(user)  # past its time to live, not yet one refresh more
    try:
        _heartbeat_aged(redis_url, dead.pk, seconds=21)
        _heartbeat_aged(redis_url, quiet.pk, seconds=16)
        reading = heartbeat_read(quiet.pk)
        assert reading is not None
        assert (reading.fresh, reading.dead) == (False, False)
        assert reading.interval_seconds == 5.0
        assert heartbeat_alive(quiet.pk)
        # A duplicate delivery leaves the unproven run to its worker.
        assert run_execute(run_pk=quiet.pk).status == Run.Status.RUNNING

        assert runs_reap()["worker_lost"] == 1

        dead.refresh_from_db()
        quiet.refresh_from_db()
        assert (dead.status, dead.error_code) == (Run.Status.ERROR, "worker_lost")
        assert quiet.status == Run.Status.RUNNING
        [entry] = JanitorSweep.objects.get().recovered
        assert (entry["kind"], entry["run"], entry["reason"]) == (
            "worker_lost",
            dead.run_id,
            "heartbeat_stale",
        )
    finally:
        _heartbeat_drop(redis_url, dead.pk)
        _heartbeat_drop(redis_url, quiet.pk)


@pytest.mark.django_db
def test_run_whose_heartbeat_key_was_lost_waits_for_run_stale_seconds(
    user, settings, redis_url
):
    """No key (Redis lost it, or an embedded run): only RUN_STALE_SECONDS of silence reaps."""
    settings.REDIS_URL = redis_url
    run = _running_run(user)

    assert runs_reap()["worker_lost"] == 0
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING

    Run.objects.filter(pk=run.pk).update(
        started_at=timezone.now() - timedelta(seconds=600)
    )
    assert runs_reap()["worker_lost"] == 1
    [entry] = JanitorSweep.objects.get().recovered
    assert (entry["run"], entry["reason"]) == (run.run_id, "no_heartbeat")


@pytest.mark.django_db
def test_undispatched_run_whose_heartbeat_is_stale_is_dispatched_with_reason(
    user, settings, redis_url
):
    """Died after recording its calls (``after_run_recorded``): dispatched on the heartbeat."""
    from threads.models import ToolCall

    settings.REDIS_URL = redis_url
    thread = thread_create(owner=user, title="undispatched")
    run = Run.objects.create(
        thread=thread,
        status=Run.Status.AWAITING_TOOLS,
        started_at=timezone.now(),
        pending_tool_call_ids=["call_undispatched"],
    )
    ToolCall.objects.create(
        thread=thread,
        run=run,
        tool_call_id="call_undispatched",
        name="lookup_order",
        arguments={"order_id": "A-1001"},
        state=ToolCall.State.PENDING,
    )
    try:
        _heartbeat_aged(redis_url, run.pk, seconds=25)
        assert runs_reap()["dispatched"] == 1
    finally:
        _heartbeat_drop(redis_url, run.pk)
    assert not ToolCall.objects.filter(run=run, state=ToolCall.State.PENDING).exists()
    [entry] = JanitorSweep.objects.get().recovered
    assert (entry["kind"], entry["run"], entry["reason"]) == (
        "dispatched",
        run.run_id,
        "heartbeat_stale",
    )


@pytest.mark.django_db
def test_client_visible_run_killed_mid_message_ends_worker_lost_not_protocol_violation(
    user,
):
    """A dead worker's run whose log starts with the wire's RUN_STARTED ends ``worker_lost``."""
    from threads.recording import RunRecorder
    from threads.services import run_fail
    from threads.wire import wire_run_open

    thread = thread_create(owner=user, title="wire")
    with transaction.atomic():
        run = Run.objects.create(thread=thread, status=Run.Status.QUEUED)
        wire_run_open(run=run, run_input=None)
    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.RUNNING, started_at=timezone.now()
    )
    run.refresh_from_db()
    recorder = RunRecorder(run)
    recorder.record(
        [
            {"type": "RUN_STARTED", "threadId": thread.thread_id, "runId": run.run_id},
            {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "half"},
        ]
    )
    recorder.flush()  # the worker dies here, its message open

    run = run_fail(run=run, code="worker_lost", message="gone")

    assert (run.status, run.error_code) == (Run.Status.ERROR, "worker_lost")
    assert list(run.events.order_by("seq").values_list("type", flat=True)) == [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_ERROR",
    ]
