"""Gemini adapter, through ``google.genai.Client().aio`` streaming (``streamGenerateContent``).

Request: tools as ``functionDeclarations`` (the JSON Schema passed unchanged as
``parametersJsonSchema``, RT-01); an assistant turn becomes a ``model`` content with
its ``functionCall`` parts (args an object: argument text that is not a JSON object
is sent as ``{}``, see :mod:`agentcore.history`), followed by one ``user`` content
holding exactly one named ``functionResponse`` per call, same count and order
(BC23, FT-06). Thought signatures are replayed byte-for-byte on their
``functionCall`` part (BC25). Image results travel as ``functionResponse.parts``
inline data; other parts are dropped with a warning (TC-14). LP-10.

Tool-call metadata (what :class:`ToolCallBegin.metadata` carries, and what this
adapter reads back from the AG-UI ``ToolCall.metadata``)::

    {"gemini": {"id": "<Gemini's id, when it gave one>",
                "synthetic_id": true,            # when the id was generated
                "thought_signature": "<base64>"}}  # when Gemini sent one

A ``ToolCall.encrypted_value`` is also accepted as the thought signature. Ids
Gemini did not give are never sent to Gemini (BC18).
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from collections.abc import AsyncIterator
from typing import Any, Final

from google import genai
from google.genai import types

from agentcore.events import (
    AssistantMessage,
    DeveloperMessage,
    SystemMessage,
    ToolCall,
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
)
from agentcore.providers.errors import sanitized_errors
from agentcore.providers.registry import check_model_request_allowed

__all__ = ["GeminiProvider"]

logger = logging.getLogger(__name__)

_FILTERED: Final = frozenset(
    {
        "SAFETY",
        "RECITATION",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_RECITATION",
    }
)


def _gemini_meta(call: ToolCall) -> dict[str, Any]:
    meta = (call.metadata or {}).get("gemini")
    return meta if isinstance(meta, dict) else {}


def _signature(call: ToolCall) -> bytes | None:
    encoded = _gemini_meta(call).get("thought_signature") or call.encrypted_value
    if not encoded:
        return None
    try:
        return base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        logger.warning("ignoring undecodable thought signature on call %r", call.id)
        return None


def _media_part(part: Any, message_id: str) -> types.Part | None:
    source = part.source
    if part.type != "text" and source.type == "data":
        return types.Part(
            inline_data=types.Blob(
                mime_type=source.mime_type, data=base64.b64decode(source.value)
            )
        )
    if part.type != "text" and source.type == "url" and source.mime_type:
        return types.Part(
            file_data=types.FileData(file_uri=source.value, mime_type=source.mime_type)
        )
    logger.warning(
        "dropping %s part (%s source) from message %r: not accepted by Gemini (TC-14)",
        part.type,
        source.type,
        message_id,
    )
    return None


class GeminiProvider(Provider):
    """Stream one Gemini turn. ``api_version`` is passed to the SDK's HTTP options."""

    name = "gemini"

    def __init__(
        self,
        *,
        model: str,
        api_key: str,
        base_url: str | None = None,
        api_version: str | None = None,
        timeout: float | None = 120.0,
        timeout_ms: int | None = None,
        max_retries: int = 0,
        headers: dict[str, str] | None = None,
    ) -> None:
        """Configure the client; see :mod:`agentcore.providers.base` (client options).

        ``timeout_ms`` (the SDK's own unit) wins over ``timeout`` when both are given.
        """
        self.model = model
        self.base_url = base_url
        if timeout_ms is None and timeout is not None:
            timeout_ms = round(timeout * 1000)
        self._client = genai.Client(
            api_key=api_key,
            http_options=types.HttpOptions(
                base_url=base_url,
                api_version=api_version,
                timeout=timeout_ms,
                headers=headers,
                retry_options=types.HttpRetryOptions(attempts=max_retries + 1)
                if max_retries > 0
                else None,
            ),
        )

    async def aclose(self) -> None:
        """Close the SDK client (see :meth:`Provider.aclose`). Raises nothing."""
        await self._client.aio.aclose()

    # -- request -------------------------------------------------------------

    def build_request(
        self, request: ModelRequest
    ) -> tuple[list[types.Content], types.GenerateContentConfig]:
        """Return ``(contents, config)`` for ``request``.

        Raises nothing. Implements LP-10, FT-06, TC-14, BC18, BC23 and BC25 for Gemini.
        """
        messages = prepare_history(request.messages)
        system: list[str] = [request.system_prompt] if request.system_prompt else []
        contents: list[types.Content] = []
        calls: dict[str, ToolCall] = {}
        responses: list[types.Part] = []

        def flush() -> None:
            if responses:
                contents.append(types.Content(role="user", parts=list(responses)))
                responses.clear()

        for message in messages:
            if not isinstance(message, ToolMessage):
                flush()
            if isinstance(message, SystemMessage | DeveloperMessage):
                if message.content:
                    system.append(message.content)
            elif isinstance(message, UserMessage):
                parts = self._user_parts(message)
                if parts:
                    contents.append(types.Content(role="user", parts=parts))
            elif isinstance(message, AssistantMessage):
                parts = [types.Part(text=message.content)] if message.content else []
                for call in message.tool_calls or ():
                    calls[call.id] = call
                    parts.append(
                        types.Part(
                            function_call=types.FunctionCall(
                                id=_gemini_meta(call).get("id"),
                                name=call.function.name,
                                args=replay_arguments(call.function.arguments),
                            ),
                            thought_signature=_signature(call),
                        )
                    )
                if parts:
                    contents.append(types.Content(role="model", parts=parts))
            elif isinstance(message, ToolMessage):
                call = calls[message.tool_call_id]
                responses.append(self._function_response(message, call))
        flush()

        config = types.GenerateContentConfig(
            system_instruction="\n\n".join(system) if system else None,
            max_output_tokens=request.max_output_tokens,
            temperature=request.temperature,
        )
        if request.tools:
            config.tools = [
                types.Tool(
                    function_declarations=[
                        types.FunctionDeclaration(
                            name=spec.name,
                            description=spec.description,
                            parameters_json_schema=spec.parameters,
                        )
                        for spec in request.tools
                    ]
                )
            ]
            config.automatic_function_calling = types.AutomaticFunctionCallingConfig(
                disable=True
            )
        return contents, config

    @staticmethod
    def _user_parts(message: UserMessage) -> list[types.Part]:
        if isinstance(message.content, str):
            return [types.Part(text=message.content)] if message.content else []
        parts: list[types.Part] = []
        for part in message.content:
            if part.type == "text":
                if part.text:
                    parts.append(types.Part(text=part.text))
            else:
                media = _media_part(part, message.id)
                if media is not None:
                    parts.append(media)
        return parts

    @staticmethod
    def _function_response(message: ToolMessage, call: ToolCall) -> types.Part:
        """Return the ``functionResponse`` part answering ``call`` with ``message``."""
        media: list[types.FunctionResponsePart] = []
        if isinstance(message.content, str):
            text = message.content
        else:
            texts: list[str] = []
            for part in message.content:
                if part.type == "text":
                    texts.append(part.text)
                elif part.type == "image" and part.source.type == "data":
                    media.append(
                        types.FunctionResponsePart(
                            inline_data=types.FunctionResponseBlob(
                                mime_type=part.source.mime_type,
                                data=base64.b64decode(part.source.value),
                            )
                        )
                    )
                else:
                    logger.warning(
                        "dropping %s part from tool result %r: not accepted by "
                        "Gemini functionResponse (TC-14)",
                        part.type,
                        message.tool_call_id,
                    )
            text = "".join(texts)
        response: dict[str, Any]
        if message.error:
            try:
                parsed: Any = json.loads(text)
            except ValueError:
                parsed = None
            if isinstance(parsed, dict) and "error" in parsed:
                response = parsed
            else:
                response = {"error": text or message.error}
        else:
            response = {"result": text}
        return types.Part(
            function_response=types.FunctionResponse(
                id=_gemini_meta(call).get("id"),
                name=call.function.name,
                response=response,
                parts=media or None,
            )
        )

    # -- streaming -----------------------------------------------------------

    async def stream_turn(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream one turn: TextDelta / ToolCallBegin + one ToolCallDelta per call, then TurnEnd.

        Each ``functionCall`` part is its own call (args arrive whole, emitted as one
        delta of JSON text); ids Gemini omits are generated thread-unique. Raises
        :class:`ProviderError` with a sanitized code on HTTP errors and streams that
        end without a finish reason. Implements LP-09, BC18 and BC25.
        """
        check_model_request_allowed(self.base_url, provider=self.name)
        contents, config = self.build_request(request)
        model = request.model or self.model
        seen: set[str] = {
            call.id
            for m in request.messages
            if isinstance(m, AssistantMessage)
            for call in m.tool_calls or ()
        }
        n_calls = 0
        turn_ids: set[str] = set()
        finish: str | None = None
        usage: Usage | None = None
        with sanitized_errors(self.name):
            stream = await self._client.aio.models.generate_content_stream(
                model=model, contents=contents, config=config
            )
            async for chunk in stream:
                meta = chunk.usage_metadata
                if meta is not None:
                    usage = Usage(
                        input_tokens=meta.prompt_token_count,
                        output_tokens=meta.candidates_token_count,
                        total_tokens=meta.total_token_count,
                    )
                for candidate in (chunk.candidates or [])[:1]:
                    content = candidate.content
                    for part in (content.parts if content else None) or ():
                        if part.function_call is not None:
                            given = part.function_call.id or ""
                            if given and given in turn_ids:
                                # The same functionCall id in a later chunk is the
                                # same call (its args arrive whole): run once.
                                continue
                            n_calls += 1
                            if given:
                                turn_ids.add(given)
                            for event in self._call_events(part, seen):
                                yield event
                        elif part.text and not part.thought:
                            yield TextDelta(text=part.text)
                    if candidate.finish_reason is not None:
                        finish = str(
                            getattr(
                                candidate.finish_reason,
                                "value",
                                candidate.finish_reason,
                            )
                        )

        if finish is None:
            raise ProviderError(
                f"{self.name}: the stream ended without a finish reason",
                code="malformed_stream",
            )
        stop: StopReason
        if finish == "MAX_TOKENS":
            stop = "max_tokens"
        elif finish in _FILTERED:
            stop = "content_filter"
        elif finish in ("MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL"):
            stop = "error"
        elif n_calls:
            stop = "tool_use"
        else:
            stop = "end_turn"
        yield TurnEnd(stop_reason=stop, usage=usage, provider=self.name, model=model)

    @staticmethod
    def _call_events(part: types.Part, seen: set[str]) -> list[ModelEvent]:
        """Return Begin + one Delta for a ``functionCall`` part (BC18, BC25)."""
        function_call = part.function_call
        assert function_call is not None
        given = function_call.id or None
        call_id = unique_call_id(given, seen=seen, prefix="gemini_call_")
        meta: dict[str, Any] = {}
        if given is not None and given == call_id:
            meta["id"] = given
        else:
            meta["synthetic_id"] = True
            if given is not None:
                meta["id"] = given
        if part.thought_signature:
            meta["thought_signature"] = base64.b64encode(
                part.thought_signature
            ).decode()
        args = json.dumps(function_call.args or {}, separators=(",", ":"))
        return [
            ToolCallBegin(
                call_id=call_id,
                name=function_call.name or "",
                metadata={"gemini": meta},
            ),
            ToolCallDelta(call_id=call_id, delta=args),
        ]
