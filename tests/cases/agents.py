"""Test agents for the product-level case tests: providers and toolsets built here.

Plugged in through ``COUNTERSIGN_AGENTS[...]["provider_factory"]`` and dotted
toolset paths, exactly as a deployment plugs in its own.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any, Final

from agentcore.providers.base import (
    ModelEvent,
    ModelRequest,
    Provider,
    TextDelta,
    ToolCallBegin,
    ToolCallDelta,
    TurnEnd,
)
from agentcore.tools import ToolContext, ToolOutput, define_tool


class ParallelCallsProvider(Provider):
    """Call ``send_email`` and ``lookup`` in one turn; then summarize the results (BC21)."""

    name = "parallel-test"

    async def stream_turn(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        last = request.messages[-1]
        if getattr(last, "role", "") == "user":
            calls = [
                ("call_S", "send_email", {"to": "team@example.test", "body": "hi"}),
                ("call_F", "lookup", {"q": "status"}),
            ]
            for call_id, name, arguments in calls:
                yield ToolCallBegin(call_id=call_id, name=name)
                yield ToolCallDelta(call_id=call_id, delta=json.dumps(arguments))
            yield TurnEnd(stop_reason="tool_use")
            return
        results = [m for m in request.messages if getattr(m, "role", "") == "tool"]
        summary = "; ".join(f"{m.tool_call_id}={m.content}" for m in results)
        yield TextDelta(text=f"Results: {summary}")
        yield TurnEnd(stop_reason="end_turn")


class SlowToolProvider(Provider):
    """Call the agent-side ``slow_count`` tool twice in parallel, once per thread (BC20)."""

    name = "slow-test"

    async def stream_turn(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        if not any(getattr(m, "role", "") == "tool" for m in request.messages):
            for call_id in ("call_X", "call_Y"):
                yield ToolCallBegin(call_id=call_id, name="slow_count")
                yield ToolCallDelta(call_id=call_id, delta='{"seconds": 30}')
            yield TurnEnd(stop_reason="tool_use")
            return
        yield TextDelta(text="done")
        yield TurnEnd(stop_reason="end_turn")


def parallel_provider(*, model: str) -> Provider:
    return ParallelCallsProvider()


def slow_provider(*, model: str) -> Provider:
    return SlowToolProvider()


def _send_email(params: dict[str, Any], context: ToolContext) -> ToolOutput:
    return ToolOutput(content=f"sent to {params['to']}")


def _lookup(params: dict[str, Any], context: ToolContext) -> ToolOutput:
    return ToolOutput(content="status ok")


async def _slow_count(params: dict[str, Any], context: ToolContext) -> ToolOutput:
    await asyncio.sleep(params["seconds"])
    return ToolOutput(content="counted")


_OBJECT = {"type": "object", "additionalProperties": False}

PARALLEL_TOOLS: Final = (
    define_tool(
        name="send_email",
        description="Send an email. Needs a person's approval.",
        parameters={
            **_OBJECT,
            "properties": {"to": {"type": "string"}, "body": {"type": "string"}},
            "required": ["to", "body"],
        },
        execute=_send_email,
        runs_on="application",
        policy="require_approval",
        is_destructive=True,
    ),
    define_tool(
        name="lookup",
        description="Look up a status.",
        parameters={
            **_OBJECT,
            "properties": {"q": {"type": "string"}},
            "required": ["q"],
        },
        execute=_lookup,
        runs_on="application",
        policy="auto",
        is_read_only=True,
    ),
)

SLOW_TOOLS: Final = (
    define_tool(
        name="slow_count",
        description="Count slowly.",
        parameters={
            **_OBJECT,
            "properties": {"seconds": {"type": "number"}},
            "required": ["seconds"],
        },
        execute=_slow_count,
        runs_on="agent",
        is_read_only=True,
        timeout=60,
    ),
)


class PayProvider(Provider):
    """Call ``pay`` with the amount in the user's message ("pay 5"); then say the result."""

    name = "pay-test"

    async def stream_turn(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        last = request.messages[-1]
        if getattr(last, "role", "") == "user":
            amount = float(str(last.content).split()[-1])
            yield ToolCallBegin(call_id="call_pay", name="pay")
            yield ToolCallDelta(
                call_id="call_pay", delta=json.dumps({"amount": amount})
            )
            yield TurnEnd(stop_reason="tool_use")
            return
        yield TextDelta(text=f"Payment: {last.content}")
        yield TurnEnd(stop_reason="end_turn")


def pay_provider(*, model: str) -> Provider:
    return PayProvider()


def _pay(params: dict[str, Any], context: ToolContext) -> ToolOutput:
    return ToolOutput(content=f"paid {params['amount']:.2f}")


def _pay_policy(params: dict[str, Any]) -> str:
    """Small payments run at once; larger ones need a person (LP-01)."""
    return "auto" if params["amount"] <= 10 else "require_approval"


PAY_TOOLS: Final = (
    define_tool(
        name="pay",
        description="Pay an amount.",
        parameters={
            **_OBJECT,
            "properties": {"amount": {"type": "number", "minimum": 0}},
            "required": ["amount"],
        },
        execute=_pay,
        runs_on="application",
        policy=_pay_policy,
        is_destructive=True,
        idempotent=True,
    ),
)


class ConfirmProvider(Provider):
    """Ask the client's own ``confirm`` tool, then report its answer (FT-01, FT-06)."""

    name = "confirm-test"

    async def stream_turn(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        offered = [t.name for t in request.tools]
        last = request.messages[-1]
        if getattr(last, "role", "") == "tool":
            yield TextDelta(text=f"The user said: {last.content}")
            yield TurnEnd(stop_reason="end_turn")
            return
        assert "confirm" in offered, offered
        yield ToolCallBegin(call_id="call_confirm", name="confirm")
        yield ToolCallDelta(call_id="call_confirm", delta='{"question": "Proceed?"}')
        yield TurnEnd(stop_reason="tool_use")


def confirm_provider(*, model: str) -> Provider:
    return ConfirmProvider()
