"""Every id Countersign mints, and why no client input can pre-empt one.

A thread's messages, tool calls and runs share id spaces with ids that clients
choose (AG-UI clients name their messages, runs and threads). An id Countersign
needs later (the tool message answering a call, a synthetic answer, an interrupt)
must never be taken first by a client, or the later insert collides and the call
stays unanswered. The rules:

- **Namespaced and unguessable.** Ids Countersign writes into a thread's history
  itself are ``cs-<kind>-<32 hex digits>``: :data:`RESERVED_PREFIX`, a kind
  (:func:`new_message_id` ``msg``, :func:`new_tool_message_id` ``tool`` for tool
  results and the synthetic "interrupted" answers, :func:`new_interrupt_id`
  ``int``), then 128 random bits from :mod:`secrets`. The old ``result-<callId>``
  form was predictable from the call id alone.
- **Clients may not take the namespace.** A message in an input whose id starts
  with :data:`RESERVED_PREFIX` is accepted only as an echo of the stored message of
  that id (a client feeding its history back, as ``HttpAgent`` does); a new one is
  refused with HTTP 400 naming the field; so is a new assistant tool call whose id
  starts with it (interrupt ids are ``cs-approval-<pk>``, IR-02).
- **Collisions are refused before anything is recorded.** An input message whose id
  is already stored for a different message (another role, another ``toolCallId``,
  other user text) and a tool message for a call that already has its answer are
  refused with HTTP 409 (:class:`IdConflict`) naming the field and the conflicting
  id, checked by :func:`check_input_messages` before the run is created.
- **A reused tool-call id is made thread-unique on ingest.** A new assistant message
  whose call reuses an id the thread (or an earlier message of the same input)
  already holds gets ``<id>_2`` (:func:`input_call_ids_unique`); the tool messages
  after it that answer that id answer the renamed call, so both results are kept.
  The client's id stays on the rows (``metadata["clientToolCallId"]``), the run's
  ``RUN_STARTED.input`` echo shows the client's own ids, and a history posted again
  with the client's ids is recognised as the echo it is.
- Thread and run ids are UUID4 strings (:func:`threads.models.new_public_id`):
  unguessable, so a client cannot aim at a future one; a client-chosen ``runId``
  already used on the thread is a 409 where the run is created.

Implements DC-01, SEC-06.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Any, Final

from agentcore.history import unique_call_id
from threads.exceptions import ThreadsError
from threads.models import STORED_ROLES, Message, Thread, ToolCall

#: The prefix of every id Countersign mints into a thread's history.
RESERVED_PREFIX: Final = "cs-"


class IdConflict(ThreadsError):
    """An input id collides with a stored one; nothing was recorded (HTTP 409).

    ``field`` is the input's JSON path (``messages.2.id``), ``value`` the public id.
    """

    code = "id_conflict"
    status = 409

    def __init__(self, detail: str, *, field: str, value: str) -> None:
        super().__init__(detail)
        self.field = field
        self.value = value


class ReservedId(ThreadsError):
    """A new input id takes Countersign's namespace (HTTP 400)."""

    code = "invalid_input"
    status = 400

    def __init__(self, detail: str, *, field: str) -> None:
        super().__init__(detail)
        self.field = field


def _mint(kind: str) -> str:
    return f"{RESERVED_PREFIX}{kind}-{secrets.token_hex(16)}"


def new_message_id() -> str:
    """Return a new id for a message Countersign records (a REST user message)."""
    return _mint("msg")


def new_tool_message_id() -> str:
    """Return a new id for a tool message Countersign writes (a result, a synthetic answer)."""
    return _mint("tool")


def new_interrupt_id() -> str:
    """Return a new id for an AG-UI interrupt."""
    return _mint("int")


def is_reserved(value: str) -> bool:
    """Return whether ``value`` lies in Countersign's namespace (:data:`RESERVED_PREFIX`)."""
    return value.startswith(RESERVED_PREFIX)


#: ``metadata`` key (ToolCall, tool Message) and input-dict key of a renamed call's
#: id as the client sent it.
CLIENT_CALL_ID: Final = "clientToolCallId"


def _same_message(stored: Message, data: dict[str, Any]) -> bool:
    """Return whether input message ``data`` is an echo of ``stored`` (same id)."""
    if stored.role != data.get("role"):
        return False
    if stored.role == "tool":
        return data.get("toolCallId") in (
            stored.tool_call_id,
            (stored.metadata or {}).get(CLIENT_CALL_ID),
        )
    if stored.role in ("user", "system", "developer"):
        return bool(stored.content == data.get("content"))
    return True


def input_call_ids_unique(
    *, thread: Thread | None, messages: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Return ``messages`` with every reused tool-call id of a new assistant message made thread-unique.

    ``messages`` are AG-UI message dicts (camelCase) in input order. A call of an
    assistant message not stored yet whose id the thread already holds, or an
    earlier message of the input holds, gets :func:`agentcore.history.unique_call_id`'s
    ``<id>_<n>``; each later tool message answering that id (until another message
    reuses it) answers the renamed call. A renamed call and its answers carry the
    client's id as ``clientToolCallId`` (kept in their rows' ``metadata``). Messages
    the thread stores already are echoes: their calls keep their stored ids, and
    tool messages after them are read by the client's ids. Returns new dicts where
    something changed; reads, stores nothing. Implements DC-04, FT-06 (both
    results kept, no id conflict).
    """
    taken: set[str] = set()
    stored_ids: set[str] = set()
    stored_calls: dict[str, list[tuple[str, str]]] = {}
    if thread is not None:
        ids = [str(m.get("id")) for m in messages if m.get("id")]
        stored_ids = set(
            thread.messages.filter(message_id__in=ids).values_list(
                "message_id", flat=True
            )
        )
        for call_id, parent, metadata in ToolCall.objects.filter(
            thread=thread
        ).values_list("tool_call_id", "parent_message_id", "metadata"):
            taken.add(call_id)
            client = (metadata or {}).get(CLIENT_CALL_ID) or call_id
            stored_calls.setdefault(parent or "", []).append((client, call_id))
    current: dict[str, str] = {}
    result: list[dict[str, Any]] = []
    for data in messages:
        role = data.get("role")
        message_id = str(data.get("id") or "")
        if role == Message.Role.ASSISTANT and message_id in stored_ids:
            current.update(dict(stored_calls.get(message_id, [])))
        elif role == Message.Role.ASSISTANT and data.get("toolCalls"):
            calls = []
            for call in data.get("toolCalls") or []:
                client = str(call.get("id") or "")
                if client in taken and not is_reserved(client):
                    renamed = unique_call_id(client, seen=taken)
                    call = {**call, "id": renamed, CLIENT_CALL_ID: client}
                else:
                    taken.add(client)
                current[client] = str(call.get("id"))
                calls.append(call)
            data = {**data, "toolCalls": calls}
        elif role == Message.Role.TOOL and message_id not in stored_ids:
            client = str(data.get("toolCallId") or "")
            if current.get(client, client) != client:
                data = {**data, "toolCallId": current[client], CLIENT_CALL_ID: client}
        result.append(data)
    return result


def check_input_messages(
    *, thread: Thread | None, messages: Sequence[dict[str, Any]]
) -> None:
    """Refuse input messages whose ids collide with ``thread``'s stored history.

    ``messages`` are AG-UI message dicts (camelCase, as dumped by the official
    models) in input order; ``thread`` may be ``None`` (a new thread, where only the
    namespace is checked). Raises :class:`ReservedId` (400) for a new message in
    Countersign's namespace and :class:`IdConflict` (409) for a collision. Stores
    nothing. Implements DC-01, SEC-06.
    """
    stored: dict[str, Message] = {}
    answered: dict[str, str] = {}
    calls: set[str] = set()
    if thread is not None:
        ids = [m.get("id") for m in messages if m.get("id")]
        stored = {m.message_id: m for m in thread.messages.filter(message_id__in=ids)}
        answered = {
            call_id: message_id
            for call_id, message_id in Message.objects.filter(
                thread=thread, role=Message.Role.TOOL
            ).values_list("tool_call_id", "message_id")
            if call_id
        }
        calls = set(
            ToolCall.objects.filter(thread=thread).values_list(
                "tool_call_id", flat=True
            )
        )
    for index, data in enumerate(messages):
        if data.get("role") not in STORED_ROLES:
            continue  # not stored (activity, reasoning...): nothing to collide with
        message_id = str(data.get("id") or "")
        where = f"messages.{index}.id"
        existing = stored.get(message_id)
        if existing is not None:
            if not _same_message(existing, data):
                raise IdConflict(
                    f"{where} {message_id!r} is already the id of a different "
                    f"{existing.role} message on this thread; give a new message a new id",
                    field=where,
                    value=message_id,
                )
            continue
        if is_reserved(message_id):
            raise ReservedId(
                f"{where} {message_id!r}: ids starting with {RESERVED_PREFIX!r} are minted "
                "by Countersign and cannot name a new message; choose another id",
                field=where,
            )
        if data.get("role") == "tool":
            call_id = str(data.get("toolCallId") or "")
            if call_id in answered:
                where = f"messages.{index}.toolCallId"
                raise IdConflict(
                    f"{where} {call_id!r} is already answered on this thread (by message "
                    f"{answered[call_id]!r}); a call takes one answer",
                    field=where,
                    value=call_id,
                )
            answered[call_id] = message_id
        # Only an assistant message's toolCalls are typed (AG-UI ToolCall objects);
        # on any other role the key is an untyped extra field and names no call.
        if data.get("role") != Message.Role.ASSISTANT:
            continue
        for call_index, call in enumerate(data.get("toolCalls") or []):
            call_id = str(call.get("id") or "")
            if call_id in calls:
                # input_call_ids_unique renames reused ids before this check.
                where = f"messages.{index}.toolCalls.{call_index}.id"
                raise IdConflict(
                    f"{where} {call_id!r} is already a tool call of this thread; "
                    "a new assistant message cannot reuse it",
                    field=where,
                    value=call_id,
                )
            if is_reserved(call_id):
                # Interrupt ids live here (cs-approval-<pk>, IR-02): a client call
                # must never be able to bear one.
                where = f"messages.{index}.toolCalls.{call_index}.id"
                raise ReservedId(
                    f"{where} {call_id!r}: ids starting with {RESERVED_PREFIX!r} are "
                    "minted by Countersign and cannot name a new tool call; choose another id",
                    field=where,
                )
            calls.add(call_id)
