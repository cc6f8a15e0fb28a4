"""Anthropic Messages adapter, through ``anthropic.AsyncAnthropic`` with streaming.

Request: ``tools`` with ``input_schema``; assistant calls as ``tool_use`` blocks whose
``input`` is an object (argument text that is not a JSON object is sent as ``{}``,
see :mod:`agentcore.history`); results as ``tool_result`` blocks, all results of one
assistant turn first in the single user message that follows it, then that user
turn's own text and images (BC22); ``is_error`` when the tool message has ``error``;
image parts as image blocks, other parts dropped with a warning (TC-14). System and
developer messages go to the top-level ``system`` (LP-10).

Streaming: ``content_block_start`` (``tool_use``) opens a call keyed by block index,
``input_json_delta`` (possibly empty ``partial_json``) appends, ``content_block_stop``
closes; ``message_delta.stop_reason`` maps onto LP-09.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Final

import anthropic

from agentcore.events import (
    AssistantMessage,
    DeveloperMessage,
    SystemMessage,
    ToolMessage,
    UserMessage,
)
from agentcore.history import prepare_history, replay_arguments, unique_call_id
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

__all__ = ["AnthropicProvider"]

logger = logging.getLogger(__name__)

_ID_RE: Final = re.compile(r"^[A-Za-z0-9_-]+$")
_STOP: Final[dict[str, StopReason]] = {
    "tool_use": "tool_use",
    "end_turn": "end_turn",
    "stop_sequence": "end_turn",
    "pause_turn": "end_turn",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",
    "refusal": "content_filter",
}


@dataclass(slots=True)
class _Block:
    call_id: str
    arguments: str = ""
    start_input: Any = None
    got_delta: bool = False


def _media_block(part: Any, message_id: str) -> dict[str, Any] | None:
    """Return an image/document block for ``part`` or ``None`` (dropped, logged; TC-14)."""
    source = part.source
    if part.type in ("image", "document") and source.type in ("data", "url"):
        if source.type == "data":
            src: dict[str, Any] = {
                "type": "base64",
                "media_type": source.mime_type,
                "data": source.value,
            }
        else:
            src = {"type": "url", "url": source.value}
        if part.type == "image" or (
            source.type == "url" or source.mime_type == "application/pdf"
        ):
            return {"type": part.type, "source": src}
    logger.warning(
        "dropping %s part (%s source) from message %r: not accepted by "
        "Anthropic Messages (TC-14)",
        part.type,
        source.type,
        message_id,
    )
    return None


class AnthropicProvider(Provider):
    """Stream one Messages turn. ``default_max_tokens`` is sent when the request has no cap."""

    name = "anthropic"

    def __init__(
        self,
        *,
        model: str,
        api_key: str,
        base_url: str | None = None,
        default_max_tokens: int = 4096,
        max_retries: int = 0,
        timeout: float = 120.0,
        headers: dict[str, str] | None = None,
    ) -> None:
        """Configure the client; see :mod:`agentcore.providers.base` (client options)."""
        self.model = model
        self.base_url = base_url
        self.default_max_tokens = default_max_tokens
        self._client = anthropic.AsyncAnthropic(
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
        """Return the Messages request body for ``request`` (without ``stream``).

        Consecutive turns of one role are merged (the API alternates roles); tool
        results lead the user turn after their assistant turn, in call order.
        Raises nothing. Implements LP-10, FT-06, TC-14 and BC22 for Anthropic.
        """
        messages = prepare_history(request.messages)
        ids = _IdMap()
        system: list[str] = [request.system_prompt] if request.system_prompt else []
        turns: list[dict[str, Any]] = []

        def add(
            role: str, blocks: list[dict[str, Any]], *, results: bool = False
        ) -> None:
            if not blocks:
                return
            if turns and turns[-1]["role"] == role:
                if results:
                    # tool_result blocks always lead the user turn (BC22)
                    lead = [
                        b for b in turns[-1]["content"] if b["type"] == "tool_result"
                    ]
                    rest = [
                        b for b in turns[-1]["content"] if b["type"] != "tool_result"
                    ]
                    turns[-1]["content"] = lead + blocks + rest
                else:
                    turns[-1]["content"].extend(blocks)
            else:
                turns.append({"role": role, "content": list(blocks)})

        for message in messages:
            if isinstance(message, SystemMessage | DeveloperMessage):
                if message.content:
                    system.append(message.content)
            elif isinstance(message, UserMessage):
                add("user", self._user_blocks(message))
            elif isinstance(message, AssistantMessage):
                blocks: list[dict[str, Any]] = []
                if message.content:
                    blocks.append({"type": "text", "text": message.content})
                for call in message.tool_calls or ():
                    blocks.append(
                        {
                            "type": "tool_use",
                            "id": ids.get(call.id),
                            "name": call.function.name,
                            "input": replay_arguments(call.function.arguments),
                        }
                    )
                add("assistant", blocks)
            elif isinstance(message, ToolMessage):
                add("user", [self._tool_result(message, ids)], results=True)

        body: dict[str, Any] = {
            "model": request.model or self.model,
            "max_tokens": request.max_output_tokens or self.default_max_tokens,
            "messages": turns,
        }
        if system:
            body["system"] = "\n\n".join(system)
        if request.tools:
            body["tools"] = [
                {
                    "name": spec.name,
                    "description": spec.description,
                    "input_schema": spec.parameters,
                }
                for spec in request.tools
            ]
        if request.temperature is not None:
            body["temperature"] = request.temperature
        return body

    @staticmethod
    def _user_blocks(message: UserMessage) -> list[dict[str, Any]]:
        if isinstance(message.content, str):
            return (
                [{"type": "text", "text": message.content}] if message.content else []
            )
        blocks: list[dict[str, Any]] = []
        for part in message.content:
            if part.type == "text":
                if part.text:
                    blocks.append({"type": "text", "text": part.text})
            else:
                block = _media_block(part, message.id)
                if block is not None:
                    blocks.append(block)
        return blocks

    @staticmethod
    def _tool_result(message: ToolMessage, ids: _IdMap) -> dict[str, Any]:
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": ids.get(message.tool_call_id),
        }
        if isinstance(message.content, str):
            content: str | list[dict[str, Any]] = message.content
        else:
            parts: list[dict[str, Any]] = []
            for part in message.content:
                if part.type == "text":
                    if part.text:
                        parts.append({"type": "text", "text": part.text})
                elif part.type == "image":
                    media = _media_block(part, message.id)
                    if media is not None:
                        parts.append(media)
                else:
                    logger.warning(
                        "dropping %s part from tool result %r: not accepted by "
                        "Anthropic tool_result (TC-14)",
                        part.type,
                        message.tool_call_id,
                    )
            content = parts
        if not content and message.error:
            content = json.dumps({"error": message.error}, separators=(",", ":"))
        if content:
            block["content"] = content
        if message.error:
            block["is_error"] = True
        return block

    # -- streaming -----------------------------------------------------------

    async def stream_turn(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream one turn: TextDelta / ToolCallBegin / ToolCallDelta, then one TurnEnd.

        Raises :class:`ProviderError` with a sanitized code on HTTP errors, ``error``
        events in the stream, and streams that end without a stop reason.
        Implements LP-09 for Anthropic.
        """
        check_model_request_allowed(self.base_url, provider=self.name)
        body = self.build_request(request)
        seen: set[str] = {
            call.id
            for m in request.messages
            if isinstance(m, AssistantMessage)
            for call in m.tool_calls or ()
        }
        blocks: dict[int, _Block] = {}
        by_id: dict[str, _Block] = {}
        stop: str | None = None
        input_tokens: int | None = None
        output_tokens: int | None = None
        with sanitized_errors(self.name):
            stream = await self._client.messages.create(**body, stream=True)
            async for event in stream:
                kind = getattr(event, "type", None)
                if kind == "message_start":
                    usage = getattr(getattr(event, "message", None), "usage", None)
                    input_tokens = getattr(usage, "input_tokens", None)
                    output_tokens = getattr(usage, "output_tokens", None)
                elif kind == "content_block_start":
                    block = event.content_block
                    if getattr(block, "type", None) == "tool_use":
                        given = getattr(block, "id", None)
                        earlier = by_id.get(given or "")
                        if earlier is not None:
                            # The same tool_use id in a second block: one call.
                            blocks[event.index] = earlier
                            continue
                        call_id = unique_call_id(given, seen=seen)
                        blocks[event.index] = _Block(
                            call_id=call_id, start_input=getattr(block, "input", None)
                        )
                        if given:
                            by_id[given] = blocks[event.index]
                        yield ToolCallBegin(call_id=call_id, name=block.name)
                    elif getattr(block, "type", None) == "text" and getattr(
                        block, "text", ""
                    ):
                        yield TextDelta(text=block.text)
                elif kind == "content_block_delta":
                    delta = event.delta
                    dtype = getattr(delta, "type", None)
                    if dtype == "text_delta" and delta.text:
                        yield TextDelta(text=delta.text)
                    elif dtype == "input_json_delta":
                        open_block = blocks.get(event.index)
                        if open_block is None:
                            raise ProviderError(
                                f"{self.name}: input_json_delta for a block never opened",
                                code="malformed_stream",
                            )
                        part = repeated_call_text(
                            open_block.arguments,
                            getattr(delta, "partial_json", "") or "",
                        )
                        open_block.got_delta = True
                        if part:
                            open_block.arguments += part
                            yield ToolCallDelta(call_id=open_block.call_id, delta=part)
                elif kind == "content_block_stop":
                    closed = blocks.get(event.index)
                    if (
                        closed is not None
                        and not closed.got_delta
                        and closed.start_input
                    ):
                        # a proxy that sends the whole input at block start
                        text = json.dumps(closed.start_input, separators=(",", ":"))
                        closed.arguments = text
                        closed.got_delta = True
                        yield ToolCallDelta(call_id=closed.call_id, delta=text)
                elif kind == "message_delta":
                    stop = getattr(event.delta, "stop_reason", None) or stop
                    usage = getattr(event, "usage", None)
                    reported_out = getattr(usage, "output_tokens", None)
                    if reported_out is not None:
                        output_tokens = reported_out
                    reported_in = getattr(usage, "input_tokens", None)
                    if reported_in is not None:
                        input_tokens = reported_in

        if stop is None:
            if any(not _is_json(b.arguments) for b in blocks.values()):
                stop_reason: StopReason = "max_tokens"
            else:
                raise ProviderError(
                    f"{self.name}: the stream ended without a stop reason",
                    code="malformed_stream",
                )
        else:
            stop_reason = _STOP.get(stop, "end_turn")
            if blocks and stop_reason == "end_turn":
                stop_reason = "tool_use"
        total = (
            input_tokens + output_tokens
            if input_tokens is not None and output_tokens is not None
            else None
        )
        yield TurnEnd(
            stop_reason=stop_reason,
            usage=Usage(
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                total_tokens=total,
            ),
            provider=self.name,
            model=body["model"],
        )


class _IdMap:
    """Map call ids onto Anthropic's ``^[A-Za-z0-9_-]+$`` ids, stable and collision-free."""

    def __init__(self) -> None:
        self._map: dict[str, str] = {}
        self._used: set[str] = set()

    def get(self, call_id: str) -> str:
        if call_id in self._map:
            return self._map[call_id]
        mapped = (
            call_id
            if _ID_RE.match(call_id)
            else re.sub(r"[^A-Za-z0-9_-]", "_", call_id)
        )
        mapped = mapped or "call"
        base, n = mapped, 2
        while mapped in self._used:
            mapped = f"{base}_{n}"
            n += 1
        self._map[call_id] = mapped
        self._used.add(mapped)
        return mapped


def _is_json(text: str) -> bool:
    if not text.strip():
        return True
    try:
        json.loads(text)
    except ValueError:
        return False
    return True
