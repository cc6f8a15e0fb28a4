"""LangGraph: answer a graph's ``interrupt()`` with Countersign's decision (``Command(resume=…)``).

Works with LangChain's ``HumanInTheLoopMiddleware`` in both modes — ``per_call``
(one ``ToolApprovalRequest`` per gated call, answered by interrupt id) and
``batched`` (one ``HITLRequest`` per model turn, answered with a
``HITLResponse`` whose decisions follow the calls' order) — and with a plain
``interrupt({"name": ..., "args": ...})`` of one's own graph, answered with
``{"approved", "args", "reason"}``. Approved calls become ``approve`` (or
``edit`` with the approver's arguments), refused ones ``reject`` with the
reason. After the graph ran them, :func:`report_tool_messages` reports each
claimed call's ``ToolMessage``::

    gate = Gate(client, conversation_id=thread_id)
    result = agent.invoke(inputs, config, version="v2")
    result = agent.invoke(resume_command(gate, result.interrupts,
                                         messages=result.value["messages"]),
                          config, version="v2")
    report_tool_messages(gate, result.value["messages"])
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langgraph.types import Command, Interrupt

from countersign_client.adapters.gate import Gate, Verdict


def _pending_calls(messages: Sequence[BaseMessage] | None) -> list[dict[str, Any]]:
    """Return the tool calls of the last AI message (the batched requests' order)."""
    for message in reversed(messages or []):
        if isinstance(message, AIMessage):
            return [dict(call) for call in message.tool_calls]
    return []


def _asked(
    interrupt: Interrupt, messages: Sequence[BaseMessage] | None
) -> list[tuple[str, str, dict[str, Any]]]:
    """Return ``(call id, name, args)`` for each call ``interrupt`` asks about."""
    value = interrupt.value
    if not isinstance(value, Mapping):
        raise ValueError(f"interrupt {interrupt.id} asks no tool call: {value!r}")
    if value.get("type") == "tool_approval":
        return [(str(value["tool_call_id"]), str(value["name"]), dict(value["args"]))]
    if "action_requests" in value:
        calls = _pending_calls(messages)
        asked = []
        for index, action in enumerate(value["action_requests"]):
            match = next(
                (
                    c
                    for c in calls
                    if c["name"] == action["name"] and c["args"] == action["args"]
                ),
                None,
            )
            if match is not None:
                calls.remove(match)
            call_id = str(match["id"]) if match else f"{interrupt.id}:{index}"
            asked.append((call_id, str(action["name"]), dict(action["args"])))
        return asked
    name = value.get("name") or value.get("tool")
    call_id = str(value.get("tool_call_id") or interrupt.id)
    return [(call_id, str(name), dict(value.get("args") or {}))]


def _decision(verdict: Verdict, name: str) -> dict[str, Any]:
    if not verdict.approved:
        return {"type": "reject", "message": verdict.reason}
    if verdict.edited:
        return {
            "type": "edit",
            "edited_action": {"name": name, "args": verdict.arguments},
        }
    return {"type": "approve"}


def _answer(interrupt: Interrupt, asked: list[Any], verdicts: list[Verdict]) -> Any:
    value = interrupt.value
    decisions = [
        _decision(verdict, name)
        for (_, name, _), verdict in zip(asked, verdicts, strict=True)
    ]
    if value.get("type") == "tool_approval":
        return decisions[0]
    if "action_requests" in value:
        return {"decisions": decisions}
    verdict = verdicts[0]
    return {
        "approved": verdict.approved,
        "args": verdict.arguments,
        "reason": verdict.reason,
    }


def resume_command(
    gate: Gate,
    interrupts: Iterable[Interrupt],
    *,
    messages: Sequence[BaseMessage] | None = None,
) -> Command[Any]:
    """Return the ``Command(resume={interrupt id: answer})`` Countersign decided (sync ``gate``).

    ``messages`` is the graph's message list, so batched requests are matched to
    the model's tool call ids (the outcome is reported under them).
    """
    resume: dict[str, Any] = {}
    for interrupt in interrupts:
        asked = _asked(interrupt, messages)
        verdicts = [gate.decide(call_id, name, args) for call_id, name, args in asked]
        resume[interrupt.id] = _answer(interrupt, asked, verdicts)
    return Command(resume=resume)


async def aresume_command(
    gate: Gate,
    interrupts: Iterable[Interrupt],
    *,
    messages: Sequence[BaseMessage] | None = None,
) -> Command[Any]:
    """Return the resume command with an async ``gate`` (see :func:`resume_command`)."""
    resume: dict[str, Any] = {}
    for interrupt in interrupts:
        asked = _asked(interrupt, messages)
        verdicts = [
            await gate.adecide(call_id, name, args) for call_id, name, args in asked
        ]
        resume[interrupt.id] = _answer(interrupt, asked, verdicts)
    return Command(resume=resume)


def report_tool_messages(gate: Gate, messages: Iterable[BaseMessage]) -> int:
    """Report the ``ToolMessage`` of each call ``gate`` claimed; return how many (sync)."""
    reported = 0
    for message in messages:
        if isinstance(message, ToolMessage):
            error = "tool_error" if message.status == "error" else None
            if gate.report(message.tool_call_id, message.text, error=error):
                reported += 1
    return reported


async def areport_tool_messages(gate: Gate, messages: Iterable[BaseMessage]) -> int:
    """Report the claimed calls' ``ToolMessage`` with an async ``gate``."""
    reported = 0
    for message in messages:
        if isinstance(message, ToolMessage):
            error = "tool_error" if message.status == "error" else None
            if await gate.areport(message.tool_call_id, message.text, error=error):
                reported += 1
    return reported
