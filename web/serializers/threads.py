"""Serializers of the threads REST API: strict input, camelCase output, the error body.

Output keys are camelCase like the AG-UI wire format and
:func:`approvals.services.approval_snapshot`. Input serializers reject unknown
fields (:class:`StrictInputMixin`). Implements DC-05.

Over 400 lines because it holds the REST API's input and output serializers of one
app, as DRF apps keep them.
"""

from __future__ import annotations

from typing import Any, ClassVar

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request

from agentcore.content import ContentError, part_dict
from threads.models import Run, Thread, ToolCall
from threads.selectors import (
    thread_latest_run,
    thread_status,
    tool_call_result,
    tool_call_validation,
)
from threads.validation import json_problem

#: Longest message text accepted, in characters.
MAX_CONTENT_CHARS = 100_000
#: Most content parts in one message.
MAX_CONTENT_PARTS = 50


def _json_type_error(field: serializers.Field, value: Any) -> str | None:
    """Return why ``value`` is not of the JSON type the schema documents for ``field``."""
    if value is None:
        return None
    kind = type(value).__name__
    if isinstance(field, serializers.CharField | serializers.ChoiceField):
        if not isinstance(value, str):
            return f"must be a string, not {kind}"
    elif isinstance(field, serializers.BooleanField):
        if not isinstance(value, bool):
            return f"must be true or false, not {kind}"
    elif isinstance(field, serializers.IntegerField | serializers.FloatField) and (
        isinstance(value, bool) or not isinstance(value, int | float)
    ):
        return f"must be a number, not {kind}"
    return None


class StrictInputMixin:
    """Reject request fields the serializer does not declare, naming each one.

    JSON values must have the type the schema documents: DRF would read ``0`` as
    the string ``"0"`` or ``"true"`` as a boolean; here they are refused, naming the
    field. The OpenAPI schema says ``additionalProperties: false`` for these
    bodies (web.schema).
    """

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            declared = self.fields  # type: ignore[attr-defined]
            unknown = sorted(str(key) for key in data if key not in declared)
            if unknown:
                allowed = sorted(declared)
                raise serializers.ValidationError(
                    {
                        key: [f"unknown field {key!r}; allowed fields: {allowed!r}"]
                        for key in unknown
                    }
                )
            wrong = {
                name: [problem]
                for name, value in data.items()
                if (problem := _json_type_error(declared[name], value)) is not None
            }
            if wrong:
                raise serializers.ValidationError(wrong)
        return super().to_internal_value(data)  # type: ignore[misc]


class StrictSerializer(StrictInputMixin, serializers.Serializer):
    """A plain serializer that rejects unknown fields."""


class QueryFilterSerializer(serializers.Serializer):
    """Query-string filters that refuse what they would otherwise ignore, naming each parameter.

    A parameter the endpoint does not take (``?risk=``, ``?page=``), one given
    twice (``?status=a&status=b``) or one sent empty (``?status=``) is a 400
    naming it and the parameters the endpoint takes; DRF would ignore the first,
    read only the last of the second and read the third as absent, while the
    schema documents each filter as one non-empty value. ``paging`` names the
    query parameters the endpoint's paginator reads (and validates) beside the
    declared filters. The one mechanism every list endpoint reads its query with.
    """

    #: Query parameters read (and validated) by the paginator, not by this serializer.
    paging: ClassVar[tuple[str, ...]] = ()

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        for field in fields.values():
            if isinstance(field, serializers.ChoiceField):
                # DRF says only that the value is not valid; name what is.
                allowed = ", ".join(map(str, field.choices))
                field.error_messages["invalid_choice"] = (
                    f'"{{input}}" is not allowed; use one of: {allowed}'
                )
        return fields

    def to_internal_value(self, data: Any) -> Any:
        if hasattr(data, "getlist"):
            declared = [*map(str, self.fields), *self.paging]
            problems: dict[str, list[str]] = {}
            for name in data:
                values = data.getlist(name)
                if name not in declared:
                    problems[name] = [
                        f"this endpoint has no query parameter {name[:60]!r}; it takes "
                        + (", ".join(declared) if declared else "none")
                    ]
                elif len(values) > 1:
                    problems[name] = ["must be given once"]
                elif name in self.fields and values[0] == "":
                    problems[name] = [
                        "must not be empty; leave the parameter out to not filter"
                    ]
            if problems:
                raise serializers.ValidationError(problems)
        return super().to_internal_value(data)

    @classmethod
    def validated_query(cls, request: Request) -> Any:
        """Return ``request.query_params`` validated by this serializer (its ``validated_data``).

        A mapping of the declared filters (defaults filled in, absent optional ones
        left out). Raises DRF's ``ValidationError`` (400, naming each bad
        parameter). The one way every list view reads its filters.
        """
        filters = cls(data=request.query_params)
        filters.is_valid(raise_exception=True)
        return filters.validated_data


class ErrorSerializer(serializers.Serializer):
    """The body of every 4xx response."""

    type = serializers.CharField(help_text="Stable, machine-readable error code.")
    detail = serializers.CharField(
        help_text="What went wrong and what to do, as a sentence."
    )
    # DRF's metaclass pops declared fields off the class, so this does not shadow
    # Serializer.fields at run time; the error body's key is "fields".
    fields = serializers.DictField(  # type: ignore[assignment]
        child=serializers.ListField(child=serializers.CharField()),
        required=False,
        help_text="Validation errors by field (only for validation errors).",
    )


_CONTENT_SCHEMA: dict[str, Any] = {
    "oneOf": [
        {"type": "string", "minLength": 1, "maxLength": MAX_CONTENT_CHARS},
        {
            "type": "array",
            "minItems": 1,
            "maxItems": MAX_CONTENT_PARTS,
            "items": {
                "type": "object",
                "properties": {
                    "type": {
                        "type": "string",
                        "enum": ["text", "image", "audio", "video", "document"],
                    }
                },
                "required": ["type"],
                "additionalProperties": True,
            },
        },
    ],
    "description": "Text, or a list of AG-UI content parts "
    '(`{"type": "text", "text": "..."}`, `{"type": "image", "source": {...}}`...).',
}


@extend_schema_field(_CONTENT_SCHEMA)
class ContentField(serializers.Field):
    """A message's content: non-blank text, or a non-empty list of AG-UI content parts (TC-10)."""

    default_error_messages = {
        "type": "content must be a string or a list of AG-UI content parts, not {kind}",
        "blank": "content must not be blank",
        "too_long": f"content is longer than {MAX_CONTENT_CHARS} characters",
        "empty": "content must hold at least one content part",
        "too_many": f"content may hold at most {MAX_CONTENT_PARTS} parts",
        "part": "part {index}: {error}",
        "unstorable": "{detail}",
    }

    def to_internal_value(self, data: Any) -> str | list[dict[str, Any]]:

        # NUL, lone surrogates, non-finite numbers, depth: the one shared check.
        problem = json_problem(data, path="content")
        if problem is not None:
            self.fail("unstorable", detail=problem.detail)
        if isinstance(data, str):
            if not data.strip():
                self.fail("blank")
            if len(data) > MAX_CONTENT_CHARS:
                self.fail("too_long")
            return data
        if not isinstance(data, list):
            self.fail("type", kind=type(data).__name__)
        if not data:
            self.fail("empty")
        if len(data) > MAX_CONTENT_PARTS:
            self.fail("too_many")
        parts: list[dict[str, Any]] = []
        for index, item in enumerate(data):
            if not isinstance(item, dict):
                self.fail(
                    "part",
                    index=index,
                    error=f"expected an object, got {type(item).__name__}",
                )
            try:
                parts.append(part_dict(item))
            except ContentError as error:
                first = str(error).splitlines()
                self.fail("part", index=index, error=" ".join(first[:3]))
        return parts

    def to_representation(self, value: Any) -> Any:
        return value


_MESSAGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "An AG-UI message (camelCase): user, assistant (with toolCalls), "
    "system, developer or tool (with toolCallId).",
    "properties": {
        "id": {"type": "string"},
        "role": {
            "type": "string",
            "enum": ["user", "assistant", "system", "developer", "tool"],
        },
        "content": {},
        "name": {"type": "string"},
        "toolCallId": {"type": "string"},
        "error": {"type": "string"},
        "toolCalls": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "string"},
                    "type": {"type": "string", "enum": ["function"]},
                    "function": {
                        "type": "object",
                        "properties": {
                            "name": {"type": "string"},
                            "arguments": {"type": "string"},
                        },
                        "required": ["name", "arguments"],
                    },
                },
                "required": ["id", "type", "function"],
            },
        },
    },
    "required": ["id", "role"],
    "additionalProperties": True,
}


@extend_schema_field(_MESSAGE_SCHEMA)
class AguiMessageField(serializers.Field):
    """An AG-UI message dict, passed through unchanged (read-only)."""

    def to_representation(self, value: Any) -> Any:
        return value


_EVENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "One AG-UI event from the thread's log: its payload plus `seq`.",
    "properties": {
        "seq": {"type": "integer", "minimum": 1},
        "type": {"type": "string"},
    },
    "required": ["seq", "type"],
    "additionalProperties": True,
}


@extend_schema_field(_EVENT_SCHEMA)
class EventField(serializers.Field):
    """A log row as sent on the wire: ``{"seq", ...AG-UI payload}`` (read-only)."""

    def to_representation(self, value: Any) -> Any:
        return value.as_wire()


@extend_schema_field(OpenApiTypes.ANY)
class AnyJSONField(serializers.JSONField):
    """Any JSON value (documented as such)."""


class MessageOutputSerializer(serializers.Serializer):
    """A stored message in the AG-UI shape (``id``, ``role``, ``content``)."""

    id = serializers.CharField(source="message_id")
    role = serializers.CharField()
    content = AnyJSONField(help_text="Text, or a list of AG-UI content parts.")


# -- runs ----------------------------------------------------------------------------


class RunErrorSerializer(serializers.Serializer):
    """Why a run ended in error."""

    code = serializers.CharField()
    message = serializers.CharField()


class RunSegmentSerializer(serializers.Serializer):
    """One of the agent's own runs inside a client-visible run (never a run of its own)."""

    runId = serializers.CharField(
        source="run_id",
        help_text="The agent's run id for this segment (the first segment's is the "
        "client's runId); it names no client-visible run.",
    )
    status = serializers.ChoiceField(choices=Run.Status.choices)
    pendingToolCallIds = serializers.ListField(
        source="pending_tool_call_ids",
        child=serializers.CharField(),
        help_text="The calls this segment handed over (Countersign's, held and the "
        "client's alike).",
    )
    createdAt = serializers.DateTimeField(source="created_at")
    startedAt = serializers.DateTimeField(source="started_at", allow_null=True)
    finishedAt = serializers.DateTimeField(source="finished_at", allow_null=True)


class RunOutputSerializer(serializers.Serializer):
    """A client-visible run (one per AG-UI POST or posted message), as its client saw it.

    Serializes a :class:`threads.selectors.ClientRun`: status, outcome, pending
    calls, interrupts and error are those of the stream the client received; the
    agent's own runs inside it are ``segments``.
    """

    runId = serializers.CharField(source="run.run_id")
    threadId = serializers.CharField(source="run.thread.thread_id")
    agent = serializers.CharField(source="run.agent")
    status = serializers.ChoiceField(
        choices=Run.Status.choices,
        help_text="`running` while the client's stream is open (whatever the agent's "
        "segments do inside it); `awaiting_tools` while calls it ended with "
        "(the client's, or held for a person) are unanswered.",
    )
    outcome = serializers.ChoiceField(
        choices=Run.Outcome.choices,
        allow_null=True,
        help_text="The `RUN_FINISHED.outcome.type` the client got; null while "
        "streaming or after a `RUN_ERROR`.",
    )
    pendingToolCallIds = serializers.ListField(
        source="pending_tool_call_ids",
        child=serializers.CharField(),
        help_text="The client's own calls the run left for it to answer.",
    )
    interruptIds = serializers.ListField(
        source="interrupt_ids",
        child=serializers.CharField(),
        help_text="The interrupts the run ended with (`cs-approval-<id>`, the ids of "
        "/api/approvals/<id>/).",
    )
    error = RunErrorSerializer(allow_null=True)
    cancelRequested = serializers.BooleanField(source="cancel_requested")
    continues = serializers.CharField(
        allow_null=True,
        help_text="The runId whose pending calls or interrupts this run continues.",
    )
    createdAt = serializers.DateTimeField(source="run.created_at")
    startedAt = serializers.DateTimeField(source="run.started_at", allow_null=True)
    finishedAt = serializers.DateTimeField(source="finished_at", allow_null=True)
    segments = RunSegmentSerializer(
        many=True,
        help_text="The agent's own runs streamed inside this one, in order (empty "
        "for a run recorded as is, e.g. an import).",
    )


# -- threads -------------------------------------------------------------------------


THREAD_STATUSES = (
    "running",
    "waiting_for_approval",
    "waiting_for_tools",
    "idle",
    "failed",
)


class ThreadOutputSerializer(serializers.Serializer):
    """A thread with its derived status and the pending calls of its last run."""

    threadId = serializers.CharField(source="thread_id")
    title = serializers.CharField()
    agent = serializers.CharField()
    owner = serializers.CharField(
        source="owner.username", allow_null=True, default=None
    )
    status = serializers.SerializerMethodField()
    pendingToolCallIds = serializers.SerializerMethodField()
    createdAt = serializers.DateTimeField(source="created_at")
    updatedAt = serializers.DateTimeField(source="updated_at")
    archivedAt = serializers.DateTimeField(source="archived_at", allow_null=True)

    @extend_schema_field(serializers.ChoiceField(choices=THREAD_STATUSES))
    def get_status(self, thread: Thread) -> str:
        annotated = getattr(thread, "status_value", None)
        return annotated or thread_status(thread=thread)

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_pendingToolCallIds(self, thread: Thread) -> list[str]:
        """The last run's pending calls while they still wait (not once answered or cancelled)."""
        if hasattr(thread, "latest_pending_tool_call_ids"):
            if getattr(thread, "latest_run_status", None) != "awaiting_tools":
                return []
            return list(thread.latest_pending_tool_call_ids or [])
        run = thread_latest_run(thread=thread)
        if run is None or run.status != "awaiting_tools":
            return []
        return list(run.pending_tool_call_ids)


# -- tool calls ----------------------------------------------------------------------


class ValidationVerdictSerializer(serializers.Serializer):
    """The argument ladder's verdict on a call's argument text (RT-05, RT-06)."""

    verdict = serializers.ChoiceField(
        choices=["ok", "repair", "error", "unknown_tool", "streaming"]
    )
    repair = serializers.CharField(allow_null=True)
    error = serializers.CharField(allow_null=True)
    params = serializers.DictField(allow_null=True)


class ToolResultSerializer(serializers.Serializer):
    """The one tool message answering a call (DC-04)."""

    messageId = serializers.CharField(source="message_id")
    content = AnyJSONField(help_text="Text, or a list of AG-UI content parts.")
    error = serializers.CharField(allow_null=True)


class ToolCallApprovalSerializer(serializers.Serializer):
    """The approval state of a call."""

    id = serializers.IntegerField()
    status = serializers.CharField()
    editedArguments = serializers.DictField(source="edited_arguments", allow_null=True)
    decidedBy = serializers.CharField(
        source="decided_by.username", allow_null=True, default=None
    )
    reason = serializers.CharField()


class ToolCallOutputSerializer(serializers.Serializer):
    """A tool call: state, arguments as streamed and parsed, verdict, result, approval."""

    toolCallId = serializers.CharField(source="tool_call_id")
    threadId = serializers.CharField(source="thread.thread_id")
    runId = serializers.CharField(
        source="run.wire_run.run_id",
        help_text="The client-visible run that streamed the call (the runId its "
        "AG-UI client saw), also when an internal segment of it made the call.",
    )
    name = serializers.CharField()
    state = serializers.ChoiceField(choices=ToolCall.State.choices)
    argumentsText = serializers.CharField(source="arguments_text", allow_blank=True)
    arguments = AnyJSONField(allow_null=True)
    validation = serializers.SerializerMethodField()
    result = serializers.SerializerMethodField()
    approval = serializers.SerializerMethodField()
    createdAt = serializers.DateTimeField(source="created_at")
    updatedAt = serializers.DateTimeField(source="updated_at")

    @extend_schema_field(ValidationVerdictSerializer)
    def get_validation(self, call: ToolCall) -> dict[str, Any]:
        return tool_call_validation(call=call)

    @extend_schema_field(ToolResultSerializer(allow_null=True))
    def get_result(self, call: ToolCall) -> dict[str, Any] | None:
        message = tool_call_result(call=call)
        return ToolResultSerializer(message).data if message is not None else None

    @extend_schema_field(ToolCallApprovalSerializer(allow_null=True))
    def get_approval(self, call: ToolCall) -> dict[str, Any] | None:
        approval = getattr(call, "approval", None)
        return (
            ToolCallApprovalSerializer(approval).data if approval is not None else None
        )


# -- catalogue -----------------------------------------------------------------------


class ToolOutputSerializer(serializers.Serializer):
    """A registered tool as an agent offers it."""

    agent = serializers.CharField()
    name = serializers.CharField()
    description = serializers.CharField()
    parameters = serializers.DictField(help_text="The tool's JSON Schema.")
    runsOn = serializers.ChoiceField(choices=["agent", "application"])
    policy = serializers.ChoiceField(
        choices=["auto", "require_approval", "deny", "conditional"],
        help_text="`conditional`: decided per call by a function of the arguments.",
    )
    isDestructive = serializers.BooleanField()
    isReadOnly = serializers.BooleanField()
    idempotent = serializers.BooleanField()
    timeout = serializers.FloatField(help_text="Seconds.")
    permission = serializers.CharField(allow_null=True)


class AgentOutputSerializer(serializers.Serializer):
    """A configured agent (no secrets, URLs or headers)."""

    name = serializers.CharField()
    provider = serializers.CharField()
    model = serializers.CharField()
    tools = serializers.ListField(child=serializers.CharField())


def results_of(name: str, item: Any, *, paginated: str | None = None) -> Any:
    """Return an inline serializer documenting ``{"results": [item...]}`` (+ links)."""
    fields: dict[str, Any] = {
        "results": item(many=True) if isinstance(item, type) else item
    }
    if paginated == "cursor":
        fields["next"] = serializers.URLField(allow_null=True)
        fields["previous"] = serializers.URLField(allow_null=True)
    elif paginated == "offset":
        fields["count"] = serializers.IntegerField()
        fields["next"] = serializers.URLField(allow_null=True)
        fields["previous"] = serializers.URLField(allow_null=True)
    elif paginated == "after":
        fields["next"] = serializers.URLField(allow_null=True)
        fields["lastSeq"] = serializers.IntegerField()
    return inline_serializer(name=name, fields=fields)
