"""Executing a run: claim it, drive its agent, record every event.

:func:`run_claim` and :func:`run_drive` are the first step of the pipeline's
:func:`orchestration.pipeline.run_execute`, which the ``threads.tasks.run_agent``
Celery task (and the embedded pool) runs, and which hands a run that ended with
pending calls to the next step. The agent's events enter through the one
recording path (:class:`threads.recording.RunRecorder`).
Implements DESIGN.md "one path for every event", FT-06, ER-01.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import queue
import threading
import time
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.utils import timezone

from agentcore.events import RunAgentInput
from approvals import crashpoints
from approvals.services import interrupt_arguments_check
from orchestration.supervision import heartbeat_alive, heartbeat_touch
from threads.agent_config import agent_build
from threads.answers import (
    held_calls_answer_refused,
    run_answer_dangling_calls,
    run_awaits_answers,
)
from threads.locks import run_lock
from threads.models import Run
from threads.recording import RunRecorder, record_terminal_error
from threads.services import run_fail, run_input_build
from threads.transitions import run_transition

if TYPE_CHECKING:
    from agentcore.agents import Agent

logger = logging.getLogger(__name__)

#: Seconds the inbox must stay empty before the agent counts as paused (B1).
#: A steady stream faster than this (1,000 events/s) is batched by the coalescing
#: window instead of a flush per pause: fewer writes holding the interpreter lock
#: let its previews leave sooner (B1 first sighting p50 15 -> 5 ms, measured
#: against 0 and 0.5 ms), while its logged rows wait up to the 50 ms window.
PAUSE_GRACE_SECONDS = 0.002


def run_claim(*, run_pk: int) -> tuple[Run, bool | None]:
    """Lock run ``run_pk`` and claim it; return it and whether it was claimed.

    ``None``: the run already moved on, or another live worker executes it (its
    heartbeat is fresh: this is a duplicate delivery, e.g. the janitor's copy of
    a message it took for lost); nothing to do. ``False``: found ``running``
    with no heartbeat (a dead worker's) or cancelled before it started.
    """
    with transaction.atomic():
        run = run_lock(run_pk=run_pk)
        if run.status == Run.Status.RUNNING:
            return run, None if heartbeat_alive(run_pk) else False
        if run.status != Run.Status.QUEUED:
            return run, None
        if run.continues_id is not None and run_awaits_answers(run_pk=run.continues_id):
            # A resume's continuation, created before its calls were answered
            # (IR-07): enqueued again by the answer that completes them.
            return run, None
        run_transition(run=run, to=Run.Status.RUNNING, save=False)
        run.started_at = timezone.now()
        run.save(update_fields=["status", "started_at"])
        # Before the claim commits: a duplicate waiting on the row lock then
        # sees this worker's heartbeat with the run ``running``.
        heartbeat_touch(run_pk)
        return run, not run.cancel_requested


def run_drive(*, run: Run, claimed: bool) -> Run:
    """Run the claimed ``run``'s agent and record every event; return the run, reloaded.

    ``claimed`` is :func:`run_claim`'s answer: ``False`` ends the run with a
    ``cancelled`` error instead (a run found abandoned without a cancellation
    is the pipeline's: ``orchestration.pipeline.run_worker_lost``). Agent failures end the run
    with ``RUN_ERROR``; nothing already recorded is lost. A run that ended with an
    error or cancelled gets its calls answered as interrupted; one that ended
    awaiting tools is returned as it is (the caller dispatches its calls). Must
    run holding the run's heartbeat (:func:`orchestration.supervision.run_heartbeat`).
    """
    if not claimed:
        return run_fail(
            run=run,
            code="cancelled",
            message="The run was cancelled before it started.",
        )
    crashpoints.crash_point("after_run_claimed")
    recorder = RunRecorder(run)
    try:
        run_input_data = run_input_build(run=run)
        Run.objects.filter(pk=run.pk).update(input=run_input_data)
        run.input = run_input_data
        agent = agent_build(run.agent)
        drive_agent(
            agent=agent,
            run_input=RunAgentInput.model_validate(run_input_data),
            recorder=recorder,
        )
    except Exception as error:
        logger.exception("run %s failed", run.run_id)
        recorder.flush()
        if not recorder.finished:
            record_terminal_error(
                recorder,
                code="internal_error",
                message=f"The run failed inside Countersign ({type(error).__name__}); "
                "the details are in the server log.",
            )
    run.refresh_from_db()
    if run.status in (Run.Status.CANCELLED, Run.Status.ERROR):
        run_answer_dangling_calls(run=run)
    held_calls_answer_refused(run=run)
    interrupt_arguments_check(run=run)
    return run


def drive_agent(
    *, agent: Agent, run_input: RunAgentInput, recorder: RunRecorder
) -> None:
    """Run ``agent`` on ``run_input`` and feed its events to ``recorder`` until it ends.

    The agent's async generator runs on an event loop in a helper thread; this
    (synchronous) thread does every database write, flushing coalesced deltas when
    their window closes even if the agent is silent, and passes a cancellation
    requested in the database (``Run.cancel_requested``) to the agent as an
    ``asyncio.Event``. When nothing arrives for :data:`PAUSE_GRACE_SECONDS` (the
    agent paused) buffered deltas are flushed at once, at most every
    ``COALESCE_PAUSE_MS``; a fast stream still batches by the coalescing window.
    Implements DESIGN.md "one path for every event".
    """
    inbox: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=10000)
    loop = asyncio.new_event_loop()
    cancel = asyncio.Event()

    async def produce() -> None:
        try:
            async for event in agent.run(run_input, cancel=cancel):
                inbox.put(("event", event))
        except Exception as error:
            inbox.put(("error", error))
        finally:
            inbox.put(("done", None))

    def loop_main() -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(produce())
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()

    producer = threading.Thread(
        target=contextvars.copy_context().run,  # keeps the log context (run, thread)
        args=(loop_main,),
        name=f"agent-{recorder.run.run_id}",
    )
    producer.start()
    last_cancel_check = time.monotonic()
    try:
        while True:
            # The agent has paused only once nothing arrived for PAUSE_GRACE_SECONDS:
            # an inbox found empty the instant after a write usually means the
            # producer thread has not had the GIL yet, not that the agent stopped
            # (B1, B4: a spurious pause splits a burst of deltas into extra rows).
            wait = recorder.seconds_until_flush(paused=True)
            timeout = (
                0.25 if wait is None else min(max(wait, PAUSE_GRACE_SECONDS), 0.25)
            )
            try:
                kind, item = inbox.get(timeout=timeout)
            except queue.Empty:
                kind, item = "idle", None
            if kind == "event":
                recorder.record([item])
            elif kind == "error":
                logger.error("agent for run %s raised %r", recorder.run.run_id, item)
                recorder.flush()
                if not recorder.finished:
                    record_terminal_error(
                        recorder,
                        code="agent_error",
                        message=f"The agent failed ({type(item).__name__}); "
                        "the details are in the server log.",
                    )
            elif kind == "done":
                break
            if recorder.flush_due(paused=kind == "idle"):
                recorder.flush()
            now = time.monotonic()
            if now - last_cancel_check >= 0.2 and not cancel.is_set():
                last_cancel_check = now
                if Run.objects.filter(
                    pk=recorder.run.pk, cancel_requested=True
                ).exists():
                    loop.call_soon_threadsafe(cancel.set)
    finally:
        producer.join(timeout=30)
        recorder.flush()
    if not recorder.finished:
        record_terminal_error(
            recorder,
            code="truncated_run",
            message="The agent stopped without finishing the run.",
        )
