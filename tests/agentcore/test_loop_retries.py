"""The loop's retries of a model turn after a transient provider failure (SEC-06, LP-06).

Driven by the scripted provider: a turn that raises a :class:`ProviderError` before
any output is requested again while retries, ``Retry-After`` and the deadline allow;
a turn that already streamed output never is.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from agentcore.events import BaseEvent
from agentcore.loop import LoopAgent
from agentcore.providers.base import ProviderError
from agentcore.providers.scripted import (
    ScriptedProvider,
    ScriptedTurn,
    raise_error,
    text,
    turn,
)
from agentcore.tools import Toolset
from tests.agentcore.helpers import assert_valid_stream, collect, make_input, of_type


def fail(code: str = "upstream_unavailable", **kwargs: float) -> ScriptedTurn:
    return raise_error(ProviderError(f"p: failed ({code})", code=code, **kwargs))


def agent(
    script: list[ScriptedTurn], **options: float
) -> tuple[LoopAgent, ScriptedProvider]:
    """Return a loop agent over ``script`` with fast retries, and its provider."""
    provider = ScriptedProvider(script)
    loop_agent = LoopAgent(
        provider,
        toolset=Toolset([]),
        model="scripted",
        model_retries=int(options.pop("model_retries", 2)),
        retry_backoff=options.pop("retry_backoff", 0.01),
        **options,
    )
    return loop_agent, provider


async def run(loop_agent: LoopAgent) -> list[BaseEvent]:
    events = await collect(loop_agent, make_input("hi"))
    assert_valid_stream(events)
    return events


def code_of(events: list[BaseEvent]) -> str | None:
    errors = of_type(events, "RUN_ERROR")
    return errors[0].code if errors else None


@pytest.mark.parametrize("code", ["upstream_unavailable", "rate_limited", "timeout"])
async def test_transient_failure_before_output_is_retried(
    code: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A retryable failure before any output: the turn is requested again and succeeds."""
    loop_agent, provider = agent([fail(code), text("Hello")])
    events = await run(loop_agent)
    assert code_of(events) is None
    assert "".join(e.delta for e in of_type(events, "TEXT_MESSAGE_CONTENT")) == "Hello"
    assert len(provider.requests) == 2
    warnings = [r for r in caplog.records if r.name == "agentcore.loop"]
    assert [r.levelno for r in warnings] == [logging.WARNING]
    assert warnings[0].exc_info is None
    assert "retry 1 of 2" in warnings[0].getMessage()


async def test_corrupted_chunk_marked_retryable_is_retried() -> None:
    """``malformed_stream`` is retried when the classifier marked it transient."""
    loop_agent, provider = agent(
        [
            raise_error(ProviderError("p", code="malformed_stream", retryable=True)),
            text("ok"),
        ]
    )
    assert code_of(await run(loop_agent)) is None
    assert len(provider.requests) == 2


@pytest.mark.parametrize("code", ["bad_request", "authentication", "malformed_stream"])
async def test_permanent_failure_is_not_retried(code: str) -> None:
    """The request's own fault ends the run at once with its code."""
    loop_agent, provider = agent([fail(code), text("never")])
    assert code_of(await run(loop_agent)) == code
    assert len(provider.requests) == 1


async def test_failure_after_output_is_not_retried() -> None:
    """Once text was streamed the failure ends the run; the text stays, closed (ER-01)."""
    loop_agent, provider = agent([turn(text("Partial"), fail()), text("never")])
    events = await run(loop_agent)
    assert code_of(events) == "upstream_unavailable"
    assert of_type(events, "TEXT_MESSAGE_END")
    assert len(provider.requests) == 1


async def test_retries_are_bounded_by_model_retries() -> None:
    """1 + model_retries attempts, then the last failure's code."""
    loop_agent, provider = agent(
        [fail(), fail(), fail(), text("late")], model_retries=2
    )
    assert code_of(await run(loop_agent)) == "upstream_unavailable"
    assert len(provider.requests) == 3


async def test_model_retries_zero_never_retries() -> None:
    loop_agent, provider = agent([fail(), text("never")], model_retries=0)
    assert code_of(await run(loop_agent)) == "upstream_unavailable"
    assert len(provider.requests) == 1


async def test_retry_after_is_waited_for() -> None:
    """The upstream's ``Retry-After`` is the wait before the next attempt."""
    loop_agent, provider = agent([fail("rate_limited", retry_after=0.3), text("ok")])
    started = asyncio.get_running_loop().time()
    assert code_of(await run(loop_agent)) is None
    assert asyncio.get_running_loop().time() - started >= 0.3
    assert len(provider.requests) == 2


async def test_retry_after_beyond_the_cap_ends_the_run() -> None:
    """A ``Retry-After`` longer than ``retry_max_delay`` is not waited for."""
    loop_agent, provider = agent(
        [fail("rate_limited", retry_after=60), text("never")], retry_max_delay=5
    )
    assert code_of(await run(loop_agent)) == "rate_limited"
    assert len(provider.requests) == 1


async def test_a_wait_past_the_deadline_is_not_started() -> None:
    """A retry that would end after the run's deadline is not attempted (LP-06)."""
    loop_agent, provider = agent(
        [fail("rate_limited", retry_after=2), text("never")], deadline_seconds=1
    )
    assert code_of(await run(loop_agent)) == "rate_limited"
    assert len(provider.requests) == 1


async def test_cancel_during_the_wait_ends_cancelled() -> None:
    """Cancelling while the loop waits to retry ends the run with the cancelled outcome."""
    loop_agent, provider = agent([fail("rate_limited", retry_after=5), text("never")])
    cancel = asyncio.Event()
    asyncio.get_running_loop().call_later(0.1, cancel.set)
    events = await asyncio.wait_for(
        collect(loop_agent, make_input("hi"), cancel=cancel), timeout=3
    )
    assert_valid_stream(events)
    assert of_type(events, "RUN_FINISHED")
    assert len(provider.requests) == 1


def test_retry_settings_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match="model_retries"):
        agent([], model_retries=-1)
    with pytest.raises(ValueError, match="retry_backoff"):
        agent([], retry_backoff=-1)
