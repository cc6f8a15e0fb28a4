"""Writes for threads: recording events, projecting them onto rows, starting runs.

Every AG-UI event enters the database through :class:`RunRecorder` (or the
:func:`record_events` convenience around it): it is validated and normalized by
:class:`agentcore.stream.RunStream`, appended to the thread's gapless event log,
projected onto :class:`Message`, :class:`ToolCall` and :class:`Run` rows in the same
transaction, and published to the thread's channel group after commit.
Implements DC-01, DC-02 and the pipeline in DESIGN.md.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.utils import timezone

from agentcore.events import (
    BaseEvent,
    EventType,
    ToolCallResultEvent,
    event_from_dict,
    event_to_dict,
)
from agentcore.stream import RunStream, StreamViolation
from threads.conf import countersign_settings
from threads.models import Event, Message, Run, Thread, ToolCall
from threads.validation import storable

logger = logging.getLogger(__name__)

#: ``Message.metadata["source"]`` of tool messages Countersign itself wrote.
APPLICATION_SOURCE = "countersign"

_DELTA_TYPES = {EventType.TOOL_CALL_ARGS, EventType.TEXT_MESSAGE_CONTENT}
_TERMINAL_TYPES = {EventType.RUN_FINISHED, EventType.RUN_ERROR}


def _item_id(event: BaseEvent) -> str:
    return getattr(event, "tool_call_id", None) or getattr(event, "message_id", "")


def _merge_delta(buffer: list[BaseEvent], event: BaseEvent) -> bool:
    """Append ``event``'s delta to a buffered delta of the same item, if order allows.

    Walk back over buffered delta events only: a non-delta event (a START, END,
    result...) is a boundary no delta may cross. Return whether it merged.
    """
    item = _item_id(event)
    for index in range(len(buffer) - 1, -1, -1):
        previous = buffer[index]
        if previous.type not in _DELTA_TYPES:
            return False
        if previous.type == event.type and _item_id(previous) == item:
            merged = previous.model_copy(update={"delta": previous.delta + event.delta})
            buffer[index] = merged
            return True
    return False


@dataclass
class _Projection:
    """Rows touched by one flush, written back once at its end."""

    messages: dict[str, Message] = field(default_factory=dict)
    tool_calls: dict[str, ToolCall] = field(default_factory=dict)
    dirty_messages: set[str] = field(default_factory=set)
    dirty_calls: set[str] = field(default_factory=set)


class RunRecorder:
    """Record one run's events: validate, coalesce, append to the log, project, publish.

    ``record(events)`` accepts AG-UI event models or their JSON dicts, in stream
    order. Deltas (``TOOL_CALL_ARGS``, ``TEXT_MESSAGE_CONTENT``) are coalesced and
    written when ``coalesce_ms`` milliseconds have passed since the first buffered
    event or ``coalesce_bytes`` bytes of deltas are buffered, and at the run's
    terminal event or an explicit :meth:`flush`.

    On a fatal protocol violation the valid events before it are written, every
    item still open is closed, and the run ends with a ``RUN_ERROR`` whose message
    names the violation (rule, event index, id); nothing already recorded is lost.
    :attr:`violation` then holds the :class:`StreamViolation` and further events are
    ignored. Implements DC-01, ER-01, FT-04, FT-05.
    """

    def __init__(
        self,
        run: Run,
        *,
        coalesce_ms: float | None = None,
        coalesce_bytes: int | None = None,
        publish: bool = True,
    ) -> None:
        self.run = run
        self.thread = run.thread
        self.coalesce_ms = (
            countersign_settings.COALESCE_MS if coalesce_ms is None else coalesce_ms
        )
        self.coalesce_bytes = (
            countersign_settings.COALESCE_BYTES
            if coalesce_bytes is None
            else coalesce_bytes
        )
        self.publish = publish
        self.violation: StreamViolation | None = None
        self.written: list[Event] = []
        self._buffer: list[BaseEvent] = []
        self._buffer_bytes = 0
        self._buffer_since: float | None = None
        prior_calls = ToolCall.objects.filter(thread=self.thread).exclude(run=run)
        prior_messages = Message.objects.filter(thread=self.thread).exclude(run=run)
        # Tool messages the application wrote since the last run (approved,
        # rejected, expired, cancelled calls) enter the log as TOOL_CALL_RESULT
        # events right after this run's RUN_STARTED, so AG-UI clients following the
        # thread receive them as events too (BC21, BC32).
        self._application_results = [
            ToolCallResultEvent(
                message_id=m.message_id,
                tool_call_id=m.tool_call_id,
                content=m.content,
                role="tool",
                metadata={"error": m.error} if m.error else None,
            )
            for m in prior_messages.filter(
                role=Message.Role.TOOL,
                run__isnull=True,
                metadata__source=APPLICATION_SOURCE,
            ).order_by("position", "id")
        ]
        reported = {e.message_id for e in self._application_results}
        self.stream = RunStream(
            thread_id=self.thread.thread_id,
            run_id=run.run_id,
            prior_tool_call_ids=list(
                prior_calls.values_list("tool_call_id", flat=True)
            ),
            prior_message_ids=[
                m
                for m in prior_messages.values_list("message_id", flat=True)
                if m not in reported
            ],
        )

    # -- intake ---------------------------------------------------------------

    @property
    def finished(self) -> bool:
        """Whether the run reached its terminal event (or a violation ended it)."""
        return self.violation is not None or self.stream.status in {
            "finished",
            "errored",
        }

    def record(self, events: Iterable[BaseEvent | dict[str, Any]]) -> list[Event]:
        """Feed ``events``; return the log rows written by any flush this call caused."""
        written: list[Event] = []
        for event in events:
            if self.violation is not None:
                logger.warning(
                    "run %s: event ignored after a protocol violation", self.run.run_id
                )
                continue
            try:
                normalized = self.stream.feed(event)
            except StreamViolation as violation:
                written.extend(self._fail(violation))
                continue
            if self._application_results and any(
                item.type == EventType.RUN_STARTED for item in normalized
            ):
                injected, self._application_results = self._application_results, []
                for result in injected:
                    normalized.extend(self.stream.feed(result))
            terminal = False
            for item in normalized:
                self._buffer_event(item)
                terminal = terminal or item.type in _TERMINAL_TYPES
            if terminal or self.flush_due():
                written.extend(self.flush())
        return written

    def flush_due(self) -> bool:
        """Whether the buffer's age or size has reached the coalescing window."""
        if not self._buffer:
            return False
        if self._buffer_bytes >= self.coalesce_bytes:
            return True
        assert self._buffer_since is not None
        return (time.monotonic() - self._buffer_since) * 1000 >= self.coalesce_ms

    def seconds_until_flush(self) -> float | None:
        """Seconds until the buffer must be flushed, or ``None`` when it is empty."""
        if not self._buffer or self._buffer_since is None:
            return None
        elapsed = time.monotonic() - self._buffer_since
        return max(0.0, self.coalesce_ms / 1000 - elapsed)

    def _buffer_event(self, event: BaseEvent) -> None:
        if self._buffer_since is None:
            self._buffer_since = time.monotonic()
        if event.type in _DELTA_TYPES:
            self._buffer_bytes += len(event.delta)
            if _merge_delta(self._buffer, event):
                return
        self._buffer.append(event)

    def close_open_items(self) -> None:
        """Buffer END events for every item still open (ER-01), as the stream machine made them.

        The machine has already applied them, so they are buffered, not fed again.
        """
        try:
            closing = self.stream.close_open_items()
        except Exception:
            logger.exception("run %s: could not close open items", self.run.run_id)
            closing = []
        for item in closing:
            self._buffer_event(item)

    def _fail(self, violation: StreamViolation) -> list[Event]:
        self.violation = violation
        logger.warning("run %s: %s", self.run.run_id, violation)
        self.close_open_items()
        from agentcore.events import RunErrorEvent

        self._buffer.append(
            RunErrorEvent(
                message=f"The agent's event stream broke the AG-UI protocol: {violation}",
                code="protocol_violation",
            )
        )
        return self.flush()

    # -- write ----------------------------------------------------------------

    def flush(self) -> list[Event]:
        """Write the buffered events and their projection in one transaction.

        Returns the new log rows, with their ``seq``. Publishing to the thread's
        channel group happens after the transaction commits.
        """
        if not self._buffer:
            return []
        batch, self._buffer = self._buffer, []
        self._buffer_bytes = 0
        self._buffer_since = None
        # PostgreSQL stores no NUL character: model output carrying one is kept
        # with U+FFFD instead, in the log and in the projection alike.
        payloads = []
        for index, event in enumerate(batch):
            payload = event_to_dict(event)
            clean = storable(payload, what=f"event of run {self.run.run_id}")
            if clean is not payload:
                batch[index] = event_from_dict(clean)
            payloads.append(clean)
        with transaction.atomic():
            thread = Thread.objects.select_for_update().get(pk=self.thread.pk)
            first = thread.next_seq
            rows = [
                Event(
                    thread=thread,
                    run=self.run,
                    seq=first + offset,
                    type=str(event.type.value),
                    payload=payload,
                )
                for offset, (event, payload) in enumerate(
                    zip(batch, payloads, strict=True)
                )
            ]
            Thread.objects.filter(pk=thread.pk).update(
                next_seq=first + len(rows), updated_at=timezone.now()
            )
            Event.objects.bulk_create(rows)
            _project(
                thread=thread, run=self.run, events=batch, seqs=[r.seq for r in rows]
            )
            if self.publish:
                transaction.on_commit(
                    lambda: publish_events(thread=thread, events=rows), robust=True
                )
        self.written.extend(rows)
        return rows


def record_events(
    *, run: Run, events: Sequence[BaseEvent | dict[str, Any]]
) -> list[Event]:
    """Record ``events`` of ``run`` and flush; return the log rows written.

    A convenience for callers that hold all of a run's events at once (tests,
    ``loaddemo``, replays); a streaming worker keeps one :class:`RunRecorder`.
    Implements DC-01.
    """
    recorder = RunRecorder(run)
    recorder.record(events)
    recorder.flush()
    return recorder.written


def thread_replay(
    *, payloads: Sequence[dict[str, Any]], thread_id: str, owner: Any
) -> Thread:
    """Rebuild a thread from its event log ``payloads`` (in ``seq`` order); return it.

    Each ``RUN_STARTED`` opens a run; every event goes through the same recorder
    as live events, without coalescing, so the log and its projection come out
    identical. Implements DC-01 (the log is the truth).
    """
    thread = Thread.objects.create(thread_id=thread_id, owner=owner)
    recorder: RunRecorder | None = None
    for payload in payloads:
        if payload.get("type") == "RUN_STARTED":
            if recorder is not None:
                recorder.flush()
            run = Run.objects.create(
                thread=thread, run_id=payload["runId"], status=Run.Status.RUNNING
            )
            recorder = RunRecorder(run, coalesce_ms=0, coalesce_bytes=0, publish=False)
        if recorder is None:
            raise ValueError("a thread's log must start with RUN_STARTED")
        recorder.record([payload])
    if recorder is not None:
        recorder.flush()
    return thread


# -- projection ---------------------------------------------------------------


def _project(
    *, thread: Thread, run: Run, events: list[BaseEvent], seqs: list[int]
) -> None:
    """Apply ``events`` to Message/ToolCall/Run rows (one write per touched row)."""
    p = _Projection()

    def message(message_id: str) -> Message | None:
        if message_id not in p.messages:
            found = Message.objects.filter(thread=thread, message_id=message_id).first()
            if found is None:
                return None
            p.messages[message_id] = found
        return p.messages[message_id]

    def tool_call(tool_call_id: str) -> ToolCall | None:
        if tool_call_id not in p.tool_calls:
            found = ToolCall.objects.filter(
                thread=thread, tool_call_id=tool_call_id
            ).first()
            if found is None:
                return None
            p.tool_calls[tool_call_id] = found
        return p.tool_calls[tool_call_id]

    def ensure_assistant(message_id: str, seq: int) -> Message:
        existing = message(message_id)
        if existing is not None:
            return existing
        created = Message.objects.create(
            thread=thread,
            message_id=message_id,
            role=Message.Role.ASSISTANT,
            content="",
            run=run,
            position=seq,
        )
        p.messages[message_id] = created
        return created

    run_fields: set[str] = set()
    for event, seq in zip(events, seqs, strict=True):
        kind = event.type
        if kind == EventType.RUN_STARTED:
            run.status = Run.Status.RUNNING
            run.started_at = run.started_at or timezone.now()
            run_fields |= {"status", "started_at"}
            if event.input is not None:
                _project_input_messages(
                    thread=thread, run=run, run_input=event.input, seq=seq
                )
        elif kind == EventType.TEXT_MESSAGE_START:
            role = event.role or "assistant"
            existing = message(event.message_id)
            if existing is None:
                p.messages[event.message_id] = Message.objects.create(
                    thread=thread,
                    message_id=event.message_id,
                    role=role,
                    content="",
                    name=getattr(event, "name", None) or "",
                    run=run,
                    position=seq,
                )
        elif kind == EventType.TEXT_MESSAGE_CONTENT:
            row = message(event.message_id)
            if row is not None:
                row.content = (
                    row.content if isinstance(row.content, str) else ""
                ) + event.delta
                p.dirty_messages.add(event.message_id)
        elif kind == EventType.TOOL_CALL_START:
            parent_id = event.parent_message_id or event.tool_call_id
            ensure_assistant(parent_id, seq)
            existing_call = tool_call(event.tool_call_id)
            if existing_call is None:
                p.tool_calls[event.tool_call_id] = ToolCall.objects.create(
                    thread=thread,
                    run=run,
                    tool_call_id=event.tool_call_id,
                    parent_message_id=parent_id,
                    name=event.tool_call_name,
                    arguments_text="",
                    state=ToolCall.State.STREAMING,
                    position=seq,
                    metadata=event.metadata,
                )
            else:  # TC-06 reopen: arguments append, the original name is kept
                existing_call.state = ToolCall.State.STREAMING
                p.dirty_calls.add(event.tool_call_id)
        elif kind == EventType.TOOL_CALL_ARGS:
            row_call = tool_call(event.tool_call_id)
            if row_call is not None:
                row_call.arguments_text += event.delta
                p.dirty_calls.add(event.tool_call_id)
        elif kind == EventType.TOOL_CALL_END:
            row_call = tool_call(event.tool_call_id)
            if row_call is not None:
                row_call.arguments = _parse_or_none(row_call.arguments_text)
                if event.metadata:
                    row_call.metadata = {**(row_call.metadata or {}), **event.metadata}
                if row_call.state == ToolCall.State.STREAMING:
                    row_call.state = ToolCall.State.COMPLETE
                p.dirty_calls.add(event.tool_call_id)
        elif kind == EventType.TOOL_CALL_RESULT:
            content = event.content
            if not isinstance(content, str):
                content = [
                    part.model_dump(mode="json", by_alias=True, exclude_none=True)
                    if hasattr(part, "model_dump")
                    else part
                    for part in content
                ]
            error = (event.metadata or {}).get("error") if event.metadata else None
            existing_answer = Message.objects.filter(
                thread=thread, role=Message.Role.TOOL, tool_call_id=event.tool_call_id
            ).first()
            if existing_answer is not None:
                # The application's own answer, reported in this run (see RunRecorder).
                if existing_answer.run_id is None:
                    Message.objects.filter(pk=existing_answer.pk).update(run=run)
                continue
            Message.objects.create(
                thread=thread,
                message_id=event.message_id,
                role=Message.Role.TOOL,
                content=content,
                tool_call_id=event.tool_call_id,
                error=error,
                run=run,
                position=seq,
            )
            row_call = tool_call(event.tool_call_id)
            if row_call is not None:
                row_call.state = (
                    ToolCall.State.FAILED if error else ToolCall.State.SUCCEEDED
                )
                p.dirty_calls.add(event.tool_call_id)
        elif kind == EventType.STATE_SNAPSHOT:
            thread.state = event.snapshot
            Thread.objects.filter(pk=thread.pk).update(state=event.snapshot)
        elif kind == EventType.STATE_DELTA:
            thread.state = apply_json_patch(thread.state, event.delta)
            Thread.objects.filter(pk=thread.pk).update(state=thread.state)
        elif kind == EventType.RUN_FINISHED:
            outcome = event.outcome
            outcome_type = getattr(outcome, "type", "success") if outcome else "success"
            run.outcome = outcome_type
            run.finished_at = timezone.now()
            if outcome_type == Run.Outcome.CANCELLED:
                run.status = Run.Status.CANCELLED
                pending: list[str] = []
                # A cancelled run leaves nothing to answer: its calls are cancelled,
                # or they would hold the thread (thread_check_can_start_run) forever.
                for row_call in ToolCall.objects.filter(
                    run=run,
                    state__in=[ToolCall.State.STREAMING, ToolCall.State.COMPLETE],
                ):
                    cached = p.tool_calls.setdefault(row_call.tool_call_id, row_call)
                    cached.state = ToolCall.State.CANCELLED
                    p.dirty_calls.add(row_call.tool_call_id)
            else:
                pending = _derived_pending(run=run)
                run.status = (
                    Run.Status.AWAITING_TOOLS if pending else Run.Status.FINISHED
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
                row_call = tool_call(call_id)
                if row_call is not None:
                    row_call.state = ToolCall.State.PENDING
                    p.dirty_calls.add(call_id)
            run_fields |= {
                "status",
                "outcome",
                "finished_at",
                "pending_tool_call_ids",
                "usage",
            }
        elif kind == EventType.RUN_ERROR:
            run.status = Run.Status.ERROR
            run.error_message = event.message
            run.error_code = event.code or ""
            run.finished_at = timezone.now()
            run_fields |= {"status", "error_message", "error_code", "finished_at"}
            for row_call in ToolCall.objects.filter(
                run=run, state__in=[ToolCall.State.STREAMING, ToolCall.State.COMPLETE]
            ):
                cached = p.tool_calls.setdefault(row_call.tool_call_id, row_call)
                cached.state = ToolCall.State.CANCELLED
                p.dirty_calls.add(row_call.tool_call_id)

    for message_id in p.dirty_messages:
        row = p.messages[message_id]
        Message.objects.filter(pk=row.pk).update(content=row.content)
    for call_id in p.dirty_calls:
        row_call = p.tool_calls[call_id]
        ToolCall.objects.filter(pk=row_call.pk).update(
            arguments_text=row_call.arguments_text,
            arguments=row_call.arguments,
            state=row_call.state,
            metadata=row_call.metadata,
            updated_at=timezone.now(),
        )
    if run_fields:
        run.save(update_fields=sorted(run_fields))


def _derived_pending(*, run: Run) -> list[str]:
    """Return the run's calls with no tool message, in creation order (FT-05)."""
    answered = set(
        Message.objects.filter(thread=run.thread, role=Message.Role.TOOL).values_list(
            "tool_call_id", flat=True
        )
    )
    calls = list(ToolCall.objects.filter(run=run).order_by("position", "id"))
    return [c.tool_call_id for c in calls if c.tool_call_id not in answered]


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


def message_create_from_agui(
    *, thread: Thread, data: dict[str, Any], run: Run | None, position: int
) -> Message:
    """Create a Message (and its ToolCall rows, for an assistant message) from AG-UI JSON.

    ``data`` is one AG-UI message object (camelCase). Assistant ``toolCalls`` become
    :class:`ToolCall` rows owned by ``run`` or, when ``run`` is ``None``, by the
    thread's latest run. Raises :class:`django.db.IntegrityError` on a duplicate id.
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
    )
    if role == Message.Role.TOOL:
        # A client answering a call itself (its own frontend tool): the call is done.
        ToolCall.objects.filter(
            thread=thread,
            tool_call_id=row.tool_call_id,
            state__in=[ToolCall.State.COMPLETE, ToolCall.State.PENDING],
        ).update(state=ToolCall.State.FAILED if row.error else ToolCall.State.SUCCEEDED)
    owner_run = run or thread.runs.order_by("-created_at", "-id").first()
    for index, call in enumerate(data.get("toolCalls") or []):
        if owner_run is None:
            break
        text = call.get("function", {}).get("arguments", "")
        ToolCall.objects.get_or_create(
            thread=thread,
            tool_call_id=call["id"],
            defaults={
                "run": owner_run,
                "parent_message_id": data["id"],
                "name": call.get("function", {}).get("name", ""),
                "arguments_text": text,
                "arguments": _parse_or_none(text),
                "state": ToolCall.State.COMPLETE,
                "position": position * 1000 + index,
            },
        )
    return row


def _parse_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return None


def apply_json_patch(document: Any, operations: list[Any]) -> Any:
    """Apply RFC 6902 ``operations`` to a copy of ``document`` and return it.

    Supports ``add``, ``remove``, ``replace``, ``move``, ``copy`` and ``test``.
    Raises :class:`ValueError` naming the operation on a bad path or a failed test.
    """
    import copy

    doc = copy.deepcopy(document)

    def split(pointer: str) -> list[str]:
        if pointer == "":
            return []
        if not pointer.startswith("/"):
            raise ValueError(f"JSON pointer {pointer!r} must start with '/'")
        return [t.replace("~1", "/").replace("~0", "~") for t in pointer[1:].split("/")]

    def walk(root: Any, tokens: list[str]) -> Any:
        for token in tokens:
            root = root[int(token)] if isinstance(root, list) else root[token]
        return root

    def get(root: Any, pointer: str) -> Any:
        return walk(root, split(pointer))

    def put(root: Any, pointer: str, value: Any, *, replace: bool) -> Any:
        tokens = split(pointer)
        if not tokens:
            return value
        parent = walk(root, tokens[:-1])
        key = tokens[-1]
        if isinstance(parent, list):
            if key == "-":
                parent.append(value)
            elif replace:
                parent[int(key)] = value
            else:
                parent.insert(int(key), value)
        else:
            parent[key] = value
        return root

    def remove(root: Any, pointer: str) -> Any:
        tokens = split(pointer)
        parent = walk(root, tokens[:-1])
        if isinstance(parent, list):
            parent.pop(int(tokens[-1]))
        else:
            del parent[tokens[-1]]
        return root

    for raw in operations:
        op = raw if isinstance(raw, dict) else dict(raw)
        try:
            name, path = op["op"], op["path"]
            if name == "add":
                doc = put(doc, path, copy.deepcopy(op["value"]), replace=False)
            elif name == "replace":
                doc = put(doc, path, copy.deepcopy(op["value"]), replace=True)
            elif name == "remove":
                doc = remove(doc, path)
            elif name in {"move", "copy"}:
                value = copy.deepcopy(get(doc, op["from"]))
                if name == "move":
                    doc = remove(doc, op["from"])
                doc = put(doc, path, value, replace=False)
            elif name == "test":
                if get(doc, path) != op["value"]:
                    raise ValueError(f"test failed at {path!r}")
            else:
                raise ValueError(f"unknown JSON Patch operation {name!r}")
        except (KeyError, IndexError, TypeError) as error:
            raise ValueError(
                f"JSON Patch operation {op!r} does not apply: {error}"
            ) from error
    return doc


# -- publishing ---------------------------------------------------------------


def thread_group_name(thread_pk: int) -> str:
    """Return the Channels group that carries ``thread``'s events."""
    return f"thread.{thread_pk}"


def publish_events(*, thread: Thread, events: Sequence[Event]) -> None:
    """Ring the thread group's doorbell with ``events`` (at-most-once; the log is the truth)."""
    from threads.realtime import group_send

    if not events:
        return
    group_send(
        thread_group_name(thread.pk),
        {"type": "thread.events", "events": [e.as_wire() for e in events]},
    )


def event_payloads(events: Iterable[Event]) -> list[BaseEvent]:
    """Parse stored log rows back into AG-UI event models, in ``seq`` order."""
    return [event_from_dict(e.payload) for e in events]


# -- starting, executing and cancelling runs ----------------------------------


def _lock_thread(thread: Thread) -> Thread:
    return Thread.objects.select_for_update().get(pk=thread.pk)


def thread_create(
    *, owner: Any, title: str = "", agent: str = "demo", thread_id: str | None = None
) -> Thread:
    """Create a thread for ``owner`` talking to ``agent``.

    Raises :class:`threads.exceptions.UnknownAgent` when ``agent`` is not configured.
    """
    from threads.agent_config import agent_settings

    agent_settings(agent)
    fields: dict[str, Any] = {"owner": owner, "title": title[:300], "agent": agent}
    if thread_id:
        fields["thread_id"] = thread_id
    return Thread.objects.create(**fields)


def thread_check_can_start_run(*, thread: Thread) -> None:
    """Raise :class:`RunConflict` unless a new run may start on ``thread`` now.

    One run per thread at a time: refused while a run is queued or running, or
    while calls of the last run are still unanswered (FT-06: a continuing thread
    answers every pending call first). Raises :class:`ThreadArchived` for an
    archived thread.
    """
    from threads.exceptions import RunConflict, ThreadArchived
    from threads.selectors import thread_unanswered_calls

    if thread.archived_at is not None:
        raise ThreadArchived(
            f"thread {thread.thread_id!r} was archived at {thread.archived_at.isoformat()}; "
            "start a new thread to continue the conversation"
        )
    active = thread.runs.filter(status__in=Run.ACTIVE_STATUSES).first()
    if active is not None:
        raise RunConflict(
            f"run {active.run_id!r} is still {active.status} on this thread; wait for it to "
            "finish or cancel it (POST /api/runs/<id>/cancel/) before posting a message"
        )
    pending = thread_unanswered_calls(thread=thread)
    if pending:
        ids = [c.tool_call_id for c in pending]
        raise RunConflict(
            f"tool calls {ids!r} are waiting for an answer; an operator approves or rejects "
            "them in the approval queue, or cancel them with "
            f"POST /api/threads/{thread.thread_id}/cancel-pending/ (a reason is required)"
        )


def thread_archive(*, thread: Thread) -> Thread:
    """Archive ``thread`` (idempotent: the first archive time is kept); return it.

    An archived thread keeps its history but accepts no new messages
    (:class:`threads.exceptions.ThreadArchived`, HTTP 409).
    """
    with transaction.atomic():
        locked = _lock_thread(thread)
        if locked.archived_at is None:
            locked.archived_at = timezone.now()
            locked.save(update_fields=["archived_at", "updated_at"])
    return locked


def message_post(
    *,
    thread: Thread,
    content: str | list[dict[str, Any]],
    message_id: str | None = None,
    run_id: str | None = None,
) -> tuple[Message, Run]:
    """Record a user message and start a run for it; return both.

    The run is enqueued after the transaction commits. Raises
    :class:`threads.exceptions.RunConflict` (HTTP 409) while a run is active or calls
    are pending. Implements DC-01, FT-06.
    """
    with transaction.atomic():
        locked = _lock_thread(thread)
        thread_check_can_start_run(thread=locked)
        message = Message.objects.create(
            thread=locked,
            message_id=message_id or new_message_id(),
            role=Message.Role.USER,
            content=content,
            position=locked.next_seq,
        )
        run = run_create(thread=locked)
        if run_id:
            run.run_id = run_id
            run.save(update_fields=["run_id"])
    return message, run


def new_message_id() -> str:
    """Return a new thread-unique message id, in Countersign's namespace (threads.ids)."""
    from threads.ids import new_message_id as mint

    return mint()


def run_create(*, thread: Thread, continues: Run | None = None) -> Run:
    """Create a queued run on ``thread`` and enqueue its execution after commit.

    ``continues`` names the run whose pending calls this run follows up; the
    database allows one continuation per run. Must be called inside a transaction
    holding the thread's row lock.
    """
    from threads.execution import enqueue

    latest = thread.runs.order_by("-created_at", "-id").first()
    run = Run.objects.create(
        thread=thread,
        agent=thread.agent,
        parent_run=latest,
        continues=continues,
        status=Run.Status.QUEUED,
    )
    enqueue("threads.tasks.run_agent", run_pk=run.pk)
    return run


def run_input_build(*, run: Run) -> dict[str, Any]:
    """Build the AG-UI ``RunAgentInput`` (camelCase JSON) for ``run`` from its thread.

    ``messages`` is the stored history; ``tools`` the agent's application tools
    plus an AG-UI client's own tools (FT-01); ``context``, ``forwardedProps`` and
    ``state`` come from the client's input when it sent them (``Run.input["client"]``),
    else the thread's state.
    """
    from threads.agent_config import agent_application_tools
    from threads.selectors import thread_messages_agui

    thread = run.thread
    client = (run.input or {}).get("client", {})
    tools = [
        t.agui_tool().model_dump(mode="json", by_alias=True, exclude_none=True)
        for t in agent_application_tools(run.agent)
    ]
    # An AG-UI client's own frontend tools are advertised too (FT-01); a name the
    # agent already defines keeps the agent's definition.
    known = {t["name"] for t in tools}
    tools += [t for t in client.get("tools", []) if t.get("name") not in known]
    state = client.get("state")
    if state not in (None, {}) and state != thread.state:
        Thread.objects.filter(pk=thread.pk).update(state=state)
        thread.state = state
    data: dict[str, Any] = {
        "threadId": thread.thread_id,
        "runId": run.run_id,
        "protocolVersion": "1.0",
        "state": thread.state,
        "messages": thread_messages_agui(thread=thread),
        "tools": tools,
        "context": client.get("context", []),
        "forwardedProps": client.get("forwardedProps", {}),
    }
    if run.parent_run_id:
        data["parentRunId"] = run.parent_run.run_id
    return data


def run_execute(*, run_pk: int) -> Run:
    """Claim run ``run_pk``, run its agent and record every event; return the run.

    Idempotent under at-least-once delivery: a run that is no longer ``queued``
    is not started again; one found ``running`` (its worker died) is finished with
    a ``worker_lost`` error so it never stays running forever. Agent failures end
    the run with ``RUN_ERROR``; nothing already recorded is lost. Log lines carry
    the run and thread, and a heartbeat tells the janitor the worker is alive
    (``threads.janitor``).
    """
    from threads.janitor import run_supervision

    with run_supervision(run_pk=run_pk):
        return _run_execute(run_pk=run_pk)


def _run_execute(*, run_pk: int) -> Run:
    from agentcore.events import RunAgentInput

    with transaction.atomic():
        run = Run.objects.select_for_update().select_related("thread").get(pk=run_pk)
        if run.status == Run.Status.RUNNING:
            claimed = False
        elif run.status != Run.Status.QUEUED:
            return run
        else:
            claimed = True
            run.status = Run.Status.RUNNING
            run.started_at = timezone.now()
            if run.cancel_requested:
                claimed = False
            run.save(update_fields=["status", "started_at"])
    if not claimed:
        return run_fail(
            run=run,
            code="worker_lost" if not run.cancel_requested else "cancelled",
            message="The worker executing this run stopped before it finished; "
            "post the message again to retry."
            if not run.cancel_requested
            else "The run was cancelled before it started.",
        )
    recorder = RunRecorder(run)
    try:
        run_input_data = run_input_build(run=run)
        Run.objects.filter(pk=run.pk).update(input=run_input_data)
        run.input = run_input_data
        from threads.agent_config import agent_build

        agent = agent_build(run.agent)
        drive_agent(
            agent=agent,
            run_input=RunAgentInput.model_validate(run_input_data),
            recorder=recorder,
        )
    except Exception as error:
        logger.exception("run %s failed", run.run_id)
        recorder.flush()
        if not recorder.finished:
            _record_terminal_error(
                recorder,
                code="internal_error",
                message=f"The run failed inside Countersign ({type(error).__name__}); "
                "the details are in the server log.",
            )
    run.refresh_from_db()
    if run.status == Run.Status.AWAITING_TOOLS:
        from approvals.services import pending_calls_dispatch

        pending_calls_dispatch(run=run)
        run.refresh_from_db()
    elif run.status in (Run.Status.CANCELLED, Run.Status.ERROR):
        run_answer_dangling_calls(run=run)
    return run


def run_answer_dangling_calls(*, run: Run) -> list[str]:
    """Answer every call of an ended ``run`` that has no result with an "interrupted" error.

    A run cancelled or failed while calls were streaming or executing would leave
    assistant ``toolCalls`` without tool messages, which every provider refuses
    on the next request (BC20). The synthetic answer is persisted right after the
    run, before any later message. Returns the answered ``toolCallId`` values.
    Implements FT-06.
    """
    from agentcore.history import INTERRUPTED_CONTENT, INTERRUPTED_ERROR
    from approvals.services import tool_message_write

    answered: list[str] = []
    with transaction.atomic():
        _lock_thread(run.thread)
        for call in (
            ToolCall.objects.select_for_update().filter(run=run).order_by("position")
        ):
            if call.state in (
                ToolCall.State.AWAITING_APPROVAL,
                ToolCall.State.APPROVED,
                ToolCall.State.EXECUTING,
                ToolCall.State.OUTCOME_UNKNOWN,
            ):
                continue  # the approval workflow owns these
            message = tool_message_write(
                call=call,
                content=INTERRUPTED_CONTENT,
                error=INTERRUPTED_ERROR,
                state=ToolCall.State.CANCELLED,
            )
            if message is not None:
                answered.append(call.tool_call_id)
    return answered


def _record_terminal_error(recorder: RunRecorder, *, code: str, message: str) -> None:
    from agentcore.events import RunErrorEvent, RunStartedEvent

    events: list[BaseEvent] = []
    if recorder.stream.status == "idle":
        events.append(
            RunStartedEvent(
                thread_id=recorder.thread.thread_id, run_id=recorder.run.run_id
            )
        )
    if recorder.stream.status in {"idle", "running"}:
        recorder.record(events)
        recorder.close_open_items()
        recorder.record([RunErrorEvent(message=message, code=code)])
    recorder.flush()


def run_fail(*, run: Run, code: str, message: str) -> Run:
    """End ``run`` with a ``RUN_ERROR`` (code, message) unless it already ended."""
    recorder = RunRecorder(run)
    # Rebuild the machine's view of what this run already recorded.
    previous = list(run.events.order_by("seq"))
    for row in previous:
        try:
            recorder.stream.feed(event_from_dict(row.payload))
        except StreamViolation:
            break
    _record_terminal_error(recorder, code=code, message=message)
    run.refresh_from_db()
    run_answer_dangling_calls(run=run)
    return run


def drive_agent(*, agent: Any, run_input: Any, recorder: RunRecorder) -> None:
    """Run ``agent`` on ``run_input`` and feed its events to ``recorder`` until it ends.

    The agent's async generator runs on an event loop in a helper thread; this
    (synchronous) thread does every database write, flushing coalesced deltas when
    their window closes even if the agent is silent, and passes a cancellation
    requested in the database (``Run.cancel_requested``) to the agent as an
    ``asyncio.Event``. Implements DESIGN.md "one path for every event".
    """
    import asyncio
    import contextvars
    import queue
    import threading

    inbox: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=10000)
    loop = asyncio.new_event_loop()
    cancel = asyncio.Event()

    async def produce() -> None:
        try:
            async for event in agent.run(run_input, cancel=cancel):
                inbox.put(("event", event))
        except Exception as error:
            inbox.put(("error", error))
        finally:
            inbox.put(("done", None))

    def loop_main() -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(produce())
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()

    producer = threading.Thread(
        target=contextvars.copy_context().run,  # keeps the log context (run, thread)
        args=(loop_main,),
        name=f"agent-{recorder.run.run_id}",
    )
    producer.start()
    last_cancel_check = time.monotonic()
    try:
        while True:
            wait = recorder.seconds_until_flush()
            try:
                kind, item = inbox.get(
                    timeout=0.25 if wait is None else min(wait, 0.25)
                )
            except queue.Empty:
                kind, item = "idle", None
            if kind == "event":
                recorder.record([item])
            elif kind == "error":
                logger.error("agent for run %s raised %r", recorder.run.run_id, item)
                recorder.flush()
                if not recorder.finished:
                    _record_terminal_error(
                        recorder,
                        code="agent_error",
                        message=f"The agent failed ({type(item).__name__}); "
                        "the details are in the server log.",
                    )
            elif kind == "done":
                break
            if recorder.flush_due():
                recorder.flush()
            now = time.monotonic()
            if now - last_cancel_check >= 0.2 and not cancel.is_set():
                last_cancel_check = now
                if Run.objects.filter(
                    pk=recorder.run.pk, cancel_requested=True
                ).exists():
                    loop.call_soon_threadsafe(cancel.set)
    finally:
        producer.join(timeout=30)
        recorder.flush()
    if not recorder.finished:
        _record_terminal_error(
            recorder,
            code="truncated_run",
            message="The agent stopped without finishing the run.",
        )


def run_cancel(*, run: Run) -> Run:
    """Request cancellation of ``run``; the worker stops at the next event boundary.

    A queued run that no worker picked up yet is finished as cancelled at once.
    Raises :class:`threads.exceptions.RunNotCancellable` when the run already ended.
    """
    from threads.exceptions import RunNotCancellable

    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        if locked.status not in Run.ACTIVE_STATUSES:
            raise RunNotCancellable(
                f"run {locked.run_id!r} already ended ({locked.status}); nothing to cancel"
            )
        locked.cancel_requested = True
        locked.save(update_fields=["cancel_requested"])
        queued = locked.status == Run.Status.QUEUED
    if queued:
        from agentcore.events import (
            RunFinishedCancelledOutcome,
            RunFinishedEvent,
            RunStartedEvent,
        )

        with transaction.atomic():
            again = Run.objects.select_for_update().get(pk=run.pk)
            if again.status == Run.Status.QUEUED:
                again.status = Run.Status.RUNNING
                again.save(update_fields=["status"])
                recorder = RunRecorder(again)
                recorder.record(
                    [
                        RunStartedEvent(
                            thread_id=again.thread.thread_id, run_id=again.run_id
                        ),
                        RunFinishedEvent(
                            thread_id=again.thread.thread_id,
                            run_id=again.run_id,
                            outcome=RunFinishedCancelledOutcome(),
                        ),
                    ]
                )
    run.refresh_from_db()
    return run
