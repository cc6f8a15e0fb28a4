"""OpenAI Responses replies for the script server, and a provider pointed at it."""

from __future__ import annotations

from typing import Any

from agentcore.providers.openai_responses import OpenAIResponsesProvider
from tests.agentcore.providers.server import Reply, json_reply, named_sse

USAGE = {"input_tokens": 11, "output_tokens": 7, "total_tokens": 18}


def response(status: str = "completed", **extra: Any) -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "model": "gpt-test",
        "status": status,
        "output": [],
        "usage": USAGE,
        **extra,
    }


def created() -> dict[str, Any]:
    return {
        "type": "response.created",
        "sequence_number": 0,
        "response": response("in_progress"),
    }


def completed(**extra: Any) -> dict[str, Any]:
    return {
        "type": "response.completed",
        "sequence_number": 99,
        "response": response(**extra),
    }


def text_events(parts: list[str]) -> list[dict[str, Any]]:
    return [
        {
            "type": "response.output_text.delta",
            "item_id": "msg_1",
            "output_index": 0,
            "content_index": 0,
            "delta": p,
            "sequence_number": 1,
        }
        for p in parts
    ]


def call_events(
    index: int, item_id: str, call_id: str, name: str, parts: list[str]
) -> list[dict[str, Any]]:
    args = "".join(parts)
    return [
        {
            "type": "response.output_item.added",
            "output_index": index,
            "sequence_number": 1,
            "item": {
                "type": "function_call",
                "id": item_id,
                "call_id": call_id,
                "name": name,
                "arguments": "",
                "status": "in_progress",
            },
        },
        *(
            {
                "type": "response.function_call_arguments.delta",
                "item_id": item_id,
                "output_index": index,
                "delta": p,
                "sequence_number": 2,
            }
            for p in parts
        ),
        {
            "type": "response.function_call_arguments.done",
            "item_id": item_id,
            "output_index": index,
            "arguments": args,
            "sequence_number": 3,
        },
        {
            "type": "response.output_item.done",
            "output_index": index,
            "sequence_number": 4,
            "item": {
                "type": "function_call",
                "id": item_id,
                "call_id": call_id,
                "name": name,
                "arguments": args,
                "status": "completed",
            },
        },
    ]


def text_reply(parts: list[str]) -> Reply:
    """Return a streamed reply of the text ``parts``, with usage."""
    return Reply(body=named_sse([created(), *text_events(parts), completed()]))


def call_reply(name: str, call_id: str, args: list[str]) -> Reply:
    """Return a streamed reply calling tool ``name`` as ``call_id`` with ``args`` pieces."""
    return Reply(
        body=named_sse(
            [
                created(),
                *call_events(0, "fc_" + call_id, call_id, name, args),
                completed(),
            ]
        )
    )


def error_reply(status: int) -> Reply:
    """Return an error reply with HTTP ``status`` whose body holds a secret not to pass on."""
    return json_reply(
        status,
        {
            "error": {
                "message": "internal detail sk-test-secret",
                "type": "x",
                "code": None,
            }
        },
    )


def factory(url: str, **options: Any) -> OpenAIResponsesProvider:
    """Return the adapter pointed at the script server ``url``, without retries."""
    return OpenAIResponsesProvider(
        model="gpt-test",
        api_key="sk-test-secret",
        base_url=url + "/v1",
        max_retries=0,
        **options,
    )
