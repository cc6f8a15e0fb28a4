"""AG-UI 1.0 event, message and input types, from the official ``ag-ui-protocol`` package.

Everything protocol-shaped is re-exported from :mod:`ag_ui.core`; this module adds
only what the package lacks: JSON round-trips that follow the protocol's
"absent means absent" rule, and a parser for one event object.

The re-exports are resolved on first use (:func:`__getattr__`): importing this
module builds no pydantic model. Modules on a run's path refer to the types as
``agui.<Name>`` (``from agentcore import events as agui``) inside the functions
that build or check events, and import them under ``TYPE_CHECKING`` for
annotations; ``from agentcore.events import <Name>`` still works and builds the
models at that import.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ag_ui.core import (
        PROTOCOL_VERSION,
        AgentCapabilities,
        AssistantMessage,
        AudioPart,
        BaseEvent,
        ContentPart,
        Context,
        CustomEvent,
        DataSource,
        DeveloperMessage,
        DocumentPart,
        Event,
        EventType,
        FileSource,
        FunctionCall,
        HumanInTheLoopCapabilities,
        IdentityCapabilities,
        ImagePart,
        Message,
        MessagesSnapshotEvent,
        RawEvent,
        ResumeEntry,
        RunAgentInput,
        RunErrorEvent,
        RunFinishedCancelledOutcome,
        RunFinishedEvent,
        RunFinishedInterruptOutcome,
        RunFinishedSuccessOutcome,
        RunStartedEvent,
        StateDeltaEvent,
        StateSnapshotEvent,
        StepFinishedEvent,
        StepStartedEvent,
        SystemMessage,
        TextMessageChunkEvent,
        TextMessageContentEvent,
        TextMessageEndEvent,
        TextMessageStartEvent,
        TextPart,
        TokenUsage,
        Tool,
        ToolCall,
        ToolCallArgsEvent,
        ToolCallChunkEvent,
        ToolCallEndEvent,
        ToolCallResultEvent,
        ToolCallStartEvent,
        ToolMessage,
        ToolsCapabilities,
        TransportCapabilities,
        UrlSource,
        UserMessage,
        VideoPart,
    )
    from ag_ui.encoder import EventEncoder
    from pydantic import BaseModel, TypeAdapter, ValidationError

__all__ = [
    "PROTOCOL_VERSION",
    "AgentCapabilities",
    "AssistantMessage",
    "AudioPart",
    "BaseEvent",
    "ContentPart",
    "Context",
    "CustomEvent",
    "DataSource",
    "DeveloperMessage",
    "DocumentPart",
    "Event",
    "EventEncoder",
    "EventType",
    "FileSource",
    "FunctionCall",
    "HumanInTheLoopCapabilities",
    "IdentityCapabilities",
    "ImagePart",
    "Message",
    "MessagesSnapshotEvent",
    "RawEvent",
    "ResumeEntry",
    "RunAgentInput",
    "RunErrorEvent",
    "RunFinishedCancelledOutcome",
    "RunFinishedEvent",
    "RunFinishedInterruptOutcome",
    "RunFinishedSuccessOutcome",
    "RunStartedEvent",
    "StateDeltaEvent",
    "StateSnapshotEvent",
    "StepFinishedEvent",
    "StepStartedEvent",
    "SystemMessage",
    "TextMessageChunkEvent",
    "TextMessageContentEvent",
    "TextMessageEndEvent",
    "TextMessageStartEvent",
    "TextPart",
    "TokenUsage",
    "Tool",
    "ToolCall",
    "ToolCallArgsEvent",
    "ToolCallChunkEvent",
    "ToolCallEndEvent",
    "ToolCallResultEvent",
    "ToolCallStartEvent",
    "ToolMessage",
    "ToolsCapabilities",
    "TransportCapabilities",
    "UrlSource",
    "UserMessage",
    "ValidationError",
    "VideoPart",
    "event_from_dict",
    "event_to_dict",
    "message_from_dict",
    "message_to_dict",
]

#: The names :func:`__getattr__` takes from ``ag_ui.core`` on first use.
_PROTOCOL_NAMES: frozenset[str] = frozenset(
    name for name in __all__ if name[0].isupper() or name == "PROTOCOL_VERSION"
) - {"EventEncoder", "ValidationError"}


def __getattr__(name: str) -> Any:
    """Return the protocol type ``name``, importing the ``ag_ui`` models on first use.

    Building the package's pydantic models costs hundreds of milliseconds; a
    process that never validates or encodes an event (a web process answering its
    probes, a worker waiting for its first task) never pays it. Each name is
    bound in this module once resolved, so later lookups are plain attribute reads.
    Raises ``AttributeError`` for any other name.
    """
    if name in _PROTOCOL_NAMES:
        import ag_ui.core

        value = getattr(ag_ui.core, name)
    elif name == "EventEncoder":
        from ag_ui.encoder import EventEncoder

        value = EventEncoder
    elif name == "ValidationError":
        from pydantic import ValidationError

        value = ValidationError
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


@cache
def _event_adapter() -> TypeAdapter[Any]:
    from pydantic import TypeAdapter

    adapter: TypeAdapter[Any] = TypeAdapter(__getattr__("Event"))
    return adapter


@cache
def _message_adapter() -> TypeAdapter[Any]:
    from pydantic import TypeAdapter

    adapter: TypeAdapter[Any] = TypeAdapter(__getattr__("Message"))
    return adapter


def event_to_dict(event: BaseEvent) -> dict[str, Any]:
    """Return ``event`` as its AG-UI JSON object (camelCase keys, absent fields omitted)."""
    return event.model_dump(mode="json", by_alias=True, exclude_none=True)


def event_from_dict(data: dict[str, Any]) -> BaseEvent:
    """Parse one AG-UI event object (either key spelling).

    Raises :class:`pydantic.ValidationError` when ``data`` is not a known event type or
    a known field is malformed. Unknown members are kept, as the package does.
    """
    event: BaseEvent = _event_adapter().validate_python(data)
    return event


def message_to_dict(message: BaseModel) -> dict[str, Any]:
    """Return an AG-UI message model as its JSON object (camelCase, absent omitted)."""
    return message.model_dump(mode="json", by_alias=True, exclude_none=True)


def message_from_dict(data: dict[str, Any]) -> Any:
    """Parse one AG-UI message object (discriminated by ``role``).

    Raises :class:`pydantic.ValidationError` on an unknown role or a malformed field.
    """
    return _message_adapter().validate_python(data)
