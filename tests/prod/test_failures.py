"""The production processes under failure: killed workers, a Redis restart, scale-out.

Real uvicorn and Celery (prefork) processes against the test database and a
private Redis (``tests/prod/conftest.py``); the REST API with a token and the
thread WebSocket with a session cookie, as integrations and browsers use them.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers.prod import (
    deltas_wait,
    event_log,
    message_send,
    pending_approval_find,
    thread_start,
)
from tests.prod.client import EventWatcher, api_client, session_cookie, wait_until
from threads.recording import RunRecorder

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]


def test_sigkill_worker_mid_run_janitor_ends_run_worker_lost(stack, operator):
    """A worker SIGKILLed mid-run: the janitor ends the run with RUN_ERROR worker_lost."""
    from threads.models import Run

    # given a worker for runs, another for the janitor, and beat
    base = stack.web()
    doomed = stack.worker("runs-worker", queues="runs")
    stack.worker("other-worker", queues="tools,countersign")
    stack.beat()
    api = api_client(base, operator["token"])
    thread_id = thread_start(api, "slow")
    posted = message_send(api, thread_id, "deltas=400 delay=0.05")
    run_id = posted["run"]["runId"]

    # when the run is streaming and its worker dies with everything in it
    deltas_wait(run_id, 3, what="the run streaming")
    doomed.kill()
    assert Run.objects.get(run_id=run_id).status == Run.Status.RUNNING

    # then the janitor finishes it: its heartbeat's last refresh is over four
    # intervals old (or, failing that, no event for RUN_STALE_SECONDS)
    run = wait_until(
        lambda: Run.objects.filter(run_id=run_id, status=Run.Status.ERROR).first(),
        timeout=30,
        what=f"the janitor ending run {run_id}\n{stack.logs()}",
    )
    assert run.error_code == "worker_lost"
    # through the janitor's sweep, which kept a record of it
    from approvals.models import JanitorSweep

    wait_until(
        lambda: any(
            entry["kind"] == "worker_lost" and entry["run"] == run_id
            for sweep in JanitorSweep.objects.all()
            for entry in sweep.recovered
        ),
        timeout=10,
        what="the sweep's record (written as the sweep ends)",
    )
    log = event_log(thread_id)
    assert [e["seq"] for e in log] == list(range(1, len(log) + 1))
    assert [e["type"] for e in log][-2:] == ["TEXT_MESSAGE_END", "RUN_ERROR"]
    assert log[-1]["code"] == "worker_lost"
    # and the thread takes a new message
    assert message_send(api, thread_id, "deltas=2 delay=0")["run"]["status"] == "queued"


def test_worker_killed_after_reservation_leaves_outcome_unknown_not_run_twice(
    stack, operator, tmp_path: Path
):
    """A worker dying between reservation and outcome: outcome_unknown, never executed twice."""
    from approvals.models import ToolExecution
    from threads.models import ToolCall

    # given the fragile agent's non-idempotent refund waiting for approval
    base = stack.web()
    runs = stack.worker("runs-worker", queues="runs,countersign")
    tools = stack.worker("tools-worker", queues="tools")
    api = api_client(base, operator["token"])
    thread_id = thread_start(api, "fragile")
    message_send(api, thread_id, "refund order A-1001 2.50")
    approval = wait_until(
        lambda: pending_approval_find(api, thread_id),
        timeout=30,
        what=f"the refund's approval request\n{stack.logs()}",
    )
    # when the tools worker dies right after committing the reservation (test hook)
    tools.terminate()
    stack.worker(
        "crashing-tools-worker",
        queues="tools",
        COUNTERSIGN_TEST_CRASH_AT="after_reservation",
    )
    decided = api.post(f"/api/approvals/{approval['id']}/approve/", json={})
    assert decided.status_code == 200, decided.text

    # then the redelivered task finds the reservation and refuses to guess
    call = wait_until(
        lambda: ToolCall.objects.filter(
            thread__client_thread_id=thread_id,
            name="refund_order",
            state="outcome_unknown",
        ).first(),
        timeout=30,
        what=f"outcome_unknown\n{stack.logs()}",
    )
    execution = ToolExecution.objects.get(tool_call=call)
    assert execution.state == ToolExecution.State.OUTCOME_UNKNOWN
    assert execution.attempts == 1
    ledger = tmp_path / "ledger.jsonl"
    assert not ledger.exists() or ledger.read_text().count("\n") == 0
    assert "exitcode 17" in "".join(p.text() for p in stack.procs)
    assert runs.alive


def test_sigterm_worker_finishes_its_run_before_exiting(stack, operator):
    """SIGTERM (warm shutdown) lets the current run finish and record every event."""
    from threads.models import Event, Run

    base = stack.web()
    worker = stack.worker("runs-worker")
    api = api_client(base, operator["token"])
    thread_id = thread_start(api, "slow")
    run_id = message_send(api, thread_id, "deltas=40 delay=0.05")["run"]["runId"]
    wait_until(
        lambda: Event.objects.filter(
            run__run_id=run_id, type="TEXT_MESSAGE_CONTENT"
        ).exists(),
        timeout=20,
        what="the run streaming",
    )

    code = worker.terminate(timeout=30)

    assert code == 0, worker.text()[-3000:]
    run = Run.objects.get(run_id=run_id)
    assert run.status == Run.Status.FINISHED, (run.status, run.error_code)
    text = "".join(e.get("delta", "") for e in event_log(thread_id))
    assert text == "".join(f"w{i} " for i in range(40))


def test_redis_restart_mid_stream_clients_resume_by_seq(stack, operator):
    """Redis shut down (nosave) and restarted mid-stream: every client ends with every event."""
    from threads.models import Run

    base = stack.web()
    stack.worker("worker")
    api = api_client(base, operator["token"])
    cookie = session_cookie(base, operator["username"], operator["password"])
    ws = base.replace("http://", "ws://")
    thread_id = thread_start(api, "slow")
    steady = EventWatcher(ws, thread_id, cookie=cookie, origin=base)
    bounced = EventWatcher(ws, thread_id, cookie=cookie, origin=base)
    steady.start()
    bounced.start()
    assert steady.connected.wait(10)
    assert bounced.connected.wait(10)
    run_id = message_send(api, thread_id, "deltas=150 delay=0.03")["run"]["runId"]
    steady.wait_for(
        lambda w: len(w.events) >= 10, timeout=20, what="the stream starting"
    )

    # when Redis goes away mid-stream and one client drops and reconnects meanwhile
    stack.redis.shutdown_nosave()
    bounced.stop()
    seen_before = bounced.last_seq
    time.sleep(1.0)
    bounced = EventWatcher(ws, thread_id, cookie=cookie, origin=base)
    bounced.events = [{"seq": seen_before}]  # resume from the last seq it had
    bounced.start()
    time.sleep(0.5)
    stack.redis.start()

    # then the run finishes and both clients hold the whole log, in order
    wait_until(
        lambda: (
            Run.objects.filter(run_id=run_id)
            .exclude(status__in=["queued", "running"])
            .exists()
        ),
        timeout=40,
        what=f"the run finishing\n{stack.logs()}",
    )
    log = event_log(thread_id)
    for watcher in (steady, bounced):
        watcher.wait_for(
            lambda w: w.last_seq >= log[-1]["seq"],
            timeout=15,
            what="the client catching up",
        )
        watcher.stop()
    assert Run.objects.get(run_id=run_id).status == Run.Status.FINISHED
    assert steady.events == log
    assert not steady.gaps
    assert bounced.events[1:] == [e for e in log if e["seq"] > seen_before]
    assert not bounced.gaps
    assert "".join(e.get("delta", "") for e in log) == "".join(
        f"w{i} " for i in range(150)
    )


def test_scale_out_approval_on_web_b_streams_to_client_on_web_a(stack, operator):
    """Two webs, two workers: a client on web A sees a run approved through web B."""
    web_a = stack.web("web-a")
    web_b = stack.web("web-b")
    stack.worker("worker-1")
    stack.worker("worker-2")
    api_b = api_client(web_b, operator["token"])
    cookie = session_cookie(web_a, operator["username"], operator["password"])
    thread_id = thread_start(api_b, "demo")
    watcher = EventWatcher(
        web_a.replace("http://", "ws://"), thread_id, cookie=cookie, origin=web_a
    )
    watcher.start()
    assert watcher.connected.wait(10)

    message_send(api_b, thread_id, "refund order A-1001 0.50")
    approval = wait_until(
        lambda: pending_approval_find(api_b, thread_id),
        timeout=30,
        what="the approval request",
    )
    decided = api_b.post(f"/api/approvals/{approval['id']}/approve/", json={})
    assert decided.status_code == 200, decided.text

    # One wire run per request (docs/agui.md): the continuation's answer ends
    # the approve's wire run; no fixed count of RUN_FINISHED.
    watcher.wait_for(
        lambda w: "Refund done" in w.text() and w.types()[-1:] == ["RUN_FINISHED"],
        timeout=30,
        what=f"the continuation on web A\n{stack.logs()}",
    )
    watcher.stop()
    assert "Refund done" in watcher.text()
    assert watcher.events == event_log(thread_id)
    assert not watcher.gaps
    assert any(n.get("state") == "succeeded" for n in watcher.notifications)
    # both workers took part or at least one did; each log line is JSON
    lines = [
        json.loads(line)
        for p in stack.procs
        if p.name.startswith("worker")
        for line in p.text().splitlines()
        if line.startswith("{")
    ]
    assert any(r.get("thread") == thread_id for r in lines)


def test_approve_while_redis_is_down_answers_200_and_the_execution_waits_queued(
    stack, operator
):
    """An approve while the broker is down is recorded (200, not 500); the execution stays queued.

    Found by ``make chaos`` (Redis restarted during decisions): the enqueue after
    commit raised kombu's OperationalError out of the view. The janitor enqueues
    queued executions again once Redis is back (lost_messages_requeue).
    """
    from approvals.models import ToolExecution

    base = stack.web()
    stack.worker("worker")
    api = api_client(base, operator["token"])
    thread_id = thread_start(api, "demo")
    message_send(api, thread_id, "refund order A-1001 0.01")
    approval = wait_until(
        lambda: pending_approval_find(api, thread_id),
        timeout=30,
        what=f"the refund's approval request\n{stack.logs()}",
    )

    stack.redis.shutdown_nosave()
    try:
        decided = api.post(f"/api/approvals/{approval['id']}/approve/", json={})
    finally:
        stack.redis.start()

    assert decided.status_code == 200, decided.text
    assert decided.json()["status"] == "approved"
    execution = ToolExecution.objects.get(
        tool_call__tool_call_id=approval["toolCallId"]
    )
    assert execution.state == ToolExecution.State.QUEUED


class _SSEFollower(threading.Thread):
    """Read ``GET /agui/threads/<id>/events`` in a background thread; keep every frame's seq."""

    def __init__(self, base: str, token: str, thread_id: str) -> None:
        super().__init__(name=f"sse-{thread_id}", daemon=True)
        self.url = f"{base}/agui/threads/{thread_id}/events"
        self.token = token
        self.seqs: list[int] = []
        self.status = 0
        self.error = ""
        self._halt = threading.Event()

    def run(self) -> None:
        try:
            with httpx.stream(
                "GET",
                self.url,
                headers={"Authorization": f"Token {self.token}"},
                timeout=httpx.Timeout(5, read=30),
            ) as response:
                self.status = response.status_code
                for line in response.iter_lines():
                    if line.startswith("id: "):
                        self.seqs.append(int(line[4:]))
                    if self._halt.is_set():
                        return
        except httpx.HTTPError as error:
            self.error = f"{type(error).__name__}: {error}"

    def stop(self) -> None:
        self._halt.set()


def _group_subscribers(stack: Any, thread_pk: int) -> int:
    """Return how many subscriptions Redis holds for thread ``thread_pk``'s group channel.

    One per server process that has a stream following the thread (the layer
    shares one Redis subscription among a process's streams).
    """
    import redis

    client = redis.Redis(port=stack.redis.port)
    names = client.pubsub_channels(f"*__group__thread.{thread_pk}")
    return sum(n for _, n in client.pubsub_numsub(*names)) if names else 0


def test_sse_and_websocket_streams_survive_a_redis_stop_and_start(stack, operator):
    """Redis down: streams poll the log, new ones open; Redis back: doorbells again, no ASGI error."""
    from django.contrib.auth import get_user_model

    from threads.models import Run, Thread

    # given an SSE stream and a WebSocket following a thread
    base = stack.web()
    cookie = session_cookie(base, operator["username"], operator["password"])
    ws = base.replace("http://", "ws://")
    owner = get_user_model().objects.get(username=operator["username"])
    thread = Thread.objects.create(thread_id="t-broker", owner=owner, agent="demo")
    run = Run.objects.create(thread=thread, run_id="r-broker", status="running")
    before = _SSEFollower(base, operator["token"], thread.thread_id)
    watcher = EventWatcher(ws, thread.thread_id, cookie=cookie, origin=base)
    before.start()
    watcher.start()
    assert watcher.connected.wait(10)
    wait_until(
        lambda: _group_subscribers(stack, thread.pk) == 1,
        timeout=10,
        what="the streams subscribed",
    )

    # when Redis stops: a row written meanwhile, and new streams opened meanwhile
    stack.redis.shutdown_nosave()
    recorder = RunRecorder(run, publish=False)
    recorder.record(
        [{"type": "RUN_STARTED", "threadId": "t-broker", "runId": "r-broker"}]
    )
    recorder.flush()
    during = _SSEFollower(base, operator["token"], thread.thread_id)
    during.start()
    opened_down = EventWatcher(ws, thread.thread_id, cookie=cookie, origin=base)
    opened_down.start()
    assert opened_down.connected.wait(10), opened_down.errors
    for seqs in (lambda: before.seqs, lambda: during.seqs):
        wait_until(lambda s=seqs: s() == [1], timeout=15, what="row 1 by polling")
    for follower in (watcher, opened_down):
        follower.wait_for(lambda w: w.last_seq == 1, timeout=15, what="row 1 (ws)")
    assert during.status == 200

    # then, Redis back, every stream joins its group again and gets the next row
    stack.redis.start()
    wait_until(
        lambda: _group_subscribers(stack, thread.pk) == 1,
        timeout=20,
        what=f"the streams subscribed again\n{stack.logs()}",
    )
    recorder.record(
        [{"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"}]
    )
    recorder.flush()
    for seqs in (lambda: before.seqs, lambda: during.seqs):
        wait_until(lambda s=seqs: s() == [1, 2], timeout=15, what="row 2 (sse)")
    for follower in (watcher, opened_down):
        follower.wait_for(lambda w: w.last_seq == 2, timeout=15, what="row 2 (ws)")
        follower.stop()
    before.stop()
    during.stop()
    assert before.error == during.error == "", (before.error, during.error)
    # and no exception reached ASGI: the only tracebacks logged are the Redis
    # layer's own reconnection attempts in its background reader
    records = [
        json.loads(line)
        for line in stack.procs[0].text().splitlines()
        if line.startswith("{")
    ]
    assert records
    assert not [r for r in records if "ASGI" in r["message"]]
    failures = {r["logger"] for r in records if "exc" in r}
    assert failures <= {"channels_redis.pubsub"}, failures


@pytest.mark.timeout(60)
def test_tokens_in_query_strings_are_in_no_log_line_of_the_web_process(stack, operator):
    """uvicorn's access log and Django's request log, as JSON lines: no key, REDACTED instead."""
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    # given the web process as deployed (uvicorn --log-config, LOG_LEVEL INFO)
    base = stack.web()
    key = operator["token"]

    # when clients put the real token in URLs
    for path in (
        f"/api/threads/?token={key}",
        f"/api/threads/?after=1&access_token={key}",
        f"/agui/threads/t1/events?access_token={key}",
        f"/api/approvals/?Token={key}&x=1",
    ):
        assert httpx.get(base + path, timeout=10).status_code == 401, path
    ws = base.replace("http://", "ws://")
    url = f"{ws}/ws/threads/t1/?after=0&token={key}"
    with pytest.raises((InvalidStatus, OSError)), connect(url, open_timeout=5) as s:
        s.recv(timeout=5)

    # then the access log has each request, its token replaced, and no line
    # of the process holds the key
    log = stack.procs[0].text()
    lines = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    access = [r["message"] for r in lines if r["logger"] == "uvicorn.access"]
    assert any("/api/threads/?token=REDACTED" in m for m in access), access
    assert any("/api/threads/?after=1&access_token=REDACTED" in m for m in access)
    assert any("/agui/threads/t1/events?access_token=REDACTED" in m for m in access)
    assert any(r["logger"] == "django.request" for r in lines)
    assert key not in log
