"""Every adapter against a third-party fake LLM server: LLMock (``llmock`` on PyPI).

LLMock is a real HTTP server (uvicorn on 127.0.0.1, an OS-chosen port, started by its
pytest plugin's ``llmock`` fixture) that speaks the Chat Completions, Responses,
Anthropic Messages and Gemini wire formats, as its authors checked them against the
official SDKs. The real SDK clients connect to it through ``base_url``; nothing is
mocked. It complements the project's own recorded streams (``server.py``): a wire
format we did not write ourselves.

Two things are proved per adapter, through the whole public path (adapter → loop →
dispatch → the next request):

- a round trip: LLMock calls the offered tool, the loop runs it, and the result goes
  back in that API's own format (LP-10); LLMock then answers in text and the run ends;
- the transport faults LLMock injects for real on the socket — a connection dropped
  mid-stream, a chunk that is not JSON, a stalled stream (read timeout), HTTP 503 and
  429 with ``Retry-After`` — end as a sanitized code or are retried, never as
  ``internal_error``, and no traceback is logged for them (SEC-06).
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Callable
from typing import Any

import pytest

from agentcore.events import BaseEvent
from agentcore.loop import LoopAgent
from agentcore.providers.anthropic import AnthropicProvider
from agentcore.providers.base import Provider
from agentcore.providers.gemini import GeminiProvider
from agentcore.providers.openai_chat import OpenAIChatProvider
from agentcore.providers.openai_responses import OpenAIResponsesProvider
from agentcore.tools import Tool, ToolContext, Toolset, define_tool
from tests.agentcore.helpers import assert_valid_stream, collect, make_input, of_type

pytest.importorskip("llmock")

KEY = "sk-test-secret"

WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
    "additionalProperties": False,
}


def _chat(url: str, **options: Any) -> Provider:
    return OpenAIChatProvider(model="gpt-4o", api_key=KEY, base_url=url, **options)


def _responses(url: str, **options: Any) -> Provider:
    return OpenAIResponsesProvider(model="gpt-4o", api_key=KEY, base_url=url, **options)


def _anthropic(url: str, **options: Any) -> Provider:
    return AnthropicProvider(
        model="claude-sonnet-4-5", api_key=KEY, base_url=url, **options
    )


def _gemini(url: str, **options: Any) -> Provider:
    return GeminiProvider(
        model="gemini-2.5-flash", api_key=KEY, base_url=url, **options
    )


#: adapter name → (LLMock base-URL key, factory taking the base URL and options)
ADAPTERS: dict[str, tuple[str, Callable[..., Provider]]] = {
    "openai_chat": ("openai", _chat),
    "openai_responses": ("openai", _responses),
    "anthropic": ("anthropic", _anthropic),
    "gemini": ("gemini", _gemini),
}

pytestmark = pytest.mark.parametrize("adapter", sorted(ADAPTERS))


class Weather:
    """An agent-side weather tool that records what it was called with."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def execute(self, params: dict[str, Any], context: ToolContext) -> str:
        self.calls.append(params)
        return f"21C and sunny in {params['city']}"

    def tool(self) -> Tool:
        return define_tool(
            name="get_weather",
            description="Get the current weather for a city.",
            parameters=WEATHER_SCHEMA,
            execute=self.execute,
        )


def agent_for(
    adapter: str,
    llmock: Any,
    weather: Weather,
    *,
    timeout: float = 10.0,
    model_retries: int = 2,
) -> LoopAgent:
    """Return a loop agent over ``adapter`` pointed at ``llmock``, with fast retries."""
    key, factory = ADAPTERS[adapter]
    provider = factory(llmock.base_url(key), timeout=timeout)
    return LoopAgent(
        provider,
        toolset=Toolset.assemble([weather.tool()]),
        model="",
        model_retries=model_retries,
        retry_backoff=0.05,
        retry_max_delay=5.0,
        deadline_seconds=60,
    )


async def run(agent: LoopAgent, text: str) -> list[BaseEvent]:
    """Run ``agent`` on one user message, check the stream, close the adapter's client."""
    run_input = make_input(text)
    try:
        events = await collect(agent, run_input)
    finally:
        await agent.provider.aclose()
    assert_valid_stream(events, run_input=run_input)
    return events


def run_error_code(events: list[BaseEvent]) -> str | None:
    """Return the RUN_ERROR code of a run, ``None`` when it finished."""
    errors = of_type(events, "RUN_ERROR")
    return errors[0].code if errors else None


def assert_no_traceback_logged(caplog: pytest.LogCaptureFixture) -> None:
    """An upstream's fault is a warning line, never a logged traceback (SEC-06)."""
    for record in caplog.records:
        if record.name == "asyncio":
            continue  # another test's client collected on a closed loop: not ours
        assert record.exc_info is None, record.getMessage()
        assert record.levelno < logging.ERROR, record.getMessage()
        assert KEY not in record.getMessage()


def model_requests(llmock: Any) -> list[Any]:
    """Return LLMock's records of the model requests (its admin paths excluded)."""
    return [r for r in llmock.requests if not r.path.startswith("/_llmock")]


def sent_tool_result(adapter: str, body: dict[str, Any]) -> tuple[str, str]:
    """Return ``(call reference, result text)`` of the tool result in a request ``body``.

    Reads each API's own result shape (LP-10); fails when it is not there.
    """
    if adapter == "openai_chat":
        (message,) = [m for m in body["messages"] if m["role"] == "tool"]
        assert {m["role"] for m in body["messages"]} >= {"user", "assistant", "tool"}
        return message["tool_call_id"], message["content"]
    if adapter == "openai_responses":
        (item,) = [i for i in body["input"] if i.get("type") == "function_call_output"]
        (call,) = [i for i in body["input"] if i.get("type") == "function_call"]
        assert call["call_id"] == item["call_id"]
        return item["call_id"], item["output"]
    if adapter == "anthropic":
        user = body["messages"][-1]
        assert user["role"] == "user"
        (block,) = [b for b in user["content"] if b["type"] == "tool_result"]
        content = block["content"]
        if isinstance(content, list):
            content = "".join(part["text"] for part in content)
        return block["tool_use_id"], content
    contents = body["contents"]
    (part,) = [p for p in contents[-1]["parts"] if "functionResponse" in p]
    assert contents[-2]["role"] == "model"
    response = part["functionResponse"]
    return response["name"], response["response"]["result"]


def called_ref(adapter: str, body: dict[str, Any]) -> str:
    """Return the reference the request ``body`` replays for the model's call."""
    if adapter == "openai_chat":
        (assistant,) = [m for m in body["messages"] if m["role"] == "assistant"]
        return assistant["tool_calls"][0]["id"]
    if adapter == "openai_responses":
        (call,) = [i for i in body["input"] if i.get("type") == "function_call"]
        return call["call_id"]
    if adapter == "anthropic":
        assistant = body["messages"][-2]
        (block,) = [b for b in assistant["content"] if b["type"] == "tool_use"]
        return block["id"]
    (part,) = [p for p in body["contents"][-2]["parts"] if "functionCall" in p]
    return part["functionCall"]["name"]


# -- a round trip with a tool call --------------------------------------------------


async def test_round_trip_tool_call_and_result_in_wire_format_lp10(
    adapter: str, llmock: Any
) -> None:
    """LLMock calls the tool; the result goes back in the API's format; the run ends (LP-10)."""
    llmock.call_tool("get_weather", {"city": "Paris"})
    weather = Weather()
    events = await run(
        agent_for(adapter, llmock, weather), "What's the weather in Paris?"
    )
    assert run_error_code(events) is None
    assert weather.calls == [{"city": "Paris"}]
    (result,) = of_type(events, "TOOL_CALL_RESULT")
    assert result.content == "21C and sunny in Paris"
    assert of_type(events, "TEXT_MESSAGE_CONTENT"), "the final answer is text"

    first, second = (r.body for r in model_requests(llmock))
    assert "get_weather" in str(first)
    ref, text = sent_tool_result(adapter, second)
    assert text == "21C and sunny in Paris"
    assert ref == called_ref(adapter, second)


async def test_round_trip_with_generated_arguments(adapter: str, llmock: Any) -> None:
    """Unscripted, LLMock calls the offered tool with schema-valid arguments it made up."""
    weather = Weather()
    events = await run(
        agent_for(adapter, llmock, weather), "What's the weather in Paris?"
    )
    assert run_error_code(events) is None
    assert len(weather.calls) == 1
    assert isinstance(weather.calls[0]["city"], str)
    assert len(model_requests(llmock)) == 2


async def test_broken_tool_call_arguments_are_answered(
    adapter: str, llmock: Any
) -> None:
    """LLMock's ``malformed_arguments`` tool fault: the call is answered once, the run goes on."""
    llmock.break_tool_call("malformed_arguments")
    weather = Weather()
    events = await run(
        agent_for(adapter, llmock, weather), "What's the weather in Paris?"
    )
    # LLMock's broken text is a cut-off object (``{"city": "``). Whether it may run
    # is the argument ladder's decision (agentcore.arguments);
    # here: the call is answered exactly once and nothing is internal_error.
    (start,) = of_type(events, "TOOL_CALL_START")
    (result,) = of_type(events, "TOOL_CALL_RESULT")
    assert result.tool_call_id == start.tool_call_id
    assert len(weather.calls) <= 1
    assert run_error_code(events) is None


# -- transport faults -----------------------------------------------------------------


async def test_disconnect_before_output_is_retried(
    adapter: str, llmock: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A connection dropped before any chunk is retried; the run then succeeds."""
    llmock.tool_mode("off").disconnect(after_chunks=0)
    events = await run(agent_for(adapter, llmock, Weather()), "Say hello")
    assert run_error_code(events) is None
    assert len(model_requests(llmock)) == 2
    assert_no_traceback_logged(caplog)


async def test_disconnect_mid_stream_is_upstream_unavailable_sec06(
    adapter: str, llmock: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A connection dropped after text was streamed ends as upstream_unavailable (SEC-06)."""
    story = " ".join(f"word{i}" for i in range(200))
    llmock.tool_mode("off").reply(story).disconnect(after_chunks=6)
    events = await run(
        agent_for(adapter, llmock, Weather()),
        "Tell me a long story about a lighthouse keeper",
    )
    assert of_type(events, "TEXT_MESSAGE_CONTENT"), "text was streamed before the cut"
    assert run_error_code(events) == "upstream_unavailable"
    (error,) = of_type(events, "RUN_ERROR")
    assert "127.0.0.1" not in error.message
    assert len(model_requests(llmock)) == 1, "streamed output is never retried"
    assert_no_traceback_logged(caplog)


async def test_corrupted_chunk_is_never_internal_error_sec06(
    adapter: str, llmock: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A chunk that is not JSON ends with a sanitized code, or is retried — never internal_error."""
    llmock.tool_mode("off").corrupt(after_chunks=0)
    events = await run(agent_for(adapter, llmock, Weather()), "Say hello")
    assert run_error_code(events) in (None, "malformed_stream")
    assert_no_traceback_logged(caplog)


async def test_stalled_stream_times_out_sec06(
    adapter: str, llmock: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A stream that stops sending fails on the read timeout as ``timeout``, not a hang."""
    story = " ".join(f"word{i}" for i in range(200))
    llmock.tool_mode("off").reply(story, times=None).stall(
        after_chunks=6, seconds=5, times=None
    )
    agent = agent_for(adapter, llmock, Weather(), timeout=0.5)
    events = await run(agent, "Tell me a long story about a lighthouse keeper")
    assert of_type(events, "TEXT_MESSAGE_CONTENT"), "text was streamed before the stall"
    assert run_error_code(events) == "timeout"
    assert len(model_requests(llmock)) == 1, "streamed output is never retried"
    assert_no_traceback_logged(caplog)


async def test_503_is_retried_then_succeeds(
    adapter: str, llmock: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Two 503s then a normal answer: the loop retries with backoff and the run succeeds."""
    llmock.tool_mode("off").fail(503, times=2)
    events = await run(agent_for(adapter, llmock, Weather()), "Say hello")
    assert run_error_code(events) is None
    assert [r.status for r in model_requests(llmock)] == [503, 503, 200]
    llmock.assert_resilient()
    assert_no_traceback_logged(caplog)


async def test_429_waits_for_retry_after(
    adapter: str, llmock: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A 429 with ``Retry-After`` is retried no sooner than it asked (LLMock's verdict checks)."""
    llmock.tool_mode("off").rate_limit(times=1, retry_after=0.4)
    events = await run(agent_for(adapter, llmock, Weather()), "Say hello")
    assert run_error_code(events) is None
    first, second = model_requests(llmock)
    assert first.status == 429
    assert second.started_at - first.ended_at >= 0.4
    llmock.assert_resilient()
    assert_no_traceback_logged(caplog)


async def test_outage_ends_as_upstream_unavailable_within_retries(
    adapter: str, llmock: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A provider that stays down: 1 + model_retries attempts, then upstream_unavailable."""
    llmock.outage()
    events = await run(agent_for(adapter, llmock, Weather()), "Say hello")
    assert run_error_code(events) == "upstream_unavailable"
    assert len(model_requests(llmock)) == 3
    assert_no_traceback_logged(caplog)


async def test_bad_request_is_not_retried(
    adapter: str, llmock: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A 400 (the prompt is too long) is the request's fault: one attempt, bad_request."""
    llmock.context_overflow()
    events = await run(agent_for(adapter, llmock, Weather()), "Say hello")
    assert run_error_code(events) == "bad_request"
    assert len(model_requests(llmock)) == 1
    llmock.assert_resilient()
    assert_no_traceback_logged(caplog)


async def test_slow_first_token_times_out_and_is_retried(
    adapter: str, llmock: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A stream silent past the read timeout before any output is retried, then succeeds."""
    llmock.tool_mode("off").slow_first_token(3)
    agent = agent_for(adapter, llmock, Weather(), timeout=0.5)
    events = await run(agent, "Say hello")
    assert run_error_code(events) is None
    assert len(model_requests(llmock)) == 2
    assert_no_traceback_logged(caplog)


async def test_stream_ending_without_finish_reason_is_never_a_finished_run(
    adapter: str, llmock: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A stream that stops cleanly but early (no finish reason) is not taken as an answer."""
    story = " ".join(f"word{i}" for i in range(200))
    llmock.tool_mode("off").reply(story).truncate(after_chunks=6)
    events = await run(agent_for(adapter, llmock, Weather()), "Tell me a story")
    assert of_type(events, "TEXT_MESSAGE_CONTENT"), "text was streamed before the end"
    assert run_error_code(events) == "malformed_stream"
    assert of_type(events, "RUN_FINISHED") == []
    # Not llmock.assert_resilient(): its verdict counts any truncated stream not
    # retried as "accepted", and output already streamed is never retried here;
    # the run ends in error instead, which is what the assertions above prove.
    assert_no_traceback_logged(caplog)


@pytest.mark.parametrize("owns", [True, False])
def test_an_owned_provider_is_closed_on_the_runs_loop(
    adapter: str, llmock: Any, caplog: pytest.LogCaptureFixture, owns: bool
) -> None:
    """With ``owns_provider`` no client is left to be closed on a dead loop.

    As in ``threads.services.drive_agent``: a fresh event loop per run, closed after
    it. Without ownership the SDK's client is collected later and asyncio reports
    "Task exception was never retrieved ... Event loop is closed" (Gemini) or
    leaves the socket to the garbage collector.
    """
    llmock.tool_mode("off")
    agent = agent_for(adapter, llmock, Weather())
    agent.owns_provider = owns
    loop = asyncio.new_event_loop()
    try:
        events = loop.run_until_complete(collect(agent, make_input("Say hello")))
    finally:
        loop.close()
    assert run_error_code(events) is None
    client_closed = provider_closed(agent.provider)
    del agent, events
    gc.collect()
    noise = [r for r in caplog.records if "Event loop is closed" in r.getMessage()]
    if owns:
        assert client_closed
        assert noise == []
    else:
        assert not client_closed


def provider_closed(provider: Provider) -> bool:
    """Return whether the adapter's HTTP client was closed (SDK internals, read only)."""
    client: Any = getattr(provider, "_client", None)
    if isinstance(provider, GeminiProvider):
        return bool(client.aio._api_client._async_httpx_client.is_closed)
    return bool(client.is_closed())
