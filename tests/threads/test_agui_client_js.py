"""The official AG-UI client (``@ag-ui/client`` 1.0.0 ``HttpAgent``) against a live server.

``tests/js/run_http_agent.mjs`` runs ``HttpAgent.runAgent`` against
``POST /agui/demo/`` with a Token header. The client verifies every stream it
receives (ordering, open/close discipline, schema) and rejects on a violation, so
exit status 0 means it accepted our streams, keep-alive comments included. A
second turn resends the full history, as a browser app does. ``npm ci`` runs once
per session when ``tests/js/node_modules`` is missing (a fresh clone). Both modes
through the ``live`` fixture. Implements FT-04, FT-06 and AGUI-1.0.md §3.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from tests.conftest import service_missing
from tests.threads.test_ws_live import (  # noqa: F401 - fixtures
    close_thread_connections,
    live_server,
    refund_awaits_approval,
    token_for,
    wait_until,
)
from threads.models import Message, ToolCall

pytestmark = pytest.mark.django_db(transaction=True)

JS_DIR = Path(__file__).resolve().parent.parent / "js"


@pytest.fixture(scope="session")
def agui_client_js() -> Path:
    """Return the node script, installing ``@ag-ui/client`` from the lockfile if needed."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        service_missing("node and npm are needed to run @ag-ui/client")
    if not (JS_DIR / "node_modules" / "@ag-ui" / "client" / "package.json").exists():
        installed = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund"],
            cwd=JS_DIR,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if installed.returncode != 0:
            service_missing(f"npm ci failed in {JS_DIR}: {installed.stderr[-2000:]}")
    return JS_DIR / "run_http_agent.mjs"


async def run_client(script: Path, config: dict[str, Any], live: Any) -> dict[str, Any]:
    """Run the node script with ``config``; return its JSON report or fail with both logs."""

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
    assert [r["eventTypes"] for r in report["runs"]] == [weather, weather]
    assert not [w for w in report["warnings"] if "[ag-ui]" in w], report["warnings"]
    client_ids = [m["id"] for m in report["messages"]]
    stored = await sync_to_async(list)(
        Message.objects.filter(thread__thread_id=thread_id)
        .order_by("position", "id")
        .values_list("message_id", flat=True)
    )
    assert stored == client_ids
    assert len(stored) == 8
    assert "Paris" in report["messages"][-1]["content"]


async def test_ft04_agui_official_client_sees_lookup_order_pending(
    user, live, agui_client_js
):
    """The refund run ends, for HttpAgent, with success and lookup_order's id pending."""
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

    # The application goes on to run lookup_order and the continuation by itself.
    await wait_until(
        refund_awaits_approval(thread_id), what="the refund approval", server=live
    )
    lookup = await ToolCall.objects.aget(
        thread__thread_id=thread_id, name="lookup_order"
    )
    assert lookup.state == ToolCall.State.SUCCEEDED
    (run,) = report["runs"]
    assert (run["outcome"], run["pendingToolCallIds"]) == (
        "success",
        [lookup.tool_call_id],
    )
    assert run["eventTypes"] == [
        "RUN_STARTED",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "RUN_FINISHED",
    ]
    assistant = report["messages"][-1]
    assert assistant["role"] == "assistant"
    assert assistant["toolCalls"] == [
        {
            "id": lookup.tool_call_id,
            "type": "function",
            "function": {"name": "lookup_order", "arguments": '{"order_id": "A-1001"}'},
        }
    ]
