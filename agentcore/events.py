"""AG-UI 1.0 event, message and input types, from the official ``ag-ui-protocol`` package.

Everything protocol-shaped is re-exported from :mod:`ag_ui.core`; this module adds
only what the package lacks: JSON round-trips that follow the protocol's
"absent means absent" rule, and a parser for one event object.
"""

from __future__ import annotations

from typing import Any

from ag_ui.core import (
    PROTOCOL_VERSION,
    AgentCapabilities,
    AssistantMessage,
    BaseEvent,
    ContentPart,
    Context,
    CustomEvent,
    DeveloperMessage,
    Event,
    EventType,
    FunctionCall,
    HumanInTheLoopCapabilities,
    IdentityCapabilities,
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
    UserMessage,
)
from ag_ui.encoder import EventEncoder
from pydantic import BaseModel, TypeAdapter

__all__ = [
    "PROTOCOL_VERSION",
    "AgentCapabilities",
    "AssistantMessage",
    "BaseEvent",
    "ContentPart",
    "Context",
    "CustomEvent",
    "DeveloperMessage",
    "Event",
    "EventEncoder",
    "EventType",
    "FunctionCall",
    "HumanInTheLoopCapabilities",
    "IdentityCapabilities",
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
    "UserMessage",
    "event_from_dict",
    "event_to_dict",
    "message_from_dict",
    "message_to_dict",
]

_EVENT_ADAPTER: TypeAdapter[Any] = TypeAdapter(Event)
_MESSAGE_ADAPTER: TypeAdapter[Any] = TypeAdapter(Message)


def event_to_dict(event: BaseEvent) -> dict[str, Any]:
    """Return ``event`` as its AG-UI JSON object (camelCase keys, absent fields omitted)."""
    return event.model_dump(mode="json", by_alias=True, exclude_none=True)


def event_from_dict(data: dict[str, Any]) -> BaseEvent:
    """Parse one AG-UI event object (either key spelling).

    Raises :class:`pydantic.ValidationError` when ``data`` is not a known event type or
    a known field is malformed. Unknown members are kept, as the package does.
    """
    event: BaseEvent = _EVENT_ADAPTER.validate_python(data)
    return event


def message_to_dict(message: BaseModel) -> dict[str, Any]:
    """Return an AG-UI message model as its JSON object (camelCase, absent omitted)."""
    return message.model_dump(mode="json", by_alias=True, exclude_none=True)


def message_from_dict(data: dict[str, Any]) -> Any:
    """Parse one AG-UI message object (discriminated by ``role``).

    Raises :class:`pydantic.ValidationError` on an unknown role or a malformed field.
    """
    return _MESSAGE_ADAPTER.validate_python(data)
