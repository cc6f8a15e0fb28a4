"""OpenAI Chat Completions adapter (and OpenAI-compatible servers: vLLM, Ollama, LiteLLM).

Request: ``tools[].function`` (``strict`` when set), assistant ``tool_calls`` with
string ``arguments``, results as ``role: "tool"`` + ``tool_call_id`` (LP-10).
Argument text that is not a JSON object is replayed as ``"{}"`` (see
:mod:`agentcore.history`). Tool messages take text only: text parts are joined,
other parts dropped with a warning, ``""`` when all were dropped (TC-14).

Streaming: ``tool_calls`` deltas are merged per ``(choice index, tool_calls[].index)``
(BC01); indexes are keys, not positions (BC03); a delta at an open index carrying a
new id or a new name starts a new call (BC02); ids may come once or in every chunk;
object-valued ``arguments`` are serialized to JSON text (BC08). Stop reasons follow
LP-09, with truncation detected from usage as well as ``finish_reason`` (BC11).

Over 400 lines because it holds the request builder and the stream parser of one
wire format, kept together as every adapter is.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal

import openai

from agentcore.events import (
    AssistantMessage,
    DeveloperMessage,
    SystemMessage,
    ToolMessage,
    UserMessage,
)
from agentcore.history import (
    map_mistral_ids,
    prepare_history,
    replay_arguments_text,
    unique_call_id,
)
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

__all__ = ["IdStyle", "OpenAIChatProvider"]

logger = logging.getLogger(__name__)

IdStyle = Literal["provider", "mistral9"]

_LABEL = "OpenAI Chat Completions"


@dataclass(slots=True)
class _OpenCall:
    """A streamed call being merged: provider id, our id, name and buffered args."""

    provider_id: str | None
    call_id: str
    name: str = ""
    arguments: str = ""
    begun: bool = False
    pending: list[str] = field(default_factory=list)


def _part_field(part: Any, name: str) -> Any:
    return getattr(part, name, None)


def _data_url(source: Any) -> str | None:
    kind = _part_field(source, "type")
    if kind == "data":
        return f"data:{source.mime_type};base64,{source.value}"
    if kind == "url":
        return str(source.value)
    return None


class OpenAIChatProvider(Provider):
    """Stream one Chat Completions turn through ``openai.AsyncOpenAI``.

    ``id_style="mistral9"`` rewrites every tool-call id sent to the server into a
    deterministic, collision-free 9-character alphanumeric id (Mistral's rule);
    ``developer_role`` chooses how developer messages are sent; ``max_tokens_param``
    names the output cap parameter (``max_tokens`` for older compatible servers).
    """

    name = "openai_chat"

    def __init__(
        self,
        *,
        model: str,
        api_key: str,
        base_url: str | None = None,
        id_style: IdStyle = "provider",
        developer_role: Literal["developer", "system"] = "developer",
        max_tokens_param: Literal["max_completion_tokens", "max_tokens"] = (
            "max_completion_tokens"
        ),
        parallel_tool_calls: bool | None = None,
        max_retries: int = 0,
        timeout: float = 120.0,
        headers: dict[str, str] | None = None,
    ) -> None:
        """Configure the client; see :mod:`agentcore.providers.base` (client options)."""
        self.model = model
        self.base_url = base_url
        self.id_style: IdStyle = id_style
        self.developer_role = developer_role
        self.max_tokens_param = max_tokens_param
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
        """Return the Chat Completions request body for ``request`` (without ``stream``).

        History goes through :func:`prepare_history` first. Raises nothing.
        Implements LP-10, FT-06 and TC-14 for Chat Completions.
        """
        messages = prepare_history(request.messages)
        id_map: dict[str, str] = {}
        if self.id_style == "mistral9":
            ids = [
                call.id
                for m in messages
                if isinstance(m, AssistantMessage)
                for call in m.tool_calls or ()
            ]
            id_map = map_mistral_ids(ids)

        out: list[dict[str, Any]] = []
        if request.system_prompt:
            out.append({"role": "system", "content": request.system_prompt})
        for message in messages:
            if isinstance(message, SystemMessage):
                out.append({"role": "system", "content": message.content})
            elif isinstance(message, DeveloperMessage):
                out.append({"role": self.developer_role, "content": message.content})
            elif isinstance(message, UserMessage):
                out.append({"role": "user", "content": self._user_content(message)})
            elif isinstance(message, AssistantMessage):
                item: dict[str, Any] = {"role": "assistant"}
                calls = message.tool_calls or []
                item["content"] = (
                    message.content if message.content else (None if calls else "")
                )
                if calls:
                    item["tool_calls"] = [
                        {
                            "id": id_map.get(call.id, call.id),
                            "type": "function",
                            "function": {
                                "name": call.function.name,
                                "arguments": replay_arguments_text(
                                    call.function.arguments
                                ),
                            },
                        }
                        for call in calls
                    ]
                out.append(item)
            elif isinstance(message, ToolMessage):
                out.append(
                    {
                        "role": "tool",
                        "tool_call_id": id_map.get(
                            message.tool_call_id, message.tool_call_id
                        ),
                        "content": self._tool_content(message),
                    }
                )
            # activity and reasoning messages are not sent to the model

        body: dict[str, Any] = {
            "model": request.model or self.model,
            "messages": out,
            "stream_options": {"include_usage": True},
        }
        if request.tools:
            tools = []
            for spec in request.tools:
                function: dict[str, Any] = {
                    "name": spec.name,
                    "description": spec.description,
                    "parameters": spec.parameters,
                }
                if spec.strict:
                    function["strict"] = True
                tools.append({"type": "function", "function": function})
            body["tools"] = tools
            if self.parallel_tool_calls is not None:
                body["parallel_tool_calls"] = self.parallel_tool_calls
        if request.max_output_tokens is not None:
            body[self.max_tokens_param] = request.max_output_tokens
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
                parts.append({"type": "text", "text": part.text})
                continue
            url = _data_url(part.source) if part.type == "image" else None
            if url is None:
                logger.warning(
                    "dropping %s part from user message %r: not accepted by %s (TC-14)",
                    part.type,
                    message.id,
                    _LABEL,
                )
                continue
            parts.append({"type": "image_url", "image_url": {"url": url}})
        return parts

    @staticmethod
    def _tool_content(message: ToolMessage) -> str:
        if isinstance(message.content, str):
            text = message.content
        else:
            texts: list[str] = []
            for part in message.content:
                if part.type == "text":
                    texts.append(part.text)
                else:
                    logger.warning(
                        "dropping %s part from tool result %r: %s tool messages "
                        "take text only (TC-14)",
                        part.type,
                        message.tool_call_id,
                        _LABEL,
                    )
            text = "".join(texts)
        if not text and message.error:
            text = json.dumps({"error": message.error}, separators=(",", ":"))
        return text

    # -- streaming -----------------------------------------------------------

    async def stream_turn(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream one turn: TextDelta / ToolCallBegin / ToolCallDelta, then one TurnEnd.

        Raises :class:`ProviderError` with a sanitized code on HTTP errors, error
        events inside the stream and streams that end without a finish reason.
        Implements LP-09 (stop reasons), BC01, BC02, BC03, BC08 and BC11.
        """
        check_model_request_allowed(self.base_url, provider=self.name)
        body = self.build_request(request)
        seen: set[str] = {
            call.id
            for m in request.messages
            if isinstance(m, AssistantMessage)
            for call in m.tool_calls or ()
        }
        open_calls: dict[tuple[int, int], _OpenCall] = {}
        calls: list[_OpenCall] = []
        finish: str | None = None
        usage: Usage | None = None
        with sanitized_errors(self.name):
            stream = await self._client.chat.completions.create(**body, stream=True)
            async for chunk in stream:
                chunk_usage = getattr(chunk, "usage", None)
                if chunk_usage is not None:
                    usage = Usage(
                        input_tokens=getattr(chunk_usage, "prompt_tokens", None),
                        output_tokens=getattr(chunk_usage, "completion_tokens", None),
                        total_tokens=getattr(chunk_usage, "total_tokens", None),
                    )
                for choice in getattr(chunk, "choices", None) or ():
                    choice_index = getattr(choice, "index", 0) or 0
                    delta = getattr(choice, "delta", None)
                    content = getattr(delta, "content", None) if delta else None
                    if content:
                        yield TextDelta(text=content)
                    for tc in (
                        (getattr(delta, "tool_calls", None) or ()) if delta else ()
                    ):
                        for event in self._merge(
                            tc, choice_index, open_calls, calls, seen
                        ):
                            yield event
                    reason = getattr(choice, "finish_reason", None)
                    if reason:
                        finish = reason

        for call in calls:
            if not call.begun:
                raise ProviderError(
                    f"{self.name}: a streamed tool call never named its tool",
                    code="malformed_stream",
                )
        yield TurnEnd(
            stop_reason=self._stop_reason(finish, calls, usage, request),
            usage=usage,
            provider=self.name,
            model=body["model"],
        )

    def _merge(
        self,
        tc: Any,
        choice_index: int,
        open_calls: dict[tuple[int, int], _OpenCall],
        calls: list[_OpenCall],
        seen: set[str],
    ) -> list[ModelEvent]:
        """Merge one ``tool_calls[]`` delta; return the events it produces."""
        index = getattr(tc, "index", None)
        key = (choice_index, index if isinstance(index, int) else 0)
        provider_id = getattr(tc, "id", None) or None
        function = getattr(tc, "function", None)
        name = getattr(function, "name", None) or None if function is not None else None
        raw_args = (
            getattr(function, "arguments", None) if function is not None else None
        )
        if isinstance(raw_args, dict | list):
            args = json.dumps(raw_args, separators=(",", ":"))
        else:
            args = raw_args or ""

        current = open_calls.get(key)
        repeated = next(
            (
                call
                for call in calls
                if provider_id is not None and call.provider_id == provider_id
            ),
            None,
        )
        if repeated is not None:
            # The same id again (at this index or another): the same call, once.
            open_calls[key] = repeated
            if name is not None and repeated.name and name != repeated.name:
                name = None
            return self._extend(
                repeated, name, repeated_call_text(repeated.arguments, args)
            )
        starts_new = (
            current is None
            or (
                provider_id is not None
                and current.provider_id is not None
                and provider_id != current.provider_id
            )
            or (
                name is not None
                and current.name != ""
                and name != current.name
                and (provider_id is None or provider_id != current.provider_id)
            )
        )
        if starts_new:
            current = _OpenCall(
                provider_id=provider_id,
                call_id=unique_call_id(provider_id, seen=seen),
            )
            open_calls[key] = current
            calls.append(current)
        assert current is not None
        if current.provider_id is None and provider_id is not None:
            current.provider_id = provider_id
        return self._extend(current, name, args)

    @staticmethod
    def _extend(current: _OpenCall, name: str | None, args: str) -> list[ModelEvent]:
        """Add ``name`` and argument text ``args`` to ``current``; return the events."""
        events: list[ModelEvent] = []
        if name is not None and not current.name:
            current.name = name
        if not current.begun and current.name:
            current.begun = True
            events.append(ToolCallBegin(call_id=current.call_id, name=current.name))
            for buffered in current.pending:
                events.append(ToolCallDelta(call_id=current.call_id, delta=buffered))
            current.pending.clear()
        if args:
            current.arguments += args
            if current.begun:
                events.append(ToolCallDelta(call_id=current.call_id, delta=args))
            else:
                current.pending.append(args)
        return events

    @staticmethod
    def _stop_reason(
        finish: str | None,
        calls: list[_OpenCall],
        usage: Usage | None,
        request: ModelRequest,
    ) -> StopReason:
        """Map ``finish_reason`` (and usage) onto a stop reason. Implements LP-09, BC11."""
        cap = request.max_output_tokens
        if finish == "length":
            return "max_tokens"
        if (
            cap is not None
            and usage is not None
            and usage.output_tokens is not None
            and usage.output_tokens >= cap
        ):
            return "max_tokens"
        if finish == "content_filter":
            return "content_filter"
        if finish is None:
            if any(not _is_json(call.arguments) for call in calls):
                return "max_tokens"
            raise ProviderError(
                f"{_LABEL}: the stream ended without a finish reason",
                code="malformed_stream",
            )
        if calls:
            return "tool_use"
        return "end_turn"


def _is_json(text: str) -> bool:
    if not text.strip():
        return True
    try:
        json.loads(text)
    except ValueError:
        return False
    return True
