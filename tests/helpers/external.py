"""External agents for the approval API's tests, and a declaration helper."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final

#: ``billing`` is strict (only the tools its policies name); ``helper`` is not.
EXTERNAL_AGENTS: Final[dict[str, Any]] = {
    "billing": {
        "provider": "external",
        "strict": True,
        "policies": {
            "refund": {"action": "require_approval"},
            "refund2": {"action": "require_approval", "approvals_required": 2},
            "lookup": "auto",
            "wipe": "deny",
        },
    },
    "helper": {"provider": "external"},
}

REFUND_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "order_id": {"type": "string"},
        "amount": {"type": "number", "exclusiveMinimum": 0},
    },
    "required": ["order_id", "amount"],
    "additionalProperties": False,
}


def declare(client: Any, **change: Any) -> Any:
    """POST a refund declaration of the ``billing`` agent, with ``change`` applied."""
    body: dict[str, Any] = {
        "agent": "billing",
        "tool": "refund",
        "arguments": {"order_id": "A-1", "amount": 25},
        "inputSchema": REFUND_SCHEMA,
        **change,
    }
    if change.get("tool") not in (None, "refund") and "inputSchema" not in change:
        del body["inputSchema"]
    return client.post("/api/external/tool-calls/", body, format="json")


class DjangoTransport:
    """httpx's WSGI transport into this process's Django, inside the test's transaction.

    As Django's test client does, the request neither opens nor closes database
    connections (a closed connection would end the test's transaction).
    """

    def __init__(self) -> None:
        import httpx
        from django.core.wsgi import get_wsgi_application

        self.inner = httpx.WSGITransport(app=get_wsgi_application())

    def handle_request(self, request: Any) -> Any:
        from django.core.signals import request_finished, request_started
        from django.db import close_old_connections

        request_started.disconnect(close_old_connections)
        request_finished.disconnect(close_old_connections)
        try:
            response = self.inner.handle_request(request)
            # Django's request_finished fires when the WSGI body is closed: here.
            response.read()
            response.close()
            return response
        finally:
            request_started.connect(close_old_connections)
            request_finished.connect(close_old_connections)

    def close(self) -> None:
        self.inner.close()


def approve_when_pending(
    base_url: str,
    token: str,
    *,
    tool: str,
    edit: dict[str, Any] | None = None,
    timeout: float = 30.0,
    alongside: Any = None,
    reject: str | None = None,
) -> dict[str, Any]:
    """Approve (with ``edit``) the first pending request for ``tool`` once the queue shows it.

    With ``reject`` (a reason), reject it with that reason instead.

    Reads the queue over the REST API as an approver would, every 50 ms, until
    ``timeout`` seconds; returns the approval as the API answered it. With
    ``alongside`` (the future of the flow that should be waiting), a flow that
    ended first re-raises its error here.
    """
    import time

    import httpx

    headers = {"Authorization": f"Token {token}"}
    deadline = time.monotonic() + timeout
    with httpx.Client(base_url=base_url, headers=headers, timeout=30) as http:
        while True:
            found = http.get(
                "/api/approvals/", params={"status": "pending", "tool": tool}
            )
            results = found.json()["results"]
            if results:
                body: dict[str, Any] = (
                    {"editedArguments": edit} if edit is not None else {}
                )
                verb = "approve"
                if reject is not None:
                    body, verb = {"reason": reject}, "reject"
                response = http.post(
                    f"/api/approvals/{results[0]['id']}/{verb}/", json=body
                )
                assert response.status_code == 200, response.text
                data: dict[str, Any] = response.json()
                return data
            if alongside is not None and alongside.done():
                alongside.result()
                raise AssertionError(f"the flow ended without a pending {tool} request")
            if time.monotonic() > deadline:
                raise AssertionError(f"no pending {tool} request within {timeout}s")
            time.sleep(0.05)


@contextmanager
def signed_webhook_receiver(secret: str) -> Iterator[tuple[list[dict[str, Any]], str]]:
    """Serve a local HTTP endpoint verifying each Standard Webhooks POST with ``secret``.

    Yields the verified payloads received (in order) and the endpoint's URL.
    """
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from standardwebhooks.webhooks import Webhook

    received: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["content-length"]))
            received.append(Webhook(secret).verify(body, dict(self.headers)))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield received, f"http://127.0.0.1:{server.server_address[1]}/hook"
    finally:
        server.shutdown()


def langgraph_refund_model(*, order_id: str, amount: float, call_id: str) -> Any:
    """Return a LangChain fake chat model proposing one ``refund`` call, then saying "done"."""
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    class ToolCallingFake(GenericFakeChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

    call = {"name": "refund", "args": {"order_id": order_id, "amount": amount}}
    return ToolCallingFake(
        messages=iter(
            [
                AIMessage(content="", tool_calls=[{**call, "id": call_id}]),
                AIMessage(content="done"),
            ]
        )
    )


def pydantic_ai_refund_model(*, order_id: str, amount: float, call_id: str) -> Any:
    """Return a Pydantic AI ``FunctionModel`` proposing one ``refund``, then "done: <result>"."""
    from pydantic_ai.messages import (
        ModelMessage,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returned = [
            p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)
        ]
        if returned:
            return ModelResponse(parts=[TextPart(f"done: {returned[0].content}")])
        arguments = {"order_id": order_id, "amount": amount}
        return ModelResponse(
            parts=[ToolCallPart("refund", arguments, tool_call_id=call_id)]
        )

    return FunctionModel(model)


def story(tool_call_id: str) -> dict[str, Any]:
    """Return what the thread shows of a call: its state, its answer, its events."""
    from approvals.models import AuditEntry
    from threads.models import Event, Message, ToolCall

    call = ToolCall.objects.select_related("thread").get(tool_call_id=tool_call_id)
    answer = Message.objects.get(
        thread=call.thread, tool_call_id=tool_call_id, role="tool"
    )
    return {
        "state": call.state,
        "answer": answer.content,
        "events": [
            e.type for e in Event.objects.filter(thread=call.thread).order_by("seq")
        ],
        "audit": list(
            AuditEntry.objects.order_by("id").values_list("action", flat=True)
        ),
    }


def docs_examples() -> dict[str, str]:
    """Return docs/integrations.md's Python examples by their ``# example:`` name."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs/integrations.md").read_text()
    return {
        match.group(1): match.group(2)
        for match in re.finditer(
            r"```python\n# example: ([\w-]+)\n(.*?)```", text, flags=re.DOTALL
        )
    }


def openai_agents_script(*arguments: str, stdin: str = "") -> dict[str, Any]:
    """Run tests/openai_agents_agent.py in ``.venv-oai`` with ``arguments``; return its JSON report.

    Skips (fails under ``COUNTERSIGN_REQUIRE_SERVICES=1``) when ``.venv-oai`` is
    missing: ``make install`` builds it from tests/remote_envs/openai-agents.txt.
    """
    import json
    import subprocess
    from pathlib import Path

    from tests.helpers.services import service_missing

    root = Path(__file__).resolve().parents[2]
    python = root / ".venv-oai" / "bin" / "python"
    if not python.exists():
        service_missing(
            f"{python} is missing: `make install` builds it from "
            "tests/remote_envs/openai-agents.txt"
        )
    done = subprocess.run(
        [str(python), str(root / "tests" / "openai_agents_agent.py"), *arguments],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report
