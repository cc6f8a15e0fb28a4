"""The built-in agent loop: model turn → tool calls → dispatch → results, within limits.

:class:`LoopAgent` runs one :class:`RunAgentInput` against a model
:class:`~agentcore.providers.base.Provider` and yields AG-UI events as they happen:

- each model turn streams as one assistant message (``TEXT_MESSAGE_*``, fresh id) and
  its tool calls (``TOOL_CALL_START`` with ``parentMessageId`` = that message,
  ``TOOL_CALL_ARGS``, and ``TOOL_CALL_END`` once the provider's turn has ended, so a
  late argument fragment still lands before the END);
- the turn's stop reason drives the loop (LP-09): with tool calls, the agent-side
  ones are validated and executed by :func:`agentcore.dispatch.dispatch` and answered
  in-stream with ``TOOL_CALL_RESULT``; calls of tools the application advertised in
  ``RunAgentInput.tools`` are never answered (FT-02) and end the run with the success
  outcome listing them in ``pendingToolCallIds`` (FT-03, FT-04, FT-08); a call naming
  no offered tool is answered with an error result listing the tools (SEC-04, SEC-05);
  with no tool calls the run is done;
- a turn cut off by the output-token limit (``max_tokens``) or stopped by a content
  filter never executes its calls: agent-side ones get an error result, application
  ones are left pending with ``metadata={"truncated": True}`` on their END;
- the number of model turns, the overall time and cancellation are bounded (LP-06):
  a limit or a provider failure ends the run with ``RUN_ERROR`` and cancellation with
  the cancelled outcome, always after closing whatever is open (ER-01);
- a transient provider failure (a :class:`ProviderError` whose ``retryable`` is set:
  ``upstream_unavailable``, ``rate_limited``, ``timeout``, a corrupted chunk) is
  retried up to ``model_retries`` times while nothing of that turn has been streamed
  yet, after the ``Retry-After`` the upstream asked for or an exponential backoff,
  never past the deadline. Once a turn has streamed output, a failure ends the run
  with its code: what was shown cannot be taken back. Upstream faults are logged as
  one warning line, without a traceback; only a failure of ours is ``internal_error``.

Token usage reported by the provider is summed over the turns onto the terminal event.
This module never imports Django nor a provider SDK.

Over 400 lines because it holds the agent loop's one execution state machine (turns,
calls, limits, retries, cancellation); the pieces share its per-run state.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable
from contextlib import suppress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, TypeVar

from agentcore import events as agui

if TYPE_CHECKING:
    from agentcore.events import (
        BaseEvent,
        RunAgentInput,
        TokenUsage,
        ToolCallResultEvent,
    )

from agentcore.agents import (
    Agent,
    new_id,
    run_cancelled,
    run_error,
    run_finished,
    run_started,
)
from agentcore.dispatch import ToolCallRequest, ToolResult, dispatch, error_content
from agentcore.history import unique_call_id
from agentcore.providers.base import (
    ModelRequest,
    Provider,
    ProviderError,
    StopReason,
    TextDelta,
    ToolCallBegin,
    ToolCallDelta,
    ToolSpec,
    TurnEnd,
    Usage,
)
from agentcore.tools import SEARCH_TOOLS_NAME, ToolContext, Toolset, selected_tools
from agentcore.unicode import hold_back, join_text, scrub

__all__ = ["EMPTY_ARGUMENTS", "LoopAgent"]

logger = logging.getLogger(__name__)

#: Argument text streamed for a call whose provider sent no argument fragment.
EMPTY_ARGUMENTS: Final = "{}"

_EMPTY_SCHEMA: Final[dict[str, Any]] = {"type": "object", "properties": {}}

#: Stop reasons whose tool calls are never executed: (error type, actionable message).
_NOT_EXECUTED: Final[dict[str, tuple[str, str]]] = {
    "max_tokens": (
        "arguments_truncated",
        "The call to {name!r} was not executed: your output was cut off by the "
        "output-token limit before its arguments were complete. Call it again with "
        "shorter arguments, or make fewer calls per step.",
    ),
    "content_filter": (
        "content_filtered",
        "The call to {name!r} was not executed: the provider's content filter "
        "stopped your output. Rephrase the request without the filtered content.",
    ),
}

#: Event types a tool's presentation events may have (RT-02); others are dropped.
_PRESENTATION_TYPES: Final = frozenset(
    {
        "CUSTOM",
        "RAW",
        "STATE_SNAPSHOT",
        "STATE_DELTA",
        "ACTIVITY_SNAPSHOT",
        "ACTIVITY_DELTA",
    }
)

_T = TypeVar("_T")
_END: Final = object()


class _Cancelled(Exception):
    """The run's cancel event was set (internal control flow)."""


class _LimitReached(Exception):
    """A run limit was hit; ``code`` is the RUN_ERROR code (internal control flow)."""

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class _Call:
    """One tool call of the current turn, as streamed so far."""

    provider_id: str
    tool_call_id: str
    name: str
    deltas: list[str] = field(default_factory=list)
    #: A trailing high surrogate held until the next delta completes it.
    held: str = ""
    #: Provider data that must travel with the call into later requests (a Gemini
    #: thought signature, BC25); carried on TOOL_CALL_START and ``ToolCall.metadata``.
    metadata: dict[str, Any] | None = None

    @property
    def arguments(self) -> str:
        """Return the joined argument text, surrogate halves paired (LP-04, TC-03)."""
        return join_text([*self.deltas, self.held])


class LoopAgent(Agent):
    """The built-in agent: a tool-calling loop over one model provider.

    ``toolset`` holds the agent's own tools (answered in-stream) and may hold
    application tools (``runs_on="application"``), which are offered only when the
    run input advertises them. ``max_iterations`` bounds the model turns per run,
    ``deadline_seconds`` the run's wall-clock time; ``max_output_tokens`` is passed to
    the provider. ``context_extras`` is copied into every :class:`ToolContext`'s
    ``extras``; its ``"user"`` entry, when present, becomes the context's ``user``.
    ``model_retries`` bounds the retries of one model turn after a transient provider
    failure; the wait is the upstream's ``Retry-After`` or ``retry_backoff`` doubled
    per attempt, at most ``retry_max_delay`` seconds (a longer ``Retry-After`` is not
    waited for: the failure ends the run). With ``owns_provider`` the provider was
    built for this agent's one run (as ``threads.agent_config.agent_build`` does):
    its HTTP client is closed when the run ends, on the run's own event loop, so no
    connection is left for the garbage collector to close on a dead loop.

    Raises :class:`ValueError` when a limit is not positive. Implements LP-06, LP-09,
    RT-07, FT-02, FT-03, FT-04, FT-08, ER-01.
    """

    def __init__(
        self,
        provider: Provider,
        *,
        toolset: Toolset,
        model: str,
        system_prompt: str = "",
        max_iterations: int = 10,
        deadline_seconds: float = 300.0,
        max_output_tokens: int | None = None,
        context_extras: dict[str, Any] | None = None,
        model_retries: int = 2,
        retry_backoff: float = 0.5,
        retry_max_delay: float = 30.0,
        owns_provider: bool = False,
    ) -> None:
        """Configure the loop; see the class docstring."""
        if model_retries < 0:
            raise ValueError(f"model_retries must be 0 or more, got {model_retries!r}")
        if not retry_backoff >= 0 or not retry_max_delay >= 0:
            raise ValueError(
                "retry_backoff and retry_max_delay must be 0 or more, got "
                f"{retry_backoff!r} and {retry_max_delay!r}"
            )
        if max_iterations < 1:
            raise ValueError(
                f"max_iterations must be at least 1, got {max_iterations!r}"
            )
        if not deadline_seconds > 0:
            raise ValueError(
                f"deadline_seconds must be a positive number, got {deadline_seconds!r}"
            )
        if max_output_tokens is not None and max_output_tokens < 1:
            raise ValueError(
                f"max_output_tokens must be positive or None, got {max_output_tokens!r}"
            )
        self.provider = provider
        self.toolset = toolset
        self.model = model
        self.system_prompt = system_prompt
        self.max_iterations = max_iterations
        self.deadline_seconds = deadline_seconds
        self.max_output_tokens = max_output_tokens
        self.context_extras: dict[str, Any] = dict(context_extras or {})
        self.model_retries = model_retries
        self.retry_backoff = retry_backoff
        self.retry_max_delay = retry_max_delay
        self.owns_provider = owns_provider

    def run(
        self, run_input: RunAgentInput, *, cancel: asyncio.Event | None = None
    ) -> AsyncIterator[BaseEvent]:
        """Yield the AG-UI events of one run of ``run_input``; see the module docstring.

        Starts with ``RUN_STARTED`` and ends with exactly one ``RUN_FINISHED`` (success,
        possibly with ``pendingToolCallIds``, or cancelled) or ``RUN_ERROR`` (``code``
        ``max_iterations``, ``deadline_exceeded``, a :class:`ProviderError` code, or
        ``internal_error``). Raises nothing. Implements LP-06, LP-09, ER-01.

        Returns the run's own async generator rather than re-yielding it: every
        event would otherwise cross one more generator (B3).
        """
        return _Execution(self, run_input, cancel).events()


class _Execution:
    """The state of one run of a :class:`LoopAgent`."""

    def __init__(
        self, agent: LoopAgent, run_input: RunAgentInput, cancel: asyncio.Event | None
    ) -> None:
        self.agent = agent
        self.input = run_input
        self.cancel = cancel
        self.advertised: dict[str, Any] = {}
        for tool in run_input.tools or ():
            self.advertised.setdefault(tool.name, tool)
        self.seen_ids: set[str] = _ids_in(run_input.messages)
        self.produced: list[Any] = []
        self.selected_deferred: set[str] = set()
        self.usage: dict[str, int] = {}
        self.usage_source: tuple[str, str] = ("", "")
        self.turns = 0
        # Open items, closed by _close_open on an abnormal end.
        self.open_text: str | None = None
        self.open_calls: list[_Call] = []
        self.deadline = 0.0
        self.cancel_waiter: asyncio.Future[Any] | None = None
        # The task awaiting inside _race, and why _interrupt cancelled it.
        self._racing: asyncio.Task[Any] | None = None
        self._interrupted: str | None = None

    # -- the run ----------------------------------------------------------------------

    async def events(self) -> AsyncIterator[BaseEvent]:
        """Yield the run's events, turning every failure into a terminal event."""
        loop = asyncio.get_running_loop()
        self.deadline = loop.time() + self.agent.deadline_seconds
        if self.cancel is not None:
            self.cancel_waiter = asyncio.ensure_future(self.cancel.wait())
            self.cancel_waiter.add_done_callback(self._on_cancel)
        yield run_started(self.input)
        deadline_timer = loop.call_at(self.deadline, self._interrupt, "deadline")
        try:
            async for event in self._loop():
                yield event
        except _Cancelled:
            for event in self._close_open():
                yield event
            yield run_cancelled(self.input, usage=self._usage())
        except _LimitReached as limit:
            for event in self._close_open():
                yield event
            yield run_error(str(limit), code=limit.code, usage=self._usage())
        except ProviderError as error:
            logger.warning(
                "model provider failed in thread %r run %r: %s (%s)",
                self.input.thread_id,
                self.input.run_id,
                error,
                error.code,
            )
            for event in self._close_open():
                yield event
            yield run_error(
                _provider_message(error), code=error.code, usage=self._usage()
            )
        except Exception:
            logger.exception(
                "agent loop failed in thread %r run %r",
                self.input.thread_id,
                self.input.run_id,
            )
            for event in self._close_open():
                yield event
            yield run_error(
                "The agent failed unexpectedly; the error was logged. Try the run again.",
                code="internal_error",
                usage=self._usage(),
            )
        finally:
            deadline_timer.cancel()
            if self.cancel_waiter is not None:
                self.cancel_waiter.cancel()
            if self.agent.owns_provider:
                with suppress(Exception):  # closing is best effort; the run has ended
                    await self.agent.provider.aclose()

    async def _loop(self) -> AsyncIterator[BaseEvent]:
        """Run model turns until the model stops calling tools or calls are pending."""
        while True:
            self._check_cancel()
            if self.turns >= self.agent.max_iterations:
                raise _LimitReached(
                    f"The agent stopped after {self.agent.max_iterations} model turns "
                    "without finishing (the iteration limit); the model kept calling "
                    "tools.",
                    code="max_iterations",
                )
            self._check_deadline()
            self.turns += 1
            calls: list[_Call] = []
            end: TurnEnd | None = None
            # The retries of a transient failure before any output, here rather than
            # in a generator of their own: every event would cross it (B3).
            attempt = 0
            while True:
                streamed = False
                try:
                    async for item in self._turn(calls):
                        if isinstance(item, TurnEnd):
                            end = item
                        else:
                            streamed = True
                            yield item
                    break
                except ProviderError as error:
                    delay = self._retry_or_raise(error, attempt, streamed=streamed)
                attempt += 1
                await self._race(asyncio.sleep(delay))
                self._check_cancel()
            assert end is not None  # _turn raises when the provider never ends the turn
            if not calls:
                yield run_finished(self.input, usage=self._usage())
                return
            pending: list[str] = []
            stop_turn = False
            async for event, result in self._answer(calls, end.stop_reason, pending):
                yield event
                if result is not None and result.end_turn:
                    stop_turn = True
            if pending or stop_turn:
                yield run_finished(
                    self.input, pending_tool_call_ids=pending, usage=self._usage()
                )
                return

    # -- one model turn ---------------------------------------------------------------

    def _retry_or_raise(
        self, error: ProviderError, attempt: int, *, streamed: bool
    ) -> float:
        """Return the wait before retrying the turn after ``error``, logging the retry.

        Re-raises ``error`` once retries are spent, the failure is not retryable,
        output was already streamed, or the wait would pass the deadline.
        """
        delay = self._retry_delay(error, attempt, streamed=streamed)
        if delay is None:
            raise error
        logger.warning(
            "model provider failed in thread %r run %r: %s (%s); "
            "retry %d of %d in %.2fs",
            self.input.thread_id,
            self.input.run_id,
            error,
            error.code,
            attempt + 1,
            self.agent.model_retries,
            delay,
        )
        return delay

    def _retry_delay(
        self, error: ProviderError, attempt: int, *, streamed: bool
    ) -> float | None:
        """Return the wait before retrying after ``error``, or ``None`` for no retry."""
        if streamed or not error.retryable or attempt >= self.agent.model_retries:
            return None
        agent = self.agent
        if error.retry_after is not None:
            if error.retry_after > agent.retry_max_delay:
                return None
            delay = error.retry_after
        else:
            delay = min(agent.retry_backoff * 2**attempt, agent.retry_max_delay)
        remaining = self.deadline - asyncio.get_running_loop().time()
        return delay if delay < remaining else None

    async def _turn(self, calls: list[_Call]) -> AsyncIterator[BaseEvent | TurnEnd]:
        """Stream one provider turn as AG-UI events; yield its :class:`TurnEnd` last.

        Fills ``calls`` in creation order. Raises :class:`ProviderError`,
        :class:`_Cancelled` or :class:`_LimitReached`.
        """
        message_id = self._fresh_message_id()
        by_provider_id: dict[str, _Call] = {}
        text: list[str] = []
        held_text = ""
        request = self._request()
        stream = aiter(self.agent.provider.stream_turn(request))
        end: TurnEnd | None = None
        try:
            while True:
                item = await self._next_item(stream)
                if item is _END:
                    break
                if isinstance(item, TextDelta):
                    if not item.text:
                        continue
                    piece, held_text = hold_back(held_text, item.text)
                    if not piece:
                        continue
                    if self.open_text is None:
                        self.open_text = message_id
                        yield agui.TextMessageStartEvent(
                            message_id=message_id, role="assistant"
                        )
                    piece = scrub(piece)
                    text.append(piece)
                    yield agui.TextMessageContentEvent(
                        message_id=message_id, delta=piece
                    )
                elif isinstance(item, ToolCallBegin):
                    known = by_provider_id.get(item.call_id)
                    if known is not None:
                        if known.name != item.name:
                            raise ProviderError(
                                "The model provider restarted a tool call under a "
                                "different tool name.",
                                code="malformed_stream",
                            )
                        continue
                    call = _Call(
                        provider_id=item.call_id,
                        tool_call_id=unique_call_id(item.call_id, seen=self.seen_ids),
                        name=item.name,
                        metadata=item.metadata,
                    )
                    by_provider_id[item.call_id] = call
                    calls.append(call)
                    self.open_calls.append(call)
                    yield agui.ToolCallStartEvent(
                        tool_call_id=call.tool_call_id,
                        tool_call_name=call.name,
                        parent_message_id=message_id,
                        metadata=call.metadata,
                    )
                elif isinstance(item, ToolCallDelta):
                    target = by_provider_id.get(item.call_id)
                    if target is None:
                        raise ProviderError(
                            "The model provider sent arguments for a tool call it "
                            "never started.",
                            code="malformed_stream",
                        )
                    # Whole characters only: a high surrogate waits for its low half.
                    emit, target.held = hold_back(target.held, item.delta)
                    if emit:
                        target.deltas.append(emit)
                        yield agui.ToolCallArgsEvent(
                            tool_call_id=target.tool_call_id, delta=scrub(emit)
                        )
                elif isinstance(item, TurnEnd):
                    end = item
                    break
                self._check_cancel()
        finally:
            close = getattr(stream, "aclose", None)
            if close is not None:
                with suppress(Exception):
                    await close()
        if end is None:
            raise ProviderError(
                "The model provider's stream ended before the turn finished.",
                code="malformed_stream",
            )
        self._add_usage(end)
        if held_text:
            if self.open_text is None:
                self.open_text = message_id
                yield agui.TextMessageStartEvent(
                    message_id=message_id, role="assistant"
                )
            text.append(scrub(held_text))
            yield agui.TextMessageContentEvent(message_id=message_id, delta=text[-1])
        truncated = end.stop_reason in _NOT_EXECUTED
        for event in self._close_open(truncated=truncated):
            yield event
        content = "".join(text)
        if content or calls:
            self.produced.append(
                agui.AssistantMessage(
                    id=message_id,
                    content=content or None,
                    tool_calls=[
                        agui.ToolCall(
                            id=call.tool_call_id,
                            function=agui.FunctionCall(
                                name=call.name, arguments=call.arguments
                            ),
                            metadata=call.metadata,
                        )
                        for call in calls
                    ]
                    or None,
                )
            )
        if end.stop_reason == "error":
            raise ProviderError(
                "The model provider reported an error and ended the turn.",
                code="upstream_unavailable",
                # the model's own verdict on this history (Gemini's
                # MALFORMED_FUNCTION_CALL): the same request would get it again
                retryable=False,
            )
        yield end

    def _request(self) -> ModelRequest:
        """Return this turn's request: history so far, offered tools, limits."""
        return ModelRequest(
            model=self.agent.model,
            messages=[*self.input.messages, *self.produced],
            tools=self._tool_specs(),
            system_prompt=self._system_prompt(),
            max_output_tokens=self.agent.max_output_tokens,
        )

    def _tool_specs(self) -> list[ToolSpec]:
        """Return the tools offered this turn: agent-side tools, then advertised ones.

        A toolset tool that runs on the application side is offered only through the
        run input's advertisement, whose definition is the application's (FT-01).
        """
        specs: list[ToolSpec] = []
        for tool in self.agent.toolset.offered(self.selected_deferred):
            if tool.runs_on == "agent" and tool.name not in self.advertised:
                specs.append(tool.spec())
        for name, advertised in self.advertised.items():
            own = self.agent.toolset.get(name)
            specs.append(
                ToolSpec(
                    name=name,
                    description=advertised.description,
                    parameters=advertised.parameters or dict(_EMPTY_SCHEMA),
                    strict=bool(own.strict) if own is not None else False,
                )
            )
        return specs

    def _system_prompt(self) -> str:
        """Return the system prompt, followed by the run input's context entries."""
        prompt = self.agent.system_prompt
        entries = [f"- {c.description}: {c.value}" for c in self.input.context or ()]
        if entries:
            block = "Context from the application:\n" + "\n".join(entries)
            prompt = f"{prompt}\n\n{block}" if prompt else block
        return prompt

    # -- answering the calls ----------------------------------------------------------

    async def _answer(
        self, calls: list[_Call], stop_reason: StopReason, pending: list[str]
    ) -> AsyncIterator[tuple[BaseEvent, ToolResult | None]]:
        """Answer the turn's agent-side and unknown calls; list application calls in ``pending``.

        Yields ``(TOOL_CALL_RESULT, dispatch result or None)`` in call order.
        Implements LP-02, LP-08, RT-07, FT-02, SEC-04, SEC-05.
        """
        blocked = _NOT_EXECUTED.get(stop_reason)
        answers: dict[str, tuple[str, str] | ToolResult] = {}
        requests: list[ToolCallRequest] = []
        for call in calls:
            if call.name in self.advertised:
                pending.append(call.tool_call_id)  # FT-02: never answered here
                continue
            tool = self.agent.toolset.resolve(call.name)
            agent_side = tool is not None and tool.runs_on == "agent"
            if blocked is not None:
                error_type, template = blocked
                answers[call.tool_call_id] = (
                    error_type,
                    template.format(name=call.name),
                )
            elif not agent_side:
                answers[call.tool_call_id] = (
                    "unknown_tool",
                    self._unknown_tool(call.name),
                )
            else:
                requests.append(
                    ToolCallRequest(
                        tool_call_id=call.tool_call_id,
                        name=call.name,
                        arguments=call.arguments,
                    )
                )
        if requests:
            self._check_cancel()
            results = await self._race(
                dispatch(
                    requests,
                    toolset=self.agent.toolset,
                    context_factory=self._context,
                    cancel=self.cancel,
                )
            )
            for result in results:
                answers[result.tool_call_id] = result
        for call in calls:
            answer = answers.get(call.tool_call_id)
            if answer is None:
                continue
            if isinstance(answer, ToolResult):
                for event in self._result_event(call, answer):
                    yield event, answer
            else:
                error_type, message = answer
                yield self._error_event(call, error_type, message), None

    def _result_event(self, call: _Call, result: ToolResult) -> list[BaseEvent]:
        """Return the tool's presentation events and the ``TOOL_CALL_RESULT`` for ``result``.

        A failed call carries its sanitized type in ``metadata["error"]`` and the
        runtime's error content (``{"error": type, "detail": actionable message}``),
        never a success-looking result (LP-08). Presentation events of the kinds in
        ``_PRESENTATION_TYPES`` go first; others are dropped with a warning.
        """
        events = self._presentation_events(result)
        if result.error is None and result.name == SEARCH_TOOLS_NAME:
            self.selected_deferred.update(selected_tools(result.details))
        events.append(self._emit_result(call, result.content, error=result.error))
        return events

    def _presentation_events(self, result: ToolResult) -> list[BaseEvent]:
        """Return the tool's own stream events that are safe to pass on."""
        events: list[BaseEvent] = []
        for raw in result.events:
            try:
                event = (
                    raw
                    if isinstance(raw, agui.BaseEvent)
                    else agui.event_from_dict(raw)
                )
            except (agui.ValidationError, TypeError, ValueError):
                logger.warning(
                    "tool %r emitted a malformed event; dropped", result.name
                )
                continue
            if str(event.type.value) not in _PRESENTATION_TYPES:
                logger.warning(
                    "tool %r emitted a %s event, which only the loop may send; dropped",
                    result.name,
                    event.type.value,
                )
                continue
            events.append(event)
        return events

    def _error_event(
        self, call: _Call, error_type: str, message: str
    ) -> ToolCallResultEvent:
        """Return an error ``TOOL_CALL_RESULT`` answering ``call``. Implements LP-08."""
        return self._emit_result(
            call, error_content(error_type, message), error=error_type
        )

    def _emit_result(
        self, call: _Call, content: Any, *, error: str | None
    ) -> ToolCallResultEvent:
        """Build the result event, append its tool message to the run's history."""
        message_id = self._fresh_message_id()
        event = agui.ToolCallResultEvent(
            message_id=message_id,
            tool_call_id=call.tool_call_id,
            content=content,
            role="tool",
            metadata={"error": error} if error else None,
        )
        self.produced.append(
            agui.ToolMessage(
                id=message_id,
                tool_call_id=call.tool_call_id,
                content=event.content,
                error=error,
            )
        )
        return event

    def _unknown_tool(self, name: str) -> str:
        """Return the actionable message for a call naming no offered tool (RT-09)."""
        offered = ", ".join(spec.name for spec in self._tool_specs()) or "(none)"
        return (
            f"There is no tool named {name!r}. Available tools: {offered}. "
            "Call one of these by its exact name, or answer without a tool."
        )

    def _context(self, request: ToolCallRequest) -> ToolContext:
        """Return the :class:`ToolContext` for one dispatched call. Implements LP-07."""
        extras = dict(self.agent.context_extras)
        user = extras.pop("user", None)
        return ToolContext(
            thread_id=self.input.thread_id,
            run_id=self.input.run_id,
            tool_call_id=request.tool_call_id,
            idempotency_key=f"{self.input.thread_id}:{request.tool_call_id}",
            user=user,
            # Not the run's event: dispatch gives each call its own signal, which
            # the run's cancel also sets, so one call's timeout stays that call's.
            cancel=None,
            extras=extras,
        )

    # -- limits, closing, usage -------------------------------------------------------

    async def _race(self, awaitable: Awaitable[_T]) -> _T:
        """Await ``awaitable`` unless the run is cancelled or its deadline passes first.

        Raises :class:`_Cancelled` or :class:`_LimitReached` (the awaitable is then
        cancelled). Implements LP-06.

        The awaitable runs in the caller's task: no task, timer nor ``asyncio.wait``
        per awaited item (B3). The run's cancel event and its one deadline timer
        reach it through :meth:`_interrupt`, which cancels this task while it is
        inside a race; the cancellation is then taken back (``uncancel``) and raised
        as the run's own exception.
        """
        task = asyncio.current_task()
        if self.cancel is not None and self.cancel.is_set():
            _close_awaitable(awaitable)
            raise _Cancelled()
        if task is None or asyncio.get_running_loop().time() >= self.deadline:
            _close_awaitable(awaitable)
            raise self._deadline_error()
        self._racing = task
        self._interrupted = None
        try:
            return await awaitable
        except asyncio.CancelledError:
            error = self._interruption(task)
            if error is None:
                raise
            raise error from None
        finally:
            self._racing = None

    async def _next_item(self, stream: AsyncIterator[_T]) -> _T | object:
        """Return ``stream``'s next item (``_END`` when it is exhausted), as a race.

        :meth:`_race` of ``anext`` in one coroutine: a model turn awaits
        this once per streamed fragment, so the two coroutines a race would build per
        item are spared (B3). Raises :class:`_Cancelled` or :class:`_LimitReached`.
        """
        task = asyncio.current_task()
        if self.cancel is not None and self.cancel.is_set():
            raise _Cancelled()
        if task is None or asyncio.get_running_loop().time() >= self.deadline:
            raise self._deadline_error()
        self._racing = task
        self._interrupted = None
        try:
            return await anext(stream)
        except StopAsyncIteration:
            return _END
        except asyncio.CancelledError:
            error = self._interruption(task)
            if error is None:
                raise
            raise error from None
        finally:
            self._racing = None

    def _interruption(self, task: asyncio.Task[Any]) -> Exception | None:
        """Return what a cancelled race raises instead, or ``None`` for a foreign cancel.

        Our own interruption (:meth:`_interrupt`) is taken back from ``task``
        (``uncancel``) and becomes :class:`_Cancelled` or the deadline's error; any
        other cancellation propagates unchanged.
        """
        reason = self._interrupted
        if reason is None:
            return None
        task.uncancel()
        if reason == "cancel":
            return _Cancelled()
        return self._deadline_error()

    def _interrupt(self, reason: str) -> None:
        """Cancel the task racing an awaitable, for ``reason`` (``cancel``/``deadline``)."""
        if self._racing is None or self._interrupted is not None:
            return
        self._interrupted = reason
        self._racing.cancel()

    def _on_cancel(self, waiter: asyncio.Future[Any]) -> None:
        if not waiter.cancelled():
            self._interrupt("cancel")

    def _check_cancel(self) -> None:
        """Raise :class:`_Cancelled` when the run's cancel event is set."""
        if self.cancel is not None and self.cancel.is_set():
            raise _Cancelled()

    def _check_deadline(self) -> None:
        """Raise :class:`_LimitReached` when the run's deadline has passed."""
        if asyncio.get_running_loop().time() >= self.deadline:
            raise self._deadline_error()

    def _deadline_error(self) -> _LimitReached:
        """Return the deadline error."""
        return _LimitReached(
            f"The agent ran out of time: the run's {self.agent.deadline_seconds:g}-second "
            "limit passed before it finished.",
            code="deadline_exceeded",
        )

    def _close_open(self, *, truncated: bool = True) -> list[BaseEvent]:
        """Return events closing the open text message and tool calls, in that order.

        A call that received no argument text gets one ``TOOL_CALL_ARGS`` with ``"{}"``
        first. ``truncated`` puts ``metadata={"truncated": True}`` on each END.
        Implements ER-01.
        """
        events: list[BaseEvent] = []
        if self.open_text is not None:
            events.append(agui.TextMessageEndEvent(message_id=self.open_text))
            self.open_text = None
        for call in self.open_calls:
            if call.held:
                # A high surrogate no low half followed: the text is refused when
                # parsed; the event carries U+FFFD so it can be stored and sent.
                call.deltas.append(call.held)
                events.append(
                    agui.ToolCallArgsEvent(
                        tool_call_id=call.tool_call_id, delta=scrub(call.held)
                    )
                )
                call.held = ""
            if not call.deltas:
                call.deltas.append(EMPTY_ARGUMENTS)
                events.append(
                    agui.ToolCallArgsEvent(
                        tool_call_id=call.tool_call_id, delta=EMPTY_ARGUMENTS
                    )
                )
            events.append(
                agui.ToolCallEndEvent(
                    tool_call_id=call.tool_call_id,
                    metadata={"truncated": True} if truncated else None,
                )
            )
        self.open_calls = []
        return events

    def _fresh_message_id(self) -> str:
        """Return a message id unused on the thread."""
        message_id = new_id("msg_")
        self.seen_ids.add(message_id)
        return message_id

    def _add_usage(self, end: TurnEnd) -> None:
        """Add a turn's reported usage to the run's totals."""
        usage: Usage | None = end.usage
        if usage is None:
            return
        for key, value in (
            ("input_tokens", usage.input_tokens),
            ("output_tokens", usage.output_tokens),
            ("total_tokens", usage.total_tokens),
        ):
            if value is not None:
                self.usage[key] = self.usage.get(key, 0) + value
        self.usage_source = (
            end.provider or self.usage_source[0] or self.agent.provider.name,
            end.model or self.usage_source[1] or self.agent.model,
        )

    def _usage(self) -> list[TokenUsage] | None:
        """Return the summed usage as one :class:`TokenUsage`, or ``None`` if none was reported."""
        if not self.usage:
            return None
        provider, model = self.usage_source
        return [
            agui.TokenUsage(
                provider=provider or None, model=model or None, **self.usage
            )
        ]


def _close_awaitable(awaitable: Awaitable[Any]) -> None:
    """Close a coroutine that will never be awaited (no "never awaited" warning)."""
    close = getattr(awaitable, "close", None)
    if close is not None:
        close()


def _ids_in(messages: list[Any]) -> set[str]:
    """Return every message id and tool-call id used in ``messages``."""
    ids: set[str] = set()
    for message in messages:
        ids.add(message.id)
        for call in getattr(message, "tool_calls", None) or ():
            ids.add(call.id)
        call_id = getattr(message, "tool_call_id", None)
        if call_id:
            ids.add(call_id)
    return ids


def _provider_message(error: ProviderError) -> str:
    """Return the run error message for a provider failure (already sanitized)."""
    text = str(error).strip() or "The model provider failed."
    return text if text.endswith((".", "!", "?", ")")) else f"{text}."
