"""Prepare a canonical AG-UI transcript for a provider request, and mint call ids.

Every provider adapter runs :func:`prepare_history` on ``ModelRequest.messages``
before translating them, so all four wire formats see the same repaired thread:
each assistant tool call answered exactly once, right after its assistant message,
in call order (FT-06, BC20, BC21), every call id unique within the request, and no
lone surrogate anywhere. The id helpers keep tool-call ids unique within a thread
when providers omit or reuse them (BC02, BC18), and map ids onto the 9-character
alphanumeric form Mistral-style servers demand.

A call id used by two calls (a provider that reuses ids, an imported conversation)
keeps every call and every result: each tool message answers the earliest
unanswered call with its id made before it (or, failing that, after it), and the
second and later calls with one id get a wire id unique in the request
(``<id>_2``...), on the call and on its result alike. ``wire_ids`` gives the caller
the mapping back (wire id to the history's id) for anything the provider returns
about those calls. A tool message answering no call is dropped here with a warning;
the boundaries where messages enter refuse it first (:func:`check_tool_results`).

Argument replay (a documented choice shared by every adapter): argument text that
is a JSON object (no ``NaN``, no lone surrogate) is replayed unchanged; anything else
(``""``, whitespace, truncated or otherwise unparseable text, a non-object value,
text holding an unpaired surrogate) is replayed as the empty object ``{}``, so the
next request always encodes. The model learns what went wrong from the call's tool
message (an argument error or ``arguments_truncated`` result), so unterminated text
is never sent back to a provider (BC06, BC11) and every API gets a valid object.
Message text holding an unpaired surrogate is sent with U+FFFD in its place.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from agentcore import events as agui

if TYPE_CHECKING:
    from agentcore.events import (
        Message,
        ToolMessage,
    )

from agentcore.unicode import has_lone_surrogate, scrub

__all__ = [
    "INTERRUPTED_CONTENT",
    "INTERRUPTED_ERROR",
    "UnknownToolResult",
    "check_tool_results",
    "map_mistral_ids",
    "mistral9_id",
    "prepare_history",
    "replay_arguments",
    "replay_arguments_text",
    "unique_call_id",
]

logger = logging.getLogger(__name__)

#: Content of the synthetic tool message answering a call that has no result (BC20).
INTERRUPTED_CONTENT: Final = (
    '{"error":"interrupted","detail":"tool call was cancelled before it completed"}'
)
#: ``error`` of that synthetic tool message.
INTERRUPTED_ERROR: Final = "interrupted"

_INVALID_IDS: Final = frozenset({"", "null", "none", "undefined", "nil"})
_MISTRAL_RE: Final = re.compile(r"^[A-Za-z0-9]{9}$")
_BASE62: Final = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


class UnknownToolResult(ValueError):
    """A tool message answers a ``toolCallId`` that no assistant message made.

    ``message_id`` and ``tool_call_id`` name the offending message and id; the
    message says what to send instead (RT-09).
    """

    def __init__(self, *, message_id: str | None, tool_call_id: str | None) -> None:
        """Build the error for the tool message ``message_id`` answering ``tool_call_id``."""
        self.message_id = message_id
        self.tool_call_id = tool_call_id
        super().__init__(
            f"tool message {message_id!r} answers toolCallId {tool_call_id!r}, which no "
            "assistant message in this conversation made; send the assistant message "
            "carrying that tool call before its result, or leave the result out"
        )


def _field(message: Any, name: str, alias: str) -> Any:
    """Return ``name`` of an AG-UI message model, or ``alias`` of its camelCase dict."""
    if isinstance(message, Mapping):
        return message.get(alias)
    return getattr(message, name, None)


def check_tool_results(
    messages: Iterable[Message | Mapping[str, Any]],
    *,
    known_call_ids: Iterable[str] = (),
) -> None:
    """Raise :class:`UnknownToolResult` for the first tool message that answers no call.

    ``messages`` are AG-UI messages (models or camelCase dicts) in order; a tool
    message's ``toolCallId`` must be the id of a call in an assistant message of
    ``messages`` or in ``known_call_ids`` (the calls already stored on the thread).
    Boundaries that take messages from outside (AG-UI input, REST) call this, so
    a stray result is refused with its id named rather than dropped later.
    Implements FT-06, RT-09.
    """
    known = set(known_call_ids)
    items = list(messages)
    for message in items:
        for call in _field(message, "tool_calls", "toolCalls") or ():
            call_id = call.get("id") if isinstance(call, Mapping) else call.id
            if call_id:
                known.add(call_id)
    for message in items:
        if _field(message, "role", "role") != "tool":
            continue
        call_id = _field(message, "tool_call_id", "toolCallId")
        if call_id not in known:
            raise UnknownToolResult(
                message_id=_field(message, "id", "id"), tool_call_id=call_id
            )


def prepare_history(
    messages: Sequence[Message],
    *,
    not_executed_content: str = INTERRUPTED_CONTENT,
    wire_ids: dict[str, str] | None = None,
) -> list[Message]:
    """Return ``messages`` with every assistant tool call answered exactly once, in place.

    Each assistant message carrying ``tool_calls`` is followed immediately by one
    :class:`ToolMessage` per call, in the order the calls were made, wherever the
    results were stored. A call with no result (cancelled, crashed, still pending)
    gets a synthetic tool message with ``content=not_executed_content`` and
    ``error="interrupted"``; its id is ``"synthetic-<call id>"``, so the repair is
    deterministic. A call id used by several calls keeps all of them: each result
    answers the earliest unanswered call with its id before it (else after it),
    and later calls with the id get a wire id unique in the request, on the call
    and its result; ``wire_ids``, when given, is filled with wire id to original id
    for those. A second result for one call, and a result answering no call, are
    dropped (logged). Unpaired surrogates in message text become U+FFFD and call
    arguments holding one become ``"{}"``, so the request always encodes. Other
    messages (system, developer, user, assistant text, reasoning) keep their order.
    The input is not modified. Raises nothing. Implements FT-06 (BC20, BC21), LP-10.
    """
    occurrences: dict[str, list[tuple[int, int]]] = {}
    used: set[str] = set()
    for index, message in enumerate(messages):
        if isinstance(message, agui.AssistantMessage):
            for position, call in enumerate(message.tool_calls or ()):
                occurrences.setdefault(call.id, []).append((index, position))
                used.add(call.id)
        elif isinstance(message, agui.ToolMessage):
            used.add(message.tool_call_id)

    wire: dict[tuple[int, int], str] = {}
    for call_id, places in occurrences.items():
        wire[places[0]] = call_id
        for place in places[1:]:
            wire[place] = unique_call_id(call_id, seen=used)
            if wire_ids is not None:
                wire_ids[wire[place]] = call_id

    results: dict[tuple[int, int], ToolMessage] = {}
    for index, message in enumerate(messages):
        if not isinstance(message, agui.ToolMessage):
            continue
        answered = occurrences.get(message.tool_call_id)
        if not answered:
            logger.warning(
                "dropping tool message %r answering unknown call %r",
                message.id,
                message.tool_call_id,
            )
            continue
        open_places = [p for p in answered if p not in results]
        before = [p for p in open_places if p[0] < index]
        candidates = before or open_places
        chosen = candidates[0] if candidates else None
        if chosen is None:
            logger.warning(
                "dropping duplicate tool message %r for call %r",
                message.id,
                message.tool_call_id,
            )
            continue
        results[chosen] = message

    prepared: list[Message] = []
    for index, message in enumerate(messages):
        if isinstance(message, agui.ToolMessage):
            continue
        if not isinstance(message, agui.AssistantMessage) or not message.tool_calls:
            prepared.append(_encodable(message))
            continue
        calls = [
            _wire_call(call, wire[(index, position)])
            for position, call in enumerate(message.tool_calls)
        ]
        prepared.append(_encodable(message.model_copy(update={"tool_calls": calls})))
        for position, call in enumerate(calls):
            result = results.get((index, position))
            if result is not None:
                if result.tool_call_id != call.id:
                    result = result.model_copy(update={"tool_call_id": call.id})
                prepared.append(_encodable(result))
            else:
                prepared.append(
                    agui.ToolMessage(
                        id=f"synthetic-{call.id}",
                        tool_call_id=call.id,
                        content=not_executed_content,
                        error=INTERRUPTED_ERROR,
                    )
                )
    return prepared


def _wire_call(call: Any, wire_id: str) -> Any:
    """Return ``call`` under ``wire_id``, with arguments holding a lone surrogate as ``"{}"``.

    Provider metadata echoing the call's id (Gemini's ``{"gemini": {"id": ...}}``,
    which goes on the wire as the ``functionCall`` id) is renamed along.
    """
    update: dict[str, Any] = {}
    if wire_id != call.id:
        update["id"] = wire_id
        metadata = call.metadata if isinstance(call.metadata, dict) else None
        if metadata is not None:
            update["metadata"] = {
                key: {**value, "id": wire_id}
                if isinstance(value, dict) and value.get("id") == call.id
                else value
                for key, value in metadata.items()
            }
    if has_lone_surrogate(call.function.arguments):
        update["function"] = call.function.model_copy(update={"arguments": "{}"})
    return call.model_copy(update=update) if update else call


def _encodable(message: Message) -> Message:
    """Return ``message`` with unpaired surrogates in its string content replaced by U+FFFD."""
    content = getattr(message, "content", None)
    if isinstance(content, str) and has_lone_surrogate(content):
        return message.model_copy(update={"content": scrub(content)})
    return message


def unique_call_id(
    provider_id: str | None, *, seen: set[str], prefix: str = "call_"
) -> str:
    """Return a tool-call id unique within ``seen`` and add it to ``seen``.

    ``provider_id`` is kept verbatim when it is a real, unused id. An id that is
    missing, empty or a null spelling (``"null"``, ``"None"``...) becomes
    ``f"{prefix}{n}"`` with the smallest unused ``n`` counting from ``len(seen) + 1``;
    a reused id becomes ``f"{provider_id}_{n}"``. The result is never ``"null"`` nor a
    function name, and is deterministic for a given ``seen``. Implements BC18 and
    BC02 (ids unique within the thread).
    """
    candidate = (provider_id or "").strip()
    if candidate.lower() in _INVALID_IDS:
        n = len(seen) + 1
        while f"{prefix}{n}" in seen:
            n += 1
        result = f"{prefix}{n}"
    elif candidate in seen:
        n = 2
        while f"{candidate}_{n}" in seen:
            n += 1
        result = f"{candidate}_{n}"
    else:
        result = candidate
    seen.add(result)
    return result


def mistral9_id(call_id: str, *, salt: int = 0) -> str:
    """Return a deterministic 9-character ``[A-Za-z0-9]`` id derived from ``call_id``.

    ``salt`` picks another id when the first collides. Raises nothing.
    """
    digest = hashlib.sha256(f"{salt}:{call_id}".encode()).digest()
    number = int.from_bytes(digest[:8], "big")
    chars = []
    for _ in range(9):
        number, rest = divmod(number, 62)
        chars.append(_BASE62[rest])
    return "".join(chars)


def map_mistral_ids(call_ids: Iterable[str]) -> dict[str, str]:
    """Map each id in ``call_ids`` onto a 9-character alphanumeric id, collision-free.

    Ids already of that form map to themselves when free; the others map to
    :func:`mistral9_id`, re-salted until unused. The mapping depends only on the
    ids and their order, so one request always maps the same way. Raises nothing.
    """
    mapping: dict[str, str] = {}
    used: set[str] = set()
    ordered = list(dict.fromkeys(call_ids))
    for call_id in ordered:
        if _MISTRAL_RE.match(call_id):
            mapping[call_id] = call_id
            used.add(call_id)
    for call_id in ordered:
        if call_id in mapping:
            continue
        salt = 0
        mapped = mistral9_id(call_id)
        while mapped in used:
            salt += 1
            mapped = mistral9_id(call_id, salt=salt)
        mapping[call_id] = mapped
        used.add(mapped)
    return mapping


def _replayable(arguments: str) -> Any:
    """Return the decoded argument text when it may go back to a provider, else ``None``.

    It may when it is JSON (no ``NaN``/``Infinity``) and holds no unpaired surrogate,
    raw or escaped: such text could not be encoded, or a provider would refuse it.
    """
    if not isinstance(arguments, str) or has_lone_surrogate(arguments):
        return None
    try:
        value: Any = json.loads(arguments, parse_constant=_no_constant)
    except (TypeError, ValueError, RecursionError):
        return None
    return value if _clean(value) else None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _clean(value: Any) -> bool:
    """Return whether every string (key or value) in ``value`` is encodable Unicode."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if has_lone_surrogate(item):
                return False
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return True


def replay_arguments(arguments: str) -> dict[str, Any]:
    """Return the argument object to replay for a call whose argument text is ``arguments``.

    A JSON object is returned as parsed; a JSON string holding an object
    (double-encoded, BC09) is decoded once more; anything else (unparseable, not an
    object, holding an unpaired surrogate or ``NaN``) is ``{}``. Raises nothing.
    Implements the module's documented replay choice (BC06, BC11).
    """
    value = _replayable(arguments)
    if isinstance(value, str):
        value = _replayable(value)
    return value if isinstance(value, dict) else {}


def replay_arguments_text(arguments: str) -> str:
    """Return the argument text to replay: ``arguments`` unchanged if it is a replayable JSON object.

    Otherwise the JSON text of :func:`replay_arguments` (``"{}"`` for empty,
    unparseable or unencodable text). The result always encodes as UTF-8.
    Raises nothing. Implements BC06 and BC11.
    """
    if isinstance(_replayable(arguments), dict):
        return arguments
    return json.dumps(replay_arguments(arguments), separators=(",", ":"))
