"""Messages and the event log over the REST API: post, idempotency, conflicts, limits (DC-05)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tests.helpers.api import REFUND_ARGS, pending_refund_thread
from threads.models import Event, IdempotencyKey, Message, Run, Thread

pytestmark = pytest.mark.django_db


def _run_view(run: Run) -> dict:
    return {
        "runId": run.run_id,
        "threadId": run.thread.thread_id,
        "agent": "demo",
        "status": "queued",
        "outcome": None,
        "pendingToolCallIds": [],
        "interruptIds": [],
        "error": None,
        "cancelRequested": False,
        "continues": None,
        "createdAt": run.created_at.isoformat().replace("+00:00", "Z"),
        "startedAt": None,
        "finishedAt": None,
        # The posted message's run is a client-visible run; its first segment is
        # the agent's run under the same id.
        "segments": [
            {
                "runId": run.run_id,
                "status": "queued",
                "pendingToolCallIds": [],
                "createdAt": run.created_at.isoformat().replace("+00:00", "Z"),
                "startedAt": None,
                "finishedAt": None,
            }
        ],
    }


@pytest.fixture
def thread(user) -> Thread:
    """Return an idle thread of ``user``."""
    return Thread.objects.create(owner=user, thread_id="t-1", title="chat")


def test_dc05_post_message_starts_a_run(api, thread):
    """POST messages/ records the user message, starts a queued run, answers 201 with both."""
    response = api.post(
        "/api/threads/t-1/messages/", {"content": "Weather in Oslo?"}, format="json"
    )

    assert response.status_code == 201
    message = Message.objects.get(thread=thread)
    run = Run.objects.get(thread=thread)
    assert (message.role, message.content, message.run) == (
        "user",
        "Weather in Oslo?",
        None,
    )
    assert response.json() == {
        "message": {
            "id": message.message_id,
            "role": "user",
            "content": "Weather in Oslo?",
        },
        "run": _run_view(run),
    }


def test_post_message_accepts_agui_content_parts(api, thread):
    """Content may be a list of AG-UI content parts; they are stored validated."""
    parts = [
        {"type": "text", "text": "What is in this picture?"},
        {
            "type": "image",
            "source": {"type": "url", "value": "https://example.com/a.png"},
        },
    ]

    response = api.post("/api/threads/t-1/messages/", {"content": parts}, format="json")

    assert response.status_code == 201
    assert response.json()["message"]["content"] == parts
    assert Message.objects.get(thread=thread).content == parts


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("   ", "content must not be blank"),
        (42, "content must be a string or a list of AG-UI content parts, not int"),
        ([], "content must hold at least one content part"),
        (["hi"], "part 0: expected an object, got str"),
        (None, "This field may not be null."),
    ],
    ids=["blank", "number", "empty-list", "bare-string-part", "null"],
)
def test_invalid_content_names_the_field(api, thread, content, message):
    """Bad content is a 400 whose ``fields`` name ``content``; nothing is started."""
    response = api.post(
        "/api/threads/t-1/messages/", {"content": content}, format="json"
    )

    assert response.status_code == 400
    assert response.json()["fields"] == {"content": [message]}
    assert not Run.objects.exists()


def test_an_unknown_part_type_names_the_part(api, thread):
    """A part whose type is not an AG-UI content part is refused with its index."""
    response = api.post(
        "/api/threads/t-1/messages/", {"content": [{"type": "hologram"}]}, format="json"
    )

    assert response.status_code == 400
    assert response.json()["fields"]["content"][0].startswith(
        "part 0: not a content part"
    )


def test_missing_content_is_required(api, thread):
    """An empty body says ``content`` is required."""
    response = api.post("/api/threads/t-1/messages/", {}, format="json")

    assert response.status_code == 400
    assert response.json()["fields"] == {"content": ["This field is required."]}
    # Said as missing, not as an "invalid value".
    assert response.json()["detail"] == (
        "Missing 'content': it is required; add it to the request"
    )


def test_dc05_posting_while_a_run_is_active_is_409(api, thread):
    """A second message while the first run is queued → 409 run_conflict saying what to do."""
    first = api.post("/api/threads/t-1/messages/", {"content": "one"}, format="json")

    second = api.post("/api/threads/t-1/messages/", {"content": "two"}, format="json")

    assert first.status_code == 201
    assert second.status_code == 409
    run_id = first.json()["run"]["runId"]
    assert second.json() == {
        "type": "run_conflict",
        "detail": f"run {run_id!r} is still queued on this thread; wait for it to finish "
        "or cancel it (POST /api/runs/<id>/cancel/) before posting a message",
    }
    assert Run.objects.count() == 1


def test_sec02_posting_while_a_call_awaits_approval_is_409(api, user):
    """While a call awaits approval, posting is 409 and points at the approval queue (SEC-02)."""
    pending_refund_thread(user, thread_id="t-refund")

    response = api.post(
        "/api/threads/t-refund/messages/", {"content": "hurry"}, format="json"
    )

    assert response.status_code == 409
    assert response.json() == {
        "type": "run_conflict",
        "detail": "tool calls ['t-refund-call'] are waiting for an answer; an operator "
        "approves or rejects them in the approval queue, or cancel them with "
        "POST /api/threads/t-refund/cancel-pending/ (a reason is required)",
    }


def test_idempotent_retry_returns_the_same_response_and_starts_nothing(api, thread):
    """Same Idempotency-Key and body → the first response again, one message, one run."""
    body = {"content": "refund order A-1001 25.00"}

    first = api.post(
        "/api/threads/t-1/messages/", body, format="json", HTTP_IDEMPOTENCY_KEY="k-1"
    )
    retry = api.post(
        "/api/threads/t-1/messages/", body, format="json", HTTP_IDEMPOTENCY_KEY="k-1"
    )

    assert first.status_code == retry.status_code == 201
    assert retry.json() == first.json()
    assert retry["Idempotent-Replayed"] == "true"
    assert "Idempotent-Replayed" not in first
    assert Run.objects.count() == 1
    assert Message.objects.count() == 1
    assert IdempotencyKey.objects.get().key == "k-1"


def test_idempotency_key_with_a_different_body_is_422(api, thread):
    """The same key with another body → 422 idempotency_key_reused; nothing new starts."""
    api.post(
        "/api/threads/t-1/messages/",
        {"content": "one"},
        format="json",
        HTTP_IDEMPOTENCY_KEY="k-1",
    )

    response = api.post(
        "/api/threads/t-1/messages/",
        {"content": "two"},
        format="json",
        HTTP_IDEMPOTENCY_KEY="k-1",
    )

    assert response.status_code == 422
    assert response.json() == {
        "type": "idempotency_key_reused",
        "detail": "Idempotency-Key 'k-1' was already used for a different request; send a "
        "new key for a new request, or resend the original body to get its response",
    }
    assert Run.objects.count() == 1


def test_idempotency_keys_are_per_user(api, other_api, thread, other_user):
    """Another user's identical key is independent of this user's."""
    Thread.objects.create(owner=other_user, thread_id="t-2")

    mine = api.post(
        "/api/threads/t-1/messages/",
        {"content": "a"},
        format="json",
        HTTP_IDEMPOTENCY_KEY="k",
    )
    theirs = other_api.post(
        "/api/threads/t-2/messages/",
        {"content": "a"},
        format="json",
        HTTP_IDEMPOTENCY_KEY="k",
    )

    assert (mine.status_code, theirs.status_code) == (201, 201)
    assert Run.objects.count() == 2


def test_a_failed_request_stores_no_idempotency_key(api, thread):
    """A 409 is not stored: the same key may be retried once the conflict is gone."""
    api.post("/api/threads/t-1/messages/", {"content": "first"}, format="json")

    conflict = api.post(
        "/api/threads/t-1/messages/",
        {"content": "second"},
        format="json",
        HTTP_IDEMPOTENCY_KEY="k-9",
    )

    assert conflict.status_code == 409
    assert not IdempotencyKey.objects.exists()


def test_an_overlong_idempotency_key_names_the_header(api, thread):
    """A key longer than 255 characters is a 400 naming the header."""
    response = api.post(
        "/api/threads/t-1/messages/",
        {"content": "x"},
        format="json",
        HTTP_IDEMPOTENCY_KEY="k" * 256,
    )

    assert response.status_code == 400
    assert response.json()["fields"] == {
        "Idempotency-Key": ["must be 1-255 printable characters"]
    }


def test_message_posting_is_rate_limited_per_token(api, user, settings):
    """Past the configured rate, posting answers 429 with Retry-After and the error body."""
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"messages": "2/min"},
    }
    for index in range(3):
        Thread.objects.create(owner=user, thread_id=f"t-{index}")

    statuses = [
        api.post(
            f"/api/threads/t-{i}/messages/", {"content": "hi"}, format="json"
        ).status_code
        for i in range(3)
    ]
    limited = api.post("/api/threads/t-0/messages/", {"content": "hi"}, format="json")
    listing = api.get("/api/threads/t-0/messages/")

    assert statuses == [201, 201, 429]
    assert limited.status_code == 429
    assert limited.json()["type"] == "throttled"
    assert limited.json()["detail"].startswith(
        "Too many requests: Request was throttled."
    )
    assert 0 < int(limited["Retry-After"]) <= 60
    assert listing.status_code == 200  # reads are not limited
    assert Run.objects.count() == 2


def test_dc05_messages_list_is_the_agui_history(api, user):
    """GET messages/ returns the thread's history in the AG-UI message shape."""
    pending_refund_thread(user, thread_id="t-refund")

    response = api.get("/api/threads/t-refund/messages/")

    assert response.status_code == 200
    assert response.json() == {
        "results": [
            {
                "id": "t-refund-call",
                "role": "assistant",
                "toolCalls": [
                    {
                        "id": "t-refund-call",
                        "type": "function",
                        "function": {"name": "refund_order", "arguments": REFUND_ARGS},
                    }
                ],
            }
        ]
    }


def test_dc05_events_replay_in_pages_after_a_seq(api, user):
    """events/?after=&limit= pages the log; ``next`` resumes after the last seq."""
    thread = pending_refund_thread(user, thread_id="t-refund")
    log = list(Event.objects.filter(thread=thread).order_by("seq"))

    page1 = api.get("/api/threads/t-refund/events/?limit=2").json()
    page2 = api.get(page1["next"]).json()
    tail = api.get("/api/threads/t-refund/events/?after=4").json()

    assert page1 == {
        "results": [
            {
                "seq": 1,
                "type": "RUN_STARTED",
                "threadId": "t-refund",
                "runId": "t-refund-run",
            },
            {
                "seq": 2,
                "type": "TOOL_CALL_START",
                "toolCallId": "t-refund-call",
                "toolCallName": "refund_order",
            },
        ],
        "next": "http://testserver/api/threads/t-refund/events/?after=2&limit=2",
        "lastSeq": 2,
    }
    assert [e["seq"] for e in page2["results"]] == [3, 4]
    assert tail["results"] == [e.as_wire() for e in log[4:]]
    assert tail["next"] is None
    assert tail["lastSeq"] == len(log) == 5


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("after=-1", "after"),
        ("after=abc", "after"),
        ("after=" + "9" * 40, "after"),
        ("limit=0", "limit"),
        ("limit=5000", "limit"),
    ],
)
def test_event_paging_parameters_are_validated(api, user, query, field):
    """Negative, non-numeric, huge or out-of-range paging values are 400s naming the field."""
    Thread.objects.create(owner=user, thread_id="t-1")

    response = api.get(f"/api/threads/t-1/events/?{query}")

    assert response.status_code == 400
    assert list(response.json()["fields"]) == [field]


def test_messages_need_credentials():
    """Without credentials the messages endpoint answers 401."""
    response = APIClient().post(
        "/api/threads/t-1/messages/", {"content": "x"}, format="json"
    )

    assert response.status_code == 401
