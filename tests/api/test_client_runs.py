"""One run per request in every view: the REST API and the thread page show the client's runs.

A POST (or a posted message) is one client-visible run however many times the agent
ran inside it (docs/agui.md "one run per request"). Here the work is driven by hand,
step by step, in this process (the agent for real, the tools for real), so each test
can stop at the exact moment it needs: ``GET /api/threads/<id>/runs/``,
``GET /api/runs/<id>/``, tool calls, approvals and the thread page's state read
show that one run with its segments nested; ``POST /api/runs/<client runId>/cancel/``
cancels whatever part of it is live; a call whose outcome became unknown ends it with
``RUN_ERROR``. Every log is read by ``ag-ui-validate``. One run per request and one
interrupt spelling, in the REST API.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from approvals import crashpoints
from approvals.models import ApprovalRequest, ToolExecution
from orchestration.pipeline import execution_resolve, run_execute, tool_call_execute
from orchestration.resume import agui_run_start
from tests.aguivalidate import assert_valid_stream
from tests.helpers.api import token_client
from tests.helpers.interrupts import agui_input
from threads.answers import run_awaits_answers
from threads.models import Event, Message, Run, Thread, ToolCall
from threads.services import message_post, thread_create
from web.ui.threads import thread_ui_state

pytestmark = pytest.mark.django_db

REFUND = "refund order A-1001 25.00"

FRAGILE_AGENT = {
    "fragile": {
        "provider": "scripted",
        "model": "scripted",
        "system_prompt": "Test agent with a non-idempotent refund.",
        "toolsets": ["tests.prod.toolsets.FRAGILE_TOOLS"],
    }
}


@pytest.fixture
def fragile_agent(settings: Any) -> None:
    """The demo rules with a refund that may not run twice (tests.prod.toolsets)."""
    settings.COUNTERSIGN_AGENTS = {**settings.COUNTERSIGN_AGENTS, **FRAGILE_AGENT}
    from threads.agent_config import toolset_load

    toolset_load.cache_clear()


def step(thread: Thread) -> bool:
    """Do one piece of the thread's queued work here (a run, or one execution); return whether any."""
    for run in Run.objects.filter(thread=thread, status=Run.Status.QUEUED).order_by(
        "created_at", "id"
    ):
        if run.continues_id is None or not run_awaits_answers(run_pk=run.continues_id):
            run_execute(run_pk=run.pk)
            return True
    execution = (
        ToolExecution.objects.filter(
            tool_call__thread=thread, state=ToolExecution.State.QUEUED
        )
        .order_by("id")
        .first()
    )
    if execution is not None:
        tool_call_execute(tool_call_pk=execution.tool_call_id)
        return True
    return False


def drive(thread: Thread) -> None:
    """Do the thread's queued work until none is left (what a worker would do)."""
    for _ in range(20):
        if not step(thread):
            return
    pytest.fail("the thread never settled")


def log(thread: Thread) -> list[dict[str, Any]]:
    return [e.payload for e in Event.objects.filter(thread=thread).order_by("seq")]


def refund_interrupted(user: Any) -> tuple[Thread, Run, ApprovalRequest]:
    """Post the refund and drive it until its client run ends with the interrupt."""
    thread = thread_create(owner=user, title="refund", thread_id="t-one-run")
    _, run = message_post(thread=thread, content=REFUND)
    drive(thread)
    approval = ApprovalRequest.objects.get(thread=thread)
    return thread, run, approval


def test_one_post_is_one_run_in_the_rest_api_with_its_segments_nested(
    api: Any, user: Any
) -> None:
    """The refund message: lookup (answered by Countersign) and refund (held) are one run."""
    thread, run, approval = refund_interrupted(user)
    segments = list(Run.objects.filter(thread=thread).order_by("created_at", "id"))
    # Given: the agent ran twice inside the message's run (lookup, then refund)
    assert segments[0].run_id == run.run_id
    assert len(segments) == 2
    assert segments[1].outer_id == run.pk

    listed = api.get(f"/api/threads/{thread.thread_id}/runs/")
    detail = api.get(f"/api/runs/{run.run_id}/")
    by_segment = api.get(f"/api/runs/{segments[1].run_id}/")

    assert listed.status_code == 200
    (only,) = listed.json()["results"]
    assert only == detail.json() == by_segment.json()
    interrupt_id = f"cs-approval-{approval.pk}"
    assert only["runId"] == run.run_id
    assert (only["status"], only["outcome"]) == ("awaiting_tools", "interrupt")
    assert only["interruptIds"] == [interrupt_id]
    # lookup_order was Countersign's to answer, the refund a person's: the client
    # has nothing of its own to answer (FT-04).
    assert only["pendingToolCallIds"] == []
    assert only["error"] is None
    assert [s["runId"] for s in only["segments"]] == [s.run_id for s in segments]
    assert [s["status"] for s in only["segments"]] == ["finished", "awaiting_tools"]
    finished = log(thread)[-1]
    assert finished["type"] == "RUN_FINISHED"
    assert finished["runId"] == run.run_id
    assert [i["id"] for i in finished["outcome"]["interrupts"]] == [interrupt_id]
    assert_valid_stream(log(thread), what="the refund thread's log")
    # Tool calls and the approval name the run the client saw, not a segment.
    calls = api.get(f"/api/tool-calls/?thread={thread.thread_id}").json()["results"]
    assert {(c["name"], c["runId"]) for c in calls} == {
        ("lookup_order", run.run_id),
        ("refund_order", run.run_id),
    }


def test_the_thread_page_state_shows_the_run_the_client_saw(user: Any) -> None:
    """thread_ui_state: one run with its segments, each call under that run's id."""
    thread, run, approval = refund_interrupted(user)
    segment = Run.objects.get(thread=thread, outer=run)

    state = thread_ui_state(thread=thread)

    assert state["status"] == "waiting_for_approval"
    assert state["runs"] == [
        {
            "runId": run.run_id,
            "status": "awaiting_tools",
            "outcome": "interrupt",
            "pendingToolCallIds": [],
            "interruptIds": [f"cs-approval-{approval.pk}"],
            "error": None,
            "segments": [run.run_id, segment.run_id],
        }
    ]
    assert {c["name"]: c["runId"] for c in state["calls"].values()} == {
        "lookup_order": run.run_id,
        "refund_order": run.run_id,
    }


def test_approval_resource_uses_the_interrupt_id_the_client_sees(
    approver_api: Any, user: Any
) -> None:
    """interruptId is cs-approval-<id> (one spelling); Countersign's own has no remote id."""
    thread, run, approval = refund_interrupted(user)
    finished = log(thread)[-1]

    body = approver_api.get(f"/api/approvals/{approval.pk}/").json()
    listed = approver_api.get("/api/approvals/").json()["results"]

    (interrupt,) = finished["outcome"]["interrupts"]
    assert body["interruptId"] == interrupt["id"] == f"cs-approval-{approval.pk}"
    assert body["remoteInterruptId"] is None
    assert body["runId"] == run.run_id
    assert [a["interruptId"] for a in listed if a["id"] == approval.pk] == [
        interrupt["id"]
    ]


def test_message_run_status_is_running_while_its_later_segment_waits_on_countersign(
    api: Any, user: Any
) -> None:
    """Between segments (lookup queued for execution) the client's run is still running."""
    thread = thread_create(owner=user, title="refund", thread_id="t-between")
    _, run = message_post(thread=thread, content=REFUND)
    run_execute(run_pk=run.pk)  # the first segment hands lookup_order over

    body = api.get(f"/api/runs/{run.run_id}/").json()
    thread_body = api.get(f"/api/threads/{thread.thread_id}/").json()
    listed = api.get("/api/threads/").json()["results"]

    assert (body["status"], body["outcome"]) == ("running", None)
    assert [s["status"] for s in body["segments"]] == ["awaiting_tools"]
    assert thread_body["status"] == "running"
    assert [t["status"] for t in listed if t["threadId"] == thread.thread_id] == [
        "running"
    ]


def test_cancel_by_the_client_run_id_cancels_the_queued_later_segment(
    api: Any, user: Any
) -> None:
    """POST runs/<client runId>/cancel/ while the second segment is queued: cancelled."""
    thread = thread_create(owner=user, title="refund", thread_id="t-cancel-seg")
    _, run = message_post(thread=thread, content=REFUND)
    run_execute(run_pk=run.pk)
    step(thread)  # lookup_order runs; the continuation segment is queued
    segment = Run.objects.get(thread=thread, outer=run)
    assert segment.status == Run.Status.QUEUED

    cancelled = api.post(f"/api/runs/{run.run_id}/cancel/")
    again = api.post(f"/api/runs/{run.run_id}/cancel/")
    drive(thread)

    assert cancelled.status_code == 200, cancelled.json()
    body = cancelled.json()
    assert (body["runId"], body["status"], body["outcome"]) == (
        run.run_id,
        "cancelled",
        "cancelled",
    )
    assert body["interruptIds"] == []
    assert again.status_code == 409
    assert again.json()["detail"] == (
        f"run {run.run_id!r} already ended (cancelled); nothing to cancel"
    )
    segment.refresh_from_db()
    assert segment.status == Run.Status.CANCELLED
    events = log(thread)
    finished = dict(events[-1])
    # The first segment's tokens are the client run's (its own RUN_FINISHED was hidden).
    assert [u["totalTokens"] for u in finished.pop("usage")] == [10]
    assert finished == {
        "type": "RUN_FINISHED",
        "threadId": thread.thread_id,
        "runId": run.run_id,
        "outcome": {"type": "cancelled"},
    }
    assert [e["type"] for e in events].count("RUN_STARTED") == 1
    assert not ToolCall.objects.filter(thread=thread, name="refund_order").exists()
    assert_valid_stream(events, what="the cancelled run's log")


def test_cancel_by_the_client_run_id_while_the_later_segment_is_running(
    api: Any, user: Any, monkeypatch: Any
) -> None:
    """The cancel arrives once a worker claimed the second segment: the run ends cancelled.

    Whether the agent sees the cancel before it ends (its own cancelled
    RUN_FINISHED) or hands the refund over first (then answered as cancelled,
    never held for a person), the client's run ends ``{type:"cancelled"}``.
    """
    thread = thread_create(owner=user, title="refund", thread_id="t-cancel-running")
    _, run = message_post(thread=thread, content=REFUND)
    run_execute(run_pk=run.pk)
    step(thread)  # lookup_order runs; the continuation segment is queued
    segment = Run.objects.get(thread=thread, outer=run)
    answers: list[Any] = []

    def cancel_when_claimed(name: str) -> None:
        if name == "after_run_claimed" and not answers:
            answers.append(api.post(f"/api/runs/{run.run_id}/cancel/"))

    monkeypatch.setattr(crashpoints, "crash_point", cancel_when_claimed)
    run_execute(run_pk=segment.pk)
    monkeypatch.undo()
    drive(thread)

    (cancelled,) = answers
    assert cancelled.status_code == 200, cancelled.json()
    assert (cancelled.json()["status"], cancelled.json()["cancelRequested"]) == (
        "running",
        True,
    )
    final = api.get(f"/api/runs/{run.run_id}/").json()
    assert (final["status"], final["outcome"]) == ("cancelled", "cancelled")
    assert not ApprovalRequest.objects.filter(thread=thread).exists()
    assert not ToolExecution.objects.filter(tool_call__name="refund_order").exists()
    events = log(thread)
    assert [e["type"] for e in events].count("RUN_FINISHED") == 1
    assert events[-1]["outcome"] == {"type": "cancelled"}
    assert events[-1]["runId"] == run.run_id
    assert_valid_stream(events, what="the cancelled run's log")


def test_cancel_by_the_client_run_id_while_countersign_answers_its_calls(
    api: Any, user: Any
) -> None:
    """Cancel while lookup_order waits for execution: abandoned, no continuation, cancelled."""
    thread = thread_create(owner=user, title="refund", thread_id="t-cancel-calls")
    _, run = message_post(thread=thread, content=REFUND)
    run_execute(run_pk=run.pk)
    lookup = ToolCall.objects.get(thread=thread, name="lookup_order")
    assert lookup.state == ToolCall.State.APPROVED  # auto-approved, queued to execute

    cancelled = api.post(f"/api/runs/{run.run_id}/cancel/")
    drive(thread)  # the queued execution still runs (it may have started)

    assert cancelled.status_code == 200, cancelled.json()
    assert (cancelled.json()["status"], cancelled.json()["outcome"]) == (
        "cancelled",
        "cancelled",
    )
    final = api.get(f"/api/runs/{run.run_id}/").json()
    assert (final["status"], final["outcome"]) == ("cancelled", "cancelled")
    assert final["cancelRequested"] is True
    assert [s["status"] for s in final["segments"]] == ["finished"]
    # The lookup already handed to a worker finished; it was never restarted.
    lookup.refresh_from_db()
    assert lookup.state == ToolCall.State.SUCCEEDED
    assert ToolExecution.objects.get(tool_call=lookup).attempts == 1
    # No continuation: the agent never ran again after the cancel.
    assert Run.objects.filter(thread=thread).count() == 1
    events = log(thread)
    assert [e["type"] for e in events if e["type"].startswith("RUN_")] == [
        "RUN_STARTED",
        "RUN_FINISHED",
    ]
    assert events[[e["type"] for e in events].index("RUN_FINISHED")]["outcome"] == {
        "type": "cancelled"
    }
    assert_valid_stream(events, what="the cancelled run's log")


def _die_mid_execution(monkeypatch: Any, call: ToolCall) -> None:
    """Execute ``call`` with a worker that dies after its reservation; expire the lease."""

    class WorkerDied(Exception):
        pass

    def die(name: str) -> None:
        if name == "after_reservation":
            raise WorkerDied(name)

    monkeypatch.setattr(crashpoints, "crash_point", die)
    with pytest.raises(WorkerDied):
        tool_call_execute(tool_call_pk=call.pk)
    monkeypatch.undo()
    ToolExecution.objects.filter(tool_call=call).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )


def resolved_by_operator(
    thread: Thread, call: ToolCall, operator: Any, content: str
) -> list[dict[str, Any]]:
    """Resolve ``call`` as having succeeded with ``content``; drive the thread; return its log.

    Countersign's own run (a ``RUN_STARTED`` with no ``input``) reports the one
    ``TOOL_CALL_RESULT`` of the call, and the log stays a valid AG-UI stream.
    """
    execution_resolve(
        tool_call=call,
        resolved_by=operator,
        succeeded=True,
        content=content,
        reason="the ledger shows what happened",
    )
    drive(thread)
    events = log(thread)
    assert "input" not in [e for e in events if e["type"] == "RUN_STARTED"][-1]
    results = [e["toolCallId"] for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert results.count(call.tool_call_id) == 1
    assert_valid_stream(events, what="the resolved thread's log")
    return events


def test_outcome_unknown_ends_the_client_run_with_run_error(
    api: Any, nonstaff_approver: Any, user: Any, fragile_agent: None, monkeypatch: Any
) -> None:
    """An auto-approved call (lookup_order, not idempotent here) dies mid-execution.

    The redelivery records ``outcome_unknown``; the client's run, still streaming,
    ends with ``RUN_ERROR`` code ``outcome_unknown`` naming the call (never a
    success with nothing pending). Once an operator resolves the call, the thread
    continues in a run Countersign starts itself, the call answered exactly once.
    """
    thread = thread_create(
        owner=user, title="r", thread_id="t-unknown", agent="fragile"
    )
    _, run = message_post(thread=thread, content="refund order A-1001 2.50")
    run_execute(run_pk=run.pk)
    lookup = ToolCall.objects.get(thread=thread, name="lookup_order")
    _die_mid_execution(monkeypatch, lookup)

    # When the redelivery finds the dead worker's reservation
    tool_call_execute(tool_call_pk=lookup.pk)

    lookup.refresh_from_db()
    assert lookup.state == ToolCall.State.OUTCOME_UNKNOWN
    events = log(thread)
    error = events[-1]
    assert error["type"] == "RUN_ERROR"
    assert error["code"] == "outcome_unknown"
    assert error["message"].startswith(
        f"The outcome of lookup_order ({lookup.tool_call_id}) is unknown"
    )
    assert f"/agui/threads/{thread.thread_id}/events" in error["message"]
    assert "RUN_FINISHED" not in [e["type"] for e in events]
    assert_valid_stream(events, what="the outcome_unknown run's log")
    body = api.get(f"/api/runs/{run.run_id}/").json()
    assert (body["status"], body["outcome"]) == ("error", None)
    assert body["error"] == {"code": "outcome_unknown", "message": error["message"]}
    assert body["pendingToolCallIds"] == []

    # Then the operator resolves it and Countersign's own run streams the answer
    events = resolved_by_operator(
        thread,
        lookup,
        nonstaff_approver,
        '{"order_id":"A-1001","status":"delivered","total":25.0}',
    )
    assert [e["type"] for e in events].count("RUN_STARTED") == 2
    runs = api.get(f"/api/threads/{thread.thread_id}/runs/").json()["results"]
    assert [(r["status"], r["outcome"]) for r in runs] == [
        ("error", None),
        ("awaiting_tools", "interrupt"),
    ]


def test_outcome_unknown_during_a_resume_ends_that_run_with_run_error(
    nonstaff_approver: Any, fragile_agent: None, monkeypatch: Any
) -> None:
    """The client resumed the refund; its worker died mid-call: that POST's run ends RUN_ERROR.

    The run's ``RUN_ERROR`` has code ``outcome_unknown`` and names the call; the
    REST run says ``error`` with the same code; the call is answered exactly once
    after the operator resolves it, in a run Countersign starts itself.
    """
    history = [{"id": "u1", "role": "user", "content": "refund order A-1001 2.50"}]
    agui_run_start(
        user=nonstaff_approver,
        agent="fragile",
        run_input=agui_input("t-unknown-resume", "run-1", history),
    )
    thread = Thread.objects.get(client_thread_id="t-unknown-resume")
    drive(thread)
    approval = ApprovalRequest.objects.get(thread=thread)
    agui_run_start(
        user=nonstaff_approver,
        agent="fragile",
        run_input=agui_input(
            "t-unknown-resume",
            "run-2",
            history,
            resume=[
                {
                    "interruptId": f"cs-approval-{approval.pk}",
                    "status": "resolved",
                    "payload": {"approved": True},
                }
            ],
        ),
    )
    call = ToolCall.objects.get(pk=approval.tool_call_id)
    _die_mid_execution(monkeypatch, call)

    tool_call_execute(tool_call_pk=call.pk)

    events = log(thread)
    error = events[-1]
    assert error["type"] == "RUN_ERROR"
    assert error["code"] == "outcome_unknown"
    assert f"refund_order ({call.tool_call_id})" in error["message"]
    assert "resolve" in error["message"]
    assert [e["runId"] for e in events if e["type"] == "RUN_STARTED"] == [
        "run-1",
        "run-2",
    ]
    body = token_client(nonstaff_approver).get("/api/runs/run-2/").json()
    assert (body["status"], body["outcome"]) == ("error", None)
    assert body["error"] == {"code": "outcome_unknown", "message": error["message"]}
    run2 = Run.objects.get(thread=thread, run_id="run-2")
    # It never ran, and no longer waits for the call: a later run continues it.
    assert (run2.status, run2.continues_id) == ("error", None)
    assert_valid_stream(events, what="the resumed run's log")

    # When the operator resolves the call, Countersign's own run answers it once
    events = resolved_by_operator(
        thread, call, nonstaff_approver, "refunded 2.50 on A-1001"
    )
    assert [e["type"] for e in events].count("RUN_STARTED") == 3
    assert (
        Message.objects.filter(
            thread=thread, role="tool", tool_call_id=call.tool_call_id
        ).count()
        == 1
    )
    assert events[-1]["type"] == "RUN_FINISHED"
    assert events[-1]["outcome"] == {"type": "success"}
