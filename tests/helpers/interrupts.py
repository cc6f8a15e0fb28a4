"""AG-UI interrupts of held calls: start a refund run, resolve its interrupt, resume."""

from __future__ import annotations

from typing import Any

from agentcore.events import RunAgentInput
from approvals.interrupts import (
    interrupt_id,
)
from approvals.models import ApprovalRequest
from orchestration.resume import agui_run_start
from threads.models import Thread

REFUND = "refund order A-1001 25.00"


def agui_input(
    thread_id: str,
    run_id: str,
    messages: list[dict[str, Any]],
    resume: list[dict[str, Any]] | None = None,
) -> RunAgentInput:
    """Return a ``RunAgentInput`` for ``messages``, resuming ``resume`` entries if given."""
    body: dict[str, Any] = {
        "threadId": thread_id,
        "runId": run_id,
        "state": {},
        "messages": messages,
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }
    if resume is not None:
        body["resume"] = resume
    return RunAgentInput.model_validate(body)


def interrupted(user: Any, executor: Any, thread_id: str) -> ApprovalRequest:
    """Start the refund request for ``user``; return the approval it waits on."""
    agui_run_start(
        user=user,
        agent="demo",
        run_input=agui_input(
            thread_id, "run-1", [{"id": "u1", "role": "user", "content": REFUND}]
        ),
    )
    thread = Thread.objects.get(client_thread_id=thread_id)
    executor.settle(thread)
    return ApprovalRequest.objects.select_related("tool_call", "run").get(
        thread=thread, status=ApprovalRequest.Status.PENDING
    )


def approve(approval: ApprovalRequest) -> list[dict[str, Any]]:
    """Return the resume entries that approve ``approval``'s interrupt."""
    return [
        {
            "interruptId": interrupt_id(approval),
            "status": "resolved",
            "payload": {"approved": True},
        }
    ]


def resume_post(
    user: Any, thread_id: str, run_id: str, resume: list[dict], agent: str = "demo"
) -> Any:
    """What one resuming POST does before it streams: return the run or the refusal."""
    return agui_run_start(
        user=user,
        agent=agent,
        run_input=agui_input(thread_id, run_id, [], resume),
    )
