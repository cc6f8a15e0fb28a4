"""OpenTelemetry traces: configured by the standard ``OTEL_*`` variables, off (and free) without them.

:func:`tracing_configure` runs once per process (``config/asgi.py`` for the web,
``config/celery.py`` at a worker's start; forked pool children inherit it). It
does nothing unless ``OTEL_TRACES_EXPORTER`` (``otlp`` or ``console``) or an
``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is set
(and ``OTEL_SDK_DISABLED`` is not ``true``): then the SDK is loaded, spans are
exported in batches over OTLP/HTTP (the exporter reads the other ``OTEL_*``
variables itself: headers, timeout, sampler ``OTEL_TRACES_SAMPLER``, service
name ``OTEL_SERVICE_NAME``, default ``countersign``) and Django, Celery, psycopg
and httpx are instrumented. Off, the spans below go to the API's no-op tracer:
no SDK import, no export, a few attribute lookups per tool call.

Countersign's own spans follow the GenAI semantic conventions where they apply:

- ``execute_tool {gen_ai.tool.name}`` around each approved or automatic tool
  execution (``gen_ai.operation.name=execute_tool``, ``gen_ai.tool.name``,
  ``gen_ai.tool.call.id``, ``gen_ai.tool.type``; ``error.type`` on failure),
  linked to the span that asked for approval. The MCP client puts its context in
  the request's ``_meta`` (``traceparent``); a remote AG-UI agent gets it in the
  request headers.
- ``request_approval {tool}`` when a call is held for a person: its context is
  kept on the approval request (``ApprovalRequest.trace_context``).
- ``await_approval {tool}``, started at the request time and ended at the
  decision, in the decision's trace and linked to the request: the human wait,
  visible as its own bar. docs/observability.md.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import SpanProcessor

#: The instrumentation scope of Countersign's own spans.
SCOPE: Final = "countersign"

_lock = threading.Lock()
_configured = False


def tracing_requested() -> bool:
    """Return whether the ``OTEL_*`` environment asks for traces (see the module doc)."""
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter == "none":
        return False
    return bool(
        exporter
        or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


def _exporter_processor() -> SpanProcessor:
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

    name = os.environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() or "otlp"
    if name == "console":
        return BatchSpanProcessor(ConsoleSpanExporter())
    if name != "otlp":
        raise ValueError(
            f"OTEL_TRACES_EXPORTER={name!r} is not supported; use otlp, console or none"
        )
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter,
    )

    return BatchSpanProcessor(OTLPSpanExporter())


def tracing_configure(
    *, span_processor: SpanProcessor | None = None, instrument: bool = True
) -> bool:
    """Install the tracer provider and the instrumentations once; return whether tracing is on.

    ``span_processor`` replaces the exporter chosen by the environment and turns
    tracing on regardless of it (tests: ``SimpleSpanProcessor(InMemorySpanExporter())``).
    ``instrument`` also instruments Django, Celery, psycopg and httpx. A second
    call does nothing and returns ``True`` if tracing is on. Raises ``ValueError``
    for an ``OTEL_TRACES_EXPORTER`` other than ``otlp``, ``console`` or ``none``.
    """
    global _configured
    with _lock:
        if _configured:
            return True
        if span_processor is None and not tracing_requested():
            return False
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider

        service = os.environ.get("OTEL_SERVICE_NAME") or SCOPE
        provider = TracerProvider(resource=Resource.create({"service.name": service}))
        provider.add_span_processor(span_processor or _exporter_processor())
        trace.set_tracer_provider(provider)
        if instrument:
            instrumentations_install()
        _configured = True
        return True


def _instrumentors() -> tuple[Any, ...]:
    from opentelemetry.instrumentation.celery import CeleryInstrumentor
    from opentelemetry.instrumentation.django import DjangoInstrumentor
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
    from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor

    return (
        DjangoInstrumentor(),
        CeleryInstrumentor(),
        PsycopgInstrumentor(),
        HTTPXClientInstrumentor(),
    )


def instrumentations_install() -> None:
    """Instrument Django (server spans), Celery (task spans, context in messages), psycopg and httpx."""
    for instrumentor in _instrumentors():
        if not instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.instrument()


def instrumentations_remove() -> None:
    """Undo :func:`instrumentations_install` (tests)."""
    for instrumentor in _instrumentors():
        if instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.uninstrument()


def tracing_active() -> bool:
    """Return whether :func:`tracing_configure` turned tracing on in this process."""
    return _configured


def _tracer() -> trace.Tracer:
    return trace.get_tracer(SCOPE)


def context_carrier() -> dict[str, str]:
    """Return the current trace context as W3C headers (``traceparent``…); ``{}`` without a span."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier


def headers_with_context(headers: Mapping[str, str]) -> dict[str, str]:
    """Return ``headers`` plus the current trace context (``traceparent``, ``tracestate``)."""
    merged = dict(headers)
    propagate.inject(merged)
    return merged


def _links(carrier: Mapping[str, Any] | None) -> list[trace.Link]:
    if not carrier:
        return []
    span_context = trace.get_current_span(
        propagate.extract(dict(carrier))
    ).get_span_context()
    return [trace.Link(span_context)] if span_context.is_valid else []


@contextmanager
def approval_request_span(
    *, tool_name: str, tool_call_id: str
) -> Iterator[dict[str, str]]:
    """Open ``request_approval {tool_name}`` and yield its context as a carrier to keep."""
    with _tracer().start_as_current_span(
        f"request_approval {tool_name}",
        attributes={"gen_ai.tool.name": tool_name, "gen_ai.tool.call.id": tool_call_id},
    ):
        yield context_carrier()


def approval_wait_record(
    *,
    tool_name: str,
    tool_call_id: str,
    approval_id: int,
    decision: str,
    requested_at: datetime,
    decided_at: datetime,
    request_context: Mapping[str, Any] | None,
) -> None:
    """Record the human wait as ``await_approval {tool_name}``: requested_at → decided_at.

    A child of the current span (the decision), linked to the request's span
    (``request_context``, a carrier from :func:`approval_request_span`).
    """
    span = _tracer().start_span(
        f"await_approval {tool_name}",
        start_time=int(requested_at.timestamp() * 1e9),
        links=_links(request_context),
        attributes={
            "gen_ai.tool.name": tool_name,
            "gen_ai.tool.call.id": tool_call_id,
            "countersign.approval.id": approval_id,
            "countersign.approval.decision": decision,
            "countersign.approval.wait_seconds": max(
                (decided_at - requested_at).total_seconds(), 0.0
            ),
        },
    )
    span.end(end_time=int(decided_at.timestamp() * 1e9))


@contextmanager
def tool_span(
    *,
    tool_name: str,
    tool_call_id: str,
    tool_type: str = "function",
    description: str = "",
    request_context: Mapping[str, Any] | None = None,
) -> Iterator[trace.Span]:
    """Open the GenAI ``execute_tool {tool_name}`` span around one execution; yield it.

    Linked to the approval request's span when ``request_context`` carries one.
    Call :func:`tool_span_outcome` with the tool's error (or ``None``).
    """
    attributes: dict[str, str] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool_name,
        "gen_ai.tool.call.id": tool_call_id,
        "gen_ai.tool.type": tool_type,
    }
    if description:
        attributes["gen_ai.tool.description"] = description[:1000]
    with _tracer().start_as_current_span(
        f"execute_tool {tool_name}",
        kind=trace.SpanKind.INTERNAL,
        links=_links(request_context),
        attributes=attributes,
    ) as span:
        yield span


def tool_span_outcome(span: trace.Span, *, error: str | None) -> None:
    """Mark the tool span failed with ``error.type`` ``error`` (``None``: succeeded)."""
    if error is not None:
        span.set_attribute("error.type", error)
        span.set_status(trace.Status(trace.StatusCode.ERROR, error))


def context_carry(function: Callable[..., Any]) -> Callable[..., Any]:
    """Return ``function`` wrapped to run in the current trace context (for another thread)."""
    captured = otel_context.get_current()

    def run(*args: Any, **kwargs: Any) -> Any:
        token = otel_context.attach(captured)
        try:
            return function(*args, **kwargs)
        finally:
            otel_context.detach(token)

    return run
