"""The contract every provider adapter meets, as a mixin run against each adapter.

Each adapter's test class inherits :class:`ProviderContract` and sets
``provider_factory`` (base URL → provider), ``text_reply`` and ``call_reply``
(scripted responses in that API's real wire format). STYLE 15.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, ClassVar

import pytest

from agentcore.events import UserMessage
from agentcore.providers.base import (
    ModelEvent,
    ModelRequest,
    Provider,
    ProviderError,
    TextDelta,
    ToolCallBegin,
    ToolCallDelta,
    ToolSpec,
    TurnEnd,
)
from tests.agentcore.providers.server import Reply, ScriptServer

WEATHER = ToolSpec(
    name="get_weather",
    description="Return the weather for a city.",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)


def user_request(text: str = "hi", **kwargs: Any) -> ModelRequest:
    """Return a one-message request offering the weather tool."""
    return ModelRequest(
        model="test-model",
        messages=[UserMessage(id="u1", content=text)],
        tools=[WEATHER],
        **kwargs,
    )


async def collect(provider: Provider, request: ModelRequest) -> list[ModelEvent]:
    """Return every event of one streamed turn."""
    return [event async for event in provider.stream_turn(request)]


async def drain(events: AsyncIterator[ModelEvent], into: list[ModelEvent]) -> None:
    """Append each event of ``events`` to ``into``, so a test keeps what came before a raise."""
    async for event in events:
        into.append(event)


def tool_calls(events: Sequence[ModelEvent]) -> list[dict[str, Any]]:
    """Join Begin/Delta events into ``{"id", "name", "arguments"}`` (arguments parsed)."""
    calls: dict[str, dict[str, Any]] = {}
    for event in events:
        if isinstance(event, ToolCallBegin):
            assert event.call_id not in calls, f"call {event.call_id!r} begun twice"
            calls[event.call_id] = {"id": event.call_id, "name": event.name, "text": ""}
        elif isinstance(event, ToolCallDelta):
            assert event.call_id in calls, "delta before its ToolCallBegin"
            calls[event.call_id]["text"] += event.delta
    return [
        {
            "id": c["id"],
            "name": c["name"],
            "arguments": json.loads(c["text"]) if c["text"].strip() else {},
        }
        for c in calls.values()
    ]


def raw_arguments(events: Sequence[ModelEvent]) -> dict[str, str]:
    """Return each call's joined argument text, keyed by call id."""
    text: dict[str, str] = {}
    for event in events:
        if isinstance(event, ToolCallBegin):
            text[event.call_id] = ""
        elif isinstance(event, ToolCallDelta):
            text[event.call_id] += event.delta
    return text


def text_of(events: Sequence[ModelEvent]) -> str:
    """Return the joined text deltas."""
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def turn_end(events: Sequence[ModelEvent]) -> TurnEnd:
    """Return the single, last TurnEnd, asserting there is exactly one."""
    ends = [e for e in events if isinstance(e, TurnEnd)]
    assert len(ends) == 1, ends
    assert events[-1] is ends[0]
    return ends[0]


class ProviderContract:
    """Tests every adapter must pass; subclasses set the three hooks below."""

    provider_factory: ClassVar[Callable[[str], Provider]]
    text_reply: ClassVar[Callable[[list[str]], Reply]]
    call_reply: ClassVar[Callable[[str, str, list[str]], Reply]]
    error_reply: ClassVar[Callable[[int], Reply]]

    def make(self, server: ScriptServer) -> Provider:
        return type(self).provider_factory(server.url)

    async def test_contract_text_only_turn_lp09(self, server: ScriptServer) -> None:
        """A text-only turn yields TextDelta events then one TurnEnd(end_turn) (LP-09)."""
        server.replies.append(type(self).text_reply(["Hel", "lo", "!"]))
        events = await collect(self.make(server), user_request())
        assert all(isinstance(e, TextDelta) for e in events[:-1])
        assert text_of(events) == "Hello!"
        assert turn_end(events).stop_reason == "end_turn"

    async def test_contract_call_deltas_join_to_json_lp04(
        self, server: ScriptServer
    ) -> None:
        """A call's deltas follow its Begin and join into valid JSON; stop is tool_use (LP-04, LP-09)."""
        server.replies.append(
            type(self).call_reply("get_weather", "call_c1", ['{"ci', 'ty":"Os', 'lo"}'])
        )
        events = await collect(self.make(server), user_request())
        calls = tool_calls(events)
        assert [(c["name"], c["arguments"]) for c in calls] == [
            ("get_weather", {"city": "Oslo"})
        ]
        assert turn_end(events).stop_reason == "tool_use"

    async def test_contract_exactly_one_turn_end_last(
        self, server: ScriptServer
    ) -> None:
        """Exactly one TurnEnd is yielded, and it is the last event."""
        server.replies.append(
            type(self).call_reply("get_weather", "call_c2", ['{"city":"Rome"}'])
        )
        events = await collect(self.make(server), user_request())
        turn_end(events)

    @pytest.mark.parametrize(
        ("status", "code"),
        [(429, "rate_limited"), (500, "upstream_unavailable"), (401, "authentication")],
    )
    async def test_contract_http_error_before_stream_is_sanitized_sec06(
        self, server: ScriptServer, status: int, code: str
    ) -> None:
        """An HTTP error before the stream raises ProviderError with a sanitized code and no secrets (SEC-06)."""
        server.replies.append(type(self).error_reply(status))
        provider = self.make(server)
        with pytest.raises(ProviderError) as info:
            await collect(provider, user_request())
        assert info.value.code == code
        message = str(info.value)
        assert "sk-test-secret" not in message
        assert "127.0.0.1" not in message
        assert "internal detail" not in message
