"""Runs and tool calls over the REST API: retrieve, cancel, list, verdicts (DC-05, RT-05, RT-06)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tests.helpers.api import REFUND_ARGS, pending_refund_thread
from threads.models import Run, Thread, ToolCall
from threads.recording import record_events

pytestmark = pytest.mark.django_db


def _stamp(value) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


def test_dc05_run_retrieve_shows_status_pending_calls_and_timestamps(api, user):
    """GET runs/<runId>/ shows the run as the database holds it."""
    pending_refund_thread(user, thread_id="t-refund")
    run = Run.objects.get(run_id="t-refund-run")

    response = api.get("/api/runs/t-refund-run/")

    assert response.status_code == 200
    assert response.json() == {
        "runId": "t-refund-run",
        "threadId": "t-refund",
        "agent": "demo",
        "status": "awaiting_tools",
        "outcome": "success",
        "pendingToolCallIds": ["t-refund-call"],
        "interruptIds": [],
        "error": None,
        "cancelRequested": False,
        "continues": None,
        "createdAt": _stamp(run.created_at),
        "startedAt": _stamp(run.started_at),
        "finishedAt": _stamp(run.finished_at),
        "segments": [],
    }


def test_run_retrieve_shows_the_error_and_what_it_continues(api, user):
    """A failed continuation run shows its error code/message and the run it continues."""
    thread = Thread.objects.create(owner=user, thread_id="t-1")
    first = Run.objects.create(thread=thread, run_id="r-1", status=Run.Status.FINISHED)
    Run.objects.create(
        thread=thread,
        run_id="r-2",
        continues=first,
        status=Run.Status.ERROR,
        error_code="agent_error",
        error_message="The agent failed (TimeoutError).",
    )

    body = api.get("/api/runs/r-2/").json()

    assert body["error"] == {
        "code": "agent_error",
        "message": "The agent failed (TimeoutError).",
    }
    assert body["continues"] == "r-1"
    assert body["status"] == "error"


def test_dc05_cancel_a_queued_run(api, user):
    """POST runs/<runId>/cancel/ ends a queued run as cancelled; a second cancel is 409."""
    Thread.objects.create(owner=user, thread_id="t-1")
    run_id = api.post(
        "/api/threads/t-1/messages/", {"content": "hi"}, format="json"
    ).json()["run"]["runId"]

    cancelled = api.post(f"/api/runs/{run_id}/cancel/")
    again = api.post(f"/api/runs/{run_id}/cancel/")

    assert cancelled.status_code == 200
    assert (cancelled.json()["status"], cancelled.json()["outcome"]) == (
        "cancelled",
        "cancelled",
    )
    assert cancelled.json()["cancelRequested"] is True
    assert again.status_code == 409
    assert again.json() == {
        "type": "run_not_cancellable",
        "detail": f"run {run_id!r} already ended (cancelled); nothing to cancel",
    }


def test_dc05_another_users_run_and_tool_call_answer_404(other_api, user):
    """Another user's run, its cancel and its tool call are 404 (not 403)."""
    pending_refund_thread(user, thread_id="t-refund")

    responses = [
        other_api.get("/api/runs/t-refund-run/"),
        other_api.post("/api/runs/t-refund-run/cancel/"),
        other_api.get("/api/tool-calls/t-refund-call/"),
    ]

    assert [r.status_code for r in responses] == [404, 404, 404]
    assert other_api.get("/api/tool-calls/").json()["results"] == []


def test_runs_and_tool_calls_need_credentials():
    """Without credentials: 401."""
    client = APIClient()

    assert client.get("/api/runs/r/").status_code == 401
    assert client.get("/api/tool-calls/").status_code == 401


def test_dc05_tool_call_shows_arguments_verdict_and_approval(api, user):
    """A pending refund: arguments as streamed and parsed, verdict ok, approval pending."""
    pending_refund_thread(user, thread_id="t-refund")
    call = ToolCall.objects.get(tool_call_id="t-refund-call")
    params = {"order_id": "A-1001", "amount": 25.0, "reason": "customer request"}

    response = api.get("/api/tool-calls/t-refund-call/")

    assert response.status_code == 200
    assert response.json() == {
        "toolCallId": "t-refund-call",
        "threadId": "t-refund",
        "runId": "t-refund-run",
        "name": "refund_order",
        "state": "awaiting_approval",
        "argumentsText": REFUND_ARGS,
        "arguments": params,
        "validation": {
            "verdict": "ok",
            "repair": None,
            "error": None,
            "params": params,
        },
        "result": None,
        "approval": {
            "id": call.approval.pk,
            "status": "pending",
            "editedArguments": None,
            "decidedBy": None,
            "reason": "",
        },
        "createdAt": _stamp(call.created_at),
        "updatedAt": _stamp(call.updated_at),
    }


def _call_with_arguments(user, name: str, arguments: str, *, thread_id: str) -> None:
    thread = Thread.objects.create(owner=user, thread_id=thread_id)
    run = Run.objects.create(
        thread=thread, run_id=f"{thread_id}-run", status=Run.Status.RUNNING
    )
    record_events(
        run=run,
        events=[
            {"type": "RUN_STARTED", "threadId": thread_id, "runId": run.run_id},
            {
                "type": "TOOL_CALL_START",
                "toolCallId": f"{thread_id}-c",
                "toolCallName": name,
            },
            {
                "type": "TOOL_CALL_ARGS",
                "toolCallId": f"{thread_id}-c",
                "delta": arguments,
            },
            {"type": "TOOL_CALL_END", "toolCallId": f"{thread_id}-c"},
            {
                "type": "RUN_FINISHED",
                "threadId": thread_id,
                "runId": run.run_id,
                "outcome": {
                    "type": "success",
                    "pendingToolCallIds": [f"{thread_id}-c"],
                },
            },
        ],
    )


@pytest.mark.parametrize(
    ("name", "arguments", "verdict", "repair", "params"),
    [
        (
            "get_weather",
            '{"city": "Oslo",}',
            "repair",
            "trailing_commas",
            {"city": "Oslo"},
        ),
        ("get_weather", '{"city": 7}', "error", None, None),
        ("launch_rockets", "{}", "unknown_tool", None, None),
    ],
    ids=["repaired", "invalid", "unknown-tool"],
)
def test_rt05_rt06_tool_call_validation_verdicts(
    api, user, name, arguments, verdict, repair, params
):
    """The verdict is the argument ladder's: ok, repair (naming the rung), error, unknown_tool."""
    _call_with_arguments(user, name, arguments, thread_id="t-v")

    body = api.get("/api/tool-calls/t-v-c/").json()

    assert body["argumentsText"] == arguments
    assert body["validation"]["verdict"] == verdict
    assert body["validation"]["repair"] == repair
    assert body["validation"]["params"] == params
    assert (body["validation"]["error"] is None) == (verdict in {"ok", "repair"})


def test_tool_calls_list_filters_by_thread_state_and_name(api, user):
    """tool-calls/ lists newest first and filters by thread, state and name."""
    pending_refund_thread(user, thread_id="t-refund")
    _call_with_arguments(user, "get_weather", '{"city":"Oslo"}', thread_id="t-weather")

    everything = api.get("/api/tool-calls/").json()
    by_thread = api.get("/api/tool-calls/?thread=t-refund").json()["results"]
    by_state = api.get("/api/tool-calls/?state=awaiting_approval").json()["results"]
    by_name = api.get("/api/tool-calls/?name=get_weather").json()["results"]
    bad_state = api.get("/api/tool-calls/?state=bogus")

    assert everything["count"] == 2
    assert [c["toolCallId"] for c in everything["results"]] == [
        "t-weather-c",
        "t-refund-call",
    ]
    assert [c["toolCallId"] for c in by_thread] == ["t-refund-call"]
    assert [c["toolCallId"] for c in by_state] == ["t-refund-call"]
    assert [c["toolCallId"] for c in by_name] == ["t-weather-c"]
    assert bad_state.status_code == 400
    assert list(bad_state.json()["fields"]) == ["state"]


def test_huge_offsets_do_not_crash(api, user):
    """An offset beyond any page is an empty page, not a database overflow."""
    pending_refund_thread(user, thread_id="t-refund")

    response = api.get("/api/tool-calls/?offset=" + "9" * 30)

    assert response.status_code == 200
    assert response.json()["results"] == []
