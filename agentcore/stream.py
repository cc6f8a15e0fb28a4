"""The AG-UI streaming-pattern state machine for one run's event sequence.

:class:`RunStream` consumes the events of a run (and of later runs on the same thread)
one at a time, checks them against the ordering rules of AG-UI 1.0 (the streaming
pattern, the tool-call events, the run lifecycle) and returns the normalized events:
``TOOL_CALL_CHUNK`` and ``TEXT_MESSAGE_CHUNK`` expanded into their START/ARGS|CONTENT/END
form, every other event unchanged. A fatal violation raises :class:`StreamViolation`;
a non-fatal finding is recorded as a :class:`StreamWarning`.

Besides checking, the machine keeps what a consumer needs after the run: the state of
every tool call (:class:`ToolCallState`), the calls left unanswered
(:attr:`RunStream.pending_tool_call_ids`) and the messages the run produced
(:attr:`RunStream.messages`), built the way ``@ag-ui/client`` 1.0 builds them.

Both producers (to check what they are about to emit) and consumers (to check what
they received) use it; :meth:`RunStream.close_open_items` lets a producer that must
stop close everything still open before ``RUN_ERROR`` or a cancelled ``RUN_FINISHED``.

``MESSAGES_SNAPSHOT`` is passed through unchanged: it closes open chunk items (it is a
run-level event) but never replaces the accumulated messages, so a snapshot that omits
a tool message cannot make a ``TOOL_CALL_RESULT`` vanish (case BC30).

Rule strings carried by violations: ``"ER-01"`` (streaming-pattern ordering for tool
calls, text messages and steps), ``"TC-01"`` (a malformed tool-call event),
``"TC-07"`` (chunk form), ``"TC-08"`` (a malformed ``TOOL_CALL_RESULT`` or a role other
than ``"tool"``), ``"TC-10"`` / ``"TC-11"`` (result content), ``"TC-17"`` (reserved names),
``"FT-04"`` (``pendingToolCallIds``) and ``"LIFECYCLE"`` (run lifecycle, identifiers,
malformed events).

Over 400 lines because it holds the streaming-pattern state machine with one handler
per event type and the rule checks those handlers share.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any, Final, Literal, NoReturn

from agentcore import events as agui
from agentcore.content import is_part_model, part_adapter

if TYPE_CHECKING:
    from pydantic import ValidationError

    from agentcore.events import (
        BaseEvent,
        RunErrorEvent,
        RunFinishedEvent,
        RunStartedEvent,
        StepFinishedEvent,
        StepStartedEvent,
        TextMessageChunkEvent,
        TextMessageContentEvent,
        TextMessageEndEvent,
        TextMessageStartEvent,
        ToolCallArgsEvent,
        ToolCallChunkEvent,
        ToolCallEndEvent,
        ToolCallResultEvent,
        ToolCallStartEvent,
        ToolMessage,
    )

__all__ = [
    "RESERVED_NAMES",
    "RunStatus",
    "RunStream",
    "StreamViolation",
    "StreamWarning",
    "ToolCallState",
]

RunStatus = Literal["idle", "running", "finished", "errored"]

RESERVED_NAMES: frozenset[str] = frozenset(
    {"ReasoningPart", "ToolCallPart", "AssistantPart"}
)
"""Names no producer may emit, as an event type or a content part type (TC-17)."""

_PART_TYPES: frozenset[str] = frozenset({"text", "image", "audio", "video", "document"})

# Events that close every lane's open chunk item (AGUI-1.0.md 2.1). Plain strings:
# ``EventType`` is a ``str`` enum, equal to and hashed as its value.
_RUN_LEVEL: frozenset[str] = frozenset(
    {"RUN_STARTED", "RUN_FINISHED", "RUN_ERROR", "MESSAGES_SNAPSHOT"}
)
# Events that leave open chunk items open (AGUI-1.0.md 2.1).
_LANE_NEUTRAL: frozenset[str] = frozenset(
    {
        "RAW",
        "ACTIVITY_SNAPSHOT",
        "ACTIVITY_DELTA",
        "REASONING_ENCRYPTED_VALUE",
        "SUBAGENT_STARTED",
    }
)
# The rule a malformed known event of these types breaks; any other type: LIFECYCLE.
_MALFORMED_RULE = {
    "TOOL_CALL_START": "TC-01",
    "TOOL_CALL_ARGS": "TC-01",
    "TOOL_CALL_END": "TC-01",
    "TOOL_CALL_CHUNK": "TC-07",
    "TOOL_CALL_RESULT": "TC-08",
}


@cache
def _event_types() -> frozenset[str]:
    """Return every AG-UI event ``type`` value (the protocol models built on first use)."""
    return frozenset(member.value for member in agui.EventType)


_ItemKind = Literal["text", "tool", "step"]
_Key = tuple[_ItemKind, str]


@dataclass(frozen=True, slots=True)
class _Kind:
    """How one kind of streamed item is spelled: a tool call or a text message.

    The handlers for both kinds are one set (``_on_start``, ``_on_continue``,
    ``_on_chunk``, ``_check_can_open``); what differs is named here.
    """

    kind: _ItemKind
    noun: str
    id_field: str
    start: str
    chunk: str
    #: The rule a misused chunk breaks (TC-07 for calls; ER-01 for text).
    chunk_rule: str
    #: ``format(spelling, id)``: the item is still open and cannot be reopened.
    still_open: str
    #: ``format(id)``: the id was used by an earlier run on the thread.
    reused: str

    def delta_event(self, item_id: str, delta: str, **fields: Any) -> BaseEvent:
        """Return the ARGS or CONTENT event carrying ``delta``."""
        if self.kind == "tool":
            return agui.ToolCallArgsEvent(tool_call_id=item_id, delta=delta, **fields)
        return agui.TextMessageContentEvent(message_id=item_id, delta=delta, **fields)


_TOOL: Final = _Kind(
    kind="tool",
    noun="call",
    id_field="toolCallId",
    start="TOOL_CALL_START",
    chunk="TOOL_CALL_CHUNK",
    chunk_rule="TC-07",
    still_open="call '{1}' is still open; close it with TOOL_CALL_END before "
    "reopening it",
    reused="toolCallId '{0}' was used by an earlier run on this thread; tool call "
    "ids are thread-unique (a client would merge the two calls)",
)
_TEXT: Final = _Kind(
    kind="text",
    noun="message",
    id_field="messageId",
    start="TEXT_MESSAGE_START",
    chunk="TEXT_MESSAGE_CHUNK",
    chunk_rule="ER-01",
    still_open="{0} for message '{1}', which is still open; close it before "
    "reopening it",
    reused="messageId '{0}' was used by an earlier run on this thread; message ids "
    "are thread-unique (restate history as a snapshot)",
)


class StreamViolation(Exception):
    """A fatal protocol violation found by :class:`RunStream`.

    Attributes: ``index`` (0-based position of the offending event among the events
    fed to the stream), ``item_id`` (the ``toolCallId`` / ``messageId`` / step name
    involved, or ``None``), ``rule`` (a rule id such as ``"TC-07"``, ``"ER-01"``,
    ``"FT-04"``, or ``"LIFECYCLE"``) and ``message`` (what is wrong and what to do).
    ``str(exc)`` is ``"<rule> at event <index>: <message>"``.
    """

    def __init__(
        self, *, index: int, rule: str, item_id: str | None, message: str
    ) -> None:
        """Build the violation; see the class docstring for the attributes."""
        super().__init__(f"{rule} at event {index}: {message}")
        self.index = index
        self.rule = rule
        self.item_id = item_id
        self.message = message

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle through the keyword-only constructor (for task queues)."""
        return (_rebuild_violation, (self.index, self.rule, self.item_id, self.message))


def _rebuild_violation(
    index: int, rule: str, item_id: str | None, message: str
) -> StreamViolation:
    """Rebuild a pickled :class:`StreamViolation`."""
    return StreamViolation(index=index, rule=rule, item_id=item_id, message=message)


@dataclass(frozen=True)
class StreamWarning:
    """A non-fatal finding, e.g. a reopening START that disagrees with its call (TC-06)."""

    index: int
    rule: str
    item_id: str | None
    message: str


@dataclass
class ToolCallState:
    """What the stream has said about one tool call so far.

    ``arguments`` is the argument text exactly as streamed (the joined deltas, never
    parsed: TC-03, TC-05); ``open`` is true between START and END; ``ended`` once an
    END was seen; ``result_message_id`` is the ``messageId`` of the first
    ``TOOL_CALL_RESULT`` answering it; ``order`` is its creation order in the run.
    Implements TC-01, TC-04, TC-06.
    """

    tool_call_id: str
    name: str
    parent_message_id: str | None
    arguments: str
    open: bool
    ended: bool
    result_message_id: str | None
    order: int

    @property
    def complete(self) -> bool:
        """Return whether the arguments may be acted on: ended and not reopened (TC-04)."""
        return self.ended and not self.open


@dataclass
class _OpenItem:
    """An open text message, tool call or step, with how it was opened."""

    kind: _ItemKind
    item_id: str
    by_chunk: bool
    lane: str | None
    metadata: dict[str, Any] | None = None


@dataclass
class _MessageRecord:
    """A message being accumulated: text deltas, tool-call ids, or a finished tool message."""

    role: str
    content: list[str] | None = None
    name: str | None = None
    subagent_run_id: str | None = None
    tool_call_ids: list[str] = field(default_factory=list)
    tool_message: ToolMessage | None = None


class RunStream:
    """Validate and normalize the events of one AG-UI run (and later runs on its thread).

    Construct with the thread's ``thread_id`` / the requested ``run_id`` when known (the
    run's boundary events must carry them) and the ids earlier runs already used on the
    thread (``prior_tool_call_ids``, ``prior_message_ids``): ids are thread-unique, so a
    START or ``TOOL_CALL_RESULT`` reusing one is fatal.

    Public state: ``status`` (``"idle"``, ``"running"``, ``"finished"``, ``"errored"``),
    ``thread_id`` / ``run_id`` (of the current run), ``tool_calls`` (this run's calls in
    creation order), ``pending_tool_call_ids``, ``messages`` and ``warnings``.
    A new ``RUN_STARTED`` after a finished or failed run resets the per-run state
    (``tool_calls``, ``messages``, open items) and keeps the thread-level ids.

    Implements TC-01..TC-10, TC-17, FT-04, FT-05, ER-01 and the run lifecycle.
    """

    def __init__(
        self,
        *,
        thread_id: str | None = None,
        run_id: str | None = None,
        prior_tool_call_ids: Iterable[str] = (),
        prior_message_ids: Iterable[str] = (),
    ) -> None:
        """Start idle, before the first ``RUN_STARTED``."""
        self.status: RunStatus = "idle"
        self.thread_id: str | None = thread_id
        self.run_id: str | None = None
        self.tool_calls: dict[str, ToolCallState] = {}
        self.warnings: list[StreamWarning] = []
        self._requested_run_id = run_id
        self._run_ids: set[str] = set()
        self._thread_tool_call_ids: set[str] = set(prior_tool_call_ids)
        self._thread_message_ids: set[str] = set(prior_message_ids)
        self._index = 0
        self._failure: StreamViolation | None = None
        # Per-run state, cleared by _reset_run.
        self._records: dict[str, _MessageRecord] = {}
        self._open: dict[_Key, _OpenItem] = {}
        self._lane_chunk: dict[str | None, _Key] = {}
        self._by_chunk: dict[_Key, bool] = {}
        self._owners: dict[str, str | None] = {}
        self._text_roles: dict[str, str] = {}
        self._answered: dict[str, str] = {}

    # -- public API -------------------------------------------------------------------

    def message_ids_forget(self, message_ids: Iterable[str]) -> None:
        """Stop counting ``message_ids`` as used by earlier runs of the thread.

        For a machine replaying a run's log whose ``TOOL_CALL_RESULT`` events
        report tool messages an earlier run's calls received (a continuation's
        results, written right after its ``RUN_STARTED``): the result is where
        the id first appears on the wire. Implements the run lifecycle.
        """
        self._thread_message_ids.difference_update(message_ids)

    @property
    def pending_tool_call_ids(self) -> list[str]:
        """Return the calls this run started and no ``TOOL_CALL_RESULT`` answered.

        In creation order; this is the derived list a consumer uses when
        ``pendingToolCallIds`` is absent or empty, and for interrupted runs.
        Implements FT-04, FT-05.
        """
        return [
            call_id
            for call_id, call in self.tool_calls.items()
            if call.result_message_id is None
        ]

    @property
    def messages(self) -> list[Any]:
        """Return the ``ag_ui.core`` messages this run produced, in first-seen order.

        Assistant text and tool calls are grouped by ``parentMessageId`` into one
        ``AssistantMessage`` (a call without one gets an assistant message whose id is
        its ``toolCallId``); each ``TOOL_CALL_RESULT`` is a ``ToolMessage`` with its
        content untouched (string or parts); user/system/developer text messages keep
        their role. Arguments are the text streamed so far. ``MESSAGES_SNAPSHOT`` never
        changes this list. Implements TC-02, TC-08, TC-10.
        """
        result: list[Any] = []
        for message_id, record in self._records.items():
            if record.tool_message is not None:
                result.append(record.tool_message)
                continue
            content = "".join(record.content) if record.content is not None else None
            common: dict[str, Any] = {
                "id": message_id,
                "name": record.name,
                "subagent_run_id": record.subagent_run_id,
            }
            if record.role == "assistant":
                calls = [
                    agui.ToolCall(
                        id=call_id,
                        function=agui.FunctionCall(
                            name=self.tool_calls[call_id].name,
                            arguments=self.tool_calls[call_id].arguments,
                        ),
                    )
                    for call_id in record.tool_call_ids
                ]
                result.append(
                    agui.AssistantMessage(
                        content=content, tool_calls=calls or None, **common
                    )
                )
            elif record.role == "user":
                result.append(agui.UserMessage(content=content or "", **common))
            elif record.role == "system":
                result.append(agui.SystemMessage(content=content or "", **common))
            else:
                result.append(agui.DeveloperMessage(content=content or "", **common))
        return result

    def feed(self, event: BaseEvent | dict[str, Any]) -> list[BaseEvent]:
        """Check one event and return the normalized events it produces, in order.

        ``event`` is an ``ag_ui.core`` event model or its JSON object (parsed with
        ``event_from_dict``). Chunk events come back expanded (START, then ARGS or
        CONTENT; the END of a chunk-opened item is synthesized when another item opens
        in its lane, when a message, tool-call, step, state, custom or reasoning event
        arrives in the lane, or on a run-level event); chunk ``metadata`` is carried to
        the synthesized events. Every other event is returned as the same object. An
        event of unknown ``type`` is dropped with a :class:`StreamWarning` (returns
        ``[]``).

        Raises :class:`StreamViolation` on a fatal violation; after one, every further
        ``feed`` raises too. Implements TC-01..TC-10, TC-17, FT-04, FT-05, ER-01.
        """
        index = self._index
        self._index += 1
        if self._failure is not None:
            raise StreamViolation(
                index=index,
                rule="LIFECYCLE",
                item_id=None,
                message=(
                    f"the stream already failed at event {self._failure.index} "
                    f"({self._failure.rule}); a failed RunStream accepts nothing more"
                ),
            )
        try:
            parsed = self._parse(event, index)
            if parsed is None:
                return []
            return self._dispatch(parsed, index)
        except StreamViolation as exc:
            self._failure = exc
            raise

    def close_open_items(self) -> list[BaseEvent]:
        """Return END events closing everything still open, in opening order.

        ``TEXT_MESSAGE_END``, ``TOOL_CALL_END`` and ``STEP_FINISHED`` events (chunk
        metadata carried as on a synthesized END); the items are marked closed, so the
        returned events are already applied and must not be fed back. Use it before
        ``RUN_ERROR`` or a cancelled ``RUN_FINISHED`` so nothing is left dangling; it
        also works after a :class:`StreamViolation`. Implements ER-01.
        """
        return self._close(list(self._open))

    # -- parsing ----------------------------------------------------------------------

    def _parse(self, event: BaseEvent | dict[str, Any], index: int) -> BaseEvent | None:
        """Return ``event`` as a model, or ``None`` for an unknown type (dropped).

        Raises :class:`StreamViolation` on a malformed known event (TC-01, TC-07,
        TC-08, TC-10, TC-11, TC-17 or LIFECYCLE). Implements TC-10, TC-17.
        """
        if isinstance(event, agui.BaseEvent):
            if isinstance(event, agui.ToolCallResultEvent):
                self._check_result_shape(
                    event.role, event.content, event.tool_call_id, index
                )
            return event
        if not isinstance(event, dict):
            self._fail(
                index,
                "LIFECYCLE",
                None,
                f"expected an ag_ui.core event or its JSON object, got {type(event).__name__}",
            )
        item_id = _dict_item_id(event)
        event_type = event.get("type")
        if not isinstance(event_type, str) or not event_type:
            self._fail(
                index, "LIFECYCLE", item_id, "an event needs a non-empty string 'type'"
            )
        if event_type in RESERVED_NAMES:
            self._fail(
                index,
                "TC-17",
                item_id,
                f"'{event_type}' is a reserved name and no event type; do not emit it",
            )
        if event_type not in _event_types():
            self.warnings.append(
                StreamWarning(
                    index,
                    "LIFECYCLE",
                    item_id,
                    f"dropped an event of unknown type '{event_type}' (not in AG-UI 1.0)",
                )
            )
            return None
        if event_type == agui.EventType.MESSAGES_SNAPSHOT and isinstance(
            event.get("messages"), list
        ):
            for message in event["messages"]:
                if isinstance(message, dict):
                    self._check_reserved_parts(
                        message.get("content"), message.get("id"), index
                    )
        if event_type == agui.EventType.TOOL_CALL_RESULT and "content" in event:
            self._check_result_shape(
                event.get("role"), event["content"], item_id, index
            )
        try:
            return agui.event_from_dict(event)
        except agui.ValidationError as exc:
            self._fail(
                index,
                _MALFORMED_RULE.get(event_type, "LIFECYCLE"),
                item_id,
                f"malformed {event_type} event: {_summarize(exc)}",
            )

    def _check_reserved_parts(
        self, content: Any, item_id: str | None, index: int
    ) -> None:
        """Raise TC-17 when a content list holds a part with a reserved type name."""
        if not isinstance(content, list):
            return
        for position, part in enumerate(content):
            part_type = (
                part.get("type")
                if isinstance(part, dict)
                else getattr(part, "type", None)
            )
            if part_type in RESERVED_NAMES:
                self._fail(
                    index,
                    "TC-17",
                    item_id,
                    f"content part {position} has the reserved type '{part_type}'; "
                    "send text, image, audio, video or document parts",
                )

    def _check_result_shape(
        self, role: Any, content: Any, item_id: str | None, index: int
    ) -> None:
        """Raise unless a result's role is absent or ``"tool"`` and its content is well formed.

        Content must be a string or a list of content parts (text, image, audio, video,
        document); there is no JSON part and no provider-specific part. Implements TC-08,
        TC-10, TC-11, TC-12, TC-17.
        """
        if role is not None and role != "tool":
            self._fail(
                index,
                "TC-08",
                item_id,
                f"TOOL_CALL_RESULT role is {role!r}; a result mints a tool message, so "
                "role must be 'tool' or absent",
            )
        self._check_reserved_parts(content, item_id, index)
        if isinstance(content, str):
            return
        if not isinstance(content, list):
            self._fail(
                index,
                "TC-10",
                item_id,
                f"TOOL_CALL_RESULT content is a {type(content).__name__}; it must be a "
                "string or a list of content parts (serialize structured data into a string)",
            )
        for position, part in enumerate(content):
            if is_part_model(part):
                continue
            part_type = part.get("type") if isinstance(part, dict) else None
            if part_type == "json":
                self._fail(
                    index,
                    "TC-11",
                    item_id,
                    f"content part {position} has type 'json'; there is no JSON part, "
                    "serialize structured data into a string or a text part",
                )
            if not isinstance(part, dict) or part_type not in _PART_TYPES:
                self._fail(
                    index,
                    "TC-10",
                    item_id,
                    f"content part {position} is {part_type or type(part).__name__!r}; parts "
                    "are text, image, audio, video or document (other detail goes in a "
                    "part's metadata)",
                )
            try:
                part_adapter().validate_python(part)
            except agui.ValidationError as exc:
                self._fail(
                    index,
                    "TC-10",
                    item_id,
                    f"content part {position} ({part_type}) is malformed: {_summarize(exc)}",
                )

    # -- dispatch ---------------------------------------------------------------------

    def _dispatch(self, event: BaseEvent, index: int) -> list[BaseEvent]:
        """Route ``event`` to its handler with the chunk items it closes."""
        closing = self._closed_by(event)
        if isinstance(event, agui.RunStartedEvent):
            return self._on_run_started(event, index, closing)
        if isinstance(event, agui.RunFinishedEvent):
            return self._on_run_finished(event, index, closing)
        if isinstance(event, agui.RunErrorEvent):
            return self._on_run_error(event, index, closing)
        self._require_running(event, index)
        if isinstance(event, agui.ToolCallStartEvent | agui.TextMessageStartEvent):
            return self._on_start(event, index, closing)
        if isinstance(
            event,
            agui.ToolCallArgsEvent
            | agui.ToolCallEndEvent
            | agui.TextMessageContentEvent
            | agui.TextMessageEndEvent,
        ):
            return self._on_continue(event, index, closing)
        if isinstance(event, agui.ToolCallChunkEvent | agui.TextMessageChunkEvent):
            return self._on_chunk(event, index, closing)
        if isinstance(event, agui.ToolCallResultEvent):
            return self._on_tool_call_result(event, index, closing)
        if isinstance(event, agui.StepStartedEvent | agui.StepFinishedEvent):
            return self._on_step(event, index, closing)
        return [*self._close(closing), event]

    def _closed_by(self, event: BaseEvent) -> list[_Key]:
        """Return the open chunk items ``event`` closes, in opening order (no mutation)."""
        event_type = event.type
        if event_type in _LANE_NEUTRAL:
            return []
        if event_type in _RUN_LEVEL:
            targets = set(self._lane_chunk.values())
        else:
            # An event's lane is its owner; SUBAGENT_FINISHED / SUBAGENT_ERROR name the
            # subagent that terminates, which closes that subagent's lane.
            lane = getattr(event, "subagent_run_id", None)
            current = self._lane_chunk.get(lane)
            if current is None:
                return []
            if isinstance(event, agui.ToolCallChunkEvent | agui.TextMessageChunkEvent):
                kind, item_id = current
                chunk_kind = (
                    "tool" if isinstance(event, agui.ToolCallChunkEvent) else "text"
                )
                chunk_id = (
                    event.tool_call_id
                    if isinstance(event, agui.ToolCallChunkEvent)
                    else event.message_id
                )
                if kind == chunk_kind and chunk_id in (None, item_id):
                    return []
            targets = {current}
        return [key for key in self._open if key in targets]

    def _require_running(self, event: BaseEvent, index: int) -> None:
        """Raise LIFECYCLE unless a run is in progress."""
        if self.status == "running":
            return
        self._fail(
            index, "LIFECYCLE", _item_id(event), self._not_running_message(event)
        )

    def _not_running_message(self, event: BaseEvent) -> str:
        """Explain why ``event`` cannot come now."""
        name = _type_name(event)
        if self.status == "idle":
            return f"the stream must begin with RUN_STARTED (or RUN_ERROR), not {name}"
        if self.status == "finished":
            return (
                f"{name} after RUN_FINISHED; only RUN_STARTED (a new run) or a late "
                "RUN_ERROR may follow"
            )
        return f"{name} after RUN_ERROR; only RUN_STARTED (a new run) may follow"

    # -- run lifecycle ------------------------------------------------------------------

    def _on_run_started(
        self, event: RunStartedEvent, index: int, closing: list[_Key]
    ) -> list[BaseEvent]:
        """Start a run, or a new run after a finished or failed one. Implements LIFECYCLE."""
        if self.status == "running":
            self._fail(
                index,
                "LIFECYCLE",
                None,
                f"RUN_STARTED '{event.run_id}' while run '{self.run_id}' is still running; "
                "finish it with RUN_FINISHED or RUN_ERROR first",
            )
        if self.thread_id is not None and event.thread_id != self.thread_id:
            self._fail(
                index,
                "LIFECYCLE",
                None,
                f"RUN_STARTED threadId '{event.thread_id}' is not the thread's "
                f"'{self.thread_id}'",
            )
        if (
            not self._run_ids
            and self._requested_run_id is not None
            and event.run_id != self._requested_run_id
        ):
            self._fail(
                index,
                "LIFECYCLE",
                None,
                f"RUN_STARTED runId '{event.run_id}' does not echo the requested runId "
                f"'{self._requested_run_id}'",
            )
        if event.run_id in self._run_ids:
            self._fail(
                index,
                "LIFECYCLE",
                None,
                f"runId '{event.run_id}' was already used on this thread; use a fresh runId",
            )
        out = self._close(closing)
        self._reset_run()
        self.thread_id = event.thread_id
        self.run_id = event.run_id
        self._run_ids.add(event.run_id)
        self.status = "running"
        return [*out, event]

    def _on_run_finished(
        self, event: RunFinishedEvent, index: int, closing: list[_Key]
    ) -> list[BaseEvent]:
        """Finish the run. Implements ER-01, FT-04, FT-05 and LIFECYCLE."""
        self._require_running(event, index)
        if event.run_id != self.run_id or event.thread_id != self.thread_id:
            self._fail(
                index,
                "LIFECYCLE",
                None,
                f"RUN_FINISHED (threadId '{event.thread_id}', runId '{event.run_id}') does "
                f"not match RUN_STARTED (threadId '{self.thread_id}', runId '{self.run_id}')",
            )
        still_open = [self._open[key] for key in self._open if key not in closing]
        if still_open:
            listed = ", ".join(f"{item.kind} '{item.item_id}'" for item in still_open)
            self._fail(
                index,
                "ER-01",
                still_open[0].item_id,
                f"RUN_FINISHED while items are still open ({listed}); close each one "
                "(TOOL_CALL_END / TEXT_MESSAGE_END / STEP_FINISHED) first, or end with "
                "RUN_ERROR",
            )
        outcome = event.outcome
        if outcome is None or isinstance(outcome, agui.RunFinishedSuccessOutcome):
            named = outcome.pending_tool_call_ids if outcome is not None else None
            derived = self.pending_tool_call_ids
            if named and list(named) != derived:
                self._fail(
                    index,
                    "FT-04",
                    None,
                    f"pendingToolCallIds {list(named)} disagrees with the stream, whose "
                    f"unanswered calls in creation order are {derived}; send exactly that "
                    "list, or omit it",
                )
        out = self._close(closing)
        self.status = "finished"
        return [*out, event]

    def _on_run_error(
        self, event: RunErrorEvent, index: int, closing: list[_Key]
    ) -> list[BaseEvent]:
        """Fail the run (allowed first, while running, and late after RUN_FINISHED)."""
        if self.status == "errored":
            self._fail(index, "LIFECYCLE", None, self._not_running_message(event))
        out = self._close(closing)
        self.status = "errored"
        return [*out, event]

    # -- tool calls and text messages: one set of handlers, parameterised by kind ------

    def _on_start(
        self,
        event: ToolCallStartEvent | TextMessageStartEvent,
        index: int,
        closing: list[_Key],
    ) -> list[BaseEvent]:
        """Open or reopen a call or a text message. Implements TC-01, TC-02, TC-06, ER-01."""
        if isinstance(event, agui.ToolCallStartEvent):
            self._check_can_open(_TOOL, event.tool_call_id, index, closing)
            out = self._close(closing)
            self._open_call(
                event.tool_call_id,
                event.tool_call_name,
                event.parent_message_id,
                event.subagent_run_id,
                index,
                by_chunk=False,
            )
        else:
            self._check_can_open(_TEXT, event.message_id, index, closing)
            out = self._close(closing)
            self._open_text(
                event.message_id,
                event.role,
                event.name,
                event.subagent_run_id,
                index,
                by_chunk=False,
            )
        return [*out, event]

    def _on_continue(
        self,
        event: ToolCallArgsEvent
        | ToolCallEndEvent
        | TextMessageContentEvent
        | TextMessageEndEvent,
        index: int,
        closing: list[_Key],
    ) -> list[BaseEvent]:
        """Append to, or close, an open call or text message.

        Argument text is appended verbatim; an END leaves the arguments complete, not
        necessarily valid (TC-05). Implements TC-01, TC-03, TC-04, TC-05, TC-07, ER-01.
        """
        if isinstance(event, agui.ToolCallArgsEvent | agui.ToolCallEndEvent):
            kind, item_id = _TOOL, event.tool_call_id
        else:
            kind, item_id = _TEXT, event.message_id
        self._check_explicit_continue(kind, item_id, _type_name(event), index, closing)
        out = self._close(closing)
        if isinstance(event, agui.ToolCallArgsEvent | agui.TextMessageContentEvent):
            self._append(kind, item_id, event.delta)
        else:
            out.extend(self._close([(kind.kind, item_id)], synthesize=False))
        return [*out, event]

    def _on_chunk(
        self,
        event: ToolCallChunkEvent | TextMessageChunkEvent,
        index: int,
        closing: list[_Key],
    ) -> list[BaseEvent]:
        """Expand a chunk into START / ARGS or CONTENT (its END is synthesized later).

        A chunk continues the lane's open chunk item of its kind when it names that
        item or no item; otherwise it opens one, which needs an id (and, for a call,
        a name). Implements TC-07 and ER-01 (the streaming pattern's chunk form).
        """
        kind = _TOOL if isinstance(event, agui.ToolCallChunkEvent) else _TEXT
        lane = event.subagent_run_id
        current = self._lane_chunk.get(lane)
        stamp: dict[str, Any] = {
            "metadata": event.metadata,
            "timestamp": event.timestamp,
            "subagent_run_id": lane,
        }
        if current is not None and current[0] == kind.kind and not closing:
            item_id = current[1]
            for field_name, given, kept in self._fixed_fields(event, item_id):
                if given is not None and given != kept:
                    self._fail(
                        index,
                        kind.chunk_rule,
                        item_id,
                        f"continuation {kind.chunk} {field_name} {given!r} conflicts "
                        f"with the open {kind.noun}'s {kept!r}; a different "
                        f"{kind.noun} needs its own {kind.id_field}",
                    )
            if event.metadata is not None:
                self._open[current].metadata = event.metadata
            if event.delta is None:
                return []
            self._append(kind, item_id, event.delta)
            return [
                kind.delta_event(
                    item_id, event.delta, raw_event=event.raw_event, **stamp
                )
            ]
        chunk_id = (
            event.tool_call_id
            if isinstance(event, agui.ToolCallChunkEvent)
            else event.message_id
        )
        if chunk_id is None:
            self._fail(
                index,
                kind.chunk_rule,
                None,
                f"the first {kind.chunk} of a {kind.noun} must carry {kind.id_field} "
                f"(no chunk {kind.noun} is open in this lane to continue)",
            )
        if isinstance(event, agui.ToolCallChunkEvent) and event.tool_call_name is None:
            self._fail(
                index,
                "TC-07",
                chunk_id,
                "the first TOOL_CALL_CHUNK of a call must carry toolCallName",
            )
        self._check_can_open(kind, chunk_id, index, closing, by_chunk=True)
        out = self._close(closing)
        out.append(self._open_by_chunk(event, chunk_id, index, stamp))
        if event.delta is not None:
            self._append(kind, chunk_id, event.delta)
            out.append(kind.delta_event(chunk_id, event.delta, **stamp))
        return out

    def _fixed_fields(
        self, event: ToolCallChunkEvent | TextMessageChunkEvent, item_id: str
    ) -> list[tuple[str, str | None, str | None]]:
        """Return ``(field, given, kept)`` for what a continuation chunk may not change."""
        if isinstance(event, agui.ToolCallChunkEvent):
            call = self.tool_calls[item_id]
            return [
                ("toolCallName", event.tool_call_name, call.name),
                ("parentMessageId", event.parent_message_id, call.parent_message_id),
            ]
        return [("role", event.role, self._text_roles[item_id])]

    def _open_by_chunk(
        self,
        event: ToolCallChunkEvent | TextMessageChunkEvent,
        item_id: str,
        index: int,
        stamp: dict[str, Any],
    ) -> BaseEvent:
        """Open the item a first chunk names and return the START it stands for."""
        lane = event.subagent_run_id
        if isinstance(event, agui.ToolCallChunkEvent):
            assert event.tool_call_name is not None  # checked by _on_chunk
            self._open_call(
                item_id,
                event.tool_call_name,
                event.parent_message_id,
                lane,
                index,
                by_chunk=True,
                metadata=event.metadata,
            )
            return agui.ToolCallStartEvent(
                tool_call_id=item_id,
                tool_call_name=event.tool_call_name,
                parent_message_id=event.parent_message_id,
                raw_event=event.raw_event,
                **stamp,
            )
        self._open_text(
            item_id,
            event.role,
            event.name,
            lane,
            index,
            by_chunk=True,
            metadata=event.metadata,
        )
        return agui.TextMessageStartEvent(
            message_id=item_id,
            role=event.role,
            name=event.name,
            raw_event=event.raw_event,
            **stamp,
        )

    def _check_can_open(
        self,
        kind: _Kind,
        item_id: str,
        index: int,
        closing: list[_Key],
        *,
        by_chunk: bool = False,
    ) -> None:
        """Raise unless call or message ``item_id`` may be opened now.

        It may not be open already (unless this event closes it), nor carry an id an
        earlier run on the thread used; a text message may not take a tool message's
        id. Implements TC-06, TC-07, ER-01.
        """
        key: _Key = (kind.kind, item_id)
        if key in self._open and key not in closing:
            if kind is _TOOL and by_chunk and not self._open[key].by_chunk:
                self._fail(
                    index,
                    "TC-07",
                    item_id,
                    f"TOOL_CALL_CHUNK for call '{item_id}', which was opened by "
                    "TOOL_CALL_START; continue it with TOOL_CALL_ARGS / TOOL_CALL_END "
                    "(the two spellings never mix)",
                )
            spelling = kind.chunk if by_chunk else kind.start
            self._fail(
                index, "ER-01", item_id, kind.still_open.format(spelling, item_id)
            )
        earlier = (
            self._thread_tool_call_ids if kind is _TOOL else self._thread_message_ids
        )
        if item_id in earlier:
            self._fail(index, "LIFECYCLE", item_id, kind.reused.format(item_id))
        record = self._records.get(item_id) if kind is _TEXT else None
        if record is not None and record.tool_message is not None:
            self._fail(
                index,
                "LIFECYCLE",
                item_id,
                f"messageId '{item_id}' already names the tool message of a "
                "TOOL_CALL_RESULT; use a new id",
            )

    def _append(self, kind: _Kind, item_id: str, delta: str) -> None:
        """Append a delta to a call's arguments or a message's content."""
        if kind is _TOOL:
            self.tool_calls[item_id].arguments += delta
            return
        record = self._records[item_id]
        if record.content is None:
            record.content = []
        record.content.append(delta)

    # -- tool results and the records of calls and messages --------------------------

    def _on_tool_call_result(
        self, event: ToolCallResultEvent, index: int, closing: list[_Key]
    ) -> list[BaseEvent]:
        """Record a result as a tool message; it answers the call and never reopens it.

        A result for a call that is still open or unknown is accepted (as
        ``@ag-ui/client`` does); a second result for the same call is a warning.
        Implements TC-08, TC-09, TC-10, FT-04.
        """
        message_id = event.message_id
        if message_id in self._thread_message_ids or message_id in self._records:
            self._fail(
                index,
                "LIFECYCLE",
                message_id,
                f"TOOL_CALL_RESULT messageId '{message_id}' is already used on this thread; "
                "each result mints a new message with a thread-unique id",
            )
        out = self._close(closing)
        self._records[message_id] = _MessageRecord(
            role="tool",
            tool_message=agui.ToolMessage(
                id=message_id,
                content=event.content,
                tool_call_id=event.tool_call_id,
                subagent_run_id=event.subagent_run_id,
            ),
        )
        if event.tool_call_id in self._answered:
            self._warn(
                index,
                "TC-08",
                event.tool_call_id,
                f"call '{event.tool_call_id}' was already answered by message "
                f"'{self._answered[event.tool_call_id]}'; a call gets exactly one result",
            )
        else:
            self._answered[event.tool_call_id] = message_id
            call = self.tool_calls.get(event.tool_call_id)
            if call is not None:
                call.result_message_id = message_id
        return [*out, event]

    def _open_call(
        self,
        tool_call_id: str,
        name: str,
        parent_message_id: str | None,
        owner: str | None,
        index: int,
        *,
        by_chunk: bool,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        """Create or reopen a call and attach a new one to its assistant message.

        Implements TC-02, TC-06.
        """
        key: _Key = ("tool", tool_call_id)
        call = self.tool_calls.get(tool_call_id)
        if call is not None:
            previous_owner = self._owners.get(tool_call_id)
            for label, given, kept in (
                ("toolCallName", name, call.name),
                ("parentMessageId", parent_message_id, call.parent_message_id),
                ("subagentRunId", owner, previous_owner),
            ):
                if given != kept:
                    self._warn(
                        index,
                        "TC-06",
                        tool_call_id,
                        f"reopening call '{tool_call_id}' with {label} {given!r}, but the "
                        f"call has {kept!r}; kept {kept!r} (a reopening START must match)",
                    )
            call.open = True
        else:
            self.tool_calls[tool_call_id] = ToolCallState(
                tool_call_id=tool_call_id,
                name=name,
                parent_message_id=parent_message_id,
                arguments="",
                open=True,
                ended=False,
                result_message_id=self._answered.get(tool_call_id),
                order=len(self.tool_calls),
            )
            self._owners[tool_call_id] = owner
            self._attach_call(tool_call_id, parent_message_id, owner, index)
        self._open[key] = _OpenItem("tool", tool_call_id, by_chunk, owner, metadata)
        self._by_chunk[key] = by_chunk
        if by_chunk:
            self._lane_chunk[owner] = key

    def _attach_call(
        self,
        tool_call_id: str,
        parent_message_id: str | None,
        owner: str | None,
        index: int,
    ) -> None:
        """Add a new call to its parent assistant message (or one named after it). Implements TC-02."""
        holder = parent_message_id or tool_call_id
        record = self._records.get(holder)
        if record is not None and record.role != "assistant":
            self._warn(
                index,
                "TC-02",
                tool_call_id,
                f"parentMessageId '{holder}' names a {record.role} message, not an "
                f"assistant message; the call is kept under assistant message "
                f"'{tool_call_id}'",
            )
            holder = tool_call_id
            record = self._records.get(holder)
        if record is None:
            record = _MessageRecord(role="assistant", subagent_run_id=owner)
            self._records[holder] = record
        elif record.subagent_run_id != owner:
            self._warn(
                index,
                "TC-02",
                tool_call_id,
                f"call '{tool_call_id}' has subagentRunId {owner!r} but its assistant "
                f"message '{holder}' has {record.subagent_run_id!r}; they must agree",
            )
        record.tool_call_ids.append(tool_call_id)

    def _open_text(
        self,
        message_id: str,
        role: str | None,
        name: str | None,
        owner: str | None,
        index: int,
        *,
        by_chunk: bool,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        """Create or reopen a text message's record. Implements ER-01."""
        key: _Key = ("text", message_id)
        effective_role = role or "assistant"
        record = self._records.get(message_id)
        if record is None:
            self._records[message_id] = _MessageRecord(
                role=effective_role, content=[], name=name, subagent_run_id=owner
            )
        else:
            if record.role != effective_role:
                self._warn(
                    index,
                    "ER-01",
                    message_id,
                    f"message '{message_id}' is a {record.role} message; a start with role "
                    f"{effective_role!r} does not change that",
                )
            if record.content is None:
                record.content = []
        self._text_roles[message_id] = (
            record.role if record is not None else effective_role
        )
        self._open[key] = _OpenItem("text", message_id, by_chunk, owner, metadata)
        self._by_chunk[key] = by_chunk
        if by_chunk:
            self._lane_chunk[owner] = key

    # -- steps --------------------------------------------------------------------------

    def _on_step(
        self,
        event: StepStartedEvent | StepFinishedEvent,
        index: int,
        closing: list[_Key],
    ) -> list[BaseEvent]:
        """Open or close a step by name. Implements ER-01."""
        key: _Key = ("step", event.step_name)
        is_open = key in self._open
        if isinstance(event, agui.StepStartedEvent) and is_open:
            self._fail(
                index,
                "ER-01",
                event.step_name,
                f"STEP_STARTED for step '{event.step_name}', which is still open",
            )
        if isinstance(event, agui.StepFinishedEvent) and not is_open:
            self._fail(
                index,
                "ER-01",
                event.step_name,
                f"STEP_FINISHED for step '{event.step_name}', which is not open; send "
                "STEP_STARTED first",
            )
        out = self._close(closing)
        if isinstance(event, agui.StepStartedEvent):
            self._open[key] = _OpenItem(
                "step", event.step_name, False, event.subagent_run_id
            )
        else:
            del self._open[key]
        return [*out, event]

    # -- shared helpers -----------------------------------------------------------------

    def _check_explicit_continue(
        self,
        kind: _Kind,
        item_id: str,
        event_name: str,
        index: int,
        closing: list[_Key],
    ) -> None:
        """Raise unless an explicit ARGS/CONTENT/END may continue ``item_id``.

        Implements TC-07 (no mixing of spellings) and ER-01 (the item must be open).
        """
        key: _Key = (kind.kind, item_id)
        if self._by_chunk.get(key):
            self._fail(
                index,
                kind.chunk_rule,
                item_id,
                f"{event_name} for '{item_id}', which was opened by a chunk; a chunk-opened "
                "item is continued by chunks and its END is synthesized, never sent",
            )
        if key in self._open and key not in closing:
            return
        known = item_id in (self.tool_calls if kind is _TOOL else self._text_roles)
        state = "is closed (reopen it" if known else "was never opened (open it"
        self._fail(
            index,
            "ER-01",
            item_id,
            f"{event_name} for '{item_id}', which {state} with {kind.start} first)",
        )

    def _close(self, keys: list[_Key], *, synthesize: bool = True) -> list[BaseEvent]:
        """Close ``keys`` (open items) and return their END events if ``synthesize``."""
        out: list[BaseEvent] = []
        for key in keys:
            item = self._open.pop(key)
            if self._lane_chunk.get(item.lane) == key:
                del self._lane_chunk[item.lane]
            if item.kind == "tool":
                call = self.tool_calls[item.item_id]
                call.open = False
                call.ended = True
            if not synthesize:
                continue
            stamp: dict[str, Any] = {
                "metadata": item.metadata,
                "subagent_run_id": item.lane,
            }
            if item.kind == "tool":
                out.append(agui.ToolCallEndEvent(tool_call_id=item.item_id, **stamp))
            elif item.kind == "text":
                out.append(agui.TextMessageEndEvent(message_id=item.item_id, **stamp))
            else:
                out.append(agui.StepFinishedEvent(step_name=item.item_id, **stamp))
        return out

    def _reset_run(self) -> None:
        """Move this run's ids to the thread's and clear the per-run state."""
        self._thread_tool_call_ids.update(self.tool_calls)
        self._thread_message_ids.update(self._records)
        self.tool_calls = {}
        self._records = {}
        self._open = {}
        self._lane_chunk = {}
        self._by_chunk = {}
        self._owners = {}
        self._text_roles = {}
        self._answered = {}

    def _warn(self, index: int, rule: str, item_id: str | None, message: str) -> None:
        """Record a non-fatal finding."""
        self.warnings.append(StreamWarning(index, rule, item_id, message))

    def _fail(
        self, index: int, rule: str, item_id: str | None, message: str
    ) -> NoReturn:
        """Raise a :class:`StreamViolation`."""
        raise StreamViolation(index=index, rule=rule, item_id=item_id, message=message)


def _type_name(event: BaseEvent) -> str:
    """Return an event's wire type name."""
    return str(getattr(event.type, "value", event.type))


def _item_id(event: BaseEvent) -> str | None:
    """Return the toolCallId or messageId an event carries, if any."""
    return getattr(event, "tool_call_id", None) or getattr(event, "message_id", None)


def _dict_item_id(data: dict[str, Any]) -> str | None:
    """Return the toolCallId or messageId of an event object, if it carries a string one."""
    for key in ("toolCallId", "tool_call_id", "messageId", "message_id"):
        value = data.get(key)
        if isinstance(value, str):
            return value
    return None


def _summarize(exc: ValidationError) -> str:
    """Return the first validation error of ``exc`` as ``<location>: <message>``."""
    first = exc.errors()[0]
    location = ".".join(str(part) for part in first["loc"])
    more = exc.error_count() - 1
    suffix = f" (and {more} more)" if more > 0 else ""
    return f"{location or 'event'}: {first['msg']}{suffix}"
