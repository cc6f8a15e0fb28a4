"""Malformed input gets a clear 4xx naming what was wrong, never a 500 or lost data."""

from __future__ import annotations

import json

import pytest

from threads.models import Event, Message, Run, Thread
from threads.recording import RunRecorder
from threads.services import thread_create

pytestmark = pytest.mark.django_db


def _agui(api, body, **extra):
    return api.post(
        "/agui/demo/", data=json.dumps(body), content_type="application/json", **extra
    )


def _input(**changes):
    body = {
        "threadId": "t-hard",
        "runId": "r-hard",
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
        "messages": [{"id": "u1", "role": "user", "content": "hi"}],
    }
    body.update(changes)
    return body


def test_rest_message_with_nul_is_refused(api, user):
    thread = thread_create(owner=user, title="nul")
    response = api.post(
        f"/api/threads/{thread.thread_id}/messages/",
        {"content": "hi\u0000there"},
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["type"] == "validation_error"
    assert "NUL" in response.json()["fields"]["content"][0]
    assert not Run.objects.filter(thread=thread).exists()


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        (
            {"messages": [{"id": "u1", "role": "user", "content": "a\u0000b"}]},
            "messages.0.content",
        ),
        ({"threadId": "x" * 201}, "threadId"),
        ({"threadId": ""}, "threadId"),
        ({"threadId": "a/b?c#d"}, "threadId"),
        ({"threadId": "t\u0001x"}, "threadId"),
        ({"threadId": "t\nx"}, "threadId"),
        ({"threadId": " t-1"}, "threadId"),
        ({"threadId": 123}, "threadId"),
        ({"threadId": None}, "threadId"),
        ({"threadId": ["t-1"]}, "threadId"),
        ({"threadId": {"id": "t-1"}}, "threadId"),
        ({"runId": "r" * 300}, "runId"),
        (
            {"messages": [{"id": "m" * 201, "role": "user", "content": "hi"}]},
            "messages.0.id",
        ),
        (
            {
                "messages": [
                    {"id": "m1", "role": "user", "content": "hi"},
                    {"id": "m1", "role": "user", "content": "again"},
                ]
            },
            "messages.1.id",
        ),
        (
            {
                "tools": [
                    {"name": "x", "description": "a"},
                    {"name": "x", "description": "b"},
                ]
            },
            "tools.1.name",
        ),
    ],
)
def test_agui_input_we_cannot_store_is_refused_naming_the_field(api, changes, field):
    response = _agui(api, _input(**changes))
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["type"] == "invalid_input"
    assert field in body["fields"]
    assert not Thread.objects.exists()


def test_oversized_bodies_get_the_json_error_shape(api, user, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    thread = thread_create(owner=user, title="big")
    rest = api.post(
        f"/api/threads/{thread.thread_id}/messages/",
        {"content": "x" * 5000},
        format="json",
    )
    agui = _agui(
        api, _input(messages=[{"id": "u1", "role": "user", "content": "x" * 5000}])
    )
    for response in (rest, agui):
        assert response.status_code == 413
        assert response["Content-Type"].startswith("application/json")
        assert response.json()["type"] == "payload_too_large"
        assert "1000 bytes" in response.json()["detail"]


def test_model_output_with_nul_is_stored_not_crashed(user):
    """A NUL in streamed model text is stored as U+FFFD in the log and the message."""
    thread = thread_create(owner=user, title="nul-model")
    run = Run.objects.create(thread=thread, status=Run.Status.RUNNING)
    recorder = RunRecorder(run)
    recorder.record(
        [
            {"type": "RUN_STARTED", "threadId": thread.thread_id, "runId": run.run_id},
            {"type": "TEXT_MESSAGE_START", "messageId": "m1"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "a\u0000b"},
            {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
            {"type": "RUN_FINISHED", "threadId": thread.thread_id, "runId": run.run_id},
        ]
    )
    assert Message.objects.get(message_id="m1").content == "a\ufffdb"
    content = Event.objects.get(thread=thread, type="TEXT_MESSAGE_CONTENT").payload
    assert content["delta"] == "a\ufffdb"
    run.refresh_from_db()
    assert run.status == Run.Status.FINISHED
