"""Prepare a canonical AG-UI transcript for a provider request, and mint call ids.

Every provider adapter runs :func:`prepare_history` on ``ModelRequest.messages``
before translating them, so all four wire formats see the same repaired thread:
each assistant tool call answered exactly once, right after its assistant message,
in call order (FT-06, BC20, BC21). The id helpers keep tool-call ids unique within
a thread when providers omit or reuse them (BC02, BC18), and map ids onto the
9-character alphanumeric form Mistral-style servers demand.

Argument replay (a documented choice shared by every adapter): argument text that
parses to a JSON object is replayed unchanged; anything else (``""``, whitespace,
truncated or otherwise unparseable text, a non-object value) is replayed as the
empty object ``{}``. The model learns what went wrong from the call's tool message
(an argument error or ``arguments_truncated`` result), so unterminated text is never
sent back to a provider (BC06, BC11) and every API gets a valid object.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Iterable, Sequence
from typing import Any, Final

from agentcore.events import AssistantMessage, Message, ToolMessage

__all__ = [
    "INTERRUPTED_CONTENT",
    "INTERRUPTED_ERROR",
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


def prepare_history(
    messages: Sequence[Message],
    *,
    not_executed_content: str = INTERRUPTED_CONTENT,
) -> list[Message]:
    """Return ``messages`` with every assistant tool call answered exactly once, in place.

    Each assistant message carrying ``tool_calls`` is followed immediately by one
    :class:`ToolMessage` per call, in the order the calls were made, wherever the
    results were stored. A call with no result (cancelled, crashed, still pending)
    gets a synthetic tool message with ``content=not_executed_content`` and
    ``error="interrupted"``; its id is ``"synthetic-<call id>"``, so the repair is
    deterministic. Duplicate tool messages for one call keep the first; tool
    messages answering no known call are dropped (logged). A call id reused by a
    later assistant message is answered once only, by its first occurrence's
    result; the later occurrence gets the synthetic answer. Other messages
    (system, developer, user, assistant text, reasoning) keep their order.
    The input is not modified. Raises nothing. Implements FT-06 (BC20, BC21).
    """
    known_calls: set[str] = set()
    for message in messages:
        if isinstance(message, AssistantMessage):
            for call in message.tool_calls or ():
                known_calls.add(call.id)

    results: dict[str, ToolMessage] = {}
    for message in messages:
        if not isinstance(message, ToolMessage):
            continue
        if message.tool_call_id not in known_calls:
            logger.warning(
                "dropping tool message %r answering unknown call %r",
                message.id,
                message.tool_call_id,
            )
            continue
        if message.tool_call_id in results:
            logger.warning(
                "dropping duplicate tool message %r for call %r",
                message.id,
                message.tool_call_id,
            )
            continue
        results[message.tool_call_id] = message

    prepared: list[Message] = []
    answered: set[str] = set()
    for message in messages:
        if isinstance(message, ToolMessage):
            continue
        prepared.append(message)
        if not isinstance(message, AssistantMessage):
            continue
        for call in message.tool_calls or ():
            result = results.get(call.id)
            if result is not None and call.id not in answered:
                prepared.append(result)
            else:
                prepared.append(
                    ToolMessage(
                        id=f"synthetic-{call.id}",
                        tool_call_id=call.id,
                        content=not_executed_content,
                        error=INTERRUPTED_ERROR,
                    )
                )
            answered.add(call.id)
    return prepared


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


def replay_arguments(arguments: str) -> dict[str, Any]:
    """Return the argument object to replay for a call whose argument text is ``arguments``.

    A JSON object is returned as parsed; a JSON string holding an object
    (double-encoded, BC09) is decoded once more; anything else is ``{}``. Raises
    nothing. Implements the module's documented replay choice (BC06, BC11).
    """
    try:
        value: Any = json.loads(arguments)
    except (TypeError, ValueError):
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


def replay_arguments_text(arguments: str) -> str:
    """Return the argument text to replay: ``arguments`` unchanged if it is a JSON object.

    Otherwise the JSON text of :func:`replay_arguments` (``"{}"`` for empty or
    unparseable text). Raises nothing. Implements BC06 and BC11.
    """
    try:
        value: Any = json.loads(arguments)
    except (TypeError, ValueError):
        return "{}"
    if isinstance(value, dict):
        return arguments
    return json.dumps(replay_arguments(arguments), separators=(",", ":"))
