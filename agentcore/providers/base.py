"""The provider interface: one model turn in, a provider-neutral event stream out.

Every adapter (``openai_chat``, ``openai_responses``, ``anthropic``, ``gemini``,
``scripted``) implements :class:`Provider`. The agent loop (``agentcore.loop``) turns
the :data:`ModelEvent` stream into AG-UI events; adapters never build AG-UI events.

Adapters are responsible for:

- translating the canonical AG-UI history (:class:`ModelRequest.messages`) into their
  API's wire format without mixing formats (LP-10);
- merging streamed tool-call deltas into calls keyed by a stable ``call_id``
  (index, item id or block index, whatever the API uses), so that
  :class:`ToolCallDelta` events for one ``call_id`` join into that call's argument
  text;
- mapping the API's stop reason onto :data:`StopReason` (LP-09).

``call_id`` values are whatever the provider gave (or, when it gave none, ids the
adapter generated); the loop maps them to thread-unique ``toolCallId`` values.

Client options every network adapter accepts (also settable from
``COUNTERSIGN_AGENTS[...]["options"]``): ``timeout`` (seconds) bounds connecting and
each wait for more of the stream, so a stalled stream fails as ``timeout``;
``max_retries`` lets the SDK itself retry a failed request before streaming starts
(default 0: retries live in one place for every provider, the agent loop, which
honours ``Retry-After``; see ``LoopAgent(model_retries=...)``); ``headers`` are sent
with every request (e.g. a gateway's routing header). Transport failures are
classified once, in :mod:`agentcore.providers.errors`.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Final, Literal

StopReason = Literal["end_turn", "tool_use", "max_tokens", "content_filter", "error"]


def repeated_call_text(accumulated: str, text: str) -> str:
    """Return what a repeated copy of a streamed call adds to its argument ``text``.

    A provider may send one call twice in a turn (the same call id in two
    chunks, blocks or items: Gemini, OpenAI-compatible servers, proxies). It is
    one call: once the arguments ``accumulated`` so far are a complete JSON
    value, the copy's text is a repetition and adds ``""``; before that it
    continues them. Implements TC-01, BC34 (one call, one execution).
    """
    if not accumulated.strip():
        return text
    try:
        json.loads(accumulated)
    except ValueError:
        return text
    return ""


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as offered to the model: name, description and JSON Schema parameters.

    ``parameters`` is sent unchanged (RT-01 passthrough); ``strict`` asks providers
    that support it for schema-constrained decoding.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    strict: bool = False


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """One model turn: the model id, the system prompt, the canonical history and tools.

    ``messages`` are AG-UI message models (``ag_ui.core`` ``UserMessage``,
    ``AssistantMessage`` with ``tool_calls``, ``ToolMessage`` with ``error``, ...), in
    thread order. ``max_output_tokens`` is ``None`` for the provider's default.
    """

    model: str
    messages: list[Any]
    tools: list[ToolSpec] = field(default_factory=list)
    system_prompt: str = ""
    max_output_tokens: int | None = None
    temperature: float | None = None


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A fragment of the assistant's text for this turn."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolCallBegin:
    """The model started a tool call ``call_id`` naming tool ``name``."""

    call_id: str
    name: str
    metadata: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """A fragment of call ``call_id``'s argument text (may be ``""``)."""

    call_id: str
    delta: str


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage for one turn, as the provider reported it (``None`` = not reported)."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class TurnEnd:
    """The turn ended with ``stop_reason``; ``usage`` when the provider reported it."""

    stop_reason: StopReason
    usage: Usage | None = None
    provider: str = ""
    model: str = ""


ModelEvent = TextDelta | ToolCallBegin | ToolCallDelta | TurnEnd

#: Codes of transient upstream failures: worth another attempt (see ``agentcore.loop``).
RETRYABLE_CODES: Final = frozenset({"upstream_unavailable", "rate_limited", "timeout"})


class ProviderError(Exception):
    """The provider failed (HTTP error, malformed stream, refused request).

    ``code`` is a stable, sanitized error type (``upstream_unavailable``,
    ``rate_limited``, ``timeout``, ``bad_request``, ``authentication``,
    ``malformed_stream``, ``model_requests_disabled``); ``str(error)`` is a sentence
    safe to show a user: no key, no internal address. ``retryable`` says a later
    attempt may succeed (by default: the code is in :data:`RETRYABLE_CODES`);
    ``retry_after`` is the wait in seconds the upstream asked for, when it did.
    """

    def __init__(
        self,
        message: str,
        *,
        code: str = "upstream_unavailable",
        retryable: bool | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.retryable = code in RETRYABLE_CODES if retryable is None else retryable
        self.retry_after = retry_after


class Provider(ABC):
    """A model adapter. Subclasses implement :meth:`stream_turn`."""

    #: Stable adapter name as used in ``COUNTERSIGN_AGENTS`` (``"openai_chat"``...).
    name: str = ""

    @abstractmethod
    def stream_turn(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream one model turn as :data:`ModelEvent` values, ending with one :class:`TurnEnd`.

        Every :class:`ToolCallBegin` precedes that call's :class:`ToolCallDelta` events.
        Raises :class:`ProviderError` on a provider failure; events already yielded
        stay valid.
        """
        raise NotImplementedError(f"{type(self).__name__}.stream_turn")

    async def aclose(self) -> None:  # noqa: B027 (optional hook, no-op by default)
        """Release the adapter's HTTP client; the adapter is not used afterwards.

        Call it from the event loop the adapter streamed on, before that loop closes,
        so no connection is left for the garbage collector to close on a dead loop.
        Raises nothing.
        """
