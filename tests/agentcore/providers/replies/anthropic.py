"""Anthropic Messages replies for the script server, and a provider pointed at it."""

from __future__ import annotations

from typing import Any

from agentcore.providers.anthropic import AnthropicProvider
from tests.agentcore.providers.server import Reply, json_reply, named_sse


def start(input_tokens: int = 12) -> dict[str, Any]:
    return {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "content": [],
            "model": "claude-test",
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": 1},
        },
    }


def text_block(index: int, parts: list[str]) -> list[dict[str, Any]]:
    return [
        {
            "type": "content_block_start",
            "index": index,
            "content_block": {"type": "text", "text": ""},
        },
        *(
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "text_delta", "text": p},
            }
            for p in parts
        ),
        {"type": "content_block_stop", "index": index},
    ]


def tool_block_events(
    index: int, call_id: str, name: str, parts: list[str]
) -> list[dict[str, Any]]:
    return [
        {
            "type": "content_block_start",
            "index": index,
            "content_block": {
                "type": "tool_use",
                "id": call_id,
                "name": name,
                "input": {},
            },
        },
        *(
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "input_json_delta", "partial_json": p},
            }
            for p in parts
        ),
        {"type": "content_block_stop", "index": index},
    ]


def end(stop: str, output_tokens: int = 20) -> list[dict[str, Any]]:
    return [
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": None},
            "usage": {"output_tokens": output_tokens},
        },
        {"type": "message_stop"},
    ]


def text_reply(parts: list[str]) -> Reply:
    """Return a streamed reply of the text ``parts``, with usage."""
    return Reply(body=named_sse([start(), *text_block(0, parts), *end("end_turn")]))


def call_reply(name: str, call_id: str, args: list[str]) -> Reply:
    """Return a streamed reply calling tool ``name`` as ``call_id`` with ``args`` pieces."""
    return Reply(
        body=named_sse(
            [
                start(),
                *tool_block_events(0, call_id, name, ["", *args]),
                *end("tool_use"),
            ]
        )
    )


def error_reply(status: int) -> Reply:
    """Return an error reply with HTTP ``status`` whose body holds a secret not to pass on."""
    return json_reply(
        status,
        {
            "type": "error",
            "error": {"type": "api_error", "message": "internal detail sk-test-secret"},
        },
    )


def factory(url: str, **options: Any) -> AnthropicProvider:
    """Return the adapter pointed at the script server ``url``, without retries."""
    return AnthropicProvider(
        model="claude-test",
        api_key="sk-test-secret",
        base_url=url,
        max_retries=0,
        **options,
    )
