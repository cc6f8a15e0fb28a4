"""No input gives a 500: text JSON or PostgreSQL cannot carry, deep nesting, non-finite
numbers, ids with newlines, constraint violations.

Every entry point answers with the project's JSON error body naming the field,
from the one check in :mod:`threads.validation`.
"""

from __future__ import annotations

import json

import pytest
from django.db import IntegrityError, transaction

from threads.models import Message, Run, Thread
from threads.services import thread_create
from threads.validation import MAX_JSON_DEPTH, json_problem, parse_json, storable
from web.exception_handler import integrity_conflict

pytestmark = pytest.mark.django_db

LONE = "\ud800"


def _input(**changes):
    body = {
        "threadId": "t-store",
        "runId": "r-store",
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
        "messages": [{"id": "u1", "role": "user", "content": "hi"}],
    }
    body.update(changes)
    return body


def _agui_raw(api, raw: str | bytes):
    return api.post("/agui/demo/", data=raw, content_type="application/json")


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


# -- the one check ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ({"a": ["ok", "x\x00"]}, "a.1"),
        ({"a": {"b": LONE}}, "a.b"),
        ({LONE: 1}, LONE),
        ({"n": float("nan")}, "n"),
        ({"n": [float("inf")]}, "n.0"),
        ("x\x00", "$"),
    ],
)
def test_json_problem_names_the_first_bad_value(value, field):
    problem = json_problem(value)

    assert problem is not None
    assert problem.field == field


def test_json_problem_bounds_depth_without_recursing():
    deep: list = []
    for _ in range(50_000):
        deep = [deep]

    problem = json_problem({"state": deep})

    assert problem is not None
    assert problem.field.startswith("state.0.0")
    assert f"more than {MAX_JSON_DEPTH} levels" in problem.detail
    assert json_problem(json.loads(_nested(MAX_JSON_DEPTH))) is None


def test_storable_repairs_output_instead_of_refusing():
    value = {"text": "a\x00b" + LONE, "n": float("inf"), "pair": "\ud83d\ude00"}

    assert storable(value, what="test") == {
        "text": "a\ufffdb\ufffd",
        "n": None,
        "pair": "\U0001f600",
    }


@pytest.mark.parametrize("raw", ["NaN", "[Infinity]", '{"a": 1e999}', "-Infinity"])
def test_parse_json_refuses_non_finite_numbers(raw):
    with pytest.raises(ValueError, match=r"finite|too large"):
        parse_json(raw)


# -- AG-UI -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        (
            {"messages": [{"id": "u1", "role": "user", "content": "a" + LONE}]},
            "messages.0.content",
        ),
        (
            {"messages": [{"id": "u" + LONE, "role": "user", "content": "hi"}]},
            "messages.0.id",
        ),
        ({"state": {"k": LONE}}, "state.k"),
        (
            {"tools": [{"name": "t", "description": LONE, "parameters": {}}]},
            "tools.0.description",
        ),
        ({"forwardedProps": {"x": [LONE]}}, "forwardedProps.x.0"),
        ({"context": [{"description": "d", "value": "v\x00"}]}, "context.0.value"),
    ],
)
def test_agui_lone_surrogates_and_nul_are_400_naming_the_field(api, changes, field):
    response = _agui_raw(api, json.dumps(_input(**changes)))

    assert response.status_code == 400, response.content
    body = response.json()
    assert body["type"] == "invalid_input"
    assert list(body["fields"]) == [field]
    assert field in body["detail"]
    assert not Thread.objects.exists()


@pytest.mark.parametrize("depth", [900, 5_000, 50_000])
def test_agui_deeply_nested_state_is_400_not_a_parse_crash(api, depth):
    raw = json.dumps(_input(state={"deep": "@@"})).replace('"@@"', _nested(depth))

    response = _agui_raw(api, raw)

    assert response.status_code == 400, response.content
    body = response.json()
    assert body["type"] in ("invalid_input", "invalid_json")
    assert f"more than {MAX_JSON_DEPTH} levels" in body["detail"]
    if body["type"] == "invalid_input":
        assert next(iter(body["fields"])).startswith("state.deep")
    assert not Thread.objects.exists()


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_agui_non_finite_numbers_are_refused_like_rest(api, number):
    """AG-UI used to store these as null while REST refused them; both refuse now."""
    raw = json.dumps(_input(state={"n": "@@"})).replace('"@@"', number)

    response = _agui_raw(api, raw)

    assert response.status_code == 400, response.content
    assert response.json()["type"] == "invalid_json"
    assert not Thread.objects.exists()


@pytest.mark.parametrize(
    "name", ["get_weather", "refund_order", "functions.lookup_order"]
)
def test_agui_client_tool_named_like_a_countersign_tool_is_400(api, name):
    """A client tool is never handed to the client and answered by Countersign both."""
    tools = [
        {"name": "show_map", "description": "client", "parameters": {}},
        {"name": name, "description": "client", "parameters": {}},
    ]

    response = _agui_raw(api, json.dumps(_input(tools=tools)))

    assert response.status_code == 400, response.content
    body = response.json()
    assert body["type"] == "invalid_input"
    assert list(body["fields"]) == ["tools.1.name"]
    assert repr(name) in body["detail"]
    assert not Thread.objects.exists()


# -- REST --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "field"),
    [
        ("a" + LONE, "content"),
        ([{"type": "text", "text": "x" + LONE}], "content.0.text"),
        (
            [{"type": "text", "text": "ok"}, {"type": "text", "text": "\x00"}],
            "content.1.text",
        ),
    ],
)
def test_rest_message_text_json_cannot_carry_is_400_naming_the_field(
    api, user, content, field
):
    thread = thread_create(owner=user, title="rest")

    response = api.post(
        f"/api/threads/{thread.thread_id}/messages/",
        data=json.dumps({"content": content}),
        content_type="application/json",
    )

    assert response.status_code == 400, response.content
    body = response.json()
    assert body["type"] == "validation_error"
    assert list(body["fields"]) == [field]
    assert not Run.objects.filter(thread=thread).exists()


@pytest.mark.parametrize(
    ("raw", "status", "kind"),
    [
        ('{"title": "' + "\\ud800" + '"}', 400, "validation_error"),
        ('{"title": "t", "agent": ' + _nested(200) + "}", 400, "validation_error"),
        ('{"title": "t", "agent": ' + _nested(20_000) + "}", 400, "parse_error"),
        ('{"title": NaN}', 400, "parse_error"),
    ],
)
def test_rest_thread_create_unstorable_json_is_400(api, raw, status, kind):
    response = api.post("/api/threads/", data=raw, content_type="application/json")

    assert response.status_code == status, response.content
    assert response.json()["type"] == kind
    if kind == "validation_error":
        (field,) = response.json()["fields"]
        assert field == "title" or field.startswith("agent.0.0")
    assert not Thread.objects.exists()


@pytest.mark.parametrize(
    "path",
    [
        "/api/threads/a%0Ab/",
        "/api/threads/a%0A/messages/",
        "/api/runs/%0A/",
        "/api/nope%0A/",
        "/agui/threads/a%0Ab/events",
        "/agui/demo/extra/",
    ],
)
def test_ids_with_newlines_get_the_json_404(api, path):
    response = api.get(path)

    assert response.status_code in (404, 405), response.content
    assert response["Content-Type"].startswith("application/json")
    assert response.json()["type"] in ("not_found", "method_not_allowed")


# -- constraint violations ----------------------------------------------------------


def test_a_violated_unique_constraint_becomes_a_409_without_database_text(user):
    """A 409 that names the public id, on whichever database the suite runs (SQLite, PostgreSQL)."""
    thread = thread_create(owner=user, title="dup")
    Message.objects.create(
        thread=thread, message_id="m1", role="tool", tool_call_id="call_1", content="a"
    )
    with pytest.raises(IntegrityError) as caught, transaction.atomic():
        Message.objects.create(
            thread=thread,
            message_id="m2",
            role="tool",
            tool_call_id="call_1",
            content="b",
        )

    body = integrity_conflict(caught.value)

    assert body["type"] == "conflict"
    assert list(body["fields"]) == ["toolCallId"]
    assert "already answered" in body["detail"]
    for leak in (
        "duplicate key",
        "constraint",
        "DETAIL",
        "uniq_",
        "UNIQUE",
        "threads_",
        str(thread.pk) + ",",
    ):
        assert leak not in body["detail"]
    if "call_1" not in body["detail"]:
        # SQLite names no values; PostgreSQL's detail gives the public id.
        assert transaction.get_connection().vendor == "sqlite"


def test_the_rest_exception_handler_answers_integrity_errors_with_the_409_body(user):
    from web.exception_handler import api_exception_handler

    thread = thread_create(owner=user, title="dup-run")
    Run.objects.create(thread=thread, run_id="r-same")
    with pytest.raises(IntegrityError) as caught, transaction.atomic():
        Run.objects.create(thread=thread, run_id="r-same")

    response = api_exception_handler(caught.value, {})

    assert response is not None
    assert response.status_code == 409
    assert response.data["type"] == "conflict"
    assert list(response.data["fields"]) == ["runId"]
    assert "already used" in response.data["detail"]
    assert "UNIQUE" not in response.data["detail"]
    assert "duplicate key" not in response.data["detail"]
