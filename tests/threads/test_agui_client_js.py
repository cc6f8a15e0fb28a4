"""The official AG-UI client (``@ag-ui/client`` 1.0.0 ``HttpAgent``) against a live server.

``tests/js/run_http_agent.mjs`` runs ``HttpAgent.runAgent`` against
``POST /agui/demo/`` with a Token header. The client verifies every stream it
receives (ordering, open/close discipline, schema) and rejects on a violation, so
exit status 0 means it accepted our streams, keep-alive comments included. A
second turn resends the full history, as a browser app does. ``npm ci`` runs once
per session when ``tests/js/node_modules`` is missing (a fresh clone).
``tests/js/run_conversation.mjs`` holds a whole conversation with the same client:
interrupts answered by ``resume``, one decided in the queue while the client follows
the thread (``connectAgent`` over ``GET /agui/threads/<id>/events``), client tools
answered in the next input. Both modes through the ``live`` fixture. Implements
FT-04, FT-06, IR-01, IR-07 and AGUI-1.0.md §3.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from tests.agentcore.helpers import collapsed
from tests.helpers.agui import REFUND_RUN_TYPES
from tests.helpers.live import token_for
from tests.js_packages import JS_DIR, ensure_js_package
from threads.models import Message, ToolCall

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("close_thread_connections"),
]


@pytest.fixture(scope="session")
def agui_client_js() -> Path:
    """Return the node script, installing ``@ag-ui/client`` from the lockfile if needed."""
    ensure_js_package("@ag-ui/client")
    return JS_DIR / "run_http_agent.mjs"


async def run_client(script: Path, config: dict[str, Any], live: Any) -> dict[str, Any]:
    """Run a node script with ``config``; return its JSON report or fail with both logs."""

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["node", str(script), json.dumps(config)],
            cwd=JS_DIR,
            capture_output=True,
            text=True,
            timeout=60,
        )

    done = await sync_to_async(run, thread_sensitive=False)()
    assert done.returncode == 0, (
        f"HttpAgent rejected the run (exit {done.returncode}):\n{done.stderr[-3000:]}\n"
        f"{live.logs()}"
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


async def test_agui_official_client_accepts_weather_runs_and_resends_history(
    user, live, agui_client_js
):
    """HttpAgent accepts two weather runs; the resent history is stored once."""
    token = await sync_to_async(token_for)(user)
    thread_id = f"js-weather-{live.mode}"

    report = await run_client(
        agui_client_js,
        {
            "url": f"{live.url}/agui/demo/",
            "token": token,
            "threadId": thread_id,
            "turns": [
                {
                    "runId": "run-1",
                    "messageId": "u1",
                    "content": "What is the weather in Oslo?",
                },
                {
                    "runId": "run-2",
                    "messageId": "u2",
                    "content": "What is the weather in Paris?",
                },
            ],
        },
        live,
    )

    weather = [
        "RUN_STARTED",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]
    assert [
        (r["runId"], r["outcome"], r["pendingToolCallIds"]) for r in report["runs"]
    ] == [("run-1", "success", []), ("run-2", "success", [])]
    assert [collapsed(r["eventTypes"]) for r in report["runs"]] == [weather, weather]
    assert not [w for w in report["warnings"] if "[ag-ui]" in w], report["warnings"]
    client_ids = [m["id"] for m in report["messages"]]
    stored = await sync_to_async(list)(
        Message.objects.filter(thread__client_thread_id=thread_id)
        .order_by("position", "id")
        .values_list("message_id", flat=True)
    )
    assert stored == client_ids
    assert len(stored) == 8
    assert "Paris" in report["messages"][-1]["content"]


async def test_ir01_agui_official_client_sees_the_refund_interrupt(
    user, live, agui_client_js
):
    """IR-01, FT-09: for HttpAgent the refund run answers lookup_order in-stream and ends interrupted.

    lookup_order is Countersign's own (auto-approved) tool, so it is never pending
    for the client; the held refund is the run's one interrupt, and the client
    keeps it in ``pendingInterrupts``.
    """
    token = await sync_to_async(token_for)(user)
    thread_id = f"js-refund-{live.mode}"

    report = await run_client(
        agui_client_js,
        {
            "url": f"{live.url}/agui/demo/",
            "token": token,
            "threadId": thread_id,
            "turns": [
                {
                    "runId": "run-1",
                    "messageId": "u1",
                    "content": "refund order A-1001 25.00",
                }
            ],
        },
        live,
    )

    lookup = await ToolCall.objects.aget(
        thread__client_thread_id=thread_id, name="lookup_order"
    )
    refund = await ToolCall.objects.aget(
        thread__client_thread_id=thread_id, name="refund_order"
    )
    assert lookup.state == ToolCall.State.SUCCEEDED
    assert refund.state == ToolCall.State.AWAITING_APPROVAL
    (run,) = report["runs"]
    assert run["outcome"] == "interrupt"
    assert collapsed(run["eventTypes"]) == REFUND_RUN_TYPES
    assert [m["role"] for m in report["messages"]] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert report["messages"][1]["toolCalls"] == [
        {
            "id": lookup.tool_call_id,
            "type": "function",
            "function": {"name": "lookup_order", "arguments": '{"order_id": "A-1001"}'},
        }
    ]
    assert report["messages"][2]["toolCallId"] == lookup.tool_call_id
    assert report["messages"][3]["toolCalls"][0]["id"] == refund.tool_call_id


CONFIRM_TOOL = {
    "name": "confirm",
    "description": "Ask the user to confirm something",
    "parameters": {
        "type": "object",
        "properties": {"question": {"type": "string"}},
        "required": ["question"],
    },
}
NOTIFY_TOOL = {
    "name": "notify_customer",
    "description": "Show the customer a notification",
    "parameters": {
        "type": "object",
        "properties": {"message": {"type": "string"}},
        "required": ["message"],
    },
}


def approver_with_token(django_user_model: Any, name: str) -> str:
    """Create a user who may decide calls and authorize refunds; return their token."""
    from django.contrib.auth.models import Permission

    user = django_user_model.objects.create_user(username=name, password=f"pw-{name}-1")
    user.user_permissions.add(
        Permission.objects.get(codename="decide_approvalrequest"),
        Permission.objects.get(codename="add_refund"),
    )
    return token_for(user)


async def test_ir01_ir07_ft06_official_client_holds_a_whole_conversation(
    django_user_model, live, agui_client_js
):
    """IR-01, IR-06, IR-07, IR-13, IR-15, FT-04, FT-06, FT-07: HttpAgent through a whole conversation.

    Four user turns, each POST carrying the client's accumulated history: a refund
    approved by the client's resume; a refund decided in the queue while the
    client follows the thread through its own pipeline; a client tool answered in
    the next input; a run that holds a refund and calls a client tool at once,
    answered by a tool message beside the resume. The client accepts every stream
    (no verification error, no 4xx), keeps one tool message per call, its history
    equals the thread's, and the ledger holds one refund per approved call.
    """
    from demo.models import Refund
    from threads.models import Message

    client_token = await sync_to_async(approver_with_token)(django_user_model, "cleo")
    operator_token = await sync_to_async(approver_with_token)(django_user_model, "opal")
    thread_id = f"js-conversation-{live.mode}"
    steps = [
        {"say": "refund order A-1001 25.00"},
        {"resume": {"approved": True}},
        {"say": "refund order A-1002 5.00"},
        {"queue": "approve"},
        {"say": "confirm shipping to Oslo", "tools": [CONFIRM_TOOL]},
        {"answer": "yes"},
        {
            "say": "refund order A-1001 10.00 and notify the customer",
            "tools": [CONFIRM_TOOL, NOTIFY_TOOL],
        },
        {"answer": "shown", "resume": {"approved": True}},
    ]
    report = await run_client(
        Path(agui_client_js).with_name("run_conversation.mjs"),
        {
            "base": live.url,
            "agent": "demo",
            "token": client_token,
            "operatorToken": operator_token,
            "threadId": thread_id,
            "steps": steps,
        },
        live,
    )

    runs = report["runs"]
    assert [r["outcome"] for r in runs] == [
        "interrupt",
        "success",
        "interrupt",
        "success",
        "success",
        "success",
        "interrupt",
        "success",
    ], runs
    assert not [r for r in runs if r.get("error")], runs
    assert not [w for w in report["warnings"] if "[ag-ui]" in w], report["warnings"]
    # Each POST and the followed run were one run each: one RUN_STARTED, one end.
    for r in runs:
        assert r["eventTypes"].count("RUN_STARTED") == 1, r
        assert r["eventTypes"].count("RUN_FINISHED") == 1, r
    # Countersign's own lookups were answered in the run, never handed over.
    assert runs[0]["eventTypes"].count("TOOL_CALL_RESULT") == 1
    # The resumed run answers the held call without restating it (IR-15).
    assert "TOOL_CALL_START" not in runs[1]["eventTypes"]
    assert runs[1]["eventTypes"].count("TOOL_CALL_RESULT") == 1
    messages = report["messages"]
    calls = {c["id"]: c for m in messages for c in m.get("toolCalls", [])}
    confirm_id = next(i for i, c in calls.items() if c["function"]["name"] == "confirm")
    assert runs[4]["pendingToolCallIds"] == [confirm_id]
    # FT-07: in the mixed run only the held refund is an interrupt; the client's own
    # notify call rides the message loop and is answered by history, not resume.
    (held,) = runs[6]["interrupts"]
    assert calls[held["toolCallId"]]["function"]["name"] == "refund_order"
    answers = [m["toolCallId"] for m in messages if m["role"] == "tool"]
    assert sorted(answers) == sorted(calls), "one tool message per call"
    assert len(answers) == len(set(answers))
    assert len({m["id"] for m in messages}) == len(messages)
    assert "You answered: yes" in [m.get("content") for m in messages]
    stored = await sync_to_async(list)(
        Message.objects.filter(thread__client_thread_id=thread_id).values_list(
            "message_id", flat=True
        )
    )
    assert sorted(stored) == sorted(m["id"] for m in messages)
    ledger = await sync_to_async(list)(
        Refund.objects.order_by("id").values_list("order_id", "amount")
    )
    assert [(o, f"{a:.2f}") for o, a in ledger] == [
        ("A-1001", "25.00"),
        ("A-1002", "5.00"),
        ("A-1001", "10.00"),
    ]
