"""OpenAI Agents SDK: resolve a run's approval interruptions with Countersign's decisions.

A tool declared with ``needs_approval=True`` stops ``Runner.run`` with
``result.interruptions`` (``ToolApprovalItem``). :func:`resolve_interruptions`
asks Countersign about each one (keyed by the model's ``call_id``), then calls
``state.approve(item)`` or ``state.reject(item, rejection_message=reason)`` on the
run's ``RunState``. The SDK has no edited-arguments answer (it refuses a
pending call whose arguments changed), so :func:`approved_arguments` wraps a
``FunctionTool``: when the resumed run invokes it, it runs with the arguments
Countersign approved for that ``call_id`` (an approver's edit included), and
refuses a call Countersign did not approve for this process. After the resumed
run, :func:`report_tool_outputs` reports each claimed call's
``ToolCallOutputItem``::

    agent = Agent(name="billing", tools=[approved_arguments(gate, refund)])
    result = await Runner.run(agent, "Refund A-1")
    state = result.to_state()
    await resolve_interruptions(gate, state, result.interruptions)
    final = await Runner.run(agent, state)
    await report_tool_outputs(gate, final.new_items)
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from typing import Any

from agents import (
    FunctionTool,
    RunItem,
    RunState,
    ToolApprovalItem,
    ToolCallOutputItem,
)
from agents.tool_context import ToolContext

from countersign_client.adapters.gate import Gate
from countersign_client.client import AsyncClient


def _call_id(item: ToolApprovalItem) -> str:
    raw: Any = item.raw_item
    value = (
        raw.get("call_id") if isinstance(raw, dict) else getattr(raw, "call_id", None)
    )
    return str(value or getattr(raw, "id", "") or "")


def interruption_arguments(item: ToolApprovalItem) -> dict[str, Any]:
    """Return the arguments of ``item`` as declared to Countersign: a JSON object.

    The model's JSON string is parsed; a string that is not JSON, or JSON that
    is not an object, is declared as ``{"arguments": <it>}`` so an approver sees
    exactly what the model wrote (and may edit it) instead of the run failing.
    """
    try:
        parsed = json.loads(item.arguments or "{}")
    except json.JSONDecodeError:
        # The model wrote arguments that are not JSON: show them to the approver as text.
        return {"arguments": item.arguments}
    return parsed if isinstance(parsed, dict) else {"arguments": parsed}


def approved_arguments(gate: Gate, tool: FunctionTool) -> FunctionTool:
    """Return ``tool`` running only with the arguments Countersign approved (async ``gate``).

    The copy's ``on_invoke_tool`` looks up the invoking ``call_id`` among the
    calls ``gate`` claimed, fetches the approved arguments from Countersign and
    passes them (as the SDK's JSON string) to the original tool. A call the gate
    did not claim is not run: the model gets a refusal message instead. Use it
    with ``needs_approval=True`` tools (one wrapper per tool, per gate).
    """
    invoke = tool.on_invoke_tool

    async def on_invoke_tool(context: ToolContext[Any], arguments: str) -> Any:
        ours = gate.claimed.get(context.tool_call_id)
        if ours is None:
            return (
                f"Countersign has not approved {tool.name} call "
                f"{context.tool_call_id} for this process; it did not run."
            )
        assert isinstance(gate.client, AsyncClient), (
            "approved_arguments needs an AsyncClient"
        )
        state = await gate.client.get(ours)
        if state.decision is not None and state.decision.arguments is not None:
            arguments = json.dumps(state.decision.arguments)
        return await invoke(context, arguments)

    return dataclasses.replace(tool, on_invoke_tool=on_invoke_tool)


async def resolve_interruptions(
    gate: Gate,
    state: RunState[Any, Any],
    interruptions: Iterable[ToolApprovalItem],
) -> list[bool]:
    """Approve or reject each of ``interruptions`` on ``state`` as Countersign decides (async ``gate``).

    Waits for a person on each call in turn (``gate.timeout`` bounds each wait);
    an approved call is claimed for this process (its tool, wrapped by
    :func:`approved_arguments`, then runs with the approved arguments). Returns one ``approved`` flag
    per interruption, in order. Raises what the client raises for transport or
    authorization errors (``NotAuthorized``, ``InvalidRequest``).
    """
    decided: list[bool] = []
    for item in interruptions:
        verdict = await gate.adecide(
            _call_id(item), item.name or "", interruption_arguments(item)
        )
        if verdict.approved:
            state.approve(item)
        else:
            state.reject(
                item,
                rejection_message=verdict.reason
                or "A person refused this call; do not retry it.",
            )
        decided.append(verdict.approved)
    return decided


async def report_tool_outputs(gate: Gate, items: Iterable[RunItem]) -> int:
    """Report the outputs of the calls ``gate`` claimed (a run's ``new_items``); return how many."""
    reported = 0
    for item in items:
        if not isinstance(item, ToolCallOutputItem):
            continue
        raw: Any = item.raw_item
        call_id = (
            raw.get("call_id")
            if isinstance(raw, dict)
            else getattr(raw, "call_id", None)
        )
        output: Any = item.output
        if (
            not isinstance(output, str | int | float | bool | dict | list)
            and output is not None
        ):
            output = str(output)
        if call_id and await gate.areport(str(call_id), output):
            reported += 1
    return reported
