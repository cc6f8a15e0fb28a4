"""Reconciling a remote agent's ``MESSAGES_SNAPSHOT`` with what the thread holds.

A remote AG-UI agent may end a run with ``MESSAGES_SNAPSHOT``, its own view of the
conversation. An AG-UI client replaces its history with it (``@ag-ui/client`` does),
so a snapshot relayed as the remote sent it can make the client's history and the
thread disagree:

- ``ag-ui-langgraph`` names a tool result by the call id in ``TOOL_CALL_RESULT`` and
  by LangGraph's own uuid in the snapshot: the client then holds a second id for an
  answered call, and its next POST of that history is refused (one tool message per
  call, FT-06, TC-08);
- a model that does not stream shows its tool calls (and its text) *only* in the
  snapshot: nothing was recorded, nobody is asked, and the thread misses a turn the
  client shows.

:func:`snapshot_reconcile` returns the events that bring the two together: the
messages and calls only the snapshot holds, as ordinary stream events
(``TEXT_MESSAGE_*``, ``TOOL_CALL_START/ARGS/END``, ``TOOL_CALL_RESULT``) to record
before the snapshot, so they are projected, relayed and (for calls) disposed of by
policy like streamed ones (FT-06, SEC-02); then the snapshot with every message it
shares with the thread under the thread's id, so a client that replaces its
history with the snapshot can post it back. Implements TC-08, TC-09.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from agentcore.events import (
    BaseEvent,
    MessagesSnapshotEvent,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    message_from_dict,
    message_to_dict,
)
from threads.ids import new_tool_message_id
from threads.models import Message, Run, Thread, ToolCall

logger = logging.getLogger(__name__)

#: ``Message.metadata`` key holding the remote agent's own id of a thread message.
REMOTE_ID = "remoteId"


def snapshot_reconcile(
    *, thread: Thread, run: Run, snapshot: MessagesSnapshotEvent
) -> tuple[list[BaseEvent], dict[str, str]]:
    """Return the events to record for ``snapshot`` and the remote's names for thread messages.

    The events are what only the snapshot holds, then the snapshot; the mapping is
    ``{thread message id: the remote's id}`` for each message renamed (for
    :func:`message_remote_ids_record`).

    Reads the thread's messages and calls as recorded so far (the caller flushes
    everything streamed before the snapshot first). For each snapshot message:

    - a tool message answering a call the thread already answered takes the id of
      the thread's tool message (matched by ``toolCallId``); one answering a known
      call the thread has no answer for becomes a ``TOOL_CALL_RESULT`` (TC-08);
    - an assistant message holding calls the thread knows takes the id of their
      parent message; an unknown text-only one takes the id of a not yet matched
      assistant message of ``run`` with the same text;
    - an assistant message still unknown becomes ``TEXT_MESSAGE_START/CONTENT/END``
      (when it has text), and each of its calls the thread does not know becomes
      ``TOOL_CALL_START/ARGS/END`` (the arguments text verbatim, TC-03).

    A call the thread answered but the snapshot shows unanswered gets the thread's
    tool message after it (BC30). User, system and developer messages are kept as
    sent; a message whose id
    (after mapping) an earlier snapshot message already has is dropped, so no id
    reaches the client twice. Raises nothing for any snapshot content (a message
    that does not reparse after rewriting keeps its original form).
    """
    messages = Message.objects.filter(thread=thread)
    known_ids = set(messages.values_list("message_id", flat=True))
    answer_ids: dict[str, str] = {
        str(call_id): message_id
        for call_id, message_id in messages.filter(
            role=Message.Role.TOOL, tool_call_id__isnull=False
        ).values_list("tool_call_id", "message_id")
    }
    call_parents: dict[str, str] = dict(
        ToolCall.objects.filter(thread=thread).values_list(
            "tool_call_id", "parent_message_id"
        )
    )
    run_texts: list[tuple[str, str]] = [
        (message_id, content)
        for message_id, content in messages.filter(
            run=run, role=Message.Role.ASSISTANT
        ).values_list("message_id", "content")
        if isinstance(content, str) and content
    ]
    matched: set[str] = set()
    remote_ids: dict[str, str] = {}
    added: list[BaseEvent] = []
    rewritten: list[Any] = []
    for original in snapshot.messages:
        data = message_to_dict(original)
        sent_as = str(data.get("id"))
        role = data.get("role")
        if role == "tool":
            _reconcile_tool(data, answer_ids, call_parents, known_ids, added)
        elif role == "assistant":
            _reconcile_assistant(
                data, call_parents, known_ids, run_texts, matched, added
            )
        message_id = str(data.get("id"))
        if message_id != sent_as:
            remote_ids.setdefault(message_id, sent_as)
        if message_id in matched:
            # Two of the remote's messages are one of the thread's (a remote that
            # stored a tool result twice under two ids): the client gets it once.
            continue
        matched.add(message_id)
        known_ids.add(message_id)
        rewritten.append(_reparsed(data, original))
    rewritten = _answers_restored(thread=thread, messages=rewritten)
    if added:
        logger.info(
            "run %s: %d event(s) recorded from the remote's MESSAGES_SNAPSHOT",
            run.run_id,
            len(added),
        )
    return [*added, snapshot.model_copy(update={"messages": rewritten})], remote_ids


def message_remote_ids_record(*, thread: Thread, remote_ids: dict[str, str]) -> None:
    """Remember the remote agent's id of each thread message in ``remote_ids``.

    ``remote_ids`` is ``{thread message id: remote id}`` from
    :func:`snapshot_reconcile`; it is kept as ``Message.metadata["remoteId"]`` so the
    remote's next input names its own messages as it does (a remote that keeps its
    own history, as LangGraph does, would otherwise store them twice), while
    clients keep seeing the thread's ids (:func:`input_echo_thread_ids`).
    """
    for row in Message.objects.filter(thread=thread, message_id__in=list(remote_ids)):
        metadata = {**(row.metadata or {}), REMOTE_ID: remote_ids[row.message_id]}
        Message.objects.filter(pk=row.pk).update(metadata=metadata)


def input_echo_thread_ids(*, thread: Thread, event: RunStartedEvent) -> RunStartedEvent:
    """Return ``event`` with its ``input`` echo naming messages by the thread's ids.

    The remote's input named some messages by the remote's ids
    (:func:`message_remote_ids_record`); clients following the thread, and the
    projection of the echo, see the thread's. Unchanged when nothing is renamed.
    """
    run_input = event.input
    if run_input is None or not getattr(run_input, "messages", None):
        return event
    thread_ids = {
        remote: message_id
        for message_id, metadata in Message.objects.filter(
            thread=thread, metadata__has_key=REMOTE_ID
        ).values_list("message_id", "metadata")
        if isinstance(metadata, dict)
        for remote in [metadata.get(REMOTE_ID)]
        if isinstance(remote, str)
    }
    if not any(m.id in thread_ids for m in run_input.messages):
        return event
    messages = [
        m.model_copy(update={"id": thread_ids[m.id]}) if m.id in thread_ids else m
        for m in run_input.messages
    ]
    return event.model_copy(
        update={"input": run_input.model_copy(update={"messages": messages})}
    )


def _reconcile_tool(
    data: dict[str, Any],
    answer_ids: dict[str, str],
    call_parents: dict[str, str],
    known_ids: set[str],
    added: list[BaseEvent],
) -> None:
    call_id = str(data.get("toolCallId"))
    answered_as = answer_ids.get(call_id)
    if answered_as is not None:
        data["id"] = answered_as
        return
    if data.get("id") in known_ids or call_id not in call_parents:
        return
    # A known call answered only in the snapshot: the answer is recorded (TC-08),
    # under an id of the thread's (the remote's may carry its own interrupt id, as
    # Agent Framework's "approval-response-<interrupt id>" does; IR-18), the
    # remote's kept as its remoteId.
    error = data.get("error")
    data["id"] = new_tool_message_id()
    added.append(
        ToolCallResultEvent(
            message_id=data["id"],
            tool_call_id=call_id,
            content=data.get("content", ""),
            role="tool",
            metadata={"error": error} if error else None,
        )
    )
    answer_ids[call_id] = data["id"]


def _reconcile_assistant(
    data: dict[str, Any],
    call_parents: dict[str, str],
    known_ids: set[str],
    run_texts: list[tuple[str, str]],
    matched: set[str],
    added: list[BaseEvent],
) -> None:
    calls = [c for c in data.get("toolCalls") or [] if isinstance(c, dict)]
    content = data.get("content")
    if data.get("id") not in known_ids:
        parents = {call_parents[c["id"]] for c in calls if c.get("id") in call_parents}
        if len(parents) == 1:
            data["id"] = parents.pop()
        elif not calls and isinstance(content, str) and content:
            same_text = next(
                (
                    mid
                    for mid, text in run_texts
                    if text == content and mid not in matched
                ),
                None,
            )
            if same_text is not None:
                data["id"] = same_text
    message_id = str(data["id"])
    new_calls = [
        c for c in calls if isinstance(c.get("id"), str) and c["id"] not in call_parents
    ]
    if message_id not in known_ids and isinstance(content, str) and content:
        added += [
            TextMessageStartEvent(message_id=message_id, role="assistant"),
            TextMessageContentEvent(message_id=message_id, delta=content),
            TextMessageEndEvent(message_id=message_id),
        ]
    elif message_id not in known_ids and new_calls:
        # A text-less message holding new calls is opened and closed empty, so
        # each call's parentMessageId names a message the client has (TC-02).
        added += [
            TextMessageStartEvent(message_id=message_id, role="assistant"),
            TextMessageEndEvent(message_id=message_id),
        ]
    for call in calls:
        call_id = call.get("id")
        if not isinstance(call_id, str) or call_id in call_parents:
            continue
        function = call.get("function") or {}
        arguments = function.get("arguments")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments if arguments is not None else {})
        added.append(
            ToolCallStartEvent(
                tool_call_id=call_id,
                tool_call_name=str(function.get("name", "")),
                parent_message_id=message_id,
            )
        )
        if arguments:
            added.append(ToolCallArgsEvent(tool_call_id=call_id, delta=arguments))
        added.append(ToolCallEndEvent(tool_call_id=call_id))
        call_parents[call_id] = message_id


def _answers_restored(*, thread: Thread, messages: list[Any]) -> list[Any]:
    """Return ``messages`` with the thread's answer after each call the snapshot left unanswered.

    A snapshot that omits a tool message the thread holds would make a client that
    replaces its history drop that answer (BC30): every call the thread answered
    gets its one tool message, right after the assistant message holding the call
    (and the tool messages already following it).
    """
    present = {getattr(m, "tool_call_id", None) for m in messages if m.role == "tool"}
    wanted = [
        call.id
        for m in messages
        if m.role == "assistant"
        for call in (getattr(m, "tool_calls", None) or [])
        if call.id not in present
    ]
    if not wanted:
        return messages
    answers = {
        row.tool_call_id: row
        for row in Message.objects.filter(
            thread=thread, role=Message.Role.TOOL, tool_call_id__in=wanted
        )
    }
    if not answers:
        return messages
    out: list[Any] = []
    owed: list[Any] = []
    for message in messages:
        if message.role != "tool" and owed:
            out += owed
            owed = []
        out.append(message)
        for call in getattr(message, "tool_calls", None) or []:
            row = answers.get(call.id) if message.role == "assistant" else None
            if row is not None:
                data = {
                    "id": row.message_id,
                    "role": "tool",
                    "toolCallId": row.tool_call_id,
                    "content": row.content,
                }
                if row.error:
                    data["error"] = row.error
                owed.append(message_from_dict(data))
    return out + owed


def _reparsed(data: dict[str, Any], original: Any) -> Any:
    try:
        return message_from_dict(data)
    except ValueError:
        logger.warning("snapshot message %r kept as sent", data.get("id"))
        return original
