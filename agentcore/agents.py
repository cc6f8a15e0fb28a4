"""The agent interface the worker runs: one :class:`RunAgentInput` in, AG-UI events out.

Two implementations exist: :class:`agentcore.loop.LoopAgent` (the built-in loop over a
model provider) and :class:`agentcore.providers.agui_http.RemoteAgent` (a remote AG-UI
agent reached over HTTP). Whichever runs, the stream has the same shape: it starts
with ``RUN_STARTED`` (``protocolVersion`` ``"1.0"``, ``threadId``/``runId`` echoing the
input) and ends with exactly one ``RUN_FINISHED`` or ``RUN_ERROR``, with every message
and tool call it opened closed first (ER-01).

The helpers below build the run-boundary events the same way for every agent.
"""

from __future__ import annotations

import asyncio
import os
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Iterable
from typing import TYPE_CHECKING, Final

from agentcore import events as agui

if TYPE_CHECKING:
    from agentcore.events import (
        BaseEvent,
        RunAgentInput,
        RunErrorEvent,
        RunFinishedEvent,
        RunStartedEvent,
        TokenUsage,
    )

__all__ = [
    "TERMINAL_EVENT_TYPES",
    "Agent",
    "new_id",
    "run_cancelled",
    "run_error",
    "run_finished",
    "run_started",
]

#: ``type`` values of the events that end a run.
TERMINAL_EVENT_TYPES: Final = frozenset({"RUN_FINISHED", "RUN_ERROR"})


class Agent(ABC):
    """An AG-UI producer: runs one :class:`RunAgentInput` and yields its events.

    Subclasses implement :meth:`run` as an async generator.
    """

    @abstractmethod
    def run(
        self, run_input: RunAgentInput, *, cancel: asyncio.Event | None = None
    ) -> AsyncIterator[BaseEvent]:
        """Yield the AG-UI events of one run of ``run_input``.

        The first event is ``RUN_STARTED`` (``protocolVersion="1.0"``, the input's
        ``threadId`` and ``runId``, ``input`` = the run input); the last is exactly one
        ``RUN_FINISHED`` or ``RUN_ERROR``, and nothing opened is left open. Setting
        ``cancel`` ends the run promptly with the cancelled outcome. Failures are
        reported as ``RUN_ERROR`` events, never raised. Implements ER-01.
        """
        raise NotImplementedError(f"{type(self).__name__}.run")


def new_id(prefix: str = "") -> str:
    """Return a fresh opaque id (``prefix`` + a UUID4 hex), unique within any thread.

    The hex is ``uuid.uuid4().hex``'s (version and variant bits set), spelled from
    the random bytes directly: a ``UUID`` object per id cost ~4x as much (B3).
    """
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 4122 variant
    return f"{prefix}{raw.hex()}"


def run_started(run_input: RunAgentInput) -> RunStartedEvent:
    """Return the ``RUN_STARTED`` event for ``run_input``: its ids, version "1.0", input echo."""
    return agui.RunStartedEvent(
        thread_id=run_input.thread_id,
        run_id=run_input.run_id,
        protocol_version=agui.PROTOCOL_VERSION,
        parent_run_id=run_input.parent_run_id,
        input=run_input,
    )


def run_finished(
    run_input: RunAgentInput,
    *,
    pending_tool_call_ids: Iterable[str] = (),
    usage: list[TokenUsage] | None = None,
) -> RunFinishedEvent:
    """Return a success ``RUN_FINISHED`` for ``run_input``.

    ``pending_tool_call_ids`` (creation order) is sent only when non-empty, as the
    success outcome's ``pendingToolCallIds``. Implements FT-03, FT-04, FT-08.
    """
    pending = list(pending_tool_call_ids)
    return agui.RunFinishedEvent(
        thread_id=run_input.thread_id,
        run_id=run_input.run_id,
        outcome=agui.RunFinishedSuccessOutcome(pending_tool_call_ids=pending or None),
        usage=usage or None,
    )


def run_cancelled(
    run_input: RunAgentInput, *, usage: list[TokenUsage] | None = None
) -> RunFinishedEvent:
    """Return the ``RUN_FINISHED`` event with the ``{"type": "cancelled"}`` outcome."""
    return agui.RunFinishedEvent(
        thread_id=run_input.thread_id,
        run_id=run_input.run_id,
        outcome=agui.RunFinishedCancelledOutcome(),
        usage=usage or None,
    )


def run_error(
    message: str, *, code: str, usage: list[TokenUsage] | None = None
) -> RunErrorEvent:
    """Return a ``RUN_ERROR`` with a stable ``code`` and a sentence safe to show a user."""
    return agui.RunErrorEvent(message=message, code=code, usage=usage or None)
