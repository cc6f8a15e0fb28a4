"""End to end: the OpenAI Agents SDK adapter through a live Countersign (uvicorn + a Celery worker).

The SDK (``openai-agents``) needs an ``openai`` newer than Countersign's, so the
agent runs in its own virtualenv (``.venv-oai``, from
tests/remote_envs/openai-agents.txt) as tests/openai_agents_agent.py: a scripted
``agents.Model`` (no API key, no network) calls a ``needs_approval=True`` tool; the
adapter sends the interruption to Countersign and waits; an approver decides over
the REST API; the run resumes from its ``RunState``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from approvals.models import ApprovalRequest
from tests.helpers.external import (
    EXTERNAL_AGENTS,
    approve_when_pending,
    docs_examples,
    openai_agents_script,
    story,
)
from tests.helpers.live import token_for
from threads.models import Event, ToolCall

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.parametrize("live", ["celery"], indirect=True),
]

ROOT = Path(__file__).resolve().parents[2]
OAI_PYTHON = ROOT / ".venv-oai" / "bin" / "python"


@pytest.fixture(scope="module", autouse=True)
def external_agents_in_environment() -> Iterator[None]:
    """Configure the external agents for the live server and its worker (before they start).

    Without ``.venv-oai`` the module skips (fails in CI) before starting a server.
    """
    if not OAI_PYTHON.exists():
        openai_agents_script()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COUNTERSIGN_AGENTS_JSON", json.dumps(EXTERNAL_AGENTS))
        yield


def run_agent(
    base_url: str,
    token: str,
    conversation: str,
    arguments: dict[str, Any],
    example: str | None = None,
) -> Future[dict[str, Any]]:
    """Start tests/openai_agents_agent.py in ``.venv-oai``; its future yields the agent's report.

    With ``example`` (Python source), the script runs that instead of its own flow.
    """
    flags = ["--example"] if example is not None else []
    return ThreadPoolExecutor(max_workers=1).submit(
        openai_agents_script,
        base_url,
        token,
        conversation,
        json.dumps(arguments),
        *flags,
        stdin=example or "",
    )


def test_an_approved_edit_runs_once_and_the_thread_shows_it(
    live: Any, user: Any, nonstaff_approver: Any
) -> None:
    """The interruption waits; the approver edits the amount; the resumed run uses it once."""
    running = run_agent(
        live.url, token_for(user), "conv-oai", {"order_id": "O-1", "amount": 25}
    )
    approve_when_pending(
        live.url,
        token_for(nonstaff_approver),
        tool="refund",
        edit={"order_id": "O-1", "amount": 4},
        timeout=60,
        alongside=running,
    )
    report = running.result(timeout=90)
    assert report == {
        "interruptions": 1,
        "decisions": [True],
        "ran": [{"order_id": "O-1", "amount": 4}],
        "output": "done: refunded 4.0",
        "reported": 1,
    }, live.logs()
    (call,) = ToolCall.objects.filter(thread__client_thread_id="conv-oai")
    assert call.name == "refund"
    assert call.state == "succeeded"
    shown = story(call.tool_call_id)
    assert shown["answer"] == "refunded 4.0"
    assert "TOOL_CALL_START" in shown["events"]
    assert {"execution.reserved", "execution.succeeded"} <= set(shown["audit"])


def test_a_rejection_reaches_the_model_and_the_tool_never_runs(
    live: Any, user: Any, nonstaff_approver: Any
) -> None:
    """``state.reject(item, rejection_message=reason)``: the model reads the approver's reason."""
    running = run_agent(
        live.url, token_for(user), "conv-oai-no", {"order_id": "O-2", "amount": 900}
    )
    rejected = approve_when_pending(
        live.url,
        token_for(nonstaff_approver),
        tool="refund",
        timeout=60,
        alongside=running,
        reject="Over the refund limit; escalate to finance.",
    )
    assert rejected["status"] == "rejected"
    report = running.result(timeout=90)
    assert report["decisions"] == [False]
    assert report["ran"] == []
    assert report["reported"] == 0
    assert "Over the refund limit; escalate to finance." in report["output"]
    (call,) = ToolCall.objects.filter(thread__client_thread_id="conv-oai-no")
    assert call.state == "declined"
    approval = ApprovalRequest.objects.get(tool_call=call)
    assert approval.status == "rejected"
    assert approval.reason == "Over the refund limit; escalate to finance."
    assert "TOOL_CALL_START" in [
        e.type for e in Event.objects.filter(thread=call.thread).order_by("seq")
    ]


def test_the_integration_docs_example_runs(
    live: Any, user: Any, nonstaff_approver: Any
) -> None:
    """docs/integrations.md's OpenAI Agents SDK example, as written, against the live server."""
    running = run_agent(
        live.url,
        token_for(user),
        "oa-1",
        {"order_id": "A-1", "amount": 25},
        example=docs_examples()["openai-agents"],
    )
    approve_when_pending(
        live.url,
        token_for(nonstaff_approver),
        tool="refund",
        edit={"order_id": "A-1", "amount": 20},
        timeout=60,
        alongside=running,
    )
    assert running.result(timeout=90) == {"example": "ran"}
    (call,) = ToolCall.objects.filter(thread__client_thread_id="oa-1")
    assert call.state == "succeeded"
    assert story(call.tool_call_id)["answer"] == "refunded 20.0"
