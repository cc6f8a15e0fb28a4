"""Argument handling through the public path: provider adapter → loop → dispatch, against a local server.

The adapters speak their real wire format to :class:`ScriptServer`; the loop joins
the deltas, the ladder decides, and the next request is what the server records.
Truncated text with a *normal* stop reason never runs a tool; a surrogate pair split
across two deltas (escaped halves in two SSE chunks) arrives as one character; a
lone half is refused and the next request still encodes, replaying ``{}``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from agentcore.events import RunAgentInput, UserMessage
from agentcore.loop import LoopAgent
from agentcore.providers.base import Provider
from agentcore.tools import ToolContext, Toolset, define_tool
from tests.agentcore.providers.replies import (
    anthropic,
    openai_chat,
    openai_responses,
)
from tests.agentcore.providers.server import Reply, ScriptServer

ADAPTERS: dict[str, Any] = {
    "openai_chat": openai_chat,
    "openai_responses": openai_responses,
    "anthropic": anthropic,
}


def weather(seen: list[dict[str, Any]]) -> Toolset:
    def execute(params: dict[str, Any], context: ToolContext) -> str:
        seen.append(params)
        return f"sunny in {params['city']}"

    return Toolset(
        [
            define_tool(
                name="get_weather",
                description="Return the weather for a city.",
                parameters={
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                },
                execute=execute,
            )
        ]
    )


async def run(
    module: Any, server: ScriptServer, args: list[str], seen: list[dict[str, Any]]
) -> list[Any]:
    call_reply: Callable[[str, str, list[str]], Reply] = module.call_reply
    text_reply: Callable[[list[str]], Reply] = module.text_reply
    server.replies += [call_reply("get_weather", "call_T", args), text_reply(["ok"])]
    provider: Provider = module.factory(server.url)
    agent = LoopAgent(provider, toolset=weather(seen), model="test-model")
    run_input = RunAgentInput(
        thread_id="t",
        run_id="r",
        state={},
        messages=[UserMessage(id="u1", content="weather?")],
        tools=[],
        context=[],
        forwarded_props={},
    )
    return [event async for event in agent.run(run_input)]


def results(events: list[Any]) -> list[dict[str, Any] | str]:
    out: list[dict[str, Any] | str] = []
    for event in events:
        if event.type.value == "TOOL_CALL_RESULT":
            try:
                out.append(json.loads(event.content))
            except ValueError:
                out.append(event.content)
    return out


def replayed_arguments(body: dict[str, Any]) -> list[Any]:
    """Return the arguments of every call in a recorded request body, any of the three formats."""
    found: list[Any] = []
    for item in body.get("messages") or body.get("input") or []:
        for call in item.get("tool_calls") or ():
            found.append(call["function"]["arguments"])
        if item.get("type") == "function_call":
            found.append(item["arguments"])
        content = item.get("content")
        if isinstance(content, list):
            found += [b["input"] for b in content if b.get("type") == "tool_use"]
    return found


@pytest.mark.parametrize("name", sorted(ADAPTERS))
@pytest.mark.parametrize(
    "args", [['{"city": "'], ['{"city": "Os'], ['{"city"'], ['{"city": "Oslo"']]
)
async def test_truncated_text_with_a_normal_stop_reason_never_runs(
    name: str, args: list[str], server: ScriptServer
) -> None:
    """``{"city": "`` then tool_calls / end_turn / completed is arguments_truncated."""
    seen: list[dict[str, Any]] = []
    events = await run(ADAPTERS[name], server, args, seen)
    assert seen == []
    [result] = results(events)
    assert isinstance(result, dict)
    assert result["error"] == "arguments_truncated"
    assert "nothing was executed" in result["detail"]
    assert events[-1].type.value == "RUN_FINISHED"
    assert replayed_arguments(server.requests[1].body) in (["{}"], [{}])


@pytest.mark.parametrize("name", sorted(ADAPTERS))
async def test_surrogate_pair_split_across_chunks_is_one_character(
    name: str, server: ScriptServer
) -> None:
    """LP-04: the SDK decodes each escaped half alone; joined as text they are one character."""
    seen: list[dict[str, Any]] = []
    events = await run(
        ADAPTERS[name], server, ['{"city": "\\ud83d', '\\ude00 town"}'], seen
    )
    assert seen == [{"city": "😀 town"}]
    assert results(events) == ["sunny in 😀 town"]
    assert events[-1].type.value == "RUN_FINISHED"


@pytest.mark.parametrize("name", sorted(ADAPTERS))
async def test_lone_surrogate_is_refused_and_the_next_request_encodes(
    name: str, server: ScriptServer
) -> None:
    """A cut-off call is refused, the run goes on, and the next request replays ``{}``."""
    seen: list[dict[str, Any]] = []
    events = await run(ADAPTERS[name], server, ['{"city": "\\ud83d', ' town"}'], seen)
    assert seen == []
    [result] = results(events)
    assert isinstance(result, dict)
    assert result["error"] == "invalid_arguments_json"
    assert "surrogate" in result["detail"]
    assert events[-1].type.value == "RUN_FINISHED"
    assert len(server.requests) == 2
    assert replayed_arguments(server.requests[1].body) in (["{}"], [{}])


@pytest.mark.parametrize("name", sorted(ADAPTERS))
@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('{"city": "a\\qb"}', "invalid_arguments_json"),
        # Valid JSON whose value holds a control character (docs/arguments.md).
        ('{"city": "\\u0007"}', "invalid_arguments"),
        ('{"city": "\\u001b[31m"}', "invalid_arguments"),
        ("{'city': 'a' + 'b'}", "invalid_arguments"),
    ],
)
async def test_invalid_text_never_runs(
    name: str, text: str, error: str, server: ScriptServer
) -> None:
    """An invalid escape, an escaped control character, an expression: refused."""
    seen: list[dict[str, Any]] = []
    events = await run(ADAPTERS[name], server, [text], seen)
    assert seen == []
    [result] = results(events)
    assert isinstance(result, dict)
    assert result["error"] == error
    if error == "invalid_arguments_json":
        offset = text.index("\\")
        assert f"at offset {offset} of the argument text" in result["detail"]
    assert events[-1].type.value == "RUN_FINISHED"
