"""Remote interrupts answered in the remote's own terms (IR-18, IR-05, IR-11, DC-04).

Three third-party AG-UI servers, each from PyPI with a fake model and no API key:
Pydantic AI's ``AGUIAdapter`` (``requires_approval``), ``ag-ui-langgraph``
(``interrupt()`` with its interrupt outcome) and Microsoft Agent Framework's
``agent-framework-ag-ui`` (an ``always_require`` tool, run in its own virtualenv,
tests/agent_framework_agent.py). For each: approve, reject and edit through an
AG-UI client's ``resume``; the tool runs once with exactly the approved arguments;
nothing of the remote's interrupt machinery reaches Countersign's clients.
"""

from __future__ import annotations

import json
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentcore.arguments import canonical_sha256
from approvals.models import ApprovalRequest, AuditEntry
from threads.execution import wait_embedded
from threads.models import Event, Message, Run, ToolCall
from threads.services import message_post

ROOT = Path(__file__).resolve().parents[2]
AF_PYTHON = ROOT / ".venv-af" / "bin" / "python"


@pytest.fixture(scope="module")
def agent_framework_server() -> Iterator[str]:
    """Run Agent Framework's AG-UI server (its own virtualenv); yield its base URL."""
    if not AF_PYTHON.exists():
        pytest.fail(
            f"{AF_PYTHON} is missing: `make install` builds it from "
            "tests/remote_envs/agent-framework.txt"
        )
    process = subprocess.Popen(
        [str(AF_PYTHON), str(ROOT / "tests" / "agent_framework_agent.py")],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        port = int(process.stdout.readline())
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)


def _af_report(base: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{base}/executed", timeout=5) as response:
        return json.loads(response.read())


@pytest.fixture
def af_remote(agent_framework_server: str, settings: Any, monkeypatch: Any) -> str:
    agents = {
        "af_remote": {
            "provider": "agui_http",
            "url": f"{agent_framework_server}/agent-framework",
        }
    }
    settings.COUNTERSIGN_AGENTS = {**settings.COUNTERSIGN_AGENTS, **agents}
    monkeypatch.setenv("COUNTERSIGN_AGENTS_JSON", json.dumps(agents))
    return agent_framework_server


def _agui_start(
    user: Any,
    agent: str,
    thread_id: str,
    run_id: str,
    *,
    messages: list[dict[str, Any]] | None = None,
    resume: list[dict[str, Any]] | None = None,
) -> Any:
    """Do what ``POST /agui/<agent>/`` does before it streams."""
    from orchestration.resume import agui_run_start
    from tests.helpers.interrupts import agui_input

    return agui_run_start(
        user=user,
        agent=agent,
        run_input=agui_input(thread_id, run_id, messages or [], resume),
    )


def _log(thread: Any) -> list[dict[str, Any]]:
    """Return every event the thread's AG-UI clients were streamed, in order."""
    return list(
        Event.objects.filter(thread=thread)
        .order_by("seq")
        .values_list("payload", flat=True)
    )


def _interrupted(user: Any, agent: str, thread_id: str, executor: Any) -> Any:
    """Start ``agent`` from an AG-UI client; return the approval its interrupt queued."""
    from threads.models import Thread

    message = {"id": "u1", "role": "user", "content": "refund order A-1001 25"}
    _agui_start(user, agent, thread_id, "run-1", messages=[message])
    thread = Thread.objects.get(client_thread_id=thread_id)
    executor.settle(thread)
    executor.wait_for(lambda: (_log(thread) or [{}])[-1].get("type") == "RUN_FINISHED")
    return ApprovalRequest.objects.select_related("tool_call", "run").get(thread=thread)


def _resume(
    user: Any, agent: str, approval: Any, executor: Any, **entry: Any
) -> list[dict[str, Any]]:
    """Resume ``approval``'s interrupt as an AG-UI client; return the new run's events."""
    from approvals.interrupts import interrupt_id

    thread = approval.thread
    before = len(_log(thread))
    _agui_start(
        user,
        agent,
        thread.thread_id,
        "run-2",
        resume=[{"interruptId": interrupt_id(approval), **entry}],
    )
    executor.settle(thread)
    executor.wait_for(
        lambda: (
            (_log(thread) or [{}])[-1].get("type") == "RUN_FINISHED"
            and len(_log(thread)) > before
        )
    )
    # What follows a run's end in its worker (answers, checks) is done too.
    wait_embedded(timeout=30)
    return _log(thread)[before:]


def _remote_resumes(base: str) -> list[Any]:
    return [b["resume"] for b in _af_report(base)["received"] if b.get("resume")]


def _wire(thread: Any) -> bytes:
    """Return the thread's log as its AG-UI clients are streamed it (web.sse frames)."""
    from web.sse import sse_frame

    return "".join(
        sse_frame(row.payload, seq=row.seq, logged_at=row.created_at)
        for row in Event.objects.filter(thread=thread).order_by("seq")
    ).encode()


def _assert_clean(thread: Any, remote_interrupt_id: str) -> None:
    """No remote interrupt id or machinery in the stream; ag-ui-validate clean."""
    from tests.aguivalidate import HYGIENE, assert_valid_stream
    from tests.helpers.agui import parse_stream

    wire = _wire(thread)
    log, _, _ = parse_stream(wire)
    assert remote_interrupt_id not in json.dumps(log)
    assert not [
        e for e in log if e.get("type") == "CUSTOM" and "interrupt" in e["name"]
    ]
    assert not [
        e
        for e in log
        if e.get("type") == "CUSTOM" and e["name"] == "function_approval_request"
    ]
    assert all("timestamp" in e for e in log), [
        e["type"] for e in log if "timestamp" not in e
    ]
    assert_valid_stream(wire, what="the thread's AG-UI stream", also=HYGIENE)


@pytest.mark.parametrize("executor", ["embedded"], indirect=True)
def test_agent_framework_approve_by_resume_runs_the_proposed_arguments_once(
    af_remote: str, nonstaff_approver: Any, executor: Any
) -> None:
    """The approver's note is no tool argument: Agent Framework's schema reads
    ``reason`` as the tool's own ``reason``, so the payload is ``{approved}``."""
    approval = _interrupted(nonstaff_approver, "af_remote", "af-approve", executor)
    assert approval.tool_call.tool_call_id == "af_refund_1"
    remote_id = approval.interrupt_id
    assert remote_id.startswith("af-call-")

    second = _resume(
        nonstaff_approver,
        "af_remote",
        approval,
        executor,
        status="resolved",
        payload={"approved": True, "reason": "approver note: looks fine"},
    )

    report = _af_report(af_remote)
    assert report["executed"] == [
        {
            "order_id": "A-1001",
            "amount": 25.0,
            "reason": "customer request (agent-framework)",
        }
    ]
    assert _remote_resumes(af_remote)[-1] == [
        {"interruptId": remote_id, "status": "resolved", "payload": {"approved": True}}
    ]
    approval.refresh_from_db()
    assert (approval.status, approval.reason) == (
        "approved",
        "approver note: looks fine",
    )
    calls = {c.name: c for c in ToolCall.objects.filter(thread=approval.thread)}
    assert calls["issue_refund"].state == "succeeded"
    results = [e for e in second if e["type"] == "TOOL_CALL_RESULT"]
    assert [r["toolCallId"] for r in results] == ["af_refund_1"] or sorted(
        r["toolCallId"] for r in results
    ) == sorted(["af_refund_1", calls["confirm_changes"].tool_call_id])
    assert "unknown_tool" not in json.dumps(_log(approval.thread))
    _assert_clean(approval.thread, remote_id)


@pytest.mark.parametrize("executor", ["embedded"], indirect=True)
def test_agent_framework_edit_by_resume_runs_exactly_the_edit_once(
    af_remote: str, nonstaff_approver: Any, executor: Any
) -> None:
    """editedArgs are checked against the remote tool's declared arguments (its
    responseSchema's editedArgs), not Countersign's toolset, and run as sent."""
    from approvals.exceptions import ResumeInvalid

    approval = _interrupted(nonstaff_approver, "af_remote", "af-edit", executor)
    edit = {"order_id": "A-1001", "amount": 10.0, "reason": "partial refund"}

    with pytest.raises(ResumeInvalid) as refused:
        _resume(
            nonstaff_approver,
            "af_remote",
            approval,
            executor,
            status="resolved",
            payload={"approved": True, "editedArgs": {"order_id": "A-1001"}},
        )
    assert refused.value.code == "invalid_arguments"
    assert "'amount'" in str(refused.value)
    # The remote server is shared by the module's tests: count what this resume adds.
    before = list(_af_report(af_remote)["executed"])
    _resume(
        nonstaff_approver,
        "af_remote",
        approval,
        executor,
        status="resolved",
        payload={"approved": True, "editedArgs": edit},
    )

    assert _af_report(af_remote)["executed"] == [*before, edit]
    assert _remote_resumes(af_remote)[-1] == [
        {
            "interruptId": approval.interrupt_id,
            "status": "resolved",
            "payload": {"approved": True, "editedArgs": edit},
        }
    ]
    approval.refresh_from_db()
    assert (approval.status, approval.edited_arguments) == ("approved", edit)
    _assert_clean(approval.thread, approval.interrupt_id)


@pytest.mark.parametrize("executor", ["embedded"], indirect=True)
def test_agent_framework_reject_answers_the_held_call_and_its_companion(
    af_remote: str, nonstaff_approver: Any, executor: Any
) -> None:
    """DC-04: a rejected call gets one tool message even though Agent Framework
    answers it only in its snapshot; confirm_changes is answered by its protocol
    ({accepted: false}), never refused as an unknown tool."""
    approval = _interrupted(nonstaff_approver, "af_remote", "af-reject", executor)
    executed_before = len(_af_report(af_remote)["executed"])

    _resume(
        nonstaff_approver,
        "af_remote",
        approval,
        executor,
        status="resolved",
        payload={"approved": False, "reason": "not this order"},
    )

    assert len(_af_report(af_remote)["executed"]) == executed_before
    assert _remote_resumes(af_remote)[-1] == [
        {
            "interruptId": approval.interrupt_id,
            "status": "resolved",
            "payload": {"approved": False},
        }
    ]
    thread = approval.thread
    calls = {c.name: c for c in ToolCall.objects.filter(thread=thread)}
    assert calls["issue_refund"].state == "declined"
    answers = {
        m.tool_call_id: m for m in Message.objects.filter(thread=thread, role="tool")
    }
    assert set(answers) == {"af_refund_1", calls["confirm_changes"].tool_call_id}
    companion = json.loads(answers[calls["confirm_changes"].tool_call_id].content)
    assert companion == {
        "accepted": False,
        "steps": [{"description": "Execute issue_refund", "status": "disabled"}],
    }
    assert "unknown_tool" not in json.dumps(_log(thread))
    assert [r.status for r in Run.objects.filter(thread=thread).order_by("id")] == [
        "finished",
        "finished",
    ]
    _assert_clean(thread, approval.interrupt_id)


@pytest.fixture
def pai_remote(settings: Any, monkeypatch: Any) -> Iterator[None]:
    """Serve Pydantic AI's AGUIAdapter agent (tests/remote_agents.py)."""
    from tests.remote_agents import EXECUTED, RECEIVED, serve

    EXECUTED.clear()
    RECEIVED.clear()
    with serve() as base:
        agents = {"pai_remote": {"provider": "agui_http", "url": f"{base}/pydantic-ai"}}
        settings.COUNTERSIGN_AGENTS = {**settings.COUNTERSIGN_AGENTS, **agents}
        monkeypatch.setenv("COUNTERSIGN_AGENTS_JSON", json.dumps(agents))
        yield


@pytest.mark.parametrize("executor", ["embedded"], indirect=True)
def test_pydantic_ai_edit_by_resume_runs_the_edit_once(
    pai_remote: None, nonstaff_approver: Any, executor: Any
) -> None:
    """Editing a remote's call through resume is no longer refused as "not
    configured": Pydantic AI declares editedArgs an object, and gets the edit."""
    from approvals.exceptions import ResumeInvalid
    from tests.remote_agents import EXECUTED, RECEIVED

    approval = _interrupted(nonstaff_approver, "pai_remote", "pai-edit", executor)
    with pytest.raises(ResumeInvalid) as refused:
        _resume(
            nonstaff_approver,
            "pai_remote",
            approval,
            executor,
            status="resolved",
            payload={"approved": True, "editedArgs": {"path": "/srv/a\u0000b"}},
        )
    assert refused.value.code == "invalid_arguments"
    assert "U+0000" in str(refused.value)

    _resume(
        nonstaff_approver,
        "pai_remote",
        approval,
        executor,
        status="resolved",
        payload={"approved": True, "editedArgs": {"path": "/srv/old.txt"}},
    )

    assert EXECUTED == ["/srv/old.txt"]
    assert [b["resume"] for b in RECEIVED if b.get("resume")] == [
        [
            {
                "interruptId": "int-pai_delete_1",
                "status": "resolved",
                "payload": {"approved": True, "editedArgs": {"path": "/srv/old.txt"}},
            }
        ]
    ]
    _assert_clean(approval.thread, "int-pai_delete_1")


@pytest.mark.parametrize("executor", ["embedded"], indirect=True)
def test_pydantic_ai_reject_by_resume_keeps_the_note_and_answers_the_call_once(
    pai_remote: None, nonstaff_approver: Any, executor: Any
) -> None:
    """Pydantic AI's schema declares ``reason`` and its tool has no such
    argument: the approver's note goes as the reason; the call has one answer."""
    from tests.remote_agents import EXECUTED, RECEIVED

    approval = _interrupted(nonstaff_approver, "pai_remote", "pai-reject", executor)
    _resume(
        nonstaff_approver,
        "pai_remote",
        approval,
        executor,
        status="resolved",
        payload={"approved": False, "reason": "keep the report"},
    )

    assert EXECUTED == []
    resumes = [b["resume"] for b in RECEIVED if b.get("resume")]
    assert resumes[0][0]["payload"] == {
        "approved": False,
        "reason": "keep the report",
    }
    answers = Message.objects.filter(thread=approval.thread, role="tool")
    assert [m.tool_call_id for m in answers] == ["pai_delete_1"]
    assert ToolCall.objects.get(thread=approval.thread).state == "declined"
    _assert_clean(approval.thread, "int-pai_delete_1")


@pytest.fixture
def lg_remote(settings: Any, monkeypatch: Any) -> Iterator[Any]:
    """Serve the LangGraph approval graph (tests/langgraph_approval_agent.py)."""
    from tests import langgraph_approval_agent
    from tests.remote_agents import serve

    langgraph_approval_agent.EXECUTED.clear()
    langgraph_approval_agent.ANSWERS.clear()
    with serve(langgraph_approval_agent.build_app()) as base:
        agents = {
            f"lg_{name}": {"provider": "agui_http", "url": f"{base}/{name}"}
            for name in ("approval", "mismatch", "silent")
        }
        settings.COUNTERSIGN_AGENTS = {**settings.COUNTERSIGN_AGENTS, **agents}
        monkeypatch.setenv("COUNTERSIGN_AGENTS_JSON", json.dumps(agents))
        yield langgraph_approval_agent


@pytest.mark.parametrize("executor", ["embedded"], indirect=True)
def test_langgraph_approval_by_resume_sends_the_note_and_runs_once(
    lg_remote: Any, nonstaff_approver: Any, executor: Any
) -> None:
    """A LangGraph interrupt() with reason "human_approval" holds its call; its
    schema keeps the arguments under editedArgs, so the note goes as reason."""
    from approvals.interrupts import interrupt_for

    approval = _interrupted(nonstaff_approver, "lg_approval", "lg-approve", executor)
    assert (approval.tool_call.tool_call_id, approval.tool_name) == (
        "lg_refund_1",
        "issue_refund",
    )
    shown = interrupt_for(approval)
    assert shown["reason"] == "tool_call"
    assert shown["responseSchema"]["properties"]["editedArgs"]["required"] == [
        "order_id",
        "amount",
        "reason",
    ]

    _resume(
        nonstaff_approver,
        "lg_approval",
        approval,
        executor,
        status="resolved",
        payload={"approved": True, "reason": "looks fine"},
    )

    assert lg_remote.ANSWERS == [{"approved": True, "reason": "looks fine"}]
    assert lg_remote.EXECUTED == [("/approval", lg_remote.PROPOSED)]
    call = ToolCall.objects.get(thread=approval.thread, tool_call_id="lg_refund_1")
    assert call.state == "succeeded"
    assert "argumentsMismatch" not in (call.metadata or {})
    _assert_clean(approval.thread, approval.interrupt_id)


@pytest.mark.parametrize("executor", ["embedded"], indirect=True)
def test_langgraph_edit_by_resume_is_checked_against_the_declared_arguments(
    lg_remote: Any, nonstaff_approver: Any, executor: Any
) -> None:
    from approvals.exceptions import ResumeInvalid

    approval = _interrupted(nonstaff_approver, "lg_approval", "lg-edit", executor)
    edit = {"order_id": "A-1001", "amount": 5.0, "reason": "goodwill"}

    with pytest.raises(ResumeInvalid) as refused:
        _resume(
            nonstaff_approver,
            "lg_approval",
            approval,
            executor,
            status="resolved",
            payload={"approved": True, "editedArgs": {**edit, "amount": -5}},
        )
    assert refused.value.code == "invalid_arguments"
    assert "amount" in str(refused.value)
    _resume(
        nonstaff_approver,
        "lg_approval",
        approval,
        executor,
        status="resolved",
        payload={"approved": True, "editedArgs": edit},
    )

    executed, answers = lg_remote.EXECUTED, lg_remote.ANSWERS
    assert executed == [("/approval", edit)]
    assert answers == [{"approved": True, "editedArgs": edit}]
    call = ToolCall.objects.get(thread=approval.thread, tool_call_id="lg_refund_1")
    assert "argumentsMismatch" not in (call.metadata or {})
    _assert_clean(approval.thread, approval.interrupt_id)


@pytest.mark.parametrize("executor", ["embedded"], indirect=True)
def test_langgraph_reject_by_resume_is_answered_once(
    lg_remote: Any, nonstaff_approver: Any, executor: Any
) -> None:
    approval = _interrupted(nonstaff_approver, "lg_approval", "lg-reject", executor)

    _resume(
        nonstaff_approver,
        "lg_approval",
        approval,
        executor,
        status="resolved",
        payload={"approved": False, "reason": "wrong order"},
    )

    assert lg_remote.EXECUTED == []
    assert lg_remote.ANSWERS == [{"approved": False, "reason": "wrong order"}]
    answers = Message.objects.filter(thread=approval.thread, role="tool")
    assert [(m.tool_call_id, m.content) for m in answers] == [
        ("lg_refund_1", "declined: wrong order")
    ]
    _assert_clean(approval.thread, approval.interrupt_id)


@pytest.mark.parametrize("executor", ["embedded"], indirect=True)
@pytest.mark.parametrize("how", ["reject", "expire", "cancel"])
def test_held_call_left_unanswered_by_its_remote_gets_countersigns_answer(
    lg_remote: Any, nonstaff_approver: Any, executor: Any, how: str
) -> None:
    """DC-04: the /silent graph answers nothing after a refusal; Countersign
    answers the held call once, whatever refused it."""
    from datetime import timedelta

    from django.utils import timezone

    from approvals.services import thread_pending_calls_cancel
    from orchestration.pipeline import approvals_expire

    approval = _interrupted(nonstaff_approver, "lg_silent", f"lg-{how}", executor)
    thread = approval.thread
    if how == "reject":
        _resume(
            nonstaff_approver,
            "lg_silent",
            approval,
            executor,
            status="resolved",
            payload={"approved": False, "reason": "no"},
        )
    else:
        if how == "expire":
            ApprovalRequest.objects.filter(pk=approval.pk).update(
                expires_at=timezone.now() - timedelta(seconds=1)
            )
            assert approvals_expire() == 1
        else:
            thread_pending_calls_cancel(
                thread=thread, cancelled_by=nonstaff_approver, reason="stop"
            )
            # The agent hears of the cancel in the thread's next input.
            message_post(thread=thread, content="never mind")
        executor.settle(thread)

    state = {"reject": "declined", "expire": "expired", "cancel": "cancelled"}[how]
    # Countersign answers once the resumed run ended, right after it.
    executor.wait_for(
        lambda: Message.objects.filter(thread=thread, role="tool").exists()
    )
    call = ToolCall.objects.get(thread=thread, tool_call_id="lg_refund_1")
    assert call.state == state
    (answer,) = Message.objects.filter(thread=thread, role="tool")
    assert answer.tool_call_id == "lg_refund_1"
    assert json.loads(answer.content)["executed"] is False
    assert lg_remote.EXECUTED == []


@pytest.mark.parametrize("executor", ["embedded"], indirect=True)
def test_remote_running_other_arguments_than_approved_is_flagged_and_audited(
    lg_remote: Any, nonstaff_approver: Any, approver_api: Any, executor: Any
) -> None:
    """The /mismatch graph runs twice the approved amount and reports it: the
    call records the mismatch, the audit chain has it, operators see it."""
    approval = _interrupted(nonstaff_approver, "lg_mismatch", "lg-mismatch", executor)
    _resume(
        nonstaff_approver,
        "lg_mismatch",
        approval,
        executor,
        status="resolved",
        payload={"approved": True},
    )

    ran = {**lg_remote.PROPOSED, "amount": 50.0}
    executed = lg_remote.EXECUTED
    assert executed == [("/mismatch", ran)]

    expected = {
        "approvalId": approval.pk,
        "approvedHash": canonical_sha256(lg_remote.PROPOSED),
        "reportedHash": canonical_sha256(ran),
        "reportedArguments": ran,
    }
    call = ToolCall.objects.get(thread=approval.thread, tool_call_id="lg_refund_1")
    assert call.metadata["argumentsMismatch"] == expected
    audit = AuditEntry.objects.get(action="approval.arguments_mismatch")
    assert (audit.target_id, audit.after) == (str(approval.pk), expected)
    shown = approver_api.get(f"/api/approvals/{approval.pk}/").json()
    assert shown["argumentsMismatch"] == expected
