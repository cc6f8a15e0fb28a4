"""A minimal AG-UI reducer for tests: a stream's events to the messages a client keeps.

Mirrors what ``@ag-ui/client``'s ``defaultApplyEvents`` does with the events
Countersign emits (text messages, tool calls under their parent message, tool
results as tool messages), so a test can feed back its accumulated history the way
``HttpAgent`` does.
"""

from __future__ import annotations

from typing import Any


def apply_events(messages: list[dict[str, Any]], events: list[dict[str, Any]]) -> None:
    """Append to ``messages`` what ``events`` add; fail on an id seen twice."""
    by_id = {m["id"]: m for m in messages}

    def add(message: dict[str, Any]) -> dict[str, Any]:
        assert message["id"] not in by_id, f"message id {message['id']!r} arrived twice"
        messages.append(message)
        by_id[message["id"]] = message
        return message

    calls: dict[str, dict[str, Any]] = {}
    for event in events:
        kind = event["type"]
        if kind == "TEXT_MESSAGE_START":
            found = by_id.get(event["messageId"])
            if found is None:
                add({"id": event["messageId"], "role": "assistant", "content": ""})
            else:
                found.setdefault("content", "")
        elif kind == "TEXT_MESSAGE_CONTENT":
            by_id[event["messageId"]]["content"] += event["delta"]
        elif kind == "TOOL_CALL_START":
            parent = event.get("parentMessageId") or event["toolCallId"]
            owner = by_id.get(parent) or add({"id": parent, "role": "assistant"})
            call = {
                "id": event["toolCallId"],
                "type": "function",
                "function": {"name": event["toolCallName"], "arguments": ""},
            }
            owner.setdefault("toolCalls", []).append(call)
            calls[call["id"]] = call
        elif kind == "TOOL_CALL_ARGS":
            calls[event["toolCallId"]]["function"]["arguments"] += event["delta"]
        elif kind == "TOOL_CALL_RESULT":
            add(
                {
                    "id": event["messageId"],
                    "role": "tool",
                    "toolCallId": event["toolCallId"],
                    "content": event["content"],
                }
            )
