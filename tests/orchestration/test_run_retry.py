"""A run whose worker died: ``worker_lost`` with its phase, and a continuation retried.

In-process (the embedded pool); the same recovery with a real Celery worker
killed mid-continuation is in ``tests/prod/test_recovery.py``.
"""

from __future__ import annotations

import pytest
from django.utils import timezone

from approvals import crashpoints
from approvals.models import ApprovalRequest, JanitorSweep
from demo.models import Refund
from orchestration.janitor import runs_reap
from orchestration.pipeline import (
    approval_decide,
    run_execute,
    run_worker_lost,
    tool_call_execute,
)
from threads.models import Message, Run, ToolCall
from threads.services import message_post, thread_create

pytestmark = pytest.mark.django_db(transaction=True)


def _answer() -> str:
    """Return the demo agent's final answer once the one refund was made."""
    return (
        "Refund done: 25.00 EUR refunded on order A-1001 "
        f"(refund #{Refund.objects.get().pk})."
    )


class _WorkerDied(BaseException):
    """What the patched crash point raises: the worker's task never returns."""


def _refund_awaiting_decision(user, monkeypatch) -> tuple[Run, list[int]]:
    """Run the demo agent up to the refund's approval request, no worker involved.

    Return the thread's first run and the list runs are enqueued into (the
    test executes them itself, in order).
    """
    import orchestration.pipeline as pipeline
    import threads.services as services

    enqueued: list[int] = []
    monkeypatch.setattr(
        services, "_run_enqueue", lambda *, run_pk: enqueued.append(run_pk)
    )
    monkeypatch.setattr(
        services,
        "_run_enqueue_later",
        lambda *, run_pk, countdown: enqueued.append(run_pk),
    )
    monkeypatch.setattr(pipeline, "enqueue", lambda *args, **kwargs: None)
    thread = thread_create(owner=user, title="refund")
    message_post(thread=thread, content="refund order A-1001 25.00")
    while enqueued:
        run_execute(run_pk=enqueued.pop(0))
        for call in ToolCall.objects.filter(thread=thread, state="approved"):
            tool_call_execute(tool_call_pk=call.pk)
    return Run.objects.filter(thread=thread).first(), enqueued


def _approve_and_execute(approver) -> ToolCall:
    approval = ApprovalRequest.objects.get()
    approval_decide(approval=approval, decided_by=approver, decision="approve")
    call = ToolCall.objects.get(name="refund_order")
    tool_call_execute(tool_call_pk=call.pk)
    return call


def test_continuation_lost_while_streaming_is_worker_lost_with_phase_not_a_violation(
    user, approver, monkeypatch
):
    """Its log starts with the wire's RUN_STARTED and the refund's result: still worker_lost."""
    from orchestration.runs import run_claim
    from threads.recording import RunRecorder

    # given the refund approved and executed, its continuation claimed by a worker
    first, enqueued = _refund_awaiting_decision(user, monkeypatch)
    _approve_and_execute(approver)
    [continuation_pk] = enqueued
    run, claimed = run_claim(run_pk=continuation_pk)
    assert claimed is True
    # which dies with the agent's answer half streamed
    recorder = RunRecorder(run)
    recorder.record(
        [
            {
                "type": "RUN_STARTED",
                "threadId": first.thread.thread_id,
                "runId": run.run_id,
            },
            {"type": "TEXT_MESSAGE_START", "messageId": "m-half", "role": "assistant"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m-half", "delta": "Refun"},
        ]
    )
    recorder.flush()
    enqueued.clear()

    # when the janitor finds it
    lost = run_worker_lost(run=run)

    # then it ended worker_lost, naming the phase, and a retry is queued
    assert (lost.run.status, lost.run.error_code) == ("error", "worker_lost")
    assert lost.phase == "streaming"
    assert lost.run.error_message == (
        "The worker executing this run stopped before it finished (streaming); "
        "Countersign starts the turn again (attempt 2 of 3)."
    )
    types = list(lost.run.events.order_by("seq").values_list("type", flat=True))
    assert types == [
        "RUN_STARTED",
        "TOOL_CALL_RESULT",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_ERROR",
    ]
    assert lost.retry is not None
    assert (lost.retry.retry_of_id, lost.retry.attempt) == (run.pk, 2)
    assert enqueued == [lost.retry.pk]
    # and the retry gives the user the agent's answer, the refund made once
    run_execute(run_pk=enqueued.pop())
    lost.retry.refresh_from_db()
    assert lost.retry.status == "finished"
    answer = Message.objects.filter(run=lost.retry, role="assistant").get()
    assert answer.content == _answer()
    assert Refund.objects.count() == 1
    # a second report of the same death changes nothing
    again = run_worker_lost(run=Run.objects.get(pk=run.pk))
    assert again.retry is None
    assert Run.objects.filter(thread=first.thread).count() == 4


def test_continuation_killed_after_claim_is_retried_by_the_janitor_until_it_answers(
    user, approver, monkeypatch, settings
):
    """Dies twice before any output: two retries with backoff, then the final answer."""
    settings.COUNTERSIGN = {**settings.COUNTERSIGN, "RUN_RETRY_ATTEMPTS": 2}
    first, enqueued = _refund_awaiting_decision(user, monkeypatch)
    deaths: list[str] = []

    def dying(name: str) -> None:
        if name == "after_run_claimed" and len(deaths) < 2:
            deaths.append(name)
            raise _WorkerDied

    monkeypatch.setattr(crashpoints, "crash_point", dying)
    _approve_and_execute(approver)
    for attempt in (1, 2):
        with pytest.raises(_WorkerDied):
            run_execute(run_pk=enqueued.pop())
        assert runs_reap(stale_seconds=0)["worker_lost"] == 1
        lost = Run.objects.get(thread=first.thread, attempt=attempt, status="error")
        assert lost.error_code == "worker_lost"
        assert "(before_output)" in lost.error_message
    run_execute(run_pk=enqueued.pop())

    runs = list(
        Run.objects.filter(thread=first.thread)
        .order_by("id")
        .values_list("status", "error_code", "attempt")
    )
    assert runs[2:] == [
        ("error", "worker_lost", 1),
        ("error", "worker_lost", 2),
        ("finished", "", 3),
    ]
    entries = [e for s in JanitorSweep.objects.order_by("id") for e in s.recovered]
    assert [(e["kind"], e["phase"], "retry" in e) for e in entries] == [
        ("worker_lost", "before_output", True),
        ("worker_lost", "before_output", True),
    ]
    last = Message.objects.filter(thread=first.thread).order_by("position").last()
    assert last is not None
    assert last.role == "assistant"
    assert last.content == _answer()
    assert Refund.objects.count() == 1


def test_retries_are_bounded_and_a_first_turn_is_not_retried(
    user, approver, monkeypatch, settings
):
    """Out of attempts: worker_lost asks for the message again; a first run is never retried."""
    settings.COUNTERSIGN = {**settings.COUNTERSIGN, "RUN_RETRY_ATTEMPTS": 1}
    first, enqueued = _refund_awaiting_decision(user, monkeypatch)

    def dying(name: str) -> None:
        if name == "after_run_claimed":
            raise _WorkerDied

    monkeypatch.setattr(crashpoints, "crash_point", dying)
    _approve_and_execute(approver)
    for _ in range(2):
        with pytest.raises(_WorkerDied):
            run_execute(run_pk=enqueued.pop())
        runs_reap(stale_seconds=0)
    assert enqueued == []
    last = Run.objects.filter(thread=first.thread).order_by("id").last()
    assert (last.attempt, last.error_code) == (2, "worker_lost")
    assert last.error_message.endswith("post the message again to retry.")

    # a first turn (no continuation) dying is reported, not retried
    thread = thread_create(owner=user, title="weather")
    message_post(thread=thread, content="What is the weather in Oslo?")
    with pytest.raises(_WorkerDied):
        run_execute(run_pk=enqueued.pop())
    lost = run_worker_lost(run=Run.objects.get(thread=thread))
    assert lost.retry is None
    assert lost.phase == "before_output"
    assert Run.objects.filter(thread=thread).count() == 1


def test_redelivered_abandoned_continuation_is_retried_too(user, approver, monkeypatch):
    """The broker's redelivery finds the run running without a worker: same recovery."""
    _first, enqueued = _refund_awaiting_decision(user, monkeypatch)
    _approve_and_execute(approver)
    [pk] = enqueued
    Run.objects.filter(pk=pk).update(status="running", started_at=timezone.now())

    run = run_execute(run_pk=enqueued.pop())

    assert (run.status, run.error_code) == ("error", "worker_lost")
    retry = Run.objects.get(retry_of=run)
    assert enqueued == [retry.pk]
