"""Pydantic AI: answer a run's ``DeferredToolRequests`` with Countersign's decisions.

Tools declared with ``requires_approval=True`` stop the run with
``DeferredToolRequests``; :func:`deferred_tool_results` asks Countersign about
each call (declared with the tool's own JSON schema) and returns the
``DeferredToolResults`` to run again with: ``ToolApproved`` (with
``override_args`` when an approver edited the arguments) or ``ToolDenied``
carrying the reason. After that run, :func:`report_tool_returns` reports each
claimed call's ``ToolReturnPart`` as its outcome::

    result = await agent.run("Refund A-1", output_type=[str, DeferredToolRequests])
    gate = Gate(client, conversation_id="conv-1", input_schemas=schemas_of(agent))
    results = await deferred_tool_results(gate, result.output)
    final = await agent.run(message_history=result.all_messages(),
                            deferred_tool_results=results)
    await report_tool_returns(gate, final.new_messages())
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic_ai import (
    DeferredToolRequests,
    DeferredToolResults,
    ToolApproved,
    ToolDenied,
)
from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart

from countersign_client.adapters.gate import Gate


async def deferred_tool_results(
    gate: Gate, requests: DeferredToolRequests
) -> DeferredToolResults:
    """Return Countersign's decision on each of ``requests.approvals`` (async ``gate``)."""
    results = DeferredToolResults()
    for part in requests.approvals:
        verdict = await gate.adecide(
            part.tool_call_id, part.tool_name, part.args_as_dict()
        )
        if verdict.approved:
            results.approvals[part.tool_call_id] = ToolApproved(
                override_args=verdict.arguments if verdict.edited else None
            )
        else:
            results.approvals[part.tool_call_id] = ToolDenied(
                verdict.reason or "A person refused this call; do not retry it."
            )
    return results


async def report_tool_returns(gate: Gate, messages: Iterable[ModelMessage]) -> int:
    """Report the tool returns of the calls ``gate`` claimed; return how many were reported."""
    reported = 0
    for message in messages:
        if not isinstance(message, ModelRequest):
            continue
        for part in message.parts:
            if isinstance(part, ToolReturnPart):
                content: Any = part.model_response_str()
                if await gate.areport(part.tool_call_id, content):
                    reported += 1
    return reported
