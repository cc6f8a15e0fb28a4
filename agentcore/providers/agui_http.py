"""A remote AG-UI agent reached over HTTP, as an :class:`~agentcore.agents.Agent`.

:class:`RemoteAgent` POSTs the :class:`RunAgentInput` (camelCase JSON,
``Accept: text/event-stream``) to the agent's URL and yields the events of the SSE
response as they arrive, checked and normalized by :class:`agentcore.stream.RunStream`
(chunk events come back expanded). Whatever goes wrong, the run still ends the way
every agent's run ends (ER-01): after a ``RUN_STARTED`` (the remote's, or one made here
when the remote never sent one) and with everything open closed, with a ``RUN_ERROR``
whose ``code`` says what happened:

- ``upstream_http_error``: the remote answered a non-2xx status (input rejected);
- ``rate_limited`` / ``upstream_unavailable``: the remote answered 429, or 408, 502,
  503 or 504, and kept answering it through ``max_retries`` retries (each after the
  ``Retry-After`` it asked for, or a doubling backoff): no run was started, so the
  request is safe to repeat;
- ``upstream_unavailable``: the connection failed or timed out;
- ``malformed_stream``: a frame that is not one JSON event, a malformed known event,
  a fatal ordering violation, or a response that is not ``text/event-stream``;
- ``truncated_stream``: the stream ended (or broke off) before ``RUN_FINISHED`` or
  ``RUN_ERROR``; a ``RUN_FINISHED`` is never synthesized for it.

What is relayed is checked for the remote's interrupt machinery (IR-18): ``CUSTOM``
events carrying it (Agent Framework's ``function_approval_request``, ag-ui-langgraph's
``on_interrupt``) and ``RAW`` events mentioning an interrupt are dropped, other ``CUSTOM``
names without a namespace become ``remote.<name>``
(:func:`agentcore.interrupts.relayed_custom_name`); a tool call whose
``parentMessageId`` names a message the client never saw gets that message opened and
closed first, empty (TC-02).

Messages never carry the URL, headers, credentials or the remote's own text (SEC-06);
details go to this module's logger without secrets. SSE reading follows the AG-UI HTTP
binding: ``data:`` lines (multi-line data joined with ``\\n``), comments, ``event:``,
``id:`` and ``retry:`` ignored, LF or CRLF line endings. Events of an unknown type are
dropped with a warning, as the processing model requires.

Unlike the modules beside it this is not a model :class:`Provider`: a remote agent runs
its own loop and tools. ``httpx`` is imported here; it is a core dependency, no SDK.

Over 400 lines because it holds the remote agent adapter with its own SSE reader and
bounded retry of the request; both serve only this adapter.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from contextlib import suppress
from typing import Any, Final
from urllib.parse import urlsplit

import httpx
from opentelemetry import propagate

from agentcore.agents import (
    TERMINAL_EVENT_TYPES,
    Agent,
    run_cancelled,
    run_error,
    run_started,
)
from agentcore.dispatch import sanitize_message
from agentcore.events import (
    BaseEvent,
    CustomEvent,
    EventType,
    RawEvent,
    RunAgentInput,
    RunStartedEvent,
)
from agentcore.interrupts import raw_mentions_interrupt, relayed_custom_name
from agentcore.providers.errors import retry_after_seconds
from agentcore.stream import RunStream, StreamViolation

__all__ = ["MAX_EVENT_BYTES", "RemoteAgent", "sse_payloads"]

logger = logging.getLogger(__name__)

#: Largest accepted ``data`` payload of one event, in characters (as ``@ag-ui/client``).
MAX_EVENT_BYTES: Final = 10 * 1024 * 1024

_KNOWN_TYPES: Final = frozenset(member.value for member in EventType)
#: Statuses that say "not now" before any run started; the request may be repeated.
_RETRY_STATUS: Final[dict[int, str]] = {
    408: "upstream_unavailable",
    429: "rate_limited",
    502: "upstream_unavailable",
    503: "upstream_unavailable",
    504: "upstream_unavailable",
}
_END: Final = object()


class _RemoteFailure(Exception):
    """The remote run failed; ``code`` is the RUN_ERROR code, ``str()`` a safe sentence."""

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.code = code


class RemoteAgent(Agent):
    """A remote AG-UI agent at ``url``; see the module docstring.

    ``headers`` are sent with every request (e.g. an ``Authorization`` header; they
    are never logged nor put in an error). ``timeout`` (seconds) bounds connecting
    and each wait for more of the stream. ``transport`` replaces httpx's network
    transport (tests, or an in-process ASGI app). ``max_retries`` bounds the retries
    of a request the remote refused with 408, 429, 502, 503 or 504; the wait is its
    ``Retry-After`` or ``retry_backoff`` doubled per attempt, at most
    ``retry_max_delay`` seconds (a longer ``Retry-After`` ends the run at once).
    Implements ER-01, SEC-06.
    """

    def __init__(
        self,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        timeout: float = 300,
        transport: httpx.AsyncBaseTransport | None = None,
        max_retries: int = 2,
        retry_backoff: float = 0.5,
        retry_max_delay: float = 30.0,
    ) -> None:
        """Configure the endpoint.

        Raises :class:`ValueError` for a non-HTTP(S) URL, a non-positive timeout or
        a negative retry setting.
        """
        if max_retries < 0 or not retry_backoff >= 0 or not retry_max_delay >= 0:
            raise ValueError(
                "max_retries, retry_backoff and retry_max_delay must be 0 or more"
            )
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError("RemoteAgent url must be an absolute http(s) URL")
        if not timeout > 0:
            raise ValueError(f"timeout must be a positive number, got {timeout!r}")
        self.url = url
        self.headers: dict[str, str] = dict(headers or {})
        self.timeout = timeout
        self.transport = transport
        self.max_retries = max_retries
        self.retry_backoff = retry_backoff
        self.retry_max_delay = retry_max_delay

    @property
    def endpoint(self) -> str:
        """Return the URL without credentials, query or fragment (for logs)."""
        parts = urlsplit(self.url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
        return f"{parts.scheme}://{host}{port}{parts.path}"

    async def run(
        self, run_input: RunAgentInput, *, cancel: asyncio.Event | None = None
    ) -> AsyncIterator[BaseEvent]:
        """Yield the remote run's events; see the module docstring.

        Starts with ``RUN_STARTED`` and ends with exactly one ``RUN_FINISHED`` or
        ``RUN_ERROR``, nothing left open; ``cancel`` closes the connection and ends
        the run with the cancelled outcome. Raises nothing. Implements ER-01.
        """
        checker = RunStream(
            thread_id=run_input.thread_id,
            run_id=run_input.run_id,
            prior_tool_call_ids=_call_ids(run_input.messages),
            prior_message_ids=[m.id for m in run_input.messages],
        )
        started = False
        # The messages the client has: the input's, and those this stream starts.
        known_messages = {m.id for m in run_input.messages}
        frames = aiter(self._frames(run_input))
        cancel_waiter = (
            asyncio.ensure_future(cancel.wait()) if cancel is not None else None
        )
        try:
            while True:
                try:
                    item = await _next_unless(frames, cancel_waiter)
                except _RemoteFailure as failure:
                    logger.warning(
                        "remote agent %s: %s (%s)", self.endpoint, failure, failure.code
                    )
                    if not started:
                        yield run_started(run_input)
                    for event in checker.close_open_items():
                        yield event
                    yield run_error(str(failure), code=failure.code)
                    return
                if item is None:  # cancelled
                    if not started:
                        yield run_started(run_input)
                    for event in checker.close_open_items():
                        yield event
                    yield run_cancelled(run_input)
                    return
                if item is _END:
                    if not started:
                        yield run_started(run_input)
                    for event in checker.close_open_items():
                        yield event
                    yield run_error(
                        "The remote agent's stream ended before the run finished "
                        "(no RUN_FINISHED or RUN_ERROR); the run is incomplete.",
                        code="truncated_stream",
                    )
                    return
                assert isinstance(item, dict)
                frame: dict[str, Any] = item
                kind = frame["type"]
                if not started and kind != "RUN_STARTED":
                    opener = run_started(run_input)
                    checker.feed(opener)
                    started = True
                    yield opener
                try:
                    events = [
                        event
                        for each in _parent_opened(frame, known_messages)
                        for event in checker.feed(each)
                    ]
                except StreamViolation as violation:
                    logger.warning(
                        "remote agent %s sent an invalid stream: %s",
                        self.endpoint,
                        violation,
                    )
                    if not started:
                        yield run_started(run_input)
                    for event in checker.close_open_items():
                        yield event
                    yield run_error(
                        "The remote agent sent an invalid event stream "
                        f"({violation.rule}): {sanitize_message(violation.message)}",
                        code="malformed_stream",
                    )
                    return
                started = started or kind == "RUN_STARTED"
                for event in events:
                    if isinstance(event, RawEvent) and raw_mentions_interrupt(
                        event.event
                    ):
                        continue
                    if isinstance(event, CustomEvent):
                        name = relayed_custom_name(event.name)
                        if name is None:
                            continue
                        event = event.model_copy(update={"name": name})
                    if isinstance(event, RunStartedEvent) and event.input is None:
                        # The run's input is what Countersign sent: echoed, so a
                        # client following the thread gets the tool messages the
                        # application answered in it (TC-09).
                        event = event.model_copy(update={"input": run_input})
                    yield event
                if kind in TERMINAL_EVENT_TYPES:
                    return
        finally:
            if cancel_waiter is not None:
                cancel_waiter.cancel()
            close = getattr(frames, "aclose", None)
            if close is not None:
                with suppress(Exception):
                    await close()

    async def _frames(self, run_input: RunAgentInput) -> AsyncIterator[dict[str, Any]]:
        """Yield each event object the remote sends, unknown types dropped.

        Raises :class:`_RemoteFailure` with a sanitized message.
        """
        body = run_input.model_dump_json(by_alias=True, exclude_none=True)
        headers = {
            **self.headers,
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
        }
        # The run's trace goes on at the remote agent (W3C traceparent/tracestate);
        # nothing is added when no span is recording.
        propagate.inject(headers)
        timeout = httpx.Timeout(self.timeout, connect=min(self.timeout, 30.0))
        responded = False
        attempt = 0
        try:
            async with httpx.AsyncClient(
                timeout=timeout, transport=self.transport, follow_redirects=False
            ) as client:
                while True:
                    async with client.stream(
                        "POST", self.url, content=body.encode("utf-8"), headers=headers
                    ) as response:
                        delay = self._retry_delay(response, attempt)
                        if delay is None:
                            responded = True
                            _check_response(response)
                            async for payload, complete in sse_payloads(
                                response.aiter_lines()
                            ):
                                frame = _parse_frame(payload, complete=complete)
                                if frame is not None:
                                    yield frame
                            return
                    attempt += 1
                    logger.warning(
                        "remote agent %s answered HTTP %d; retry %d of %d in %.2fs",
                        self.endpoint,
                        response.status_code,
                        attempt,
                        self.max_retries,
                        delay,
                    )
                    await asyncio.sleep(delay)
        except httpx.TimeoutException as error:
            raise _RemoteFailure(
                f"The remote agent did not answer within {self.timeout:g} seconds.",
                code="upstream_unavailable",
            ) from error
        except httpx.HTTPError as error:
            if responded:
                raise _RemoteFailure(
                    "The connection to the remote agent broke off before the run "
                    "finished; the run is incomplete.",
                    code="truncated_stream",
                ) from error
            raise _RemoteFailure(
                "The remote agent could not be reached (connection failed).",
                code="upstream_unavailable",
            ) from error

    def _retry_delay(self, response: httpx.Response, attempt: int) -> float | None:
        """Return the wait before repeating a refused request, or ``None`` for no retry."""
        if response.status_code not in _RETRY_STATUS or attempt >= self.max_retries:
            return None
        asked = retry_after_seconds(response.headers)
        if asked is not None:
            return asked if asked <= self.retry_max_delay else None
        return min(self.retry_backoff * 2.0**attempt, self.retry_max_delay)


def _check_response(response: httpx.Response) -> None:
    """Raise :class:`_RemoteFailure` unless ``response`` is a 2xx ``text/event-stream``."""
    if not response.is_success:
        status = response.status_code
        phrase = httpx.codes.get_reason_phrase(status)
        transient = _RETRY_STATUS.get(status)
        if transient is not None:
            raise _RemoteFailure(
                f"The remote agent is unavailable: it answered HTTP {status}"
                f"{' ' + phrase if phrase else ''}. Try the run again later.",
                code=transient,
            )
        raise _RemoteFailure(
            f"The remote agent refused the run: it answered HTTP {status}"
            f"{' ' + phrase if phrase else ''}.",
            code="upstream_http_error",
        )
    media_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type != "text/event-stream":
        raise _RemoteFailure(
            "The remote agent did not answer with an event stream "
            f"(content type {media_type[:60] or 'missing'!r}, expected "
            "'text/event-stream').",
            code="malformed_stream",
        )


async def sse_payloads(lines: AsyncIterator[str]) -> AsyncIterator[tuple[str, bool]]:
    """Yield ``(data, complete)`` for each SSE event in ``lines`` (line endings already split).

    ``data`` is the event's ``data:`` lines joined with ``\\n`` (one optional space after
    the colon removed); comments (``:``), ``event:``, ``id:``, ``retry:`` and unknown
    fields are ignored. ``complete`` is ``False`` only for data left when the stream
    ends without the blank line closing its event. Raises :class:`_RemoteFailure`
    (``malformed_stream``) when one event's data exceeds :data:`MAX_EVENT_BYTES`.
    """
    data: list[str] = []
    size = 0
    async for raw_line in lines:
        line = raw_line.rstrip("\r\n")
        if not line:
            if data:
                yield "\n".join(data), True
            data, size = [], 0
            continue
        if line.startswith(":"):
            continue
        name, colon, value = line.partition(":")
        if name != "data":
            continue
        if colon and value.startswith(" "):
            value = value[1:]
        size += len(value) + 1
        if size > MAX_EVENT_BYTES:
            raise _RemoteFailure(
                "The remote agent sent an event larger than "
                f"{MAX_EVENT_BYTES // (1024 * 1024)} MB.",
                code="malformed_stream",
            )
        data.append(value)
    if data:
        yield "\n".join(data), False


def _parse_frame(payload: str, *, complete: bool) -> dict[str, Any] | None:
    """Return the event object in ``payload``, or ``None`` for an unknown event type.

    Raises :class:`_RemoteFailure`: ``truncated_stream`` for an unparseable frame cut
    off by the end of the stream, ``malformed_stream`` for any other frame that is not
    one JSON object with a string ``type``.
    """
    try:
        frame = json.loads(payload)
    except ValueError as error:
        if not complete:
            raise _RemoteFailure(
                "The remote agent's stream ended in the middle of an event; the run "
                "is incomplete.",
                code="truncated_stream",
            ) from error
        raise _RemoteFailure(
            "The remote agent sent a frame that is not JSON.",
            code="malformed_stream",
        ) from error
    if not isinstance(frame, dict) or not isinstance(frame.get("type"), str):
        raise _RemoteFailure(
            "The remote agent sent a frame that is not an AG-UI event object "
            "(a JSON object with a string 'type').",
            code="malformed_stream",
        )
    if frame["type"] not in _KNOWN_TYPES:
        logger.warning(
            "remote agent sent unknown event type %r; dropped", frame["type"]
        )
        return None
    return frame


async def _next_unless(
    frames: AsyncIterator[dict[str, Any]], cancel_waiter: asyncio.Future[Any] | None
) -> dict[str, Any] | object | None:
    """Return the next frame, ``_END`` when exhausted, or ``None`` when cancelled first.

    Raises :class:`_RemoteFailure` from the frame reader.
    """
    if cancel_waiter is None:
        return await _next_frame(frames)
    if cancel_waiter.done():
        return None
    task = asyncio.ensure_future(_next_frame(frames))
    await asyncio.wait({task, cancel_waiter}, return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        return task.result()
    task.cancel()
    await asyncio.wait({task}, timeout=1.0)
    return None


async def _next_frame(frames: AsyncIterator[dict[str, Any]]) -> dict[str, Any] | object:
    """Return the next frame or ``_END``."""
    try:
        return await anext(frames)
    except StopAsyncIteration:
        return _END


def _parent_opened(frame: dict[str, Any], known: set[str]) -> list[dict[str, Any]]:
    """Return ``frame``, after an empty assistant message when it names an unknown parent.

    A remote may start a call whose ``parentMessageId`` names a message its
    stream never showed (ag-ui-langgraph names LangGraph's ``AIMessage``, sent
    only in its snapshot): a client then holds a call under a message it does
    not have (ag-ui-validate ``AGUI208``). That message is opened and closed
    first, empty, under the same id, so the call has the parent it names.
    ``known`` (the message ids the client has) is updated. Implements TC-02.
    """
    kind = frame.get("type")
    if kind in ("TEXT_MESSAGE_START", "TEXT_MESSAGE_CHUNK"):
        message_id = frame.get("messageId")
        if isinstance(message_id, str):
            known.add(message_id)
        return [frame]
    parent = frame.get("parentMessageId")
    if kind not in ("TOOL_CALL_START", "TOOL_CALL_CHUNK") or not isinstance(
        parent, str
    ):
        return [frame]
    if parent in known:
        return [frame]
    known.add(parent)
    return [
        {"type": "TEXT_MESSAGE_START", "messageId": parent, "role": "assistant"},
        {"type": "TEXT_MESSAGE_END", "messageId": parent},
        frame,
    ]


def _call_ids(messages: list[Any]) -> list[str]:
    """Return the tool-call ids the input history already uses."""
    ids: list[str] = []
    for message in messages:
        ids.extend(call.id for call in getattr(message, "tool_calls", None) or ())
    return ids
