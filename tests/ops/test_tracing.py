"""OpenTelemetry spans, captured with the SDK's in-memory exporter (core.tracing).

An MCP tool call held for approval: ``request_approval`` in the run's trace, the
decision's HTTP span (Django instrumentation) with ``await_approval`` under it
(started at the request, linked to it), ``execute_tool`` (GenAI conventions) in
the same trace, and the MCP server receiving that trace in the request's ``_meta``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from agentcore.providers.agui_http import RemoteAgent
from approvals.models import ApprovalRequest
from core import tracing
from orchestration.pipeline import approval_decide
from tests.helpers.api import pending_refund_thread
from tests.helpers.executors import Executor, flush_broker, use_embedded, use_redis
from threads.models import ToolCall
from threads.services import message_post, thread_create

_EXPORTER = InMemorySpanExporter()


@pytest.fixture
def spans(monkeypatch: Any) -> Iterator[InMemorySpanExporter]:
    """Tracing on for this test, every finished span kept in memory; off again after it."""
    # Recorded before tracing_configure sets it, so monkeypatch's undo turns it off:
    # a later test must not see tracing on (an extra trace-context read per call).
    monkeypatch.setattr(tracing, "_configured", tracing._configured)
    tracing.tracing_configure(span_processor=SimpleSpanProcessor(_EXPORTER))
    tracing.instrumentations_install()
    _EXPORTER.clear()
    yield _EXPORTER
    tracing.instrumentations_remove()
    _EXPORTER.clear()


def _named(spans: list[ReadableSpan], prefix: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name.startswith(prefix)]


def _hex(value: int, width: int) -> str:
    return format(value, f"0{width}x")


@pytest.mark.django_db(transaction=True)
def test_mcp_call_held_for_approval_is_one_linked_trace_down_to_the_server(
    spans, settings, client, user, approver, mcp_agents, mcp_log: Path
):
    use_embedded(settings)
    executor = Executor(mode="embedded")
    thread = thread_create(owner=user, title="mcp", agent="mcp_files")
    message_post(thread=thread, content="please do it")
    executor.settle(thread)
    call = ToolCall.objects.get(thread=thread)
    approval = ApprovalRequest.objects.get(tool_call=call)

    [requested] = _named(spans.get_finished_spans(), "request_approval ")
    assert requested.name == "request_approval files__delete_file"
    version, trace_id, span_id, flags = approval.trace_context["traceparent"].split("-")
    assert (version, trace_id, span_id) == (
        "00",
        _hex(requested.context.trace_id, 32),
        _hex(requested.context.span_id, 16),
    )
    assert int(flags, 16) & 1 == 1  # sampled

    client.force_login(approver)
    response = client.post(
        f"/api/approvals/{approval.pk}/approve/",
        {"reason": "checked"},
        content_type="application/json",
    )
    assert response.status_code == 200, response.content
    executor.settle(thread)
    finished = spans.get_finished_spans()

    [server] = [
        s for s in finished if s.kind is SpanKind.SERVER and "approve" in s.name
    ]
    [waited] = _named(finished, "await_approval ")
    [executed] = _named(finished, "execute_tool ")
    # The wait: under the decision's request, from the request time, linked to it.
    assert waited.parent.span_id == server.context.span_id
    assert waited.start_time == int(approval.requested_at.timestamp() * 1e9)
    assert waited.end_time > waited.start_time
    assert [link.context.span_id for link in waited.links] == [
        requested.context.span_id
    ]
    assert waited.attributes["countersign.approval.decision"] == "approved"
    assert waited.attributes["gen_ai.tool.call.id"] == call.tool_call_id
    # The execution: GenAI attributes, in the decision's trace, linked to the request.
    assert executed.name == "execute_tool files__delete_file"
    assert executed.context.trace_id == server.context.trace_id
    assert {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "files__delete_file",
        "gen_ai.tool.call.id": call.tool_call_id,
        "gen_ai.tool.type": "function",
    }.items() <= dict(executed.attributes).items()
    assert "Delete a file" in executed.attributes["gen_ai.tool.description"]
    assert executed.status.status_code is StatusCode.UNSET
    assert [link.context.span_id for link in executed.links] == [
        requested.context.span_id
    ]
    # The MCP server got the trace in the tools/call request's _meta.
    [line] = [json.loads(x) for x in mcp_log.read_text().splitlines()]
    assert line["tool"] == "delete_file"
    version, trace_id, parent_id, flags = line["meta"]["traceparent"].split("-")
    assert (version, trace_id) == ("00", _hex(server.context.trace_id, 32))
    assert int(flags, 16) & 1 == 1
    by_id = {s.context.span_id: s for s in finished}
    chain, span = [], by_id.get(int(parent_id, 16))
    while span is not None:
        chain.append(span.name)
        span = by_id.get(span.parent.span_id) if span.parent else None
    assert "execute_tool files__delete_file" in chain


def test_remote_agui_agent_receives_the_run_trace_in_its_headers(spans):
    """The AG-UI HTTP provider sends traceparent with the run's context."""
    import asyncio

    from agentcore.events import RunAgentInput

    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(
            200,
            headers={"content-type": "text/event-stream"},
            content=b'data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\n'
            b'data: {"type":"RUN_FINISHED","threadId":"t","runId":"r"}\n\n',
        )

    agent = RemoteAgent(
        url="http://agent.test/run", transport=httpx.MockTransport(handler)
    )
    run_input = RunAgentInput(
        thread_id="t",
        run_id="r",
        messages=[],
        tools=[],
        context=[],
        state={},
        forwarded_props={},
    )

    async def consume() -> None:
        async for _ in agent.run(run_input):
            pass

    with tracing._tracer().start_as_current_span("invoke_agent remote") as parent:
        asyncio.run(consume())
    trace_id = _hex(parent.get_span_context().trace_id, 32)
    assert seen
    assert seen[0].headers["traceparent"].split("-")[1] == trace_id


def test_tracing_stays_off_without_otel_variables():
    """No OTEL_* variable: configure does nothing and the SDK is never imported."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    code = (
        "import sys; from core.tracing import tracing_configure;"
        "print(tracing_configure(), 'opentelemetry.sdk' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        cwd=Path(__file__).resolve().parents[2],
        timeout=60,
        check=True,
    )
    assert done.stdout.split() == ["False", "False"]


def test_an_unknown_exporter_stops_the_process_with_its_name():
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["OTEL_TRACES_EXPORTER"] = "zipkin"
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from core.tracing import tracing_configure; tracing_configure()",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=Path(__file__).resolve().parents[2],
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        "ValueError: OTEL_TRACES_EXPORTER='zipkin' is not supported; use otlp, "
        "console or none"
    )


def test_otel_environment_decides_whether_tracing_is_requested(monkeypatch):
    for name in (
        "OTEL_SDK_DISABLED",
        "OTEL_TRACES_EXPORTER",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    ):
        monkeypatch.delenv(name, raising=False)
    assert tracing.tracing_requested() is False
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")
    assert tracing.tracing_requested() is True
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")
    assert tracing.tracing_requested() is False
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert tracing.tracing_requested() is False


def _console_spans(text: str) -> list[dict[str, Any]]:
    """The spans a ConsoleSpanExporter printed into a worker's log (one JSON object each)."""
    found = []
    for block in re.findall(r"^\{\n    \"name\": .*?^\}$", text, flags=re.M | re.S):
        try:
            found.append(json.loads(block))
        except ValueError:
            continue
    return found


@pytest.mark.django_db(transaction=True)
def test_prefork_worker_continues_the_decisions_trace_through_celery(
    spans, settings, user, nonstaff_approver, redis_url, celery_worker_factory
):
    """The decision's context travels in the Celery message; the worker's child spans join it."""
    flush_broker(redis_url)
    use_redis(settings, redis_url)
    worker = celery_worker_factory()
    worker.pool = "prefork"
    worker.start(
        OTEL_TRACES_EXPORTER="console",
        OTEL_BSP_SCHEDULE_DELAY="50",
        OTEL_SERVICE_NAME="countersign-worker",
    )
    executor = Executor(mode="celery", worker=worker)
    try:
        pending_refund_thread(user, thread_id="t-traced")
        approval = ApprovalRequest.objects.get()
        with tracing._tracer().start_as_current_span("decision") as decision:
            approval_decide(
                approval=approval, decided_by=nonstaff_approver, decision="approve"
            )
        trace_id = f"0x{decision.get_span_context().trace_id:032x}"

        def executed() -> list[dict[str, Any]]:
            return [
                s
                for s in _console_spans(worker.log_path.read_text())
                if s["name"] == "execute_tool refund_order"
            ]

        [span] = executor.wait_for(executed)
    finally:
        worker.stop()
    assert span["context"]["trace_id"] == trace_id
    assert span["resource"]["attributes"]["service.name"] == "countersign-worker"
    assert span["attributes"]["gen_ai.tool.call.id"] == approval.tool_call.tool_call_id
    by_id = {
        s["context"]["span_id"]: s for s in _console_spans(worker.log_path.read_text())
    }
    # Its parent is the Celery task's span (the instrumentation), in the same trace.
    parent = by_id[span["parent_id"]]
    assert parent["name"] == "run/approvals.tasks.execute_tool_call"
    assert parent["context"]["trace_id"] == trace_id


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_psycopg_queries_are_spans_under_the_current_one(spans):
    """With PostgreSQL (psycopg 3), each query of a connection opened after setup is a span."""
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL: set DATABASE_URL=postgres://...")
    # Connections opened before tracing was configured are not instrumented; a
    # process configures tracing before its first connection.
    connection.close()
    with tracing._tracer().start_as_current_span("parent") as parent:
        assert ApprovalRequest.objects.count() == 0
    queries = [
        s
        for s in spans.get_finished_spans()
        if s.parent is not None
        and s.parent.span_id == parent.get_span_context().span_id
    ]
    assert queries, [s.name for s in spans.get_finished_spans()]
    assert all(s.kind is SpanKind.CLIENT for s in queries)
    assert any(
        "approvals_approvalrequest" in str(s.attributes.get("db.statement", ""))
        or "approvals_approvalrequest" in str(s.attributes.get("db.query.text", ""))
        for s in queries
    )
