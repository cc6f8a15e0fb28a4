"""Remote agents' AG-UI interrupts as approval requests in the queue (IR-18).

A real Pydantic AI agent (``FunctionModel``, no API key) served by Pydantic AI's own
``AGUIAdapter`` under uvicorn declares ``delete_file`` with ``requires_approval=True``:
it ends its run with an interrupt outcome, Countersign queues one approval request per
interrupt, the operator decides through the REST API, and the decision goes back to the
agent as ``resume[]`` in its next input, exactly once; the agent then runs (or does
not run) its tool and the thread continues. A second small AG-UI agent asks a question
by interrupt without a tool call, answered with a form built from its
``responseSchema``. Each flow runs on the embedded pool and on a real Celery worker.
Rules: IR-18, DC-03, SEC-04, FT-06.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from approvals.models import ApprovalRequest, AuditEntry
from orchestration.pipeline import approvals_expire
from tests import remote_agents
from tests.remote_agents import EXECUTED, RECEIVED, serve
from threads.models import Message, Run, ToolCall
from threads.services import message_post, thread_create

pytest.importorskip(
    "pydantic_ai.ui.ag_ui", reason="pydantic-ai-slim[ag-ui] (dev extra)"
)


@pytest.fixture
def remote_agents_configured(settings: Any, monkeypatch: Any) -> Iterator[None]:
    """Serve the third-party agents and configure them here and in worker processes."""
    EXECUTED.clear()
    RECEIVED.clear()
    with serve() as base:
        agents = {
            "pai_remote": {"provider": "agui_http", "url": f"{base}/pydantic-ai"},
            "ask_remote": {"provider": "agui_http", "url": f"{base}/ask-shipping"},
        }
        settings.COUNTERSIGN_AGENTS = {**settings.COUNTERSIGN_AGENTS, **agents}
        monkeypatch.setenv("COUNTERSIGN_AGENTS_JSON", json.dumps(agents))
        yield


def _start(user: Any, agent: str, executor: Any) -> Any:
    thread = thread_create(owner=user, title=agent, agent=agent)
    message_post(thread=thread, content="please delete /srv/report.txt")
    executor.settle(thread)
    return thread


def _resumes() -> list[Any]:
    return [body["resume"] for body in RECEIVED if body.get("resume")]


def _final_text(thread: Any) -> str:
    message = (
        Message.objects.filter(thread=thread, role="assistant")
        .exclude(content="")
        .order_by("position", "id")
        .last()
    )
    return message.content if message is not None else ""


def test_pydantic_ai_interrupt_is_queued_approved_resumed_once_and_continues(
    remote_agents_configured: None, user: Any, approver_api: Any, executor: Any
) -> None:
    """User message → interrupt → queue → approve via REST → tool runs once → reply."""
    thread = _start(user, "pai_remote", executor)

    # Given: the remote's call waits in the queue as an interrupt, not executed.
    call = ToolCall.objects.get(thread=thread)
    assert (call.name, call.state) == ("delete_file", "awaiting_approval")
    approval = ApprovalRequest.objects.get(thread=thread)
    assert approval.tool_call == call
    assert (approval.kind, approval.interrupt_id) == ("interrupt", "int-pai_delete_1")
    assert approval.proposed_arguments == {"path": "/srv/report.txt"}
    assert (approval.response_schema or {})["required"] == ["approved"]
    first_run = Run.objects.get(thread=thread)
    assert (first_run.status, first_run.outcome) == ("awaiting_tools", "interrupt")
    assert first_run.pending_tool_call_ids == []
    listed = approver_api.get(f"/api/approvals/{approval.pk}/").json()
    assert listed["kind"] == "interrupt"
    # One spelling: the id the AG-UI client saw; the remote's own id kept apart.
    assert listed["interruptId"] == f"cs-approval-{approval.pk}"
    assert listed["remoteInterruptId"] == "int-pai_delete_1"
    assert listed["runId"] == first_run.run_id
    assert listed["toolCallId"] == "pai_delete_1"
    assert listed["message"] == 'Approve delete_file({"path":"/srv/report.txt"})?'
    assert listed["responseSchema"]["properties"]["approved"] == {"type": "boolean"}
    assert EXECUTED == []

    # When: the operator approves through the REST API, twice (a replay).
    response = approver_api.post(
        f"/api/approvals/{approval.pk}/approve/", {}, format="json"
    )
    replay = approver_api.post(
        f"/api/approvals/{approval.pk}/approve/", {}, format="json"
    )
    executor.settle(thread)

    # Then: one resume entry reached the agent once; its tool ran once; thread goes on.
    assert response.status_code == 200, response.json()
    assert replay.status_code == 200
    assert response.json()["response"] == {"approved": True}
    assert _resumes() == [
        [
            {
                "interruptId": "int-pai_delete_1",
                "status": "resolved",
                "payload": {"approved": True},
            }
        ]
    ]
    assert EXECUTED == ["/srv/report.txt"]
    call.refresh_from_db()
    assert call.state == "succeeded"
    tools = Message.objects.filter(thread=thread, role="tool")
    assert [m.content for m in tools] == ["deleted /srv/report.txt"]
    assert _final_text(thread) == "Done: deleted /srv/report.txt"
    runs = list(Run.objects.filter(thread=thread).order_by("id"))
    assert [r.status for r in runs] == ["finished", "finished"]
    assert runs[1].continues_id == runs[0].pk
    assert AuditEntry.objects.filter(
        action="approval.approved", target_id=str(approval.pk)
    ).exists()


def test_pydantic_ai_interrupt_approved_with_edited_arguments_runs_the_edit(
    remote_agents_configured: None, user: Any, approver_api: Any, executor: Any
) -> None:
    thread = _start(user, "pai_remote", executor)
    approval = ApprovalRequest.objects.get(thread=thread)

    response = approver_api.post(
        f"/api/approvals/{approval.pk}/approve/",
        {"editedArguments": {"path": "/srv/old-report.txt"}},
        format="json",
    )
    executor.settle(thread)

    assert response.status_code == 200, response.json()
    assert _resumes()[0][0]["payload"] == {
        "approved": True,
        "editedArgs": {"path": "/srv/old-report.txt"},
    }
    assert EXECUTED == ["/srv/old-report.txt"]


def test_pydantic_ai_interrupt_rejected_is_never_executed_and_the_agent_is_told(
    remote_agents_configured: None, user: Any, approver_api: Any, executor: Any
) -> None:
    thread = _start(user, "pai_remote", executor)
    approval = ApprovalRequest.objects.get(thread=thread)

    response = approver_api.post(
        f"/api/approvals/{approval.pk}/reject/",
        {"reason": "keep the report"},
        format="json",
    )
    executor.settle(thread)

    assert response.status_code == 200, response.json()
    assert _resumes() == [
        [
            {
                "interruptId": "int-pai_delete_1",
                "status": "resolved",
                "payload": {"approved": False, "reason": "keep the report"},
            }
        ]
    ]
    assert EXECUTED == []
    call = ToolCall.objects.get(thread=thread)
    assert call.state == "declined"
    assert "keep the report" in _final_text(thread)


def test_expired_interrupt_is_sent_back_cancelled_and_never_executed(
    remote_agents_configured: None, user: Any, approver_api: Any, executor: Any
) -> None:
    thread = _start(user, "pai_remote", executor)
    approval = ApprovalRequest.objects.get(thread=thread)
    ApprovalRequest.objects.filter(pk=approval.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )

    assert approvals_expire() == 1
    executor.settle(thread)
    late = approver_api.post(
        f"/api/approvals/{approval.pk}/approve/", {}, format="json"
    )

    assert _resumes() == [[{"interruptId": "int-pai_delete_1", "status": "cancelled"}]]
    assert EXECUTED == []
    assert ToolCall.objects.get(thread=thread).state == "expired"
    assert late.status_code == 409
    assert late.json()["type"] == "already_decided"


def test_interrupt_decision_needs_the_permission(
    remote_agents_configured: None, user: Any, api: Any, executor: Any
) -> None:
    thread = _start(user, "pai_remote", executor)
    approval = ApprovalRequest.objects.get(thread=thread)

    response = api.post(f"/api/approvals/{approval.pk}/approve/", {}, format="json")

    assert response.status_code in (403, 404)
    approval.refresh_from_db()
    assert approval.status == "pending"
    assert _resumes() == []


def test_question_interrupt_shows_its_form_and_refuses_an_answer_off_schema(
    remote_agents_configured: None, user: Any, approver_api: Any, executor: Any
) -> None:
    """An interrupt bound to no call: message + responseSchema; answer validated first."""
    thread = _start(user, "ask_remote", executor)
    # No call holds the thread busy here: wait for the dispatch to queue the request.
    approval = executor.wait_for(
        lambda: ApprovalRequest.objects.filter(thread=thread).first()
    )
    assert approval.tool_call is None
    shown = approver_api.get(f"/api/approvals/{approval.pk}/").json()
    assert shown["toolCallId"] is None
    assert shown["message"] == "Which carrier should ship order A-1001?"
    assert shown["responseSchema"] == remote_agents.SHIPPING_SCHEMA

    bad = approver_api.post(
        f"/api/approvals/{approval.pk}/approve/",
        {"response": {"carrier": "pigeon"}},
        format="json",
    )
    approval.refresh_from_db()
    assert bad.status_code == 400
    assert bad.json()["type"] == "invalid_response"
    assert "'carrier'" in bad.json()["detail"]
    assert approval.status == "pending"
    assert Run.objects.filter(thread=thread).count() == 1

    good = approver_api.post(
        f"/api/approvals/{approval.pk}/approve/",
        {"response": {"carrier": "dhl", "express": True}},
        format="json",
    )
    executor.settle(thread)

    assert good.status_code == 200, good.json()
    first = Run.objects.filter(thread=thread).order_by("id")[0]
    assert _resumes() == [
        [
            {
                "interruptId": f"ask-{first.run_id}",
                "status": "resolved",
                "payload": {"carrier": "dhl", "express": True},
            }
        ]
    ]
    assert _final_text(thread).startswith("Shipping with [")
    assert [r.status for r in Run.objects.filter(thread=thread)] == [
        "finished",
        "finished",
    ]


@pytest.mark.parametrize("executor", ["embedded"], indirect=True)
def test_admin_shows_the_question_and_decides_it_with_a_response(
    remote_agents_configured: None,
    user: Any,
    nonstaff_approver: Any,
    client: Any,
    executor: Any,
) -> None:
    """The admin page shows message and schema; its decide form sends a response."""
    from django.contrib.auth.models import Permission
    from django.urls import reverse

    nonstaff_approver.is_staff = True
    nonstaff_approver.save(update_fields=["is_staff"])
    nonstaff_approver.user_permissions.add(
        Permission.objects.get(codename="view_approvalrequest")
    )
    thread = _start(user, "ask_remote", executor)
    approval = executor.wait_for(
        lambda: ApprovalRequest.objects.filter(thread=thread).first()
    )
    client.force_login(nonstaff_approver)

    page = client.get(
        reverse("admin:approvals_approvalrequest_change", args=[approval.pk])
    ).content.decode()
    bad = client.post(
        reverse("admin:approvals_approvalrequest_decide", args=[approval.pk]),
        {"decision": "approve", "reason": "", "response": '{"express": true}'},
        follow=True,
    ).content.decode()
    approval.refresh_from_db()
    assert approval.status == "pending"
    client.post(
        reverse("admin:approvals_approvalrequest_decide", args=[approval.pk]),
        {"decision": "approve", "reason": "", "response": '{"carrier": "ups"}'},
    )
    executor.settle(thread)

    assert "Which carrier should ship order A-1001?" in page
    assert 'name="response"' in page
    assert "&quot;carrier&quot;" in page
    assert "is a required property" in bad
    approval.refresh_from_db()
    assert (approval.status, approval.response) == ("approved", {"carrier": "ups"})
    assert _resumes()[0][0]["payload"] == {"carrier": "ups"}


@pytest.mark.parametrize("executor", ["embedded"], indirect=True)
def test_open_interrupt_holds_the_thread_and_cancelling_it_resumes_in_the_next_run(
    remote_agents_configured: None, user: Any, api: Any, executor: Any
) -> None:
    """A new message waits for the interrupt; cancel-pending sends it back cancelled."""
    from approvals.services import thread_pending_calls_cancel
    from threads.exceptions import RunConflict

    thread = _start(user, "pai_remote", executor)
    approval = ApprovalRequest.objects.get(thread=thread)

    with pytest.raises(RunConflict, match="int-pai_delete_1"):
        message_post(thread=thread, content="never mind")
    cancelled = thread_pending_calls_cancel(
        thread=thread, cancelled_by=user, reason="changed my mind"
    )
    message_post(thread=thread, content="never mind")
    executor.settle(thread)

    approval.refresh_from_db()
    assert cancelled == ["pai_delete_1"]
    assert approval.status == "cancelled"
    assert _resumes() == [[{"interruptId": "int-pai_delete_1", "status": "cancelled"}]]
    assert EXECUTED == []
    assert ToolCall.objects.get(thread=thread).state == "cancelled"
    assert _final_text(thread).startswith("Done: ")


@pytest.fixture
def langgraph_configured(settings: Any, monkeypatch: Any) -> Iterator[Any]:
    """Serve the LangGraph agent and configure it here and in worker processes."""
    pytest.importorskip("ag_ui_langgraph", reason="ag-ui-langgraph (dev extra)")
    from tests import langgraph_agent

    langgraph_agent.ANSWERS.clear()
    with serve(langgraph_agent.build_app()) as base:
        agents = {"lg_remote": {"provider": "agui_http", "url": f"{base}/langgraph"}}
        settings.COUNTERSIGN_AGENTS = {**settings.COUNTERSIGN_AGENTS, **agents}
        monkeypatch.setenv("COUNTERSIGN_AGENTS_JSON", json.dumps(agents))
        yield langgraph_agent


def test_langgraph_interrupt_is_queued_answered_with_its_form_and_resumed_once(
    langgraph_configured: Any, user: Any, approver_api: Any, executor: Any
) -> None:
    """LangGraph (ag-ui-langgraph, emit_interrupt_outcome=True) asks; the answer resumes it."""
    thread = _start(user, "lg_remote", executor)
    approval = executor.wait_for(
        lambda: ApprovalRequest.objects.filter(thread=thread).first()
    )
    shown = approver_api.get(f"/api/approvals/{approval.pk}/").json()

    response = approver_api.post(
        f"/api/approvals/{approval.pk}/approve/",
        {"response": {"carrier": "ups"}},
        format="json",
    )
    executor.settle(thread)

    assert shown["kind"] == "interrupt"
    assert shown["toolCallId"] is None
    assert shown["message"] == "Which carrier should ship order A-1001?"
    assert shown["responseSchema"] == remote_agents.SHIPPING_SCHEMA
    assert response.status_code == 200, response.json()
    assert langgraph_configured.ANSWERS == [{"carrier": "ups"}]
    runs = list(Run.objects.filter(thread=thread).order_by("id"))
    assert [r.status for r in runs] == ["finished", "finished"]
    assert runs[1].input["resume"] == [
        {
            "interruptId": approval.interrupt_id,
            "status": "resolved",
            "payload": {"carrier": "ups"},
        }
    ]


def _agui_start(
    user: Any, agent: str, thread_id: str, run_id: str, **extra: Any
) -> Any:
    """Do what ``POST /agui/<agent>/`` does before it streams; return its result."""
    from agentcore.events import RunAgentInput
    from orchestration.resume import agui_run_start

    body = {
        "threadId": thread_id,
        "runId": run_id,
        "state": {},
        "messages": [],
        "tools": [],
        "context": [],
        "forwardedProps": {},
        **extra,
    }
    return agui_run_start(
        user=user, agent=agent, run_input=RunAgentInput.model_validate(body)
    )


def _wire_runs(thread: Any) -> list[list[dict[str, Any]]]:
    """Return the thread's log (what its AG-UI clients were streamed), one list per run."""
    from threads.models import Event

    runs: list[list[dict[str, Any]]] = []
    for payload in (
        Event.objects.filter(thread=thread)
        .order_by("seq")
        .values_list("payload", flat=True)
    ):
        if payload.get("type") == "RUN_STARTED":
            runs.append([])
        runs[-1].append(payload)
    return runs


def _interrupted_outcome(thread: Any, executor: Any) -> dict[str, Any]:
    """Wait for the client's run to end; return its RUN_FINISHED outcome."""
    finished = executor.wait_for(
        lambda: (_wire_runs(thread) or [[{}]])[-1][-1].get("type") == "RUN_FINISHED"
    )
    assert finished
    return _wire_runs(thread)[-1][-1]["outcome"]


def test_ir18_remote_tool_interrupt_reaches_the_agui_client_and_its_resume_decides_it(
    remote_agents_configured: None, nonstaff_approver: Any, executor: Any
) -> None:
    """IR-18, IR-01, IR-02, IR-03: Pydantic AI's interrupt ends the client's run as ours.

    The client of Countersign sees one interrupt for the remote's held
    ``delete_file`` call, under Countersign's id (``cs-approval-<pk>``, not the
    remote's ``int-pai_delete_1``), ``reason: "tool_call"`` and the streamed
    ``toolCallId``. Its ``resume[]`` approves it through approval_decide; the
    remote gets its own resume entry once, runs the tool once and the reply
    streams in the client's next run. Both runs pass ag-ui-validate.
    """
    from approvals.interrupts import interrupt_for
    from tests.aguivalidate import HYGIENE, assert_valid_stream
    from threads.models import Thread

    user_message = {"id": "u1", "role": "user", "content": "delete /srv/report.txt"}
    _agui_start(
        nonstaff_approver, "pai_remote", "ir18-tool", "run-1", messages=[user_message]
    )
    thread = Thread.objects.get(client_thread_id="ir18-tool")
    executor.settle(thread)
    approval = ApprovalRequest.objects.select_related("tool_call", "run").get(
        thread=thread
    )
    outcome = _interrupted_outcome(thread, executor)

    (interrupt,) = outcome["interrupts"]
    assert outcome["type"] == "interrupt"
    assert interrupt == interrupt_for(approval)
    assert (interrupt["id"], interrupt["reason"], interrupt["toolCallId"]) == (
        f"cs-approval-{approval.pk}",
        "tool_call",
        "pai_delete_1",
    )
    assert interrupt["metadata"]["approvalId"] == approval.pk
    (first,) = _wire_runs(thread)
    assert "int-pai_delete_1" not in json.dumps(first)
    assert_valid_stream(first, what="the interrupted run", also=HYGIENE)
    assert EXECUTED == []

    resume = [
        {
            "interruptId": interrupt["id"],
            "status": "resolved",
            "payload": {"approved": True},
        }
    ]
    _agui_start(nonstaff_approver, "pai_remote", "ir18-tool", "run-2", resume=resume)
    executor.settle(thread)

    approval.refresh_from_db()
    assert (approval.status, approval.decided_by) == ("approved", nonstaff_approver)
    assert _resumes() == [
        [
            {
                "interruptId": "int-pai_delete_1",
                "status": "resolved",
                "payload": {"approved": True},
            }
        ]
    ]
    assert EXECUTED == ["/srv/report.txt"]
    assert _final_text(thread) == "Done: deleted /srv/report.txt"
    _, second = _wire_runs(thread)
    assert second[0]["input"]["resume"] == resume
    assert second[-1]["outcome"] == {"type": "success"}
    assert_valid_stream(second, what="the resumed run", also=HYGIENE)


def test_ir18_remote_question_interrupt_reaches_the_agui_client_and_is_answered(
    remote_agents_configured: None, nonstaff_approver: Any, executor: Any
) -> None:
    """IR-18, IR-09: a remote question (no call) is resumed with its ``response``.

    The interrupt carries the remote's message and responseSchema under
    Countersign's id; a payload off the schema is refused before any decision
    (400 ``invalid_resume_payload``); a valid one is the request's response and
    goes to the remote as its resume entry, once.
    """
    from approvals.exceptions import ResumeInvalid
    from tests.aguivalidate import assert_valid_stream
    from threads.models import Thread

    user_message = {"id": "u1", "role": "user", "content": "ship it"}
    _agui_start(
        nonstaff_approver, "ask_remote", "ir18-ask", "run-1", messages=[user_message]
    )
    thread = Thread.objects.get(client_thread_id="ir18-ask")
    outcome = _interrupted_outcome(thread, executor)
    approval = ApprovalRequest.objects.get(thread=thread)

    (interrupt,) = outcome["interrupts"]
    assert (interrupt["id"], interrupt["reason"]) == (
        f"cs-approval-{approval.pk}",
        "input_required",
    )
    assert "toolCallId" not in interrupt
    assert interrupt["message"] == "Which carrier should ship order A-1001?"
    assert interrupt["responseSchema"] == remote_agents.SHIPPING_SCHEMA
    assert_valid_stream(_wire_runs(thread)[0], what="the interrupted run")

    def answer(run_id: str, payload: dict[str, Any]) -> Any:
        entry = {
            "interruptId": interrupt["id"],
            "status": "resolved",
            "payload": payload,
        }
        return _agui_start(
            nonstaff_approver, "ask_remote", "ir18-ask", run_id, resume=[entry]
        )

    with pytest.raises(ResumeInvalid) as refused:
        answer("run-bad", {"carrier": "pigeon"})
    assert (refused.value.status, refused.value.code) == (400, "invalid_resume_payload")
    approval.refresh_from_db()
    assert approval.status == "pending"

    answer("run-2", {"carrier": "dhl", "express": True})
    executor.settle(thread)

    approval.refresh_from_db()
    assert (approval.status, approval.response) == (
        "approved",
        {"carrier": "dhl", "express": True},
    )
    first = Run.objects.filter(thread=thread).order_by("id")[0]
    assert _resumes() == [
        [
            {
                "interruptId": f"ask-{first.run_id}",
                "status": "resolved",
                "payload": {"carrier": "dhl", "express": True},
            }
        ]
    ]
    assert _final_text(thread).startswith("Shipping with [")
    _, second = _wire_runs(thread)
    assert second[-1]["type"] == "RUN_FINISHED"
    assert second[-1].get("outcome", {"type": "success"}) == {"type": "success"}
    assert_valid_stream(second, what="the resumed run")
