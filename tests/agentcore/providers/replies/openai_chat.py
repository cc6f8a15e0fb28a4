"""OpenAI Chat Completions replies for the script server, and a provider pointed at it."""

from __future__ import annotations

from typing import Any

from agentcore.providers.openai_chat import OpenAIChatProvider
from tests.agentcore.providers.server import Reply, json_reply, sse


def chunk(
    delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any
) -> dict[str, Any]:
    """Return one ``chat.completion.chunk`` with a single choice."""
    choice: dict[str, Any] = {"index": 0, "delta": delta or {}, "finish_reason": finish}
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "test-model",
        "choices": [choice],
        **extra,
    }


def usage_chunk(prompt: int = 10, completion: int = 5) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "test-model",
        "choices": [],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    }


def from_case(stream: list[dict[str, Any]]) -> Reply:
    """Return a case's chunk list as an SSE reply (chunk envelopes filled in)."""
    full = [
        {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            **c,
        }
        for c in stream
    ]
    return Reply(body=sse(full, done=True))


def text_reply(parts: list[str]) -> Reply:
    """Return a streamed reply of the text ``parts``, with usage."""
    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"content": p}) for p in parts]
    events += [chunk(finish="stop"), usage_chunk()]
    return Reply(body=sse(events, done=True))


def call_reply(name: str, call_id: str, args: list[str]) -> Reply:
    """Return a streamed reply calling tool ``name`` as ``call_id`` with ``args`` pieces."""
    events = [
        chunk(
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "index": 0,
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": ""},
                    }
                ],
            }
        )
    ]
    events += [
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": a}}]})
        for a in args
    ]
    events += [chunk(finish="tool_calls"), usage_chunk()]
    return Reply(body=sse(events, done=True))


def error_reply(status: int) -> Reply:
    """Return an error reply with HTTP ``status`` whose body holds a secret not to pass on."""
    return json_reply(
        status,
        {
            "error": {
                "message": "internal detail sk-test-secret at 10.0.0.3",
                "type": "x",
                "code": None,
            }
        },
    )


def factory(url: str, **options: Any) -> OpenAIChatProvider:
    """Return the adapter pointed at the script server ``url``, without retries."""
    return OpenAIChatProvider(
        model="test-model",
        api_key="sk-test-secret",
        base_url=url + "/v1",
        max_retries=0,
        **options,
    )
