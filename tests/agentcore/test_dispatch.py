"""Tests for dispatch: resolution, concurrency, timeouts, cancellation and sanitized errors.

Rules: RT-07, LP-02, LP-03, LP-05, LP-08, SEC-04, SEC-05, SEC-06, RT-09.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import threading
import time
from typing import Any

import pytest

from agentcore.dispatch import (
    ToolCallRequest,
    ToolResult,
    dispatch,
    execute_call,
    sanitize_message,
)
from agentcore.tools import (
    Tool,
    ToolContext,
    ToolError,
    ToolInputError,
    ToolOutput,
    ToolPermissionDenied,
    Toolset,
    ToolUpstreamUnavailable,
    define_tool,
)

EMPTY = {"type": "object", "properties": {}}


def ctx_for(call: ToolCallRequest) -> ToolContext:
    return ToolContext(
        thread_id="th1",
        run_id="run1",
        tool_call_id=call.tool_call_id,
        idempotency_key=f"k-{call.tool_call_id}",
    )


def make(name: str, execute: Any, **options: Any) -> Tool:
    return define_tool(
        name=name,
        description=f"{name} for tests.",
        parameters=options.pop("parameters", EMPTY),
        execute=execute,
        **options,
    )


class Recorder:
    """Record each execution's start and finish (time.monotonic())."""

    def __init__(self) -> None:
        self.spans: dict[str, tuple[float, float]] = {}

    def async_tool(self, name: str, delay: float = 0.05, **options: Any) -> Tool:
        async def execute(params: dict[str, Any], context: ToolContext) -> str:
            start = time.monotonic()
            await asyncio.sleep(delay)
            self.spans[context.tool_call_id] = (start, time.monotonic())
            return f"{name} done"

        return make(name, execute, **options)

    def sync_tool(self, name: str, delay: float = 0.05, **options: Any) -> Tool:
        def execute(params: dict[str, Any], context: ToolContext) -> str:
            start = time.monotonic()
            time.sleep(delay)
            self.spans[context.tool_call_id] = (start, time.monotonic())
            return f"{name} done"

        return make(name, execute, **options)


def overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


async def run(
    calls: list[ToolCallRequest], *tools: Tool, **kw: Any
) -> list[ToolResult]:
    return await dispatch(calls, toolset=Toolset(tools), context_factory=ctx_for, **kw)


# --- LP-02 / RT-07 ------------------------------------------------------------------


async def test_lp02_zero_calls_yield_no_results() -> None:
    """LP-02: a turn with no calls dispatches nothing."""
    assert await run([], make("a", lambda p, c: "x")) == []


async def test_rt07_results_in_call_order_one_per_call() -> None:
    """RT-07, LP-02: each call gets exactly its own result, in call order."""
    rec = Recorder()
    slow = rec.async_tool("slow", 0.08, is_read_only=True, execution_mode="parallel")
    fast = rec.async_tool("fast", 0.0, is_read_only=True, execution_mode="parallel")
    calls = [
        ToolCallRequest("c1", "slow", "{}"),
        ToolCallRequest("c2", "fast", "{}"),
        ToolCallRequest("c3", "nope", "{}"),
    ]
    results = await run(calls, slow, fast)
    assert [r.tool_call_id for r in results] == ["c1", "c2", "c3"]
    assert [r.content for r in results[:2]] == ["slow done", "fast done"]
    assert results[2].error == "unknown_tool"
    assert all(r.started_at <= r.finished_at for r in results)


# --- LP-03: concurrency ----------------------------------------------------------------


async def test_lp03_parallel_read_only_tools_overlap() -> None:
    """LP-03, RT-07: parallel read-only calls run concurrently (their spans overlap)."""
    rec = Recorder()
    a = rec.async_tool("a", is_read_only=True, execution_mode="parallel")
    b = rec.sync_tool("b", is_read_only=True, execution_mode="parallel")
    calls = [
        ToolCallRequest("c1", "a", "{}"),
        ToolCallRequest("c2", "b", "{}"),
        ToolCallRequest("c3", "a", "{}"),
    ]
    results = await run(calls, a, b)
    assert all(r.error is None for r in results)
    s1, s2, s3 = rec.spans["c1"], rec.spans["c2"], rec.spans["c3"]
    assert overlap(s1, s2)
    assert overlap(s1, s3)
    assert overlap(s2, s3)
    assert max(s[0] for s in (s1, s2, s3)) < min(s[1] for s in (s1, s2, s3))


async def test_lp03_sequential_tools_do_not_overlap() -> None:
    """LP-03, RT-07: sequential calls run one after another, in call order."""
    rec = Recorder()
    w = rec.async_tool("w", execution_mode="sequential")
    calls = [ToolCallRequest(f"c{i}", "w", "{}") for i in range(3)]
    await run(calls, w)
    spans = [rec.spans[f"c{i}"] for i in range(3)]
    for earlier, later in itertools.pairwise(spans):
        assert earlier[1] <= later[0]


async def test_lp03_parallel_but_not_read_only_runs_alone() -> None:
    """LP-03: only read-only parallel tools overlap; a parallel writer is a barrier."""
    rec = Recorder()
    reader = rec.async_tool("reader", is_read_only=True, execution_mode="parallel")
    writer = rec.async_tool("writer", execution_mode="parallel")
    calls = [
        ToolCallRequest("r1", "reader", "{}"),
        ToolCallRequest("r2", "reader", "{}"),
        ToolCallRequest("w1", "writer", "{}"),
        ToolCallRequest("r3", "reader", "{}"),
    ]
    await run(calls, reader, writer)
    r1, r2, w1, r3 = (rec.spans[k] for k in ("r1", "r2", "w1", "r3"))
    assert overlap(r1, r2)
    assert max(r1[1], r2[1]) <= w1[0]
    assert w1[1] <= r3[0]


async def test_sync_tool_runs_in_a_worker_thread() -> None:
    """RT-07: a sync execute runs off the event loop thread."""
    seen: list[int] = []
    t = make("t", lambda p, c: seen.append(threading.get_ident()) or "ok")
    [result] = await run([ToolCallRequest("c", "t", "{}")], t)
    assert result.error is None
    assert seen
    assert seen[0] != threading.get_ident()


# --- LP-05: timeout, cancellation, result size ---------------------------------------------


async def test_lp05_timeout_cancels_async_tool() -> None:
    """LP-05: a call over its timeout yields a `timeout` result and the async tool sees CancelledError."""
    saw_cancel = asyncio.Event()

    async def hang(params: dict[str, Any], context: ToolContext) -> str:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            saw_cancel.set()
            raise
        return "never"

    t = make("hang", hang, timeout=0.05, is_read_only=True)
    [result] = await run([ToolCallRequest("c", "hang", "{}")], t)
    assert result.error == "timeout"
    assert saw_cancel.is_set()
    assert "did not finish within 0.05 seconds" in result.message
    assert json.loads(result.content)["error"] == "timeout"


async def test_lp05_timeout_signals_sync_tool_through_context_cancel() -> None:
    """LP-05: a sync tool cannot be killed; it is signalled through context.cancel and abandoned."""
    signalled = threading.Event()

    def slow(params: dict[str, Any], context: ToolContext) -> str:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if context.cancel is not None and context.cancel.is_set():
                signalled.set()
                return "stopped"
            time.sleep(0.005)
        return "late"

    t = make("slow", slow, timeout=0.05)
    [result] = await run([ToolCallRequest("c", "slow", "{}")], t)
    assert result.error == "timeout"
    assert await asyncio.to_thread(signalled.wait, 2)


async def test_lp05_run_cancel_stops_running_and_later_calls() -> None:
    """LP-05: when the run is cancelled, the running call is cancelled and later calls are answered `cancelled`."""
    cancel = asyncio.Event()
    started = asyncio.Event()
    executed: list[str] = []

    async def long(params: dict[str, Any], context: ToolContext) -> str:
        executed.append(context.tool_call_id)
        started.set()
        await asyncio.sleep(30)
        return "never"

    t = make("long", long)

    async def trip() -> None:
        await started.wait()
        cancel.set()

    task = asyncio.create_task(trip())
    results = await run(
        [ToolCallRequest("c1", "long", "{}"), ToolCallRequest("c2", "long", "{}")],
        t,
        cancel=cancel,
    )
    await task
    assert [r.error for r in results] == ["cancelled", "cancelled"]
    assert executed == ["c1"]


async def test_lp05_max_result_bytes_enforced() -> None:
    """LP-05, BC27: the cap is applied where the result enters the run, with a visible notice."""
    t = make("big", lambda p, c: "x" * 10_000, max_result_bytes=1024)
    [result] = await run([ToolCallRequest("c", "big", "{}")], t)
    assert result.error is None
    assert isinstance(result.content, str)
    assert len(result.content.encode()) <= 1024
    assert "bytes truncated" in result.content
    kept = result.content.count("x")
    assert result.details == {"truncated_bytes": 10_000 - kept}


# --- LP-08 / SEC-06: failures ----------------------------------------------------------

SECRET_MESSAGE = (
    "could not connect to postgres://admin:hunter2@10.0.3.7:5432/prod "
    "using token sk-live-4f9a8b7c6d5e4f3a2b1c; upstream 10.20.30.40:8080 refused; "
    "password=swordfish"
)
SECRETS = [
    "hunter2",
    "sk-live-4f9a8b7c6d5e4f3a2b1c",
    "10.0.3.7",
    "10.20.30.40",
    "swordfish",
    "postgres://",
]


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (RuntimeError(SECRET_MESSAGE), "tool_error"),
        (ValueError(SECRET_MESSAGE), "tool_error"),
        (ConnectionError(SECRET_MESSAGE), "upstream_unavailable"),
        (PermissionError(SECRET_MESSAGE), "permission_denied"),
        (TimeoutError(SECRET_MESSAGE), "timeout"),
        (ToolUpstreamUnavailable(SECRET_MESSAGE), "upstream_unavailable"),
        (ToolPermissionDenied(SECRET_MESSAGE), "permission_denied"),
        (ToolInputError(SECRET_MESSAGE), "invalid_arguments"),
    ],
)
async def test_sec06_secrets_in_exceptions_never_reach_the_result(
    exc: Exception, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    """SEC-06, LP-08: a tool exception becomes a sanitized error result; the full detail goes to the log."""

    def boom(params: dict[str, Any], context: ToolContext) -> str:
        raise exc

    t = make("boom", boom)
    with caplog.at_level(logging.WARNING, logger="agentcore.dispatch"):
        [result] = await run([ToolCallRequest("c", "boom", "{}")], t)
    assert result.error == kind
    visible = json.dumps([result.content, result.message, result.details])
    for secret in SECRETS:
        assert secret not in visible
    assert "Traceback" not in visible
    assert "File " not in visible
    assert json.loads(result.content) == {"error": kind, "detail": result.message}
    assert "hunter2" in caplog.text  # the full detail is logged for operators
    [record] = caplog.records
    if isinstance(exc, ToolError):
        # a refusal the tool chose (ToolError) is expected: WARNING, no traceback
        assert record.levelno == logging.WARNING
        assert record.exc_info is None
        assert "Traceback" not in caplog.text
    else:
        assert record.levelno == logging.ERROR
        assert "Traceback" in caplog.text


async def test_a_business_refusal_is_logged_as_a_warning_without_a_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An expected refusal becomes the model's tool result; the log has one line, no traceback."""

    def refund(params: dict[str, Any], context: ToolContext) -> str:
        raise ToolInputError("amount 500.00 is more than the 120.00 left to refund")

    with caplog.at_level(logging.DEBUG, logger="agentcore.dispatch"):
        [result] = await run(
            [ToolCallRequest("c", "refund", "{}")], make("refund", refund)
        )
    assert result.error == "invalid_arguments"
    assert [(r.levelname, r.getMessage(), r.exc_info) for r in caplog.records] == [
        (
            "WARNING",
            "tool 'refund' refused (call c, run run1): invalid_arguments: "
            "amount 500.00 is more than the 120.00 left to refund",
            None,
        )
    ]


async def test_an_unexpected_exception_keeps_error_with_its_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.DEBUG, logger="agentcore.dispatch"):
        [result] = await run(
            [ToolCallRequest("c", "boom", "{}")], make("boom", lambda p, c: 1 / 0)
        )
    assert result.error == "tool_error"
    [record] = caplog.records
    assert record.levelname == "ERROR"
    assert record.exc_info is not None
    assert record.exc_info[0] is ZeroDivisionError


async def test_sec06_async_tool_error_is_sanitized_too() -> None:
    """SEC-06: the same holds for async tools."""

    async def boom(params: dict[str, Any], context: ToolContext) -> str:
        raise ToolUpstreamUnavailable(
            "payments API at 192.168.1.20 down; retry in a minute"
        )

    [result] = await run([ToolCallRequest("c", "boom", "{}")], make("boom", boom))
    assert result.error == "upstream_unavailable"
    assert "192.168.1.20" not in result.message
    assert "retry in a minute" in result.message


def test_sec06_sanitize_message() -> None:
    """SEC-06: URLs with credentials, tokens, private addresses and tracebacks are removed."""
    text = sanitize_message(
        "redis://:pw@cache:6379/0 Bearer abc.def.ghi ghp_0123456789abcdef "
        "AKIAABCDEFGHIJKLMNOP http://localhost:8000/x 172.16.0.1 "
        "eyJhbGciOi.eyJzdWIiOi.sig api_key: zzz\nTraceback (most recent call last): boom"
    )
    for leaked in [
        "pw@",
        "abc.def",
        "ghp_",
        "AKIA",
        "localhost",
        "172.16",
        "eyJ",
        "zzz",
        "boom",
    ]:
        assert leaked not in text
    assert sanitize_message("x" * 2000).endswith("…")


async def test_lp08_failed_tool_never_produces_success() -> None:
    """LP-08: every failure path has error set and no success content."""

    def bad_content(params: dict[str, Any], context: ToolContext) -> Any:
        return {"x": object()}

    tools = [make("bad", bad_content), make("boom", lambda p, c: 1 / 0)]
    results = await run(
        [ToolCallRequest("c1", "bad", "{}"), ToolCallRequest("c2", "boom", "{}")],
        *tools,
    )
    for result in results:
        assert result.error == "tool_error"
        assert not result.ok
        assert json.loads(result.content)["error"] == "tool_error"
        assert "ZeroDivision" not in result.content


async def test_rt06_invalid_arguments_are_a_result_and_the_tool_does_not_run() -> None:
    """RT-06, RT-09: bad arguments go back as an actionable result; execute never sees them."""
    ran: list[Any] = []
    t = make(
        "pick",
        lambda p, c: ran.append(p) or "ok",
        parameters={
            "type": "object",
            "properties": {"n": {"type": "integer"}},
            "required": ["n"],
        },
    )
    [result] = await run([ToolCallRequest("c", "pick", '{"n": "three"}')], t)
    assert ran == []
    assert result.error == "invalid_arguments"
    assert "field 'n' expected integer, got string \"three\"" in result.message
    assert result.resolved_name == "pick"


# --- outputs ---------------------------------------------------------------------------


async def test_rt02_output_fields_reach_the_result() -> None:
    """RT-02: content, details, events and end_turn are carried to the result; repair is recorded."""

    def execute(params: dict[str, Any], context: ToolContext) -> ToolOutput:
        return ToolOutput(
            content={"ok": True},
            details={"rows": 3},
            events=[{"type": "CUSTOM"}],
            end_turn=True,
        )

    [result] = await run(
        [ToolCallRequest("c", "t", "```json\n{}\n```")], make("t", execute)
    )
    assert result.content == '{"ok":true}'
    assert result.details == {"rows": 3}
    assert result.events == ({"type": "CUSTOM"},)
    assert result.end_turn is True
    assert result.repair == "strip_code_fence"
    assert result.params == {}


# --- names: BC16, SEC-04, SEC-05 -----------------------------------------------------


async def test_bc16_namespace_prefix_or_unknown() -> None:
    """BC16, SEC-05: invented prefixes resolve to the declared name (raw name kept); an unknown name lists the tools."""
    view = make(
        "view", lambda p, c: "viewed", is_read_only=True, execution_mode="parallel"
    )
    docs = make(
        "search_docs",
        lambda p, c: "found",
        is_read_only=True,
        execution_mode="parallel",
    )
    toolset = Toolset([view, docs])
    names = [
        "default_api:view",
        "creating:view",
        "functions.search_docs",
        "execute_python",
    ]
    assert [getattr(toolset.resolve(n), "name", None) for n in names] == [
        "view",
        "view",
        "search_docs",
        None,
    ]
    results = await dispatch(
        [ToolCallRequest(f"c{i}", n, "{}") for i, n in enumerate(names)],
        toolset=toolset,
        context_factory=ctx_for,
    )
    assert [(r.name, r.resolved_name, r.error) for r in results] == [
        ("default_api:view", "view", None),
        ("creating:view", "view", None),
        ("functions.search_docs", "search_docs", None),
        ("execute_python", None, "unknown_tool"),
    ]
    assert json.loads(results[3].content) == {
        "error": "unknown_tool",
        "detail": "no tool named 'execute_python'; available tools: view, search_docs",
    }


def test_sec05_prefix_rule_is_strict() -> None:
    """SEC-05: only the exact last segment counts; nothing fuzzy resolves."""
    toolset = Toolset([make("view", lambda p, c: "x")])
    for name in [
        "View",
        "view ",
        "views",
        "a:b",
        "view.x",
        "functions.view.",
        "",
        "x:View",
    ]:
        assert toolset.resolve(name) is None, name
    assert toolset.resolve("a.b:view").name == "view"


async def test_bc16_prefixed_name_gets_the_resolved_tools_policy() -> None:
    """BC16, SEC-04: a prefixed name never skips the approval policy of the tool it resolves to."""
    ran: list[str] = []
    refund = make(
        "refund", lambda p, c: ran.append("x") or "refunded", is_destructive=True
    )
    [result] = await run([ToolCallRequest("c", "default_api:refund", "{}")], refund)
    assert ran == []
    assert result.error == "permission_denied"
    assert "needs approval" in result.message


async def test_sec04_tool_not_in_this_turn_is_unknown() -> None:
    """SEC-04, RT-03: a tool defined elsewhere but not assembled for this turn never runs."""
    ran: list[str] = []
    make("secret_admin", lambda p, c: ran.append("x") or "x")
    [result] = await run(
        [ToolCallRequest("c", "secret_admin", "{}")], make("a", lambda p, c: "a")
    )
    assert result.error == "unknown_tool"
    assert ran == []


# --- approval and permission gates -----------------------------------------------------


async def test_lp01_application_tool_is_not_executed_by_dispatch() -> None:
    """LP-01, FT-02: dispatch never runs application tools or calls needing approval; execute_call does."""
    ran: list[str] = []
    app = make(
        "lookup",
        lambda p, c: ran.append("x") or "found",
        runs_on="application",
        is_read_only=True,
    )
    [result] = await run([ToolCallRequest("c", "lookup", "{}")], app)
    assert result.error == "permission_denied"
    assert ran == []
    call = ToolCallRequest("c", "lookup", "{}")
    approved = await execute_call(
        call, tool=None, toolset=Toolset([app]), context=ctx_for(call)
    )
    assert approved.error is None
    assert approved.content == "found"
    assert ran == ["x"]


async def test_lp01_deny_policy_never_executes() -> None:
    """LP-01: a `deny` policy refuses even in execute_call."""
    ran: list[str] = []
    t = make("nuke", lambda p, c: ran.append("x") or "boom", policy="deny")
    call = ToolCallRequest("c", "nuke", "{}")
    result = await execute_call(
        call, tool=t, toolset=Toolset([t]), context=ctx_for(call)
    )
    assert result.error == "permission_denied"
    assert ran == []


AMOUNT = {
    "type": "object",
    "properties": {"amount": {"type": "number"}},
    "required": ["amount"],
}


def _recording_refund(seen: list[dict[str, Any]], **options: Any) -> Tool:
    return make("refund", lambda p, c: seen.append(p) or "done", **options)


async def test_execute_call_runs_a_validated_value_without_the_ladder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """RT-05: a value validated earlier runs as it is; the call's own text is not parsed."""
    from agentcore import arguments

    seen: list[dict[str, Any]] = []
    t = _recording_refund(seen, parameters=AMOUNT)
    validated = arguments.parse_arguments('{"amount": 20}', tool=t).value
    assert validated is not None

    def no_ladder(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the ladder ran for a validated value")

    monkeypatch.setattr("agentcore.dispatch.parse_arguments", no_ladder)
    call = ToolCallRequest("c", "refund", "not json at all")
    result = await execute_call(
        call, tool=t, toolset=Toolset([t]), context=ctx_for(call), validated=validated
    )
    assert (result.error, result.content, result.params) == (
        None,
        "done",
        {"amount": 20},
    )
    assert seen == [{"amount": 20}]


async def test_execute_call_validates_a_value_checked_against_another_schema() -> None:
    """RT-05: a value whose schema hash is not the tool's goes through the ladder again."""
    from agentcore import arguments

    seen: list[dict[str, Any]] = []
    loose = _recording_refund(seen)
    strict = _recording_refund(seen, parameters=AMOUNT)
    validated = arguments.parse_arguments('{"other": 1}', tool=loose).value
    call = ToolCallRequest("c", "refund", "{}")
    result = await execute_call(
        call,
        tool=strict,
        toolset=Toolset([strict]),
        context=ctx_for(call),
        validated=validated,
    )
    assert result.error == "invalid_arguments"
    assert seen == []


async def test_execute_call_unknown_name() -> None:
    """SEC-05: execute_call never raises for an unknown name."""
    call = ToolCallRequest("c", "ghost", "{}")
    result = await execute_call(
        call, tool=None, toolset=Toolset([]), context=ctx_for(call)
    )
    assert result.error == "unknown_tool"
    assert result.message == "no tool named 'ghost'; available tools: (none)"


# --- LP-04 / LP-06 ------------------------------------------------------------------------


async def test_lp04_arguments_are_parsed_only_once_joined() -> None:
    """LP-04, TC-04: the joined deltas are parsed; a cut-off prefix is never executed."""
    ran: list[dict[str, Any]] = []
    t = make(
        "echo",
        lambda p, c: ran.append(p) or "ok",
        parameters={"type": "object", "properties": {"text": {"type": "string"}}},
    )
    deltas = ['{"te', 'xt": "hel', 'lo"}']
    [joined] = await run([ToolCallRequest("c1", "echo", "".join(deltas))], t)
    assert joined.error is None
    assert ran == [{"text": "hello"}]
    [prefix] = await run(
        [ToolCallRequest("c2", "echo", "".join(deltas[:2]), truncated=True)], t
    )
    assert prefix.error == "arguments_truncated"
    assert len(ran) == 1


async def test_lp06_a_batch_is_bounded_by_the_tools_timeouts() -> None:
    """LP-06: no tool can keep the loop forever; every call ends by its timeout."""

    async def hang(params: dict[str, Any], context: ToolContext) -> str:
        await asyncio.sleep(3600)
        return "never"

    t = make("hang", hang, timeout=0.05, is_read_only=True, execution_mode="parallel")
    results = await run([ToolCallRequest(f"c{i}", "hang", "{}") for i in range(5)], t)
    assert [r.error for r in results] == ["timeout"] * 5
    assert all(r.finished_at - r.started_at < 60 for r in results)


async def test_lp05_each_call_keeps_its_own_timeout_in_a_batch() -> None:
    """LP-05: one batch timer serves every call; a later, shorter timeout still fires first.

    ``slow`` (timeout 30 s) runs first and finishes; ``late`` then sleeps 2 s under a
    0.05 s timeout: a timer still armed at the first call's deadline would let it
    finish (``ok``) instead of stopping it. In a parallel group the short timeout
    stops its call while the longer one's call finishes.
    """

    async def quick(params: dict[str, Any], context: ToolContext) -> str:
        await asyncio.sleep(0)
        return "quick done"

    async def late(params: dict[str, Any], context: ToolContext) -> str:
        await asyncio.sleep(2)
        return "late done"

    slow = make("slow", quick, timeout=30)
    short = make("short", late, timeout=0.05)
    results = await run(
        [ToolCallRequest("c1", "slow", "{}"), ToolCallRequest("c2", "short", "{}")],
        slow,
        short,
    )
    assert (results[0].error, results[0].content) == (None, "quick done")
    assert results[1].error == "timeout"

    par_short = make(
        "par_short", late, timeout=0.05, is_read_only=True, execution_mode="parallel"
    )
    par_long = make(
        "par_long", quick, timeout=30, is_read_only=True, execution_mode="parallel"
    )
    results = await run(
        [
            ToolCallRequest("p1", "par_long", "{}"),
            ToolCallRequest("p2", "par_short", "{}"),
            ToolCallRequest("p3", "par_long", "{}"),
        ],
        par_short,
        par_long,
    )
    assert [r.error for r in results] == [None, "timeout", None]
    assert [r.content for r in (results[0], results[2])] == ["quick done"] * 2


async def test_lp05_a_tool_timeout_leaves_the_callers_task_uncancelled() -> None:
    """LP-05: after a timed-out call the caller's task holds no pending cancellation."""

    async def hang(params: dict[str, Any], context: ToolContext) -> str:
        await asyncio.sleep(3600)
        return "never"

    t = make("hang", hang, timeout=0.05)
    results = await run([ToolCallRequest("c1", "hang", "{}")], t)
    assert results[0].error == "timeout"
    task = asyncio.current_task()
    assert task is not None
    assert task.cancelling() == 0
    await asyncio.sleep(0.01)  # a stray cancellation would be raised here


async def test_lp05_a_timeout_signals_only_its_own_call_never_the_runs_cancel() -> None:
    """LP-05, RT-07: a call's timeout sets that call's ``context.cancel`` only.

    The run's cancel event stays clear and a neighbour in the same parallel batch
    finishes with its value, even when the caller's contexts carry the run's event
    (as the loop's did) and the batch shares it.
    """
    cancel = asyncio.Event()
    contexts: dict[str, ToolContext] = {}

    def shared(call: ToolCallRequest) -> ToolContext:
        context = ctx_for(call)
        context.cancel = cancel
        return context

    async def hang(params: dict[str, Any], context: ToolContext) -> str:
        contexts[context.tool_call_id] = context
        await asyncio.sleep(30)
        return "never"

    async def steady(params: dict[str, Any], context: ToolContext) -> str:
        contexts[context.tool_call_id] = context
        await asyncio.sleep(0.3)  # still running when its neighbour times out
        assert context.cancel is not None
        return "signalled" if context.cancel.is_set() else "steady done"

    parallel: dict[str, Any] = {"is_read_only": True, "execution_mode": "parallel"}
    tools = (
        make("hang", hang, timeout=0.05, **parallel),
        make("steady", steady, timeout=10, **parallel),
    )
    results = await dispatch(
        [ToolCallRequest("c1", "hang", "{}"), ToolCallRequest("c2", "steady", "{}")],
        toolset=Toolset(tools),
        context_factory=shared,
        cancel=cancel,
    )
    assert [r.error for r in results] == ["timeout", None]
    assert results[1].content == "steady done"
    assert not cancel.is_set()
    first, second = contexts["c1"].cancel, contexts["c2"].cancel
    assert first is not None
    assert second is not None
    assert first is not cancel
    assert second is not cancel
    assert first is not second
    assert (first.is_set(), second.is_set()) == (True, False)


async def test_lp05_run_cancel_sets_every_running_calls_own_signal() -> None:
    """LP-05: the run's cancel reaches each running call's ``context.cancel`` (a sync tool's only stop signal)."""
    cancel = asyncio.Event()
    started = [threading.Event(), threading.Event()]
    stopped: list[str] = []

    def cooperative(params: dict[str, Any], context: ToolContext) -> str:
        started[int(context.tool_call_id[1:]) - 1].set()
        deadline = time.monotonic() + 5  # never outlive the test
        while time.monotonic() < deadline:
            if context.cancel is not None and context.cancel.is_set():
                stopped.append(context.tool_call_id)
                return "stopped"
            time.sleep(0.005)
        return "late"

    t = make(
        "work", cooperative, timeout=30, is_read_only=True, execution_mode="parallel"
    )

    async def trip() -> None:
        for event in started:
            await asyncio.to_thread(event.wait, 5)
        cancel.set()

    tripper = asyncio.create_task(trip())
    results = await run(
        [ToolCallRequest("c1", "work", "{}"), ToolCallRequest("c2", "work", "{}")],
        t,
        cancel=cancel,
    )
    await tripper
    assert [r.error for r in results] == ["cancelled", "cancelled"]
    for _ in range(200):  # the abandoned threads notice their signal shortly after
        if len(stopped) == 2:
            break
        await asyncio.sleep(0.01)
    assert sorted(stopped) == ["c1", "c2"]
