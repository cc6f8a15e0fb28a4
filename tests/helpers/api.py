"""REST API helpers: token clients and a refund call left waiting for approval."""

from __future__ import annotations

from typing import Any

from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from threads.models import Run, Thread

REFUND_ARGS = '{"order_id":"A-1001","amount":25.0,"reason":"customer request"}'


def token_client(user: Any) -> APIClient:
    """Return an API client authenticated with ``user``'s token."""
    token, _ = Token.objects.get_or_create(user=user)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


def pending_refund_thread(
    owner: Any, *, thread_id: str = "t-refund", arguments: str = REFUND_ARGS
) -> Thread:
    """Return a thread whose run left a ``refund_order`` call waiting for approval.

    The run's events go through the real recorder and the real dispatch (no
    worker runs: callbacks on commit do not fire inside a test transaction).
    Unlike the ``pending_refund`` fixture, no agent runs and no executor is needed.
    """
    from orchestration.pipeline import pending_calls_dispatch
    from threads.recording import record_events
    from threads.services import run_input_build, thread_create

    thread = thread_create(owner=owner, title="refund", thread_id=thread_id)
    run = Run.objects.create(
        thread=thread,
        run_id=f"{thread_id}-run",
        status=Run.Status.RUNNING,
        agent="demo",
    )
    run.input = run_input_build(run=run)
    run.save(update_fields=["input"])
    record_events(
        run=run,
        events=[
            {"type": "RUN_STARTED", "threadId": thread_id, "runId": run.run_id},
            {
                "type": "TOOL_CALL_START",
                "toolCallId": f"{thread_id}-call",
                "toolCallName": "refund_order",
            },
            {
                "type": "TOOL_CALL_ARGS",
                "toolCallId": f"{thread_id}-call",
                "delta": arguments,
            },
            {"type": "TOOL_CALL_END", "toolCallId": f"{thread_id}-call"},
            {
                "type": "RUN_FINISHED",
                "threadId": thread_id,
                "runId": run.run_id,
                "outcome": {
                    "type": "success",
                    "pendingToolCallIds": [f"{thread_id}-call"],
                },
            },
        ],
    )
    run.refresh_from_db()
    pending_calls_dispatch(run=run)
    return thread
