"""OpenAI Responses adapter, through ``openai.AsyncOpenAI().responses`` with streaming.

Request: function tools in ``tools`` (``strict`` always sent, since the API otherwise
defaults it on), history as input items: messages, ``function_call`` items (with
``call_id``; argument text that is not a JSON object replayed as ``"{}"``, see
:mod:`agentcore.history`) and ``function_call_output`` items (LP-10). Outputs are a
string, or ``input_text`` / ``input_image`` items when a result has an image; other
parts are dropped with a warning (TC-14). ``store`` is off by default: the full
history is sent each turn and function-call item ids (``fc_…``) are not replayed.

Streaming: ``response.output_item.added`` opens a call; the call's id is the
``call_id``; ``response.function_call_arguments.delta`` is routed by ``item_id``
(then ``output_index``) to that call (BC05); ``response.completed`` and
``response.incomplete`` end the turn with usage (LP-09).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Final

import openai

from agentcore.events import (
    AssistantMessage,
    DeveloperMessage,
    SystemMessage,
    ToolMessage,
    UserMessage,
)
from agentcore.history import prepare_history, replay_arguments_text, unique_call_id
from agentcore.providers.base import (
    ModelEvent,
    ModelRequest,
    Provider,
    ProviderError,
    StopReason,
    TextDelta,
    ToolCallBegin,
    ToolCallDelta,
    TurnEnd,
    Usage,
    repeated_call_text,
)
from agentcore.providers.errors import sanitized_errors
from agentcore.providers.registry import check_model_request_allowed

__all__ = ["OpenAIResponsesProvider"]

logger = logging.getLogger(__name__)

_ERROR_CODES: Final[dict[str, str]] = {
    "rate_limit_exceeded": "rate_limited",
    "server_error": "upstream_unavailable",
    "invalid_prompt": "bad_request",
    "invalid_request_error": "bad_request",
}


@dataclass(slots=True)
class _Call:
    call_id: str
    item_id: str | None
    arguments: str = ""
    got_delta: bool = False


def _image_url(part: Any) -> str | None:
    source = part.source
    if source.type == "data":
        return f"data:{source.mime_type};base64,{source.value}"
    if source.type == "url":
        return str(source.value)
    return None


class OpenAIResponsesProvider(Provider):
    """Stream one Responses turn. ``store`` is passed through (default ``False``)."""

    name = "openai_responses"

    def __init__(
        self,
        *,
        model: str,
        api_key: str,
        base_url: str | None = None,
        store: bool = False,
        parallel_tool_calls: bool | None = None,
        max_retries: int = 0,
        timeout: float = 120.0,
        headers: dict[str, str] | None = None,
    ) -> None:
        """Configure the client; see :mod:`agentcore.providers.base` (client options)."""
        self.model = model
        self.base_url = base_url
        self.store = store
        self.parallel_tool_calls = parallel_tool_calls
        self._client = openai.AsyncOpenAI(
            api_key=api_key,
            base_url=base_url,
            max_retries=max_retries,
            timeout=timeout,
            default_headers=headers,
        )

    async def aclose(self) -> None:
        """Close the SDK client (see :meth:`Provider.aclose`). Raises nothing."""
        await self._client.close()

    # -- request -------------------------------------------------------------

    def build_request(self, request: ModelRequest) -> dict[str, Any]:
        """Return the Responses request body for ``request`` (without ``stream``).

        Raises nothing. Implements LP-10, FT-06 and TC-14 for Responses.
        """
        items: list[dict[str, Any]] = []
        for message in prepare_history(request.messages):
            if isinstance(message, SystemMessage):
                items.append({"role": "system", "content": message.content})
            elif isinstance(message, DeveloperMessage):
                items.append({"role": "developer", "content": message.content})
            elif isinstance(message, UserMessage):
                items.append({"role": "user", "content": self._user_content(message)})
            elif isinstance(message, AssistantMessage):
                if message.content:
                    items.append({"role": "assistant", "content": message.content})
                for call in message.tool_calls or ():
                    items.append(
                        {
                            "type": "function_call",
                            "call_id": call.id,
                            "name": call.function.name,
                            "arguments": replay_arguments_text(call.function.arguments),
                        }
                    )
            elif isinstance(message, ToolMessage):
                items.append(
                    {
                        "type": "function_call_output",
                        "call_id": message.tool_call_id,
                        "output": self._output(message),
                    }
                )
        body: dict[str, Any] = {
            "model": request.model or self.model,
            "input": items,
            "store": self.store,
        }
        if request.system_prompt:
            body["instructions"] = request.system_prompt
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "name": spec.name,
                    "description": spec.description,
                    "parameters": spec.parameters,
                    "strict": spec.strict,
                }
                for spec in request.tools
            ]
            if self.parallel_tool_calls is not None:
                body["parallel_tool_calls"] = self.parallel_tool_calls
        if request.max_output_tokens is not None:
            body["max_output_tokens"] = request.max_output_tokens
        if request.temperature is not None:
            body["temperature"] = request.temperature
        return body

    @staticmethod
    def _user_content(message: UserMessage) -> str | list[dict[str, Any]]:
        if isinstance(message.content, str):
            return message.content
        parts: list[dict[str, Any]] = []
        for part in message.content:
            if part.type == "text":
                parts.append({"type": "input_text", "text": part.text})
                continue
            url = _image_url(part) if part.type == "image" else None
            if url is None:
                logger.warning(
                    "dropping %s part from user message %r: not accepted by "
                    "OpenAI Responses (TC-14)",
                    part.type,
                    message.id,
                )
                continue
            parts.append({"type": "input_image", "image_url": url})
        return parts

    @staticmethod
    def _output(message: ToolMessage) -> str | list[dict[str, Any]]:
        if isinstance(message.content, str):
            text: str | list[dict[str, Any]] = message.content
        else:
            parts: list[dict[str, Any]] = []
            for part in message.content:
                url = _image_url(part) if part.type == "image" else None
                if part.type == "text":
                    parts.append({"type": "input_text", "text": part.text})
                elif url is not None:
                    parts.append({"type": "input_image", "image_url": url})
                else:
                    logger.warning(
                        "dropping %s part from tool result %r: not accepted by "
                        "OpenAI Responses (TC-14)",
                        part.type,
                        message.tool_call_id,
                    )
            if all(p["type"] == "input_text" for p in parts):
                text = "".join(p["text"] for p in parts)
            else:
                text = parts
        if not text and message.error:
            text = json.dumps({"error": message.error}, separators=(",", ":"))
        return text

    # -- streaming -----------------------------------------------------------

    async def stream_turn(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream one turn: TextDelta / ToolCallBegin / ToolCallDelta, then one TurnEnd.

        Raises :class:`ProviderError` with a sanitized code on HTTP errors,
        ``error`` / ``response.failed`` events, and streams that end without a
        terminal event. Implements LP-09 and BC05 for Responses.
        """
        check_model_request_allowed(self.base_url, provider=self.name)
        body = self.build_request(request)
        seen: set[str] = {
            call.id
            for m in request.messages
            if isinstance(m, AssistantMessage)
            for call in m.tool_calls or ()
        }
        by_item: dict[str, _Call] = {}
        by_call_id: dict[str, _Call] = {}
        by_index: dict[int, _Call] = {}
        calls: list[_Call] = []
        final: TurnEnd | None = None
        with sanitized_errors(self.name):
            stream = await self._client.responses.create(**body, stream=True)
            async for event in stream:
                kind = getattr(event, "type", None)
                if kind == "response.output_text.delta":
                    if event.delta:
                        yield TextDelta(text=event.delta)
                elif kind in (
                    "response.output_item.added",
                    "response.output_item.done",
                ):
                    item = event.item
                    if getattr(item, "type", None) != "function_call":
                        continue
                    item_id = getattr(item, "id", None)
                    call = by_item.get(item_id or "") or by_index.get(
                        event.output_index
                    )
                    repeated = by_call_id.get(getattr(item, "call_id", None) or "")
                    if call is None and repeated is not None:
                        # The same call_id in a second item: one call, whose
                        # deltas may arrive under either item.
                        call = repeated
                        by_index[event.output_index] = call
                        if item_id:
                            by_item[item_id] = call
                    if call is None:
                        call = _Call(
                            call_id=unique_call_id(
                                getattr(item, "call_id", None), seen=seen
                            ),
                            item_id=item_id,
                        )
                        calls.append(call)
                        if getattr(item, "call_id", None):
                            by_call_id[item.call_id] = call
                        by_index[event.output_index] = call
                        if item_id:
                            by_item[item_id] = call
                        yield ToolCallBegin(
                            call_id=call.call_id,
                            name=item.name,
                            metadata={"openai_responses": {"item_id": item_id}}
                            if item_id
                            else None,
                        )
                    whole = getattr(item, "arguments", None) or ""
                    if (
                        kind == "response.output_item.done"
                        and not call.got_delta
                        and whole
                    ):
                        call.got_delta = True
                        call.arguments = whole
                        yield ToolCallDelta(call_id=call.call_id, delta=whole)
                elif kind in (
                    "response.function_call_arguments.delta",
                    "response.function_call_arguments.done",
                ):
                    call = by_item.get(
                        getattr(event, "item_id", None) or ""
                    ) or by_index.get(getattr(event, "output_index", -1))
                    if call is None:
                        raise ProviderError(
                            f"{self.name}: arguments for a function call never opened",
                            code="malformed_stream",
                        )
                    if kind.endswith(".delta"):
                        call.got_delta = True
                        part = repeated_call_text(call.arguments, event.delta)
                        if part:
                            call.arguments += part
                            yield ToolCallDelta(call_id=call.call_id, delta=part)
                    elif not call.got_delta and event.arguments:
                        call.got_delta = True
                        call.arguments = event.arguments
                        yield ToolCallDelta(call_id=call.call_id, delta=event.arguments)
                elif kind in ("response.completed", "response.incomplete"):
                    final = self._turn_end(event.response, calls, body["model"])
                elif kind == "response.failed":
                    error = getattr(event.response, "error", None)
                    raise self._event_error(getattr(error, "code", None))
                elif kind == "error":
                    raise self._event_error(getattr(event, "code", None))
        if final is None:
            raise ProviderError(
                f"{self.name}: the stream ended before response.completed",
                code="malformed_stream",
            )
        yield final

    def _event_error(self, code: str | None) -> ProviderError:
        mapped = _ERROR_CODES.get(code or "", "upstream_unavailable")
        return ProviderError(f"{self.name}: the stream failed ({mapped})", code=mapped)

    def _turn_end(self, response: Any, calls: list[_Call], model: str) -> TurnEnd:
        """Map a terminal response onto TurnEnd. Implements LP-09."""
        stop: StopReason
        if getattr(response, "status", None) == "incomplete":
            details = getattr(response, "incomplete_details", None)
            reason = getattr(details, "reason", None)
            stop = "content_filter" if reason == "content_filter" else "max_tokens"
        elif calls:
            stop = "tool_use"
        else:
            stop = "end_turn"
        usage = getattr(response, "usage", None)
        return TurnEnd(
            stop_reason=stop,
            usage=Usage(
                input_tokens=getattr(usage, "input_tokens", None),
                output_tokens=getattr(usage, "output_tokens", None),
                total_tokens=getattr(usage, "total_tokens", None),
            )
            if usage is not None
            else None,
            provider=self.name,
            model=model,
        )
