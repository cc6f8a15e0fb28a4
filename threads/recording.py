"""Recording AG-UI events: the one way an agent's event enters the database.

Every agent event enters through :class:`RunRecorder` (or :func:`record_events`
around it): it is validated and normalized by :class:`agentcore.stream.RunStream`,
appended to the thread's gapless event log (:func:`threads.eventlog.log_append`),
projected onto rows in the same transaction (:mod:`threads.projection`), and
published to the thread's channel group after commit. The facts Countersign
writes itself are validated by :func:`record_wire_events` and appended by the same
writer, without a projection. Implements DC-01, DC-02 and the pipeline in
DESIGN.md ("one path for every event").
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from typing import Any

from django.db import transaction
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.db.models.fields.json import KT

from agentcore.events import (
    BaseEvent,
    EventType,
    MessagesSnapshotEvent,
    RunErrorEvent,
    RunStartedEvent,
    ToolCallResultEvent,
    event_from_dict,
    event_to_dict,
)
from agentcore.stream import RunStream, StreamViolation
from core.conf import countersign_settings
from core.types import User
from threads.answers import APPLICATION_SOURCE
from threads.eventlog import log_append
from threads.locks import thread_lock
from threads.models import Event, Message, Run, Thread, ToolCall
from threads.projection import Projection
from threads.realtime import publish_preview
from threads.snapshots import (
    input_echo_thread_ids,
    message_remote_ids_record,
    snapshot_reconcile,
)
from threads.transitions import run_wire_transition
from threads.validation import storable

logger = logging.getLogger(__name__)

_DELTA_TYPES = {EventType.TOOL_CALL_ARGS, EventType.TEXT_MESSAGE_CONTENT}
_TERMINAL_TYPES = {EventType.RUN_FINISHED, EventType.RUN_ERROR}
_TERMINAL_NAMES = {"RUN_FINISHED", "RUN_ERROR"}


def wire_usage(wire: Run, *, extra: Any = None) -> list[dict[str, Any]]:
    """Return the token usage of wire run ``wire`` and its segments, summed per model.

    ``extra`` (TokenUsage models or dicts) is a segment's usage not stored yet.
    """
    totals: dict[tuple[Any, Any], dict[str, Any]] = {}
    lists = [
        u
        for u in Run.objects.filter(Q(pk=wire.pk) | Q(outer=wire))
        .order_by("created_at", "id")
        .values_list("usage", flat=True)
        if u
    ]
    if extra:
        lists.append(
            [
                e.model_dump(mode="json", by_alias=True, exclude_none=True)
                if hasattr(e, "model_dump")
                else e
                for e in extra
            ]
        )
    for entries in lists:
        for entry in entries:
            key = (entry.get("provider"), entry.get("model"))
            total = totals.setdefault(
                key, {k: v for k, v in entry.items() if not isinstance(v, int)}
            )
            for name, value in entry.items():
                if isinstance(value, int) and not isinstance(value, bool):
                    total[name] = total.get(name, 0) + value
    return list(totals.values())


def unreported_application_results(*, thread: Thread) -> QuerySet[Message]:
    """Tool messages Countersign wrote on ``thread`` that no log event reports yet.

    The log is the truth of what clients were told: a result is reported once a
    ``TOOL_CALL_RESULT`` with its ``messageId`` is in the thread's log.
    """
    return (
        Message.objects.filter(
            thread=thread,
            role=Message.Role.TOOL,
            run__isnull=True,
            metadata__source=APPLICATION_SOURCE,
        )
        .exclude(
            Exists(
                Event.objects.filter(thread=thread, type="TOOL_CALL_RESULT")
                .annotate(reported_id=KT("payload__messageId"))
                .filter(reported_id=OuterRef("message_id"))
            )
        )
        .order_by("position", "id")
    )


def _item_id(event: BaseEvent) -> str:
    return str(getattr(event, "tool_call_id", None) or getattr(event, "message_id", ""))


def _merge_delta(buffer: list[BaseEvent], event: BaseEvent) -> int | None:
    """Append ``event``'s delta to a buffered delta of the same item, if order allows.

    Walk back over buffered delta events only: a non-delta event (a START, END,
    result...) is a boundary no delta may cross. Return the index of the buffered
    event it merged into, or ``None``.
    """
    item = _item_id(event)
    for index in range(len(buffer) - 1, -1, -1):
        previous = buffer[index]
        if previous.type not in _DELTA_TYPES:
            return None
        if previous.type == event.type and _item_id(previous) == item:
            # Only TOOL_CALL_ARGS and TEXT_MESSAGE_CONTENT get here: both carry a delta.
            delta = getattr(previous, "delta", "") + getattr(event, "delta", "")
            merged = previous.model_copy(update={"delta": delta})
            buffer[index] = merged
            return index
    return None


class RunRecorder:
    """Record one run's events: validate, coalesce, append to the log, project, publish.

    ``record(events)`` accepts AG-UI event models or their JSON dicts, in stream
    order. Deltas (``TOOL_CALL_ARGS``, ``TEXT_MESSAGE_CONTENT``) are coalesced and
    written when ``coalesce_ms`` milliseconds have passed since the first buffered
    event or ``coalesce_bytes`` bytes of deltas are buffered, and at the run's
    terminal event or an explicit :meth:`flush`. A caller that knows the stream
    paused (nothing else waiting) asks ``flush_due(paused=True)``: that also comes
    due once ``pause_ms`` milliseconds have passed since the last flush, so a slow
    stream's deltas are not held for the whole window (B1).

    Show first, persist in batches (B1): when publishing, every event buffered
    that the log will show (not hidden) is also sent to the thread's group at
    once, before any write, as a preview (:func:`threads.realtime.publish_preview`;
    ``p`` counts this recorder's previews from 1); the flush
    that commits it publishes ``"previewedThrough": <the highest p so far>`` with
    its rows. A preview is not a log row: readers keep it only until that
    confirmation, the run's end or 5 seconds, whichever comes first
    (docs/architecture.md "Previews"). ``COUNTERSIGN["PREVIEW_EVENTS"] = False``
    turns previews off.

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
        pause_ms: float | None = None,
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
        self.pause_ms = (
            countersign_settings.COALESCE_PAUSE_MS if pause_ms is None else pause_ms
        )
        self.publish = publish
        self.previews = publish and bool(countersign_settings.PREVIEW_EVENTS)
        #: The last preview's number (0: none yet).
        self.previewed = 0
        self._last_flush = 0.0
        self.violation: StreamViolation | None = None
        self.written: list[Event] = []
        self._buffer: list[BaseEvent] = []
        # The buffered events' JSON objects (storable), index for index: made once
        # per event, sent as its preview and written by the flush.
        self._payloads: list[dict[str, Any] | None] = []
        self._buffer_bytes = 0
        self._buffer_since: float | None = None
        prior_calls = ToolCall.objects.filter(thread=self.thread).exclude(run=run)
        prior_messages = Message.objects.filter(thread=self.thread).exclude(run=run)
        #: A managed run's own RUN_STARTED, and a RUN_FINISHED that leaves calls for
        #: Countersign, are projected but never stored: the client-visible run's
        #: boundaries are written by :mod:`threads.wire` (one run per request).
        self.managed = run.managed
        # An unmanaged run (recorded directly: imports, loaddemo, replays) reports
        # the tool messages the application wrote since the last run as
        # TOOL_CALL_RESULT events right after its RUN_STARTED (BC21, BC32); a
        # managed run's wire reports them as they are written (threads.wire).
        self._application_results = (
            []
            if self.managed
            else [
                ToolCallResultEvent(
                    message_id=m.message_id,
                    tool_call_id=m.tool_call_id,
                    content=m.content,
                    role="tool",
                    metadata={"error": m.error} if m.error else None,
                )
                for m in unreported_application_results(thread=self.thread).exclude(
                    run=run
                )
            ]
        )
        self._hidden: set[int] = set()
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
                if item.type == EventType.MESSAGES_SNAPSHOT:
                    written.extend(self._record_snapshot(item))
                    if self.violation is not None:
                        break
                    continue
                if isinstance(item, RunStartedEvent):
                    item = input_echo_thread_ids(thread=self.thread, event=item)
                if self.managed:
                    item = self._wire_shape(item)
                self._buffer_event(item)
                terminal = terminal or item.type in _TERMINAL_TYPES
            if terminal or self.flush_due():
                written.extend(self.flush())
        return written

    def _record_snapshot(self, snapshot: BaseEvent) -> list[Event]:
        """Buffer ``snapshot`` reconciled with the thread (:mod:`threads.snapshots`).

        Everything streamed before it is written first, so the reconciliation reads
        it from the rows; the events that only the snapshot holds go through the
        stream machine like any other (a violation ends the run, as in
        :meth:`record`). Returns the rows the flush wrote.
        """
        written = self.flush()
        assert isinstance(snapshot, MessagesSnapshotEvent)
        reconciled, remote_ids = snapshot_reconcile(
            thread=self.thread, run=self.run, snapshot=snapshot
        )
        if remote_ids:
            message_remote_ids_record(thread=self.thread, remote_ids=remote_ids)
        for item in reconciled[:-1]:
            try:
                for normalized in self.stream.feed(item):
                    self._buffer_event(normalized)
            except StreamViolation as violation:
                return written + self._fail(violation)
        self._buffer_event(reconciled[-1])
        return written

    def _wire_shape(self, event: BaseEvent) -> BaseEvent:
        """Return a managed run's ``event`` as its wire run shows it, marking hidden ones.

        RUN_STARTED is hidden (the wire run's own start was written when it was
        created); a RUN_FINISHED that leaves calls unanswered or ends with a remote
        agent's interrupts is hidden (the calls go to Countersign, which continues
        or ends the wire run, threads.wire); any
        other RUN_FINISHED ends the wire run and carries its ``runId`` and the
        thread's AG-UI id (the agent knows the thread by its global id).
        """
        outcome_type = getattr(getattr(event, "outcome", None), "type", "success")
        hidden = event.type == EventType.RUN_STARTED or (
            event.type == EventType.RUN_FINISHED
            and outcome_type != "cancelled"
            # A remote agent's interrupts become approval requests first; the wire
            # run then ends with them under Countersign's ids (threads.wire, IR-02).
            and (bool(self.stream.pending_tool_call_ids) or outcome_type == "interrupt")
        )
        if event.type == EventType.RUN_FINISHED and not hidden:
            wire = self.run.wire_run
            payload = {
                **event_to_dict(event),
                "threadId": self.thread.agui_id,
                "runId": wire.run_id,
            }
            if wire.pk != self.run.pk:
                usage = wire_usage(wire, extra=getattr(event, "usage", None))
                if usage:
                    payload["usage"] = usage
            event = event_from_dict(payload)
        if hidden:
            self._hidden.add(id(event))
        return event

    def flush_due(self, *, paused: bool = False) -> bool:
        """Whether the buffer's age or size has reached the coalescing window.

        With ``paused`` (nothing else waiting to be recorded) it is also due once
        ``pause_ms`` has passed since the last flush.
        """
        return self.seconds_until_flush(paused=paused) == 0.0

    def seconds_until_flush(self, *, paused: bool = False) -> float | None:
        """Seconds until the buffer must be flushed, or ``None`` when it is empty.

        ``paused`` as in :meth:`flush_due`.
        """
        if not self._buffer or self._buffer_since is None:
            return None
        if self._buffer_bytes >= self.coalesce_bytes:
            return 0.0
        now = time.monotonic()
        remaining = self.coalesce_ms / 1000 - (now - self._buffer_since)
        if paused:
            remaining = min(remaining, self.pause_ms / 1000 - (now - self._last_flush))
        return max(0.0, remaining)

    def _buffer_event(self, event: BaseEvent) -> None:
        """Buffer ``event`` (validated, shaped) for the next flush, previewing it first.

        PostgreSQL stores no NUL character: model output carrying one is kept with
        U+FFFD instead, in the preview, the log and the projection alike. The
        stored dict is made here only for a previewed event (the preview is that
        dict); otherwise the flush makes it once per coalesced row (bench B4).
        """
        if self._buffer_since is None:
            self._buffer_since = time.monotonic()
        payload: dict[str, Any] | None = None
        if self.previews and id(event) not in self._hidden:
            payload = event_to_dict(event)
            clean = storable(payload, what=f"event of run {self.run.run_id}")
            if clean is not payload:
                event, payload = event_from_dict(clean), clean
            self.previewed += 1
            publish_preview(
                thread_pk=self.thread.pk,
                run_id=self.run.run_id,
                p=self.previewed,
                event=payload,
            )
        if event.type in _DELTA_TYPES:
            self._buffer_bytes += len(getattr(event, "delta", ""))
            index = _merge_delta(self._buffer, event)
            if index is not None:
                first = self._payloads[index]
                self._payloads[index] = (
                    None
                    if first is None or payload is None
                    else {
                        **first,
                        "delta": first.get("delta", "") + payload.get("delta", ""),
                    }
                )
                return
        self._buffer.append(event)
        self._payloads.append(payload)

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
        self._buffer_event(
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
        channel group happens after the transaction commits; with previews on it
        carries ``runId`` and ``previewedThrough`` (every preview so far is in
        this batch or an earlier one).
        """
        if not self._buffer:
            return []
        batch, self._buffer = self._buffer, []
        payloads, self._payloads = self._payloads, []
        hidden_ids, self._hidden = self._hidden, set()
        hidden = [id(event) in hidden_ids for event in batch]
        self._buffer_bytes = 0
        self._buffer_since = None
        self._last_flush = time.monotonic()
        through = self.previewed if self.previews and self.previewed else None
        stored: list[dict[str, Any]] = []
        offsets: list[int] = []
        for index, (known, skip) in enumerate(zip(payloads, hidden, strict=True)):
            if known is None:
                made = event_to_dict(batch[index])
                known = storable(made, what=f"event of run {self.run.run_id}")
                if known is not made:
                    batch[index] = event_from_dict(known)
            # A hidden event is projected at the position the next stored event
            # takes; it takes no seq of its own.
            offsets.append(len(stored))
            if not skip:
                stored.append(known)
        with transaction.atomic():
            thread = thread_lock(thread_pk=self.thread.pk)
            seqs = [thread.next_seq + offset for offset in offsets]
            rows = log_append(
                thread_pk=thread.pk,
                run=self.run,
                payloads=stored,
                publish=self.publish,
                run_id=self.run.run_id,
                previewed_through=through,
            )
            Projection(thread=thread, run=self.run).apply(batch, seqs)
            if self.managed and any(r.type in _TERMINAL_NAMES for r in rows):
                run_wire_transition(run=self.run.wire_run, to=Run.WireState.CLOSED)
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
    *, payloads: Sequence[dict[str, Any]], thread_id: str, owner: User
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


def record_terminal_error(recorder: RunRecorder, *, code: str, message: str) -> None:
    """End ``recorder``'s run with ``RUN_ERROR`` (``code``, ``message``) unless it ended.

    Opens the run first when nothing was recorded yet, and closes every open item
    (ER-01), so the log stays a valid AG-UI stream.
    """
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


def recorder_resume(*, run: Run) -> RunRecorder:
    """Return a recorder for ``run`` whose stream machine has seen its recorded events."""
    recorder = RunRecorder(run)
    rows = list(run.events.order_by("seq"))
    if (
        run.managed
        and run.status != Run.Status.QUEUED
        and not (rows and rows[0].type == EventType.RUN_STARTED.value)
    ):
        # A managed run's own RUN_STARTED was projected, not stored (see
        # RunRecorder); a client-visible one's log starts with the wire's
        # RUN_STARTED instead (threads.wire), which stands for it: feeding both
        # would break the stream at once.
        recorder.stream.feed(
            RunStartedEvent(thread_id=run.thread.thread_id, run_id=run.run_id)
        )
    # A client-visible continuation's log reports, right after its RUN_STARTED,
    # the results Countersign wrote for the run it continues (threads.wire): those
    # tool messages belong to that earlier run, so the machine must not take their
    # ids for ids this run reuses (it would break at the first row, and a dead
    # worker's run would end as a protocol violation instead of worker_lost).
    recorder.stream.message_ids_forget(
        str(row.payload.get("messageId"))
        for row in rows
        if row.type == EventType.TOOL_CALL_RESULT.value
    )
    for row in rows:
        try:
            recorder.stream.feed(event_from_dict(row.payload))
        except StreamViolation:
            break
    return recorder


def record_wire_events(
    *,
    run: Run,
    events: Sequence[BaseEvent | dict[str, Any]],
    run_input: dict[str, Any] | None = None,
) -> list[Event]:
    """Append events Countersign itself writes for wire run ``run`` to the log; return the rows.

    The client-visible run's RUN_STARTED and RUN_FINISHED, and the results of calls
    Countersign answered (:mod:`threads.wire`). Each event is validated as an AG-UI
    event and appended by :func:`threads.eventlog.log_append`, the writer of every
    log row, without a projection: the rows they describe exist already. Writes
    nothing for no ``events``. ``run_input`` (the client's ``RunAgentInput`` as
    camelCase JSON) becomes the first event's (RUN_STARTED's) ``input`` after
    that event is validated: it was parsed by
    :func:`threads.validation.parse_json` and validated as a ``RunAgentInput``
    already, and checking a 10,000-message history again costs seconds (B9).
    Implements DC-01, DC-02.
    """
    payloads = [
        storable(
            event_to_dict(event_from_dict(e) if isinstance(e, dict) else e),
            what=f"event of run {run.run_id}",
        )
        for e in events
    ]
    if not payloads:
        return []
    if run_input is not None:
        if payloads[0].get("type") != "RUN_STARTED":
            raise ValueError("run_input is the input of a RUN_STARTED, the first event")
        payloads[0] = {**payloads[0], "input": run_input}
    return log_append(thread_pk=run.thread_id, run=run, payloads=payloads)
