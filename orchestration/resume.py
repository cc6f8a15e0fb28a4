"""Starting an AG-UI run whose input may resume interrupts: one transaction, in order.

:func:`agui_run_start` locks the thread, checks the input's ``resume`` against the
open interrupts (:func:`approvals.services.resume.resume_check`, nothing changes
on a refusal), merges the input and creates the client's run
(:func:`threads.services.run_start_from_agui`), then decides the interrupts
through the queue's step (:func:`resume_decide`).
Doing all three under the thread's lock serializes concurrent and replayed
resumes and a racing queue decision; creating the run before deciding makes it
the continuation of the interrupted run, so the decisions' results are streamed
in it (IR-15). Implements IR-07…IR-15.
"""

from __future__ import annotations

import contextlib

from django.db import transaction

from agentcore.events import RunAgentInput
from approvals.exceptions import ApprovalExpired
from approvals.services.resume import ResumePlan, resume_check
from core.types import User
from orchestration.pipeline import approval_decide
from threads.locks import thread_lock_by_agui_id
from threads.models import Run, Thread
from threads.services import agent_check_runs_here, run_start_from_agui


def agui_run_start(
    *, user: User, agent: str, run_input: RunAgentInput
) -> tuple[Thread, Run, int]:
    """Resume, merge and start ``run_input``'s run; return (thread, run, start seq).

    Raises what :func:`approvals.services.resume.resume_check` and
    :func:`threads.services.run_start_from_agui` raise; on any error nothing is
    recorded or decided. A thread (or an agent) that records calls of an agent
    running elsewhere is refused first (:func:`threads.services.agent_check_runs_here`).
    """
    agent_check_runs_here(agent=agent)
    with transaction.atomic():
        thread = thread_lock_by_agui_id(user=user, agui_id=run_input.thread_id)
        plans = []
        if thread is not None:
            agent_check_runs_here(agent=thread.agent, thread_id=thread.thread_id)
            plans = resume_check(user=user, thread=thread, resume=run_input.resume)
        started = run_start_from_agui(
            user=user,
            agent=agent,
            run_input=run_input,
            resumed_call_ids=frozenset(p.tool_call_id for p in plans if p.tool_call_id),
            resumed_interrupt_ids=frozenset(
                p.remote_interrupt_id for p in plans if p.remote_interrupt_id
            ),
        )
        resume_decide(user=user, plans=plans)
    return started


def resume_decide(*, user: User, plans: list[ResumePlan]) -> int:
    """Decide each checked plan through the queue's step; return how many.

    Each decision is :func:`orchestration.pipeline.approval_decide`: audited,
    bound to the argument hash, executed exactly once. Implements IR-09, IR-11, IR-14.
    """
    for plan in plans:
        # A cancelled entry on a request that expired meanwhile is answered as
        # expired, which is what cancelling asked for (IR-10).
        with contextlib.suppress(ApprovalExpired):
            approval_decide(
                approval=plan.approval,
                decided_by=user,
                decision=plan.decision,
                reason=plan.reason,
                edited_arguments=plan.edited,
                response=plan.response,
            )
    return len(plans)
