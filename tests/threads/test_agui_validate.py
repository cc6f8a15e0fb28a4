"""Every AG-UI stream the product emits, read by ``ag-ui-validate`` (tests/aguivalidate.py).

Against the ``live`` server (embedded pool, or a Celery worker), each scenario's
``POST /agui/<agent>/`` response body and the ``GET /agui/threads/<id>/events``
follow stream of its thread (from the first event to the last run's end) go
through :func:`tests.aguivalidate.assert_valid_stream`: the third-party validator
with only the rules AG-UI 1.0 changed relaxed, and zero errors expected.

Scenarios: the demo agent's main job (an auto-approved lookup, an approval, the
continuations), a client's frontend tool (left pending, answered in the next
input), an error run (a remote agent that cannot be reached), and a remote
LangGraph agent's run (``tests/langgraph_refund_agent.py``). Implements TC-08, TC-09, FT-03, FT-04, ER-01.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from asgiref.sync import sync_to_async

from tests.aguivalidate import assert_valid_stream
from tests.helpers.agui import (
    REFUND,
    agents_env,
    approve_refund,
    approver_token,
    bearer,
    follow_raw,
    parse_stream,
    remote_agents_config,
)
from tests.helpers.live import run_input, token_for
from tests.langgraph_refund_agent import serve

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("close_thread_connections"),
]

CONFIRM_TOOL = {
    "name": "confirm",
    "description": "Ask the user to confirm.",
    "parameters": {
        "type": "object",
        "properties": {"question": {"type": "string"}},
        "required": ["question"],
    },
}


@pytest.fixture(scope="module", autouse=True)
def validate_agents() -> Iterator[None]:
    """Configure the scenarios' agents for the live server (before ``live`` starts)."""
    url, stop = serve()
    agents = {
        **remote_agents_config(url),
        "confirm": {
            "provider": "scripted",
            "provider_factory": "tests.cases.agents.confirm_provider",
            "toolsets": [],
        },
        # Nothing listens on port 1: the run ends with RUN_ERROR upstream_unavailable.
        "unreachable": {
            "provider": "agui_http",
            "url": "http://127.0.0.1:1/agent",
            "options": {"timeout": 5, "max_retries": 0},
        },
    }
    try:
        with agents_env(agents):
            yield
    finally:
        stop()


async def post_run(
    http: httpx.AsyncClient, agent: str, body: dict[str, Any], token: str
) -> bytes:
    response = await http.post(f"/agui/{agent}/", json=body, headers=bearer(token))
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "text/event-stream"
    assert_valid_stream(
        response.content,
        content_type=response.headers["content-type"],
        what=f"POST /agui/{agent}/ ({body['runId']})",
    )
    return response.content


async def test_validate_demo_main_job_post_and_follow_streams(
    user, live, django_user_model
):
    """Refund job: lookup auto-approved, refund approved by an operator, agent done."""
    token = await sync_to_async(token_for)(user)
    decider = await sync_to_async(approver_token)(django_user_model)
    thread_id = f"validate-main-{live.mode}"
    async with httpx.AsyncClient(base_url=live.url, timeout=60) as http:
        await post_run(
            http,
            "demo",
            run_input(
                thread_id, "run-1", [{"id": "u1", "role": "user", "content": REFUND}]
            ),
            token,
        )
        await approve_refund(http, thread_id, decider, live)
        raw = await follow_raw(http, thread_id, token, 2, live)

    # One run per request: the POST's run ends with the refund's
    # interrupt; the operator's approval continues the thread in a second run.
    events = parse_stream(raw)[0]
    assert [e["type"] for e in events].count("RUN_STARTED") == 2
    finished = [e for e in events if e["type"] == "RUN_FINISHED"]
    assert [f["outcome"]["type"] for f in finished] == ["interrupt", "success"]
    assert_valid_stream(raw, what="the main job's thread follow stream")


async def test_validate_frontend_tool_run_and_its_answer(user, live):
    """A client tool left pending (FT-03), then answered in the next input (FT-06)."""
    token = await sync_to_async(token_for)(user)
    thread_id = f"validate-frontend-{live.mode}"
    first_user = {"id": "u1", "role": "user", "content": "Shall we?"}
    async with httpx.AsyncClient(base_url=live.url, timeout=60) as http:
        first = parse_stream(
            await post_run(
                http,
                "confirm",
                {
                    **run_input(thread_id, "run-1", [first_user]),
                    "tools": [CONFIRM_TOOL],
                },
                token,
            )
        )[0]
        start = next(e for e in first if e["type"] == "TOOL_CALL_START")
        assert first[-1]["outcome"]["pendingToolCallIds"] == [start["toolCallId"]]
        history = [
            first_user,
            {
                "id": start.get("parentMessageId", start["toolCallId"]),
                "role": "assistant",
                "toolCalls": [
                    {
                        "id": start["toolCallId"],
                        "type": "function",
                        "function": {
                            "name": "confirm",
                            "arguments": '{"question": "Proceed?"}',
                        },
                    }
                ],
            },
            {
                "id": "answer-1",
                "role": "tool",
                "toolCallId": start["toolCallId"],
                "content": "yes",
            },
        ]
        await post_run(
            http,
            "confirm",
            {**run_input(thread_id, "run-2", history), "tools": [CONFIRM_TOOL]},
            token,
        )
        raw = await follow_raw(http, thread_id, token, 2, live)

    assert_valid_stream(raw, what="the frontend tool thread's follow stream")


async def test_validate_error_run(user, live):
    """A remote agent that cannot be reached: RUN_STARTED, RUN_ERROR (ER-01)."""
    token = await sync_to_async(token_for)(user)
    thread_id = f"validate-error-{live.mode}"
    async with httpx.AsyncClient(base_url=live.url, timeout=60) as http:
        events = parse_stream(
            await post_run(
                http,
                "unreachable",
                run_input(
                    thread_id, "run-1", [{"id": "u1", "role": "user", "content": "hi"}]
                ),
                token,
            )
        )[0]
        assert events[-1]["type"] == "RUN_ERROR"
        assert events[-1]["code"] == "upstream_unavailable"
        raw = await follow_raw(http, thread_id, token, 1, live)

    assert_valid_stream(raw, what="the error run's follow stream")


async def test_validate_remote_langgraph_run(user, live, django_user_model):
    """The LangGraph agent's refund job, its snapshots reconciled, through an approval."""
    token = await sync_to_async(token_for)(user)
    decider = await sync_to_async(approver_token)(django_user_model)
    thread_id = f"validate-remote-{live.mode}"
    async with httpx.AsyncClient(base_url=live.url, timeout=60) as http:
        await post_run(
            http,
            "lg",
            run_input(
                thread_id, "run-1", [{"id": "u1", "role": "user", "content": REFUND}]
            ),
            token,
        )
        await approve_refund(http, thread_id, decider, live)
        raw = await follow_raw(http, thread_id, token, 2, live)

    assert_valid_stream(raw, what="the remote agent's thread follow stream")
