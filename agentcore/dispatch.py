"""Dispatch a batch of tool calls: resolve, validate, execute, and answer every call.

:func:`dispatch` runs the agent-side calls of one model turn. Consecutive calls to
read-only tools in ``parallel`` mode run concurrently (asyncio); any other call is a
barrier and runs alone, in call order. Results come back in call order, one per call,
whatever happened (LP-02). :func:`execute_call` runs one call; the approval executor
uses it for an approved application call.

Errors become results with a sanitized type and an actionable message; the full
detail goes to the ``agentcore.dispatch`` logger, never to the model (SEC-06).

This module never imports Django.

Over 400 lines because it holds one call's whole path (resolve, parse, policy,
limits, classify, bound the result) and the batch scheduler that orders calls;
splitting them would split the timeout/cancel handling they share.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import re
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, TypedDict

from agentcore.arguments import (
    ValidatedArguments,
    parse_arguments,
    tool_schema_sha256,
)
from agentcore.content import (
    ContentError,
    limit_content,
    normalize_content,
    serialize_structured,
)
from agentcore.tools import (
    ErrorType,
    Tool,
    ToolCancelled,
    ToolContext,
    ToolError,
    ToolInputError,
    ToolOutput,
    ToolPermissionDenied,
    Toolset,
    ToolTimeout,
    ToolUpstreamUnavailable,
)

__all__ = [
    "ErrorType",
    "ToolCallRequest",
    "ToolCancelled",
    "ToolError",
    "ToolInputError",
    "ToolPermissionDenied",
    "ToolResult",
    "ToolTimeout",
    "ToolUpstreamUnavailable",
    "dispatch",
    "error_content",
    "execute_call",
    "sanitize_message",
]

logger = logging.getLogger(__name__)

#: Policies that are a plain action string, answered without evaluating them.
_PLAIN_ACTIONS: Final = frozenset({"auto", "require_approval", "deny"})


@dataclass(frozen=True)
class ToolCallRequest:
    """One call as the model made it: id, raw name, raw arguments, and whether the turn was cut off."""

    tool_call_id: str
    name: str
    arguments: str | dict[str, Any] | None
    truncated: bool = False


@dataclass(frozen=True)
class ToolResult:
    """The answer to one call (LP-02, LP-08).

    ``name`` is the name the model used (kept raw); ``resolved_name`` is the declared
    tool it resolved to. ``content`` is the AG-UI result content (a string or part
    dicts); on failure it is compact JSON ``{"error": type, "detail": message}``.
    ``error`` is the sanitized type (``None`` on success), ``message`` the actionable
    sentence. ``started_at``/``finished_at`` are ``time.monotonic()`` seconds.
    ``params`` are the validated params when validation passed. Implements RT-07.
    """

    tool_call_id: str
    name: str
    content: str | list[dict[str, Any]]
    error: str | None
    message: str | None
    details: dict[str, Any] | None
    end_turn: bool
    repair: str | None
    started_at: float
    finished_at: float
    resolved_name: str | None = None
    params: dict[str, Any] | None = None
    events: tuple[Any, ...] = ()

    @property
    def ok(self) -> bool:
        """Return whether the call succeeded."""
        return self.error is None


# --- sanitizing (SEC-06) ----------------------------------------------------------

_SECRET_PATTERNS: Final[tuple[tuple[re.Pattern[str], str], ...]] = (
    # URLs carrying credentials (postgres://user:pass@host/db, redis://:pw@host).
    (
        re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s/@'\"]*@[^\s'\"]*"),
        "[redacted url]",
    ),
    # Any URL to a private/loopback host.
    (
        re.compile(
            r"\b[a-zA-Z][a-zA-Z0-9+.\-]*://(?:localhost|127\.|10\.|192\.168\.|"
            r"172\.(?:1[6-9]|2\d|3[01])\.|169\.254\.)[^\s'\"]*"
        ),
        "[redacted url]",
    ),
    # Access tokens and keys.
    (re.compile(r"\b(?:sk|pk|rk)[-_][A-Za-z0-9_\-]{8,}"), "[redacted token]"),
    (
        re.compile(
            r"\b(?:ghp|gho|ghs|ghu|github_pat|xox[abprs])[-_][A-Za-z0-9_\-]{8,}"
        ),
        "[redacted token]",
    ),
    (re.compile(r"\bAKIA[0-9A-Z]{16}\b"), "[redacted token]"),
    (
        re.compile(r"\beyJ[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]*"),
        "[redacted token]",
    ),
    (re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/\-]+=*"), "Bearer [redacted token]"),
    (
        re.compile(
            r"(?i)\b(password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key)"
            r"(\s*[=:]\s*)[^\s,;'\"]+"
        ),
        r"\1\2[redacted]",
    ),
    # Private, loopback and link-local addresses (with an optional port).
    (
        re.compile(
            r"\b(?:10\.\d{1,3}|127\.\d{1,3}|192\.168|169\.254|172\.(?:1[6-9]|2\d|3[01]))"
            r"\.\d{1,3}\.\d{1,3}(?::\d+)?\b"
        ),
        "[internal address]",
    ),
    (re.compile(r"(?i)\blocalhost(?::\d+)?\b"), "[internal address]"),
    (
        re.compile(r"(?i)(?<![\w:])(?:fd[0-9a-f]{2}|fe80|::1)(?::[0-9a-f]{0,4}){1,7}"),
        "[internal address]",
    ),
)
_MAX_MESSAGE_CHARS: Final = 500


def sanitize_message(text: str) -> str:
    """Return ``text`` without credentials, tokens, internal addresses or tracebacks.

    Keeps only the first line before any ``Traceback`` and caps it at 500
    characters. Implements SEC-06.
    """
    text = text.split("Traceback (most recent call last)", 1)[0]
    for pattern, replacement in _SECRET_PATTERNS:
        text = pattern.sub(replacement, text)
    text = " ".join(text.split())
    if len(text) > _MAX_MESSAGE_CHARS:
        text = text[: _MAX_MESSAGE_CHARS - 1] + "…"
    return text


def error_content(error: str, detail: str) -> str:
    """Return the result content for a failed call: ``{"error":...,"detail":...}`` compact JSON. Implements TC-11, SEC-06."""
    return serialize_structured({"error": error, "detail": detail})


def _generic_message(kind: ErrorType, tool: Tool) -> str:
    """Return the message for an exception that carried no safe message of its own."""
    name = tool.name
    return {
        "permission_denied": (
            f"The caller is not allowed to use {name}. Do not retry; tell the user "
            "the action needs a permission they lack."
        ),
        "upstream_unavailable": (
            f"{name} could not reach a service it depends on (a transient failure). "
            "Retry later, or tell the user the service is unavailable."
        ),
        "timeout": (
            f"{name} did not finish within {tool.timeout:g} seconds and was stopped. "
            "Retry with a narrower request, or tell the user it timed out."
        ),
        "invalid_arguments": (
            f"{name} rejected the arguments. Check them against the tool's "
            "parameters and call it again."
        ),
        "cancelled": f"{name} was cancelled before it finished; nothing more will run.",
    }.get(
        kind,
        f"{name} failed with an internal error. Do not repeat the same call "
        "unchanged; try other arguments or tell the user the tool failed.",
    )


def _classify(error: BaseException, tool: Tool) -> tuple[ErrorType, str]:
    """Map an exception raised by a tool to ``(sanitized type, safe message)``. Implements SEC-06."""
    kind: ErrorType
    if isinstance(error, ToolError):
        text = sanitize_message(str(error))
        return error.error_type, text or _generic_message(error.error_type, tool)
    if isinstance(error, PermissionError):
        kind = "permission_denied"
    elif isinstance(error, TimeoutError):
        kind = "timeout"
    elif isinstance(error, ConnectionError):
        kind = "upstream_unavailable"
    else:
        kind = "tool_error"
    return kind, _generic_message(kind, tool)


# --- one call ----------------------------------------------------------------------


class _FailureFields(TypedDict):
    """The fields every failure of one resolved call shares (``**`` into :func:`_failure`)."""

    started_at: float
    tool: Tool | None
    repair: str | None
    params: dict[str, Any] | None


def _failure(
    call: ToolCallRequest,
    *,
    kind: str,
    message: str,
    started_at: float,
    tool: Tool | None = None,
    repair: str | None = None,
    params: dict[str, Any] | None = None,
) -> ToolResult:
    """Return an error result for ``call``. Implements LP-08, SEC-06."""
    return ToolResult(
        tool_call_id=call.tool_call_id,
        name=call.name,
        content=error_content(kind, message),
        error=kind,
        message=message,
        details=None,
        end_turn=False,
        repair=repair,
        started_at=started_at,
        finished_at=time.monotonic(),
        resolved_name=tool.name if tool is not None else None,
        params=params,
    )


#: Per tool, whether ``execute`` is a coroutine function (asked once, not per call).
_RUNS_ASYNC: weakref.WeakKeyDictionary[Tool, bool] = weakref.WeakKeyDictionary()


def _runs_async(tool: Tool) -> bool:
    """Return whether ``tool.execute`` is a coroutine function (or an async callable)."""
    known = _RUNS_ASYNC.get(tool)
    if known is None:
        execute = tool.execute
        known = inspect.iscoroutinefunction(execute) or inspect.iscoroutinefunction(
            getattr(execute, "__call__", None)  # noqa: B004 - async callable objects
        )
        _RUNS_ASYNC[tool] = known
    return known


async def _invoke(tool: Tool, params: dict[str, Any], context: ToolContext) -> Any:
    """Call ``tool.execute``: a coroutine function directly, a sync one in a worker thread."""
    execute = tool.execute
    if _runs_async(tool):
        pending = execute(params, context)
        return await pending  # type: ignore[misc]  # a coroutine function's call
    result = await asyncio.to_thread(execute, params, context)
    if inspect.isawaitable(result):
        return await result
    return result


class _Running:
    """One call inside :func:`_run_with_limits`: its task, deadline, signal, what stopped it."""

    __slots__ = ("deadline", "signal", "stopped", "task")

    def __init__(
        self, task: asyncio.Task[Any], deadline: float, signal: asyncio.Event
    ) -> None:
        self.task = task
        self.deadline = deadline
        #: The call's own abort signal (its ``ToolContext.cancel``): set on its
        #: timeout or the run's cancel, never shared with another call or the run.
        self.signal = signal
        #: ``"timeout"`` or ``"cancelled"`` once :class:`_Limits` cancelled the task.
        self.stopped: str | None = None


class _Limits:
    """The timeouts and the run's cancel signal of one batch's running calls (LP-05).

    One timer and at most one cancel waiter serve the whole batch instead of an
    ``asyncio.timeout`` and a watcher task per call (B3): the timer is armed at the
    earliest deadline of the calls running, and when it fires it cancels those past
    their own deadline and re-arms itself for the next one. Calls of one batch run
    one after the other or side by side, so the first deadline is rarely moved.

    Each call has its own signal: a timeout sets only that call's, the run's cancel
    (seen by the one waiter) sets every running call's. The run's event itself is
    only ever read here: a tool's timeout must not end the run (RT-07).
    """

    def __init__(self, cancel: asyncio.Event | None) -> None:
        self.cancel = cancel
        self.running: dict[int, _Running] = {}
        self.timer: asyncio.TimerHandle | None = None
        self.waiter: asyncio.Task[Any] | None = None

    def enter(
        self, task: asyncio.Task[Any], timeout: float, signal: asyncio.Event
    ) -> _Running:
        """Register the call running in ``task`` with a ``timeout`` in seconds.

        ``signal`` is the call's own abort event (not the run's cancel event), set
        when this call times out or the run is cancelled.
        """
        loop = task.get_loop()
        entry = _Running(task, loop.time() + timeout, signal)
        self.running[id(entry)] = entry
        if self.cancel is not None and self.waiter is None:
            self.waiter = loop.create_task(self._watch(self.cancel))
        if self.timer is None or entry.deadline < self.timer.when():
            if self.timer is not None:
                self.timer.cancel()
            self.timer = loop.call_at(entry.deadline, self._on_timer)
        return entry

    def leave(self, entry: _Running) -> None:
        """Forget a call that has finished (its deadline no longer counts)."""
        self.running.pop(id(entry), None)

    def close(self) -> None:
        """Stop the timer and the cancel waiter (the batch is over)."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.waiter is not None and not self.waiter.done():
            self.waiter.cancel()
        self.waiter = None

    def _on_timer(self) -> None:
        self.timer = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        upcoming: float | None = None
        for entry in self.running.values():
            if entry.stopped is not None:
                continue
            if entry.deadline <= now:
                entry.stopped = "timeout"
                entry.signal.set()
                entry.task.cancel()
            elif upcoming is None or entry.deadline < upcoming:
                upcoming = entry.deadline
        if upcoming is not None:
            self.timer = loop.call_at(upcoming, self._on_timer)

    async def _watch(self, cancel: asyncio.Event) -> None:
        await cancel.wait()
        for entry in self.running.values():
            if entry.stopped is None:
                entry.stopped = "cancelled"
                entry.signal.set()
                entry.task.cancel()


async def _run_with_limits(
    tool: Tool,
    params: dict[str, Any],
    context: ToolContext,
    limits: _Limits,
) -> tuple[str, Any]:
    """Run the tool under its timeout and the run's cancel signal (both kept by ``limits``).

    Returns ``("ok", value)``, ``("error", exception)``, ``("timeout", None)`` or
    ``("cancelled", None)``. A timed-out or cancelled async tool is cancelled in
    place (it sees :class:`asyncio.CancelledError` and its handlers run before this
    returns); a sync tool is signalled through ``context.cancel`` and abandoned to
    finish in its thread. An async tool that swallows the cancellation keeps the
    call waiting: tools must let ``CancelledError`` propagate. A cancellation that
    came from elsewhere (the run's own deadline, the caller) propagates.
    ``context.cancel`` is the call's own signal: one is made when the context has
    none or carries the run's cancel event (which a timeout must never set, or the
    whole run would end cancelled instead of the model getting the timeout, RT-07).
    Implements LP-05, RT-07.
    """
    if context.cancel is None or context.cancel is limits.cancel:
        context.cancel = asyncio.Event()
    current = asyncio.current_task()
    if current is None:  # not in a task: nothing to cancel, no limits to keep
        try:
            return "ok", await _invoke(tool, params, context)
        except Exception as error:
            return "error", error
    entry = limits.enter(current, tool.timeout, context.cancel)
    try:
        value = await _invoke(tool, params, context)
    except asyncio.CancelledError:
        context.cancel.set()
        if entry.stopped is not None:
            current.uncancel()
            return entry.stopped, None
        raise
    except Exception as error:
        if entry.stopped is not None:
            current.uncancel()  # the tool turned the cancellation into its own error
        return "error", error
    finally:
        limits.leave(entry)
    if entry.stopped is not None:
        # The tool swallowed the cancellation and returned: take it back so the
        # caller's task is not cancelled later, and keep the value.
        current.uncancel()
    return "ok", value


async def execute_call(
    call: ToolCallRequest,
    *,
    tool: Tool | None,
    toolset: Toolset,
    context: ToolContext,
    cancel: asyncio.Event | None = None,
    validated: ValidatedArguments | None = None,
) -> ToolResult:
    """Validate and execute one call, returning its result; never raises for tool failures.

    ``tool`` is the already-resolved tool, or ``None`` to resolve ``call.name`` in
    ``toolset`` (an unknown name yields an ``unknown_tool`` result listing the
    available tools). Arguments are parsed and validated (a truncated turn is never
    executed), unless ``validated`` holds the value an earlier step validated
    against ``tool``'s schema: then ``call.arguments`` is ignored and the ladder is
    skipped (the caller compared the schema hashes); a ``deny`` policy is refused; the tool runs under its ``timeout``; its result is normalized to AG-UI content
    and capped at ``max_result_bytes``. Approval and ``tool.permission`` are the
    caller's business (Django's ``has_perm`` is sync ORM work and the caller knows
    whose permission counts): this function executes the calls it is given.
    Implements RT-05, RT-06, RT-07, LP-01, LP-05, LP-08, SEC-04, SEC-05, SEC-06.
    """
    started = time.monotonic()
    if tool is None:
        tool = toolset.resolve(call.name)
    if tool is None:
        return _failure(
            call,
            kind="unknown_tool",
            message=toolset.unknown_tool_message(call.name),
            started_at=started,
        )
    limits = _Limits(cancel)
    try:
        return await _execute_resolved(
            call,
            tool,
            context,
            cancel,
            limits,
            started,
            gate=False,
            validated=validated,
        )
    finally:
        limits.close()


async def _execute_resolved(
    call: ToolCallRequest,
    tool: Tool,
    context: ToolContext,
    cancel: asyncio.Event | None,
    limits: _Limits,
    started: float,
    *,
    gate: bool,
    validated: ValidatedArguments | None = None,
) -> ToolResult:
    """Execute ``call`` on ``tool``; with ``gate``, refuse calls that need approval.

    ``validated`` (already checked against ``tool``'s schema) skips the ladder; a
    value checked against another schema goes through it again, as an object.
    """
    if validated is not None and validated.schema_sha256 != tool_schema_sha256(tool):
        call = replace(call, arguments=validated.as_dict())
        validated = None
    if validated is None:
        parsed = parse_arguments(call.arguments, tool=tool, truncated=call.truncated)
        if not parsed.ok or parsed.value is None:
            return _failure(
                call,
                kind=parsed.error_type or "invalid_arguments",
                message=parsed.error or "invalid arguments",
                started_at=started,
                tool=tool,
            )
        validated = parsed.value
        params = parsed.params or {}
    else:
        params = validated.as_dict()
    repair = validated.repair
    common: _FailureFields = {
        "started_at": started,
        "tool": tool,
        "repair": repair,
        "params": params,
    }
    # A plain action string is its own decision (``decision_from`` would check
    # and copy a PolicyDecision per call to say so, B3); anything else is evaluated.
    policy = tool.policy
    if not (isinstance(policy, str) and policy in _PLAIN_ACTIONS):
        policy = tool.policy_for(params)
    if policy == "deny":
        return _failure(
            call,
            kind="permission_denied",
            message=f"{tool.name} is not allowed by policy. Do not retry; tell the user.",
            **common,
        )
    if gate and (tool.runs_on == "application" or policy == "require_approval"):
        return _failure(
            call,
            kind="permission_denied",
            message=(
                f"{tool.name} needs approval by a person and was not executed here; "
                "wait for the approval or tell the user."
            ),
            **common,
        )
    if cancel is not None and cancel.is_set():
        return _failure(
            call,
            kind="cancelled",
            message=_generic_message("cancelled", tool),
            **common,
        )
    outcome, value = await _run_with_limits(tool, params, context, limits)
    if outcome != "ok":
        if outcome == "error":
            kind, message = _classify(value, tool)
            if isinstance(value, ToolError):
                # The tool refused on purpose (a refund over the order total, an
                # unknown order): an expected outcome the model is told about, not a
                # fault; the operator's log keeps its text, without a traceback.
                logger.warning(
                    "tool %r refused (call %s, run %s): %s: %s",
                    tool.name,
                    call.tool_call_id,
                    context.run_id,
                    kind,
                    value,
                )
            else:
                logger.error(
                    "tool %r failed (call %s, run %s): %s",
                    tool.name,
                    call.tool_call_id,
                    context.run_id,
                    kind,
                    exc_info=(type(value), value, value.__traceback__),
                )
        else:
            kind = "timeout" if outcome == "timeout" else "cancelled"
            message = _generic_message(kind, tool)
            logger.warning(
                "tool %r %s (call %s, run %s, timeout %ss)",
                tool.name,
                outcome,
                call.tool_call_id,
                context.run_id,
                tool.timeout,
            )
        return _failure(call, kind=kind, message=message, **common)
    try:
        output = value if isinstance(value, ToolOutput) else ToolOutput(content=value)
        content = normalize_content(output.content)
    except ContentError as error:
        logger.error("tool %r returned unusable content: %s", tool.name, error)
        return _failure(
            call,
            kind="tool_error",
            message=_generic_message("tool_error", tool),
            **common,
        )
    bounded = limit_content(content, tool.max_result_bytes)
    details = dict(output.details) if output.details is not None else None
    if bounded.truncated_bytes:
        details = {**(details or {}), "truncated_bytes": bounded.truncated_bytes}
    return ToolResult(
        tool_call_id=call.tool_call_id,
        name=call.name,
        content=bounded.content,
        error=None,
        message=None,
        details=details,
        end_turn=output.end_turn,
        repair=repair,
        started_at=started,
        finished_at=time.monotonic(),
        resolved_name=tool.name,
        params=params,
        events=tuple(output.events),
    )


# --- a batch ------------------------------------------------------------------------


def _concurrent(tool: Tool | None) -> bool:
    """Return whether a call may overlap its neighbours: unknown, or parallel and read-only (LP-03)."""
    return tool is None or (tool.execution_mode == "parallel" and tool.is_read_only)


async def dispatch(
    calls: Sequence[ToolCallRequest],
    *,
    toolset: Toolset,
    context_factory: Callable[[ToolCallRequest], ToolContext],
    cancel: asyncio.Event | None = None,
) -> list[ToolResult]:
    """Execute one turn's agent-side calls and return one result per call, in call order.

    Consecutive calls to ``parallel`` read-only tools (and unknown names, which only
    produce an error) run concurrently; every other call runs alone, after the calls
    before it finished. Calls to ``application`` tools or needing approval are not
    executed here (a ``permission_denied`` result says so): route them to the
    approval queue before calling this. When ``cancel`` is set, running calls are
    cancelled and later ones answered ``cancelled``.
    Implements RT-07, LP-02, LP-03, LP-05, LP-08.
    """
    resolved = [toolset.resolve(call.name) for call in calls]
    results: list[ToolResult | None] = [None] * len(calls)
    limits = _Limits(cancel)

    async def run(index: int) -> None:
        call = calls[index]
        tool = resolved[index]
        started = time.monotonic()
        if tool is None:
            results[index] = _failure(
                call,
                kind="unknown_tool",
                message=toolset.unknown_tool_message(call.name),
                started_at=started,
            )
            return
        results[index] = await _execute_resolved(
            call, tool, context_factory(call), cancel, limits, started, gate=True
        )

    index = 0
    try:
        while index < len(calls):
            if not _concurrent(resolved[index]):
                await run(index)
                index += 1
                continue
            group = [index]
            index += 1
            while index < len(calls) and _concurrent(resolved[index]):
                group.append(index)
                index += 1
            if len(group) == 1:
                await run(group[0])  # a group of one needs no task of its own
            else:
                await asyncio.gather(*(run(i) for i in group))
    finally:
        limits.close()
    return [r for r in results if r is not None]
