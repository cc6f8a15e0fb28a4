"""An OpenAI Agents SDK agent whose tool waits for Countersign (the adapter's end-to-end test).

Run by tests/clients/test_openai_agents.py in its own virtualenv (``.venv-oai``,
from tests/remote_envs/openai-agents.txt): the SDK needs an ``openai`` newer than
Countersign's. The model is a scripted ``agents.Model`` (no API key, no network):
it calls ``refund`` once, then answers with the tool's output. The tool has
``needs_approval=True``; the adapter sends the interruption to Countersign, waits,
approves or rejects on the ``RunState``; the run resumes from that state.

Usage: ``python openai_agents_agent.py BASE_URL TOKEN CONVERSATION ARGUMENTS_JSON``.
Prints one JSON line: the decisions, the tool's runs, the final output, the
number of outcomes reported. With ``--example``, it instead runs the Python read
from stdin (docs/integrations.md's example) with ``BASE_URL``, ``TOKEN`` and the
scripted ``model``, and prints ``{"example": "ran"}``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from agents import Agent, Model, ModelResponse, Runner, Usage, function_tool
from countersign_client import AsyncClient
from countersign_client.adapters.gate import Gate
from countersign_client.adapters.openai_agents import (
    approved_arguments,
    report_tool_outputs,
    resolve_interruptions,
)
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)


class ScriptedModel(Model):
    """Calls ``refund(**arguments)`` first; afterwards answers with the last tool output."""

    def __init__(self, arguments: dict[str, Any], call_id: str) -> None:
        self.arguments = arguments
        self.call_id = call_id

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        outputs = [
            item
            for item in (input if isinstance(input, list) else [])
            if isinstance(item, dict) and item.get("type") == "function_call_output"
        ]
        if not outputs:
            call = ResponseFunctionToolCall(
                type="function_call",
                id="fc_1",
                call_id=self.call_id,
                name="refund",
                arguments=json.dumps(self.arguments),
                status="completed",
            )
            return ModelResponse(output=[call], usage=Usage(), response_id=None)
        text = ResponseOutputText(
            type="output_text", text=f"done: {outputs[-1]['output']}", annotations=[]
        )
        message = ResponseOutputMessage(
            type="message",
            id="msg_1",
            role="assistant",
            status="completed",
            content=[text],
        )
        return ModelResponse(output=[message], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("this test model does not stream")


async def main(
    base_url: str, token: str, conversation: str, arguments: dict[str, Any]
) -> dict[str, Any]:
    ran: list[dict[str, Any]] = []

    @function_tool(needs_approval=True)
    def refund(order_id: str, amount: float) -> str:
        """Refund an order."""
        ran.append({"order_id": order_id, "amount": amount})
        return f"refunded {amount}"

    client = AsyncClient(base_url, token=token, agent="helper")
    gate = Gate(client, conversation_id=conversation, timeout=60)
    agent = Agent(
        name="billing",
        model=ScriptedModel(arguments, f"call-{conversation}"),
        tools=[approved_arguments(gate, refund)],
    )
    first = await Runner.run(agent, "Refund the order")
    state = first.to_state()
    decisions = await resolve_interruptions(gate, state, first.interruptions)
    final = await Runner.run(agent, state)
    reported = await report_tool_outputs(gate, final.new_items)
    await client.aclose()
    return {
        "interruptions": len(first.interruptions),
        "decisions": decisions,
        "ran": ran,
        "output": final.final_output,
        "reported": reported,
    }


def offline_checks() -> dict[str, Any]:
    """What the adapter does without a server: malformed model arguments, an unapproved call."""
    from agents import ToolApprovalItem
    from agents.tool_context import ToolContext
    from countersign_client.adapters.openai_agents import interruption_arguments

    ran: list[str] = []

    @function_tool(needs_approval=True)
    def refund(order_id: str, amount: float) -> str:
        """Refund an order."""
        ran.append(order_id)
        return "refunded"

    # nothing listens on port 9: the wrapper must refuse before any request
    gate = Gate(AsyncClient("http://127.0.0.1:9", token="t", agent="helper"))
    context = ToolContext(
        context=None, tool_name="refund", tool_call_id="call-x", tool_arguments="{}"
    )
    refused = asyncio.run(
        approved_arguments(gate, refund).on_invoke_tool(
            context, '{"order_id": "A", "amount": 1}'
        )
    )
    agent = Agent(name="billing")
    declared = {}
    for raw in ["not json", "[1, 2]", "", '"text"', '{"order_id": "A"}']:
        call = ResponseFunctionToolCall(
            type="function_call", call_id="c", name="refund", arguments=raw
        )
        item = ToolApprovalItem(agent=agent, raw_item=call)
        declared[raw] = interruption_arguments(item)
    return {"refused": refused, "ran": ran, "declared": declared}


def run_example(base_url: str, token: str, model: Model) -> dict[str, Any]:
    namespace: dict[str, Any] = {"BASE_URL": base_url, "TOKEN": token, "model": model}
    exec(
        compile(sys.stdin.read(), "docs/integrations.md:openai-agents", "exec"),
        namespace,
    )
    asyncio.run(namespace["main"]())
    return {"example": "ran"}


if __name__ == "__main__":
    base, token, conversation, raw = sys.argv[1:5]
    if "--offline" in sys.argv[5:]:
        print(json.dumps(offline_checks()), flush=True)
        sys.exit(0)
    if "--example" in sys.argv[5:]:
        model = ScriptedModel(json.loads(raw), f"call-{conversation}")
        print(json.dumps(run_example(base, token, model)), flush=True)
        sys.exit(0)
    print(
        json.dumps(asyncio.run(main(base, token, conversation, json.loads(raw)))),
        flush=True,
    )
