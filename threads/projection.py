"""Projecting recorded AG-UI events onto Message, ToolCall, Run and Thread rows.

The event log is the truth (DC-01); these rows are its projection, written in the
same transaction as the events (:mod:`threads.recording`). :class:`Projection`
has one handler per event type, like :class:`agentcore.stream.RunStream`, and
writes each touched row once at the end of a flush. Status changes go through
:mod:`threads.transitions` (``save=False``: the write-back persists them).
Implements DC-01, FT-04, FT-05, TC-06.

Over 400 lines because it holds one handler per AG-UI event type plus the two
helpers those handlers share (AG-UI message JSON to rows, JSON Patch); splitting
them would scatter one projection over several files.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from typing import Any

import jsonpatch
from django.db.models import Q
from django.utils import timezone

from agentcore.events import (
    BaseEvent,
    EventType,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    TextMessageContentEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from agentcore.interrupts import companion_call_for, interrupt_tool_call_id
from threads.ids import CLIENT_CALL_ID
from threads.models import Message, Run, Thread, ToolCall
from threads.transitions import run_transition, tool_call_transition

logger = logging.getLogger(__name__)

_Handler = Callable[["Projection", Any, int], None]


class Projection:
    """Apply one flush's events to the rows of ``run`` (a batch of writes per flush).

    Use ``Projection(thread=..., run=...).apply(events, seqs)``; ``seqs`` are the
    events' log sequence numbers (they order messages and calls by ``position``).

    The rows a flush touches are read in one query per table before the handlers
    run; new rows are inserted with one ``bulk_create`` per table and changed rows
    written with one statement per table, so a recorded call costs a fraction of
    two statements however many calls a flush holds (B3). Pending inserts are
    written before any handler that queries the rows themselves (the end of a
    run, an input echo), so those queries see this flush's rows.
    """

    def __init__(self, *, thread: Thread, run: Run) -> None:
        self.thread = thread
        self.run = run
        self.messages: dict[str, Message] = {}
        self.tool_calls: dict[str, ToolCall] = {}
        #: Tool messages answering a call, by ``toolCallId`` (read up front).
        self.answers: dict[str, Message] = {}
        self.dirty_messages: set[str] = set()
        self.dirty_calls: set[str] = set()
        self.run_fields: set[str] = set()
        # Ids read up front: absent from the cache means absent from the table.
        self._read_messages: set[str] = set()
        self._read_calls: set[str] = set()
        self._read_answers: set[str] = set()
        self._new_messages: list[Message] = []
        self._new_calls: list[ToolCall] = []

    def apply(self, events: list[BaseEvent], seqs: list[int]) -> None:
        """Apply ``events`` (with their ``seqs``) and write the touched rows back."""
        self._read_ahead(events)
        for event, seq in zip(events, seqs, strict=True):
            handler = _HANDLERS.get(event.type)
            if handler is not None:
                handler(self, event, seq)
        self._write_back()

    def _read_ahead(self, events: list[BaseEvent]) -> None:
        """Read every message, call and call answer the batch names, one query per table."""
        message_ids: set[str] = set()
        call_ids: set[str] = set()
        answer_ids: set[str] = set()
        for event in events:
            kind = event.type
            if kind in _MESSAGE_EVENTS:
                message_ids.add(event.message_id)  # type: ignore[attr-defined]
            elif kind in _CALL_EVENTS:
                call_id = event.tool_call_id  # type: ignore[attr-defined]
                call_ids.add(call_id)
                if kind == EventType.TOOL_CALL_START:
                    message_ids.add(event.parent_message_id or call_id)  # type: ignore[attr-defined]
                elif kind == EventType.TOOL_CALL_RESULT:
                    answer_ids.add(call_id)
        if message_ids or answer_ids:
            for row in Message.objects.filter(thread=self.thread).filter(
                Q(message_id__in=message_ids)
                | Q(role=Message.Role.TOOL, tool_call_id__in=answer_ids)
            ):
                if row.message_id in message_ids:
                    self.messages[row.message_id] = row
                if row.role == Message.Role.TOOL and row.tool_call_id in answer_ids:
                    self.answers[row.tool_call_id] = row
        if call_ids:
            for call in ToolCall.objects.filter(
                thread=self.thread, tool_call_id__in=call_ids
            ):
                self.tool_calls[call.tool_call_id] = call
        self._read_messages = message_ids
        self._read_calls = call_ids
        self._read_answers = answer_ids

    # -- row cache ------------------------------------------------------------

    def message(self, message_id: str) -> Message | None:
        """Return the thread's message ``message_id`` (cached for this flush), or ``None``."""
        if message_id not in self.messages:
            if message_id in self._read_messages:
                return None
            found = Message.objects.filter(
                thread=self.thread, message_id=message_id
            ).first()
            if found is None:
                return None
            self.messages[message_id] = found
        return self.messages[message_id]

    def tool_call(self, tool_call_id: str) -> ToolCall | None:
        """Return the thread's call ``tool_call_id`` (cached for this flush), or ``None``."""
        if tool_call_id not in self.tool_calls:
            if tool_call_id in self._read_calls:
                return None
            found = ToolCall.objects.filter(
                thread=self.thread, tool_call_id=tool_call_id
            ).first()
            if found is None:
                return None
            self.tool_calls[tool_call_id] = found
        return self.tool_calls[tool_call_id]

    def _answer(self, tool_call_id: str) -> Message | None:
        """Return the tool message answering ``tool_call_id``, or ``None``."""
        if tool_call_id in self.answers or tool_call_id in self._read_answers:
            return self.answers.get(tool_call_id)
        return Message.objects.filter(
            thread=self.thread, role=Message.Role.TOOL, tool_call_id=tool_call_id
        ).first()

    def _new_message(self, **fields: Any) -> Message:
        """Return a new message row of this thread, inserted at the next write."""
        row = Message(thread=self.thread, **fields)
        self.messages[row.message_id] = row
        self._new_messages.append(row)
        return row

    def _insert_new(self) -> None:
        """Insert the rows created since the last insert (messages first, then calls).

        Their in-memory state is what gets inserted, so they are no longer dirty.
        """
        if self._new_messages:
            Message.objects.bulk_create(self._new_messages)
            self.dirty_messages.difference_update(
                m.message_id for m in self._new_messages
            )
            self._new_messages = []
        if self._new_calls:
            now = timezone.now()
            for call in self._new_calls:
                call.updated_at = now
            ToolCall.objects.bulk_create(self._new_calls)
            self.dirty_calls.difference_update(c.tool_call_id for c in self._new_calls)
            self._new_calls = []

    def _call_to(self, call: ToolCall, state: str) -> None:
        tool_call_transition(call=call, to=state, save=False)
        self.dirty_calls.add(call.tool_call_id)

    def _cancel_open_calls(self) -> None:
        # A run that ended without finishing leaves nothing to answer: its open
        # calls are cancelled, or they would hold the thread forever.
        # The database state is read before this flush's write-back, so a call
        # answered earlier in the same flush is checked in memory and left alone.
        open_states = (ToolCall.State.STREAMING, ToolCall.State.COMPLETE)
        self._insert_new()
        for row in ToolCall.objects.filter(run=self.run, state__in=open_states):
            cached = self.tool_calls.setdefault(row.tool_call_id, row)
            if cached.state in open_states:
                self._call_to(cached, ToolCall.State.CANCELLED)

    # -- handlers -------------------------------------------------------------

    def run_started(self, event: RunStartedEvent, seq: int) -> None:
        run_transition(run=self.run, to=Run.Status.RUNNING, save=False)
        self.run.started_at = self.run.started_at or timezone.now()
        self.run_fields |= {"status", "started_at"}
        if event.input is not None:
            self._insert_new()
            _project_input_messages(
                thread=self.thread, run=self.run, run_input=event.input, seq=seq
            )

    def text_message_start(self, event: TextMessageStartEvent, seq: int) -> None:
        if self.message(event.message_id) is None:
            self._new_message(
                message_id=event.message_id,
                role=event.role or "assistant",
                content="",
                name=getattr(event, "name", None) or "",
                run=self.run,
                position=seq,
            )

    def text_message_content(self, event: TextMessageContentEvent, seq: int) -> None:
        row = self.message(event.message_id)
        if row is not None:
            row.content = (
                row.content if isinstance(row.content, str) else ""
            ) + event.delta
            self.dirty_messages.add(event.message_id)

    def tool_call_start(self, event: ToolCallStartEvent, seq: int) -> None:
        parent_id = event.parent_message_id or event.tool_call_id
        if self.message(parent_id) is None:
            self._new_message(
                message_id=parent_id,
                role=Message.Role.ASSISTANT,
                content="",
                run=self.run,
                position=seq,
            )
        existing = self.tool_call(event.tool_call_id)
        if existing is None:
            call = ToolCall(
                thread=self.thread,
                run=self.run,
                tool_call_id=event.tool_call_id,
                parent_message_id=parent_id,
                name=event.tool_call_name,
                arguments_text="",
                state=ToolCall.State.STREAMING,
                position=seq,
                metadata=event.metadata,
            )
            self.tool_calls[event.tool_call_id] = call
            self._new_calls.append(call)
        elif existing.state in (ToolCall.State.COMPLETE, ToolCall.State.STREAMING):
            # TC-06 reopen: arguments append, the original name is kept
            self._call_to(existing, ToolCall.State.STREAMING)
        else:
            # An answered call is never reopened (DC-04); its arguments still append
            # to the log's record of what the agent sent.
            logger.warning(
                "call %s reopened after it was answered (%s); state kept",
                existing.tool_call_id,
                existing.state,
            )

    def tool_call_args(self, event: ToolCallArgsEvent, seq: int) -> None:
        row = self.tool_call(event.tool_call_id)
        if row is not None:
            row.arguments_text += event.delta
            self.dirty_calls.add(event.tool_call_id)

    def tool_call_end(self, event: ToolCallEndEvent, seq: int) -> None:
        row = self.tool_call(event.tool_call_id)
        if row is not None:
            row.arguments = parse_json_or_none(row.arguments_text)
            if event.metadata:
                row.metadata = {**(row.metadata or {}), **event.metadata}
            if row.state == ToolCall.State.STREAMING:
                tool_call_transition(call=row, to=ToolCall.State.COMPLETE, save=False)
            self.dirty_calls.add(event.tool_call_id)

    def tool_call_result(self, event: ToolCallResultEvent, seq: int) -> None:
        # Stored as JSON: the parts become their dicts.
        content: str | list[Any] = event.content
        if not isinstance(content, str):
            content = [
                part.model_dump(mode="json", by_alias=True, exclude_none=True)
                if hasattr(part, "model_dump")
                else part
                for part in content
            ]
        error = (event.metadata or {}).get("error") if event.metadata else None
        existing = self._answer(event.tool_call_id)
        if existing is not None:
            # The application's own answer, reported in this run (see RunRecorder).
            if existing.run_id is None and existing.pk is not None:
                Message.objects.filter(pk=existing.pk).update(run=self.run)
                existing.run = self.run
            return
        self.answers[event.tool_call_id] = self._new_message(
            message_id=event.message_id,
            role=Message.Role.TOOL,
            content=content,
            tool_call_id=event.tool_call_id,
            error=error,
            run=self.run,
            position=seq,
        )
        row = self.tool_call(event.tool_call_id)
        if row is not None and row.state not in _DECIDED_AGAINST:
            self._call_to(row, _result_state(error))

    def state_snapshot(self, event: StateSnapshotEvent, seq: int) -> None:
        self.thread.replace_state(event.snapshot)

    def state_delta(self, event: StateDeltaEvent, seq: int) -> None:
        self.thread.replace_state(apply_json_patch(self.thread.state, event.delta))

    def run_finished(self, event: RunFinishedEvent, seq: int) -> None:
        run = self.run
        outcome = event.outcome
        outcome_type = getattr(outcome, "type", "success") if outcome else "success"
        run.outcome = outcome_type
        run.finished_at = timezone.now()
        pending: list[str] = []
        self._insert_new()
        if outcome_type == Run.Outcome.CANCELLED:
            run_transition(run=run, to=Run.Status.CANCELLED, save=False)
            self._cancel_open_calls()
        else:
            interrupts = (
                _interrupts_json(outcome) if outcome_type == "interrupt" else []
            )
            # A call an interrupt is bound to is the remote agent's own: it waits for
            # the operator's decision (IR-18) and the agent answers it after resume,
            # so it is not pending for Countersign or the client.
            bound = {i["toolCallId"] for i in interrupts if i.get("toolCallId")}
            unanswered = list(
                ToolCall.objects.filter(run=run)
                .unanswered()
                .order_by("position", "id")
                .values_list("tool_call_id", "name", "arguments_text")
            )
            # A framework's companion of a held call (Agent Framework's
            # confirm_changes) is answered with the interrupt, in that framework's
            # terms (threads.answers.interrupt_companions_answer), never refused.
            companions = {
                call_id
                for call_id, name, text in unanswered
                if companion_call_for(name=name, arguments=text, held_ids=bound)
            }
            pending = [
                call_id
                for call_id, _, _ in unanswered
                if call_id not in bound and call_id not in companions
            ]
            run.interrupts = interrupts
            self.run_fields.add("interrupts")
            for call_id in sorted(bound | companions):
                row = self.tool_call(call_id)
                if row is not None and row.state in (
                    ToolCall.State.STREAMING,
                    ToolCall.State.COMPLETE,
                ):
                    self._call_to(row, ToolCall.State.PENDING)
                    if call_id in companions:
                        # It waits for the decision on the call it stands beside.
                        self._call_to(row, ToolCall.State.AWAITING_APPROVAL)
            run_transition(
                run=run,
                to=Run.Status.AWAITING_TOOLS
                if pending or interrupts
                else Run.Status.FINISHED,
                save=False,
            )
        run.pending_tool_call_ids = pending
        if event.model_extra and "usage" in (event.model_extra or {}):
            run.usage = event.model_extra["usage"]
        usage = getattr(event, "usage", None)
        if usage:
            run.usage = [
                u.model_dump(mode="json", by_alias=True, exclude_none=True)
                for u in usage
            ]
        for call_id in pending:
            row = self.tool_call(call_id)
            if row is not None:
                self._call_to(row, ToolCall.State.PENDING)
        self.run_fields |= {
            "status",
            "outcome",
            "finished_at",
            "pending_tool_call_ids",
            "usage",
        }

    def run_error(self, event: RunErrorEvent, seq: int) -> None:
        run = self.run
        run_transition(run=run, to=Run.Status.ERROR, save=False)
        run.error_message = event.message
        run.error_code = event.code or ""
        run.finished_at = timezone.now()
        self.run_fields |= {"status", "error_message", "error_code", "finished_at"}
        self._cancel_open_calls()

    # -- write-back -----------------------------------------------------------

    def _write_back(self) -> None:
        self._insert_new()
        messages = [self.messages[m] for m in sorted(self.dirty_messages)]
        if len(messages) == 1:
            Message.objects.filter(pk=messages[0].pk).update(
                content=messages[0].content
            )
        elif messages:
            Message.objects.bulk_update(messages, ["content"])
        now = timezone.now()
        calls = [self.tool_calls[c] for c in sorted(self.dirty_calls)]
        for call in calls:
            call.updated_at = now
        # Persists what the handlers (and tool_call_transition) set in memory.
        if len(calls) == 1:
            calls[0].save(update_fields=_CALL_FIELDS)
        elif calls:
            ToolCall.objects.bulk_update(calls, _CALL_FIELDS)
        if self.run_fields:
            self.run.save(update_fields=sorted(self.run_fields))


_MESSAGE_EVENTS = frozenset(
    {EventType.TEXT_MESSAGE_START, EventType.TEXT_MESSAGE_CONTENT}
)
_CALL_EVENTS = frozenset(
    {
        EventType.TOOL_CALL_START,
        EventType.TOOL_CALL_ARGS,
        EventType.TOOL_CALL_END,
        EventType.TOOL_CALL_RESULT,
    }
)
_CALL_FIELDS = ["arguments_text", "arguments", "state", "metadata", "updated_at"]

_HANDLERS: dict[str, _Handler] = {
    EventType.RUN_STARTED: Projection.run_started,
    EventType.TEXT_MESSAGE_START: Projection.text_message_start,
    EventType.TEXT_MESSAGE_CONTENT: Projection.text_message_content,
    EventType.TOOL_CALL_START: Projection.tool_call_start,
    EventType.TOOL_CALL_ARGS: Projection.tool_call_args,
    EventType.TOOL_CALL_END: Projection.tool_call_end,
    EventType.TOOL_CALL_RESULT: Projection.tool_call_result,
    EventType.STATE_SNAPSHOT: Projection.state_snapshot,
    EventType.STATE_DELTA: Projection.state_delta,
    EventType.RUN_FINISHED: Projection.run_finished,
    EventType.RUN_ERROR: Projection.run_error,
}


#: States of an interrupt-bound call an operator refused, cancelled or let expire: the remote
#: agent still answers it after resume (IR-18), and that answer keeps the state.
_DECIDED_AGAINST = frozenset(
    {ToolCall.State.DECLINED, ToolCall.State.EXPIRED, ToolCall.State.CANCELLED}
)


def _interrupts_json(outcome: Any) -> list[dict[str, Any]]:
    """Return an interrupt outcome's ``interrupts`` as camelCase JSON objects (IR-18).

    A tool approval spelled the field's other ways (``human_approval``,
    ``confirmation``...) whose call id sits in its metadata gets that id as
    ``toolCallId`` (:func:`agentcore.interrupts.interrupt_tool_call_id`).
    """
    interrupts = []
    for item in getattr(outcome, "interrupts", None) or []:
        data = (
            item.model_dump(mode="json", by_alias=True, exclude_none=True)
            if hasattr(item, "model_dump")
            else dict(item)
        )
        call_id = interrupt_tool_call_id(data)
        if call_id and not data.get("toolCallId"):
            data["toolCallId"] = call_id
        interrupts.append(data)
    return interrupts


def _result_state(error: str | None) -> str:
    """Return the state a call's result puts it in: a cancelled tool is ``cancelled``.

    The agent loop answers a call it was executing when the run was cancelled
    with the error ``"cancelled"`` (BC20); the call is then cancelled, not failed,
    whether or not the run's end lands in the same flush.
    """
    if error == "cancelled":
        return ToolCall.State.CANCELLED
    return ToolCall.State.FAILED if error else ToolCall.State.SUCCEEDED


def _project_input_messages(
    *, thread: Thread, run: Run, run_input: Any, seq: int
) -> None:
    """Store messages of a ``RUN_STARTED.input`` echo that the thread does not hold yet."""
    messages = getattr(run_input, "messages", None)
    if messages is None and isinstance(run_input, dict):
        messages = run_input.get("messages", [])
    known = set(
        Message.objects.filter(thread=thread).values_list("message_id", flat=True)
    )
    for raw in messages or []:
        data = (
            raw
            if isinstance(raw, dict)
            else raw.model_dump(mode="json", by_alias=True, exclude_none=True)
        )
        if data.get("id") in known:
            continue
        message_create_from_agui(thread=thread, data=data, run=None, position=seq)
        known.add(data["id"])


#: Plain messages written per INSERT by :func:`messages_create_from_agui`.
HISTORY_BATCH = 1000


def messages_create_from_agui(
    *,
    thread: Thread,
    messages: Sequence[dict[str, Any]],
    position: int,
    tool_answer_check: Callable[[dict[str, Any]], None] | None = None,
) -> int:
    """Create the Messages of AG-UI ``messages`` (camelCase JSON), in order; return how many.

    A client's history (a 10,000-message conversation, B8) is mostly plain
    messages: those (no ``toolCalls``, not a tool result) are written
    :data:`HISTORY_BATCH` to an INSERT; a message with calls or a tool result
    goes through :func:`message_create_from_agui` (its ToolCall rows, the call it
    answers), the plain ones before it written first, so rows keep the input's
    order. ``tool_answer_check`` sees each tool message once every message
    before it is written, and may raise to refuse it. Raises
    :class:`django.db.IntegrityError` on a duplicate id.
    """
    plain: list[Message] = []

    def write() -> None:
        Message.objects.bulk_create(plain, batch_size=HISTORY_BATCH)
        plain.clear()

    for data in messages:
        role = data["role"]
        if role == Message.Role.TOOL or (
            role == Message.Role.ASSISTANT and data.get("toolCalls")
        ):
            write()
            if role == Message.Role.TOOL and tool_answer_check is not None:
                tool_answer_check(data)
            message_create_from_agui(
                thread=thread, data=data, run=None, position=position
            )
            continue
        plain.append(
            Message(
                thread=thread,
                message_id=data["id"],
                role=role,
                content=data.get("content") if data.get("content") is not None else "",
                name=data.get("name") or "",
                position=position,
            )
        )
    write()
    return len(messages)


def message_create_from_agui(
    *, thread: Thread, data: dict[str, Any], run: Run | None, position: int
) -> Message:
    """Create a Message (and its ToolCall rows, for an assistant message) from AG-UI JSON.

    ``data`` is one AG-UI message object (camelCase). Assistant ``toolCalls`` become
    :class:`ToolCall` rows owned by ``run`` or, when ``run`` is ``None``, by the
    thread's latest run. A tool message answers its call (a client answering its
    own frontend tool). Raises :class:`django.db.IntegrityError` on a duplicate id.
    """
    role = data["role"]
    row = Message.objects.create(
        thread=thread,
        message_id=data["id"],
        role=role,
        content=data.get("content") if data.get("content") is not None else "",
        name=data.get("name") or "",
        tool_call_id=data.get("toolCallId") if role == Message.Role.TOOL else None,
        error=data.get("error") if role == Message.Role.TOOL else None,
        run=run,
        position=position,
        metadata={CLIENT_CALL_ID: data[CLIENT_CALL_ID]}
        if role == Message.Role.TOOL and data.get(CLIENT_CALL_ID)
        else {},
    )
    if role == Message.Role.TOOL:
        # A client answering a call itself (its own frontend tool): the call is done.
        for call in ToolCall.objects.filter(
            thread=thread,
            tool_call_id=row.tool_call_id,
            state__in=[ToolCall.State.COMPLETE, ToolCall.State.PENDING],
        ):
            tool_call_transition(
                call=call,
                to=ToolCall.State.FAILED if row.error else ToolCall.State.SUCCEEDED,
            )
    # Only an assistant message's toolCalls are typed (AG-UI ToolCall objects); on
    # any other role the key is an untyped extra field and names no call.
    calls = data.get("toolCalls") if role == Message.Role.ASSISTANT else None
    owner_run = (
        (run or thread.runs.order_by("-created_at", "-id").first()) if calls else None
    )
    for index, call_data in enumerate(calls or []):
        if owner_run is None:
            break
        text = call_data.get("function", {}).get("arguments", "")
        ToolCall.objects.get_or_create(
            thread=thread,
            tool_call_id=call_data["id"],
            defaults={
                "run": owner_run,
                "parent_message_id": data["id"],
                "name": call_data.get("function", {}).get("name", ""),
                "arguments_text": text,
                "arguments": parse_json_or_none(text),
                "state": ToolCall.State.COMPLETE,
                "position": position * 1000 + index,
                "metadata": {CLIENT_CALL_ID: call_data[CLIENT_CALL_ID]}
                if call_data.get(CLIENT_CALL_ID)
                else {},
            },
        )
    return row


def parse_json_or_none(text: str) -> Any:
    """Return ``text``'s JSON value, or ``None`` when it is not JSON.

    This is the raw parse kept on ``ToolCall.arguments`` for display; validation
    against the tool's schema happens once, at dispatch (``agentcore.arguments``).
    """
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return None


def apply_json_patch(document: Any, operations: list[Any]) -> Any:
    """Apply RFC 6902 ``operations`` to a copy of ``document`` and return it.

    Uses the ``jsonpatch`` library. Raises :class:`ValueError` naming the
    operation on a bad path, an unknown operation or a failed ``test``.
    """
    ops = [op if isinstance(op, dict) else dict(op) for op in operations]
    for op in ops:
        try:
            patch = jsonpatch.JsonPatch([op])
            document = patch.apply(document, in_place=False)
        except jsonpatch.JsonPatchTestFailed as error:
            raise ValueError(f"test failed at {op.get('path')!r}") from error
        except (
            jsonpatch.JsonPatchException,
            jsonpatch.JsonPointerException,
            KeyError,
            IndexError,
            TypeError,
        ) as error:
            raise ValueError(
                f"JSON Patch operation {op!r} does not apply: {error}"
            ) from error
    return document
