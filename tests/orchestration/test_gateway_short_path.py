"""An MCP gateway's auto-approved call on the short path, in process.

The call is recorded, dispatched and reserved in one transaction, run in the
request that recorded it (no worker), and its outcome recorded in one more; a
retry gets the kept result; a request that dies between the reservation and the
outcome leaves a leased execution the janitor recovers. Implements DC-04, LP-05,
LP-07, BC32, FT-06.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from approvals import crashpoints
from approvals.models import AuditEntry, ToolExecution
from orchestration.gateway import (
    GatewayStarted,
    gateway_call_execute,
    gateway_call_finish,
    gateway_call_outcome,
    gateway_call_start,
    gateway_tool_call_id,
)
from orchestration.janitor import runs_reap
from tests.fixtures.mcp import GATEWAY
from tests.mcp_servers import executed
from threads.execution import wait_embedded
from threads.models import Event, Message, Run, ToolCall

pytestmark = pytest.mark.usefixtures("gateway_settings")

PATH = {"path": "/srv/notes.txt"}


def start(user, *, key: str | None = None, request_id: int = 1) -> GatewayStarted:
    return gateway_call_start(
        gateway=GATEWAY,
        user=user,
        session="session-1",
        tool_call_id=gateway_tool_call_id(
            gateway=GATEWAY,
            user_pk=user.pk,
            session="session-1",
            request_id=request_id,
            idempotency_key=key,
        ),
        name="files__read_file",
        arguments=PATH,
        metadata={"requestId": request_id},
    )


def run_here(started: GatewayStarted):
    result = asyncio.run(gateway_call_execute(started=started))
    return gateway_call_finish(started=started, result=result)


def reads(upstream) -> list[dict]:
    return [line for line in executed(upstream.log) if line["tool"] == "read_file"]


@pytest.mark.parametrize("executor", ["embedded"], indirect=True)
def test_an_auto_call_is_reserved_at_once_and_runs_in_the_request(
    user, executor, gateway_upstream
):
    """Reserved in the recording transaction, run here once: no worker takes it."""
    before = len(reads(gateway_upstream))

    # when the call starts, its execution is already reserved (committed)
    started = start(user)
    wait_embedded()
    execution = ToolExecution.objects.get(tool_call_id=started.tool_call_pk)
    assert started.run_here is not None
    assert (execution.state, execution.attempts) == ("reserved", 1)
    assert ToolCall.objects.get(pk=started.tool_call_pk).state == "executing"
    assert len(reads(gateway_upstream)) == before  # no worker ran it

    # then running it here answers it once
    outcome = run_here(started)

    assert (outcome.is_error, outcome.status) == (False, "succeeded")
    assert outcome.content == [{"type": "text", "text": "contents of /srv/notes.txt"}]
    execution.refresh_from_db()
    assert (execution.state, execution.attempts) == ("succeeded", 1)
    assert [r["arguments"] for r in reads(gateway_upstream)[before:]] == [PATH]
    call = ToolCall.objects.select_related("thread").get(pk=started.tool_call_pk)
    assert call.state == "succeeded"
    answers = Message.objects.filter(thread=call.thread, role="tool")
    assert list(answers.values_list("tool_call_id", flat=True)) == [call.tool_call_id]
    # the thread's log holds the recorded call; its answer is the tool message
    assert list(
        Event.objects.filter(thread=call.thread)
        .order_by("seq")
        .values_list("type", flat=True)
    ) == [
        "RUN_STARTED",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "RUN_FINISHED",
    ]
    assert list(
        Run.objects.filter(thread=call.thread).values_list("status", flat=True)
    ) == [Run.Status.FINISHED]
    # and the audit chain holds the dispatch, the reservation and the outcome
    assert list(AuditEntry.objects.order_by("pk").values_list("action", flat=True)) == [
        "tool_call.auto_approved",
        "execution.reserved",
        "execution.succeeded",
    ]


@pytest.mark.parametrize("executor", ["embedded"], indirect=True)
def test_a_retry_with_the_idempotency_key_gets_the_kept_result(
    user, executor, gateway_upstream
):
    """The same key in another request is the same call: not reserved, not run again."""
    before = len(reads(gateway_upstream))
    first = start(user, key="key-1", request_id=1)
    kept = run_here(first)

    again = start(user, key="key-1", request_id=2)

    assert (again.created, again.run_here) == (False, None)
    assert again.tool_call_pk == first.tool_call_pk
    assert gateway_call_outcome(tool_call_pk=again.tool_call_pk) == kept
    assert len(reads(gateway_upstream)) == before + 1
    assert ToolExecution.objects.get().attempts == 1


@pytest.mark.parametrize("executor", ["embedded"], indirect=True)
def test_a_request_dying_between_reservation_and_outcome_is_recovered_by_the_janitor(
    user, executor, gateway_upstream, monkeypatch
):
    """The reservation committed before the upstream call: the janitor hands it on once."""
    before = len(reads(gateway_upstream))

    def die(name: crashpoints.CrashPoint) -> None:
        if name == "after_reservation":
            raise RuntimeError("the web process died here")

    # given a request that died right after the reservation
    started = start(user)
    monkeypatch.setattr(crashpoints, "crash_point", die)
    with pytest.raises(RuntimeError):
        asyncio.run(gateway_call_execute(started=started))
    monkeypatch.undo()
    execution = ToolExecution.objects.get(tool_call_id=started.tool_call_pk)
    assert (execution.state, execution.attempts) == ("reserved", 1)
    assert len(reads(gateway_upstream)) == before

    # when the lease still runs the janitor leaves it; once it ended it hands it on
    assert runs_reap()["leases_expired"] == 0
    ToolExecution.objects.filter(pk=execution.pk).update(
        lease_expires_at=timezone.now() - timedelta(seconds=5)
    )
    assert runs_reap()["leases_expired"] == 1
    wait_embedded(timeout=30)

    # then the call is settled exactly as a dead worker's would be
    execution.refresh_from_db()
    call = ToolCall.objects.get(pk=started.tool_call_pk)
    assert (execution.state, call.state, execution.attempts) == (
        "outcome_unknown",
        "outcome_unknown",
        1,
    )
    assert len(reads(gateway_upstream)) == before
    assert gateway_call_outcome(tool_call_pk=started.tool_call_pk) is None


@pytest.mark.parametrize("executor", ["embedded"], indirect=True)
def test_the_short_path_statement_count_is_pinned(user, executor, gateway_upstream):
    """Statements per auto-approved call: recording+dispatch+reservation, then the outcome."""
    start(user, request_id=0)  # the session's thread exists, as after a first call
    with CaptureQueriesContext(connection) as recording:
        started = start(user, request_id=1)
    result = asyncio.run(gateway_call_execute(started=started))
    with CaptureQueriesContext(connection) as outcome:
        gateway_call_finish(started=started, result=result)

    # then: about 70 statements before, each a round trip (docs/benchmarks.md B8)
    assert (len(recording), len(outcome)) == (47, 21)


@pytest.mark.parametrize("executor", ["embedded"], indirect=True)
def test_a_session_whose_thread_is_gone_records_its_next_call_in_a_new_one(
    user, executor, gateway_upstream
):
    """The process remembers a session's thread; once that row is gone (deleted, or
    the pk now names another thread) the next call finds or makes the right one."""
    from threads import gateway as session_threads
    from threads.models import Thread

    run_here(start(user, request_id=1))
    (first,) = Thread.objects.filter(agent=GATEWAY)
    # the remembered pk now names another user's thread
    other = Thread.objects.create(owner=user, agent="demo", title="unrelated")
    remembered = dict(session_threads._SESSION_THREADS)
    (key,) = [k for k, pk in remembered.items() if pk == first.pk]
    session_threads._SESSION_THREADS[key] = other.pk

    result = run_here(start(user, request_id=2))

    assert result is not None
    assert ToolCall.objects.filter(thread=first).count() == 2
    assert not ToolCall.objects.filter(thread=other).exists()
    assert session_threads._SESSION_THREADS[key] == first.pk
