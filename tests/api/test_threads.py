"""Threads over the REST API: auth, create, list, retrieve, archive, errors (DC-05)."""

from __future__ import annotations

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from tests.helpers.api import pending_refund_thread, token_client
from threads.models import Run, Thread

pytestmark = pytest.mark.django_db


def _thread_view(thread: Thread, **overrides) -> dict:
    data = {
        "threadId": thread.thread_id,
        "title": thread.title,
        "agent": thread.agent,
        "owner": thread.owner.username,
        "status": "idle",
        "pendingToolCallIds": [],
        "createdAt": thread.created_at.isoformat().replace("+00:00", "Z"),
        "updatedAt": thread.updated_at.isoformat().replace("+00:00", "Z"),
        "archivedAt": None,
    }
    data.update(overrides)
    return data


def test_dc05_requests_without_credentials_answer_401():
    """No credentials → 401 with the error body and a Token challenge (DC-05)."""
    response = APIClient().get("/api/threads/")

    assert response.status_code == 401
    assert response.json() == {
        "type": "not_authenticated",
        "detail": "Authentication credentials were not provided.",
    }
    assert response["WWW-Authenticate"] == "Token"


def test_dc05_an_invalid_token_answers_401():
    """A token that does not exist → 401 authentication_failed."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token 0123456789abcdef")

    response = client.get("/api/threads/")

    assert response.status_code == 401
    assert response.json() == {
        "type": "authentication_failed",
        "detail": "Invalid token.",
    }


def test_dc05_create_thread_returns_it(api, user):
    """POST /api/threads/ creates a thread for the caller, agent "demo" by default."""
    response = api.post("/api/threads/", {"title": "Billing"}, format="json")

    assert response.status_code == 201
    thread = Thread.objects.get()
    assert (thread.owner, thread.title, thread.agent) == (user, "Billing", "demo")
    assert response.json() == _thread_view(thread)


def test_create_thread_with_unknown_agent_names_the_field(api):
    """An unknown agent is a validation error on ``agent`` listing the configured ones."""
    response = api.post("/api/threads/", {"agent": "nope"}, format="json")

    assert response.status_code == 400
    body = response.json()
    assert body["type"] == "validation_error"
    assert body["fields"] == {
        "agent": ["agent 'nope' is not configured; configured agents: ['demo']"]
    }
    assert "'agent'" in body["detail"]
    assert not Thread.objects.exists()


def test_unknown_fields_are_rejected_by_name(api):
    """A body field the endpoint does not know is refused, naming it and the allowed ones."""
    response = api.post("/api/threads/", {"title": "x", "colour": "red"}, format="json")

    assert response.status_code == 400
    assert response.json() == {
        "type": "validation_error",
        "detail": "Invalid value for 'colour': unknown field 'colour'; "
        "allowed fields: ['agent', 'title']",
        "fields": {
            "colour": ["unknown field 'colour'; allowed fields: ['agent', 'title']"]
        },
    }


@pytest.mark.parametrize(
    "body",
    [
        "{not json",
        '{"title": NaN}',
        '{"title": 1e999}',
        '{"title": "x"',
        "[" * 100_000,
    ],
    ids=["garbage", "nan", "overflowing-number", "truncated", "deep-nesting"],
)
def test_malformed_json_answers_400_not_500(api, body):
    """Malformed JSON, NaN, numbers that overflow and absurd nesting are 400 parse errors."""
    response = api.post("/api/threads/", body, content_type="application/json")

    assert response.status_code == 400
    assert response.json()["type"] == "parse_error"
    assert response.json()["detail"].startswith("JSON parse error - ")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"title": {"a": 1}}, "title"),
        ({"title": "x" * 301}, "title"),
        ({"agent": ["demo"]}, "agent"),
    ],
)
def test_wrong_types_name_the_field(api, body, field):
    """A value of the wrong type or size is a 400 naming its field."""
    response = api.post("/api/threads/", body, format="json")

    assert response.status_code == 400
    assert list(response.json()["fields"]) == [field]


def test_a_body_that_is_not_an_object_is_a_validation_error(api):
    """A JSON array body is refused with a message, not a crash."""
    response = api.post("/api/threads/", [1, 2], format="json")

    assert response.status_code == 400
    assert response.json() == {
        "type": "validation_error",
        "detail": "The request is invalid: Invalid data. Expected a dictionary, but got list.",
        "fields": {
            "non_field_errors": ["Invalid data. Expected a dictionary, but got list."]
        },
    }


def test_json_only(api):
    """Form-encoded bodies are refused with 415 and the error body."""
    response = api.post("/api/threads/", {"title": "x"})  # multipart

    assert response.status_code == 415
    assert response.json()["type"] == "unsupported_media_type"


def test_dc05_list_shows_own_threads_newest_first(api, user, other_user):
    """A user lists their own threads only, newest first."""
    first = Thread.objects.create(owner=user, title="first")
    second = Thread.objects.create(owner=user, title="second")
    Thread.objects.create(owner=other_user, title="not mine")

    response = api.get("/api/threads/")

    assert response.status_code == 200
    assert response.json() == {
        "next": None,
        "previous": None,
        "results": [_thread_view(second), _thread_view(first)],
    }


def test_list_is_cursor_paginated(api, user):
    """``?limit=`` pages the list; ``next`` leads to the following page."""
    threads = [Thread.objects.create(owner=user, title=f"t{i}") for i in range(3)]

    page1 = api.get("/api/threads/?limit=2").json()
    page2 = api.get(page1["next"]).json()

    assert [t["title"] for t in page1["results"]] == ["t2", "t1"]
    assert [t["title"] for t in page2["results"]] == ["t0"]
    assert page2["next"] is None
    assert page2["previous"] is not None
    assert len(threads) == 3


def test_an_invalid_cursor_answers_404(api):
    """A cursor that does not decode is a 404 with the error body."""
    response = api.get("/api/threads/?cursor=bm9wZQ")

    assert response.status_code == 404
    assert response.json() == {"type": "not_found", "detail": "Invalid cursor"}


def test_readers_of_every_thread_list_every_owner_and_filter_by_owner(
    thread_reader, staff_user, user, other_user
):
    """``threads.view_any_thread`` lists every owner's threads; ``is_staff`` alone lists none."""
    mine = Thread.objects.create(owner=user, title="olivia's")
    theirs = Thread.objects.create(owner=other_user, title="mallory's")
    reader = token_client(thread_reader)

    everyone = reader.get("/api/threads/").json()["results"]
    only_mallory = reader.get("/api/threads/?owner=mallory").json()["results"]

    assert [t["threadId"] for t in everyone] == [theirs.thread_id, mine.thread_id]
    assert [t["threadId"] for t in only_mallory] == [theirs.thread_id]
    assert token_client(staff_user).get("/api/threads/").json()["results"] == []


def test_status_filter_and_list_status_match_thread_status(api, user):
    """``?status=`` filters on the derived status, which equals the retrieve view's."""
    idle = Thread.objects.create(owner=user, thread_id="t-idle")
    running = Thread.objects.create(owner=user, thread_id="t-running")
    Run.objects.create(thread=running, status=Run.Status.RUNNING)
    failed = Thread.objects.create(owner=user, thread_id="t-failed")
    Run.objects.create(thread=failed, status=Run.Status.ERROR, error_code="agent_error")
    waiting = pending_refund_thread(user, thread_id="t-waiting")

    expected = {
        "idle": [idle.thread_id],
        "running": [running.thread_id],
        "failed": [failed.thread_id],
        "waiting_for_approval": [waiting.thread_id],
        "waiting_for_tools": [],
    }
    for status, thread_ids in expected.items():
        listed = api.get(f"/api/threads/?status={status}").json()["results"]
        assert [t["threadId"] for t in listed] == thread_ids, status
        for thread_id in thread_ids:
            assert api.get(f"/api/threads/{thread_id}/").json()["status"] == status


def test_an_unknown_status_filter_is_a_validation_error(api):
    """``?status=`` outside the five statuses names the field and the five."""
    response = api.get("/api/threads/?status=sleeping")

    assert response.status_code == 400
    assert response.json()["fields"] == {
        "status": [
            '"sleeping" is not allowed; use one of: running, waiting_for_approval, '
            "waiting_for_tools, idle, failed"
        ]
    }


def test_dc05_retrieve_shows_status_and_pending_calls_of_last_run(api, user):
    """Retrieve shows status from thread_status and the last run's pendingToolCallIds."""
    thread = pending_refund_thread(user, thread_id="t-refund")
    thread.refresh_from_db()

    response = api.get("/api/threads/t-refund/")

    assert response.status_code == 200
    assert response.json() == _thread_view(
        thread, status="waiting_for_approval", pendingToolCallIds=["t-refund-call"]
    )


def test_dc05_another_users_thread_answers_404(other_api, user):
    """Another user's thread is 404 (not 403), for retrieve, archive and messages."""
    Thread.objects.create(owner=user, thread_id="t-private")

    responses = [
        other_api.get("/api/threads/t-private/"),
        other_api.post("/api/threads/t-private/archive/"),
        other_api.get("/api/threads/t-private/messages/"),
        other_api.post(
            "/api/threads/t-private/messages/", {"content": "hi"}, format="json"
        ),
        other_api.get("/api/threads/t-private/events/"),
    ]

    assert [r.status_code for r in responses] == [404] * 5
    assert responses[0].json() == {
        "type": "not_found",
        "detail": "The resource was not found, or you may not see it.",
    }


def test_archive_hides_the_thread_and_refuses_new_messages(api, user):
    """Archiving sets archivedAt; the list hides it unless ?archived=1; posting is 409."""
    thread = Thread.objects.create(owner=user, thread_id="t-old")
    before = timezone.now()

    archived = api.post("/api/threads/t-old/archive/")
    again = api.post("/api/threads/t-old/archive/")
    posted = api.post(
        "/api/threads/t-old/messages/", {"content": "hello?"}, format="json"
    )

    assert archived.status_code == 200
    thread.refresh_from_db()
    assert thread.archived_at >= before
    assert archived.json()["archivedAt"] == thread.archived_at.isoformat().replace(
        "+00:00", "Z"
    )
    assert again.json()["archivedAt"] == archived.json()["archivedAt"]
    assert api.get("/api/threads/").json()["results"] == []
    assert [
        t["threadId"] for t in api.get("/api/threads/?archived=1").json()["results"]
    ] == ["t-old"]
    assert posted.status_code == 409
    assert posted.json()["type"] == "thread_archived"
    assert "start a new thread" in posted.json()["detail"]
    assert not Run.objects.filter(thread=thread).exists()


def test_unknown_api_paths_answer_404_with_the_error_body(api):
    """A path under /api/ that is no endpoint gets the API's 404 body."""
    response = api.get("/api/nothing-here")

    assert response.status_code == 404
    assert response.json()["type"] == "not_found"
    assert "/api/docs/" in response.json()["detail"]


def test_session_auth_enforces_csrf(user):
    """The UI's session auth needs a CSRF token for writes: 403 without it (DRF)."""
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(user)

    listed = client.get("/api/threads/")
    created = client.post("/api/threads/", {"title": "x"}, format="json")

    assert listed.status_code == 200
    assert created.status_code == 403
    assert created.json()["type"] == "permission_denied"
    assert "CSRF" in created.json()["detail"]


def test_list_query_count_does_not_grow_with_threads(
    api, user, django_assert_num_queries
):
    """The list derives every thread's status in SQL: a fixed number of queries."""
    for index in range(2):
        pending_refund_thread(user, thread_id=f"t-wait-{index}")
        running = Thread.objects.create(owner=user, thread_id=f"t-run-{index}")
        Run.objects.create(thread=running, status=Run.Status.RUNNING)
        Thread.objects.create(owner=user, thread_id=f"t-idle-{index}")

    # token, the user's and their groups' permissions (approvers see more threads),
    # then one query for the page of threads with their status
    with django_assert_num_queries(4):
        response = api.get("/api/threads/")

    assert [t["status"] for t in response.json()["results"]] == [
        "idle",
        "running",
        "waiting_for_approval",
    ] * 2
