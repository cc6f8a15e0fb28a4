"""Builders and runners for the ``agentcore.stream`` tests (``test_stream_*.py``).

AG-UI events are written as the JSON objects a producer sends (camelCase), built by
the small functions below rather than as nested dicts in each test; :func:`run`,
:func:`violation` and :func:`assert_violation` feed them through :class:`RunStream`.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentcore.events import (
    event_to_dict,
    message_to_dict,
)
from agentcore.stream import RunStream, StreamViolation
from tests.cases import CASES_FILE as CASES

RS: dict[str, Any] = {"type": "RUN_STARTED", "threadId": "t1", "runId": "r1"}
RF: dict[str, Any] = {"type": "RUN_FINISHED", "threadId": "t1", "runId": "r1"}


def start(call_id: str, name: str = "f", parent: str | None = None) -> dict[str, Any]:
    """Return a ``TOOL_CALL_START`` (``parentMessageId`` only when ``parent`` is given)."""
    event = {"type": "TOOL_CALL_START", "toolCallId": call_id, "toolCallName": name}
    if parent is not None:
        event["parentMessageId"] = parent
    return event


def args(call_id: str, delta: str) -> dict[str, Any]:
    """Return a ``TOOL_CALL_ARGS``."""
    return {"type": "TOOL_CALL_ARGS", "toolCallId": call_id, "delta": delta}


def end(call_id: str) -> dict[str, Any]:
    """Return a ``TOOL_CALL_END``."""
    return {"type": "TOOL_CALL_END", "toolCallId": call_id}


def chunk(**fields: Any) -> dict[str, Any]:
    """Return a ``TOOL_CALL_CHUNK`` with the given fields (all optional)."""
    return {"type": "TOOL_CALL_CHUNK", **fields}


def result(
    call_id: str, message_id: str, content: Any = "ok", **extra: Any
) -> dict[str, Any]:
    return {
        "type": "TOOL_CALL_RESULT",
        "messageId": message_id,
        "toolCallId": call_id,
        "content": content,
        **extra,
    }


def text_start(message_id: str, **fields: Any) -> dict[str, Any]:
    """Return a ``TEXT_MESSAGE_START`` (``role``, ``subagentRunId``... as ``fields``)."""
    return {"type": "TEXT_MESSAGE_START", "messageId": message_id, **fields}


def text_content(message_id: str, delta: Any, **fields: Any) -> dict[str, Any]:
    """Return a ``TEXT_MESSAGE_CONTENT`` (``delta`` may be ill-typed, on purpose)."""
    return {
        "type": "TEXT_MESSAGE_CONTENT",
        "messageId": message_id,
        "delta": delta,
        **fields,
    }


def text_end(message_id: str, **fields: Any) -> dict[str, Any]:
    """Return a ``TEXT_MESSAGE_END``."""
    return {"type": "TEXT_MESSAGE_END", "messageId": message_id, **fields}


def text_chunk(**fields: Any) -> dict[str, Any]:
    """Return a ``TEXT_MESSAGE_CHUNK`` with the given fields (all optional)."""
    return {"type": "TEXT_MESSAGE_CHUNK", **fields}


def step_started(name: str, **fields: Any) -> dict[str, Any]:
    """Return a ``STEP_STARTED`` for step ``name``."""
    return {"type": "STEP_STARTED", "stepName": name, **fields}


def step_finished(name: str, **fields: Any) -> dict[str, Any]:
    """Return a ``STEP_FINISHED`` for step ``name``."""
    return {"type": "STEP_FINISHED", "stepName": name, **fields}


def finished(pending: list[str] | None = None, **outcome: Any) -> dict[str, Any]:
    if pending is None and not outcome:
        return dict(RF)
    body: dict[str, Any] = {"type": "success", **outcome}
    if pending is not None:
        body["pendingToolCallIds"] = pending
    return {**RF, "outcome": body}


def feed_all(stream: RunStream, events: list[Any]) -> list[dict[str, Any]]:
    """Feed every event and return the normalized output as JSON objects."""
    out: list[dict[str, Any]] = []
    for event in events:
        out.extend(event_to_dict(e) for e in stream.feed(event))
    return out


def run(events: list[Any], **kwargs: Any) -> tuple[RunStream, list[dict[str, Any]]]:
    stream = RunStream(**kwargs)
    return stream, feed_all(stream, events)


def violation(events: list[Any], **kwargs: Any) -> StreamViolation:
    """Feed ``events`` and return the StreamViolation raised by the last one."""
    stream = RunStream(**kwargs)
    for event in events[:-1]:
        stream.feed(event)
    with pytest.raises(StreamViolation) as info:
        stream.feed(events[-1])
    return info.value


def assert_violation(
    exc: StreamViolation, rule: str, index: int, item_id: str | None
) -> None:
    assert (exc.rule, exc.index, exc.item_id) == (rule, index, item_id), str(exc)
    assert str(exc) == f"{rule} at event {index}: {exc.message}"
    assert exc.message


def messages(stream: RunStream) -> list[dict[str, Any]]:
    return [message_to_dict(m) for m in stream.messages]


def load_case(case_id: str) -> dict[str, Any]:
    with open(CASES, encoding="utf-8") as handle:
        for line in handle:
            case = json.loads(line)
            if case["id"] == case_id:
                return case
    raise LookupError(case_id)
