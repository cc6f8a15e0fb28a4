"""The REST API's input matches its schema: camelCase edits, JSON types, filters, closed
bodies."""

from __future__ import annotations

import pytest

from approvals.models import ToolExecution

pytestmark = pytest.mark.django_db

PROPOSED = {"order_id": "A-1001", "amount": 25.0, "reason": "customer request"}


def _schema(api) -> dict:
    return api.get(
        "/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json"
    ).json()


def test_approve_takes_edited_arguments_in_camel_case(approver_api, approval):
    edited = {**PROPOSED, "amount": 20.0}

    response = approver_api.post(
        f"/api/approvals/{approval.pk}/approve/",
        {"editedArguments": edited},
        format="json",
    )

    assert response.status_code == 200, response.json()
    assert response.json()["editedArguments"] == edited
    assert ToolExecution.objects.get().arguments == edited


def test_approve_with_invalid_camel_case_edit_names_that_spelling(
    approver_api, approval
):
    response = approver_api.post(
        f"/api/approvals/{approval.pk}/approve/",
        {"editedArguments": {**PROPOSED, "amount": -5}},
        format="json",
    )

    assert response.status_code == 400
    assert response.json()["type"] == "invalid_arguments"
    assert list(response.json()["fields"]) == ["editedArguments"]
    approval.refresh_from_db()
    assert approval.status == "pending"


def test_approve_with_both_spellings_uses_the_camel_case_one(approver_api, approval):
    edited = {**PROPOSED, "amount": 10.0}

    response = approver_api.post(
        f"/api/approvals/{approval.pk}/approve/",
        {"editedArguments": edited, "edited_arguments": {**PROPOSED, "amount": 1.0}},
        format="json",
    )

    assert response.status_code == 200, response.json()
    assert response.json()["editedArguments"] == edited
    assert ToolExecution.objects.get().arguments == edited


def test_schema_documents_edited_arguments_and_deprecates_the_old_spelling(api):
    component = _schema(api)["components"]["schemas"]["ApprovalApproveInputRequest"]

    assert component["properties"]["editedArguments"]["type"] == "object"
    assert "deprecated" not in component["properties"]["editedArguments"]
    assert component["properties"]["edited_arguments"]["deprecated"] is True
    assert component["additionalProperties"] is False


def test_strict_bodies_are_closed_in_the_schema(api):
    schemas = _schema(api)["components"]["schemas"]
    closed = {
        name for name, s in schemas.items() if s.get("additionalProperties") is False
    }

    assert {
        "ThreadListCreateInputRequest",
        "ThreadMessagesInputRequest",
        "ApprovalRejectInputRequest",
        "ApprovalResolveInputRequest",
    } <= closed


@pytest.mark.parametrize(
    ("path", "body", "field", "says"),
    [
        ("reject", {"reason": 0}, "reason", "must be a string, not int"),
        ("reject", {"reason": ["no"]}, "reason", "must be a string, not list"),
        ("approve", {"reason": False}, "reason", "must be a string, not bool"),
        (
            "resolve",
            {"succeeded": "true", "content": "done", "reason": "checked"},
            "succeeded",
            "must be true or false, not str",
        ),
        (
            "resolve",
            {"succeeded": 1, "content": "done", "reason": "checked"},
            "succeeded",
            "must be true or false, not int",
        ),
    ],
)
def test_json_values_of_the_wrong_type_are_400_naming_the_field(
    approver_api, approval, path, body, field, says
):
    response = approver_api.post(
        f"/api/approvals/{approval.pk}/{path}/", body, format="json"
    )

    assert response.status_code == 400
    assert response.json()["type"] == "validation_error"
    assert response.json()["fields"] == {field: [says]}
    approval.refresh_from_db()
    assert approval.status == "pending"


def test_thread_title_may_be_empty_and_must_be_a_string(api):
    empty = api.post("/api/threads/", {"title": ""}, format="json")
    number = api.post("/api/threads/", {"title": 7}, format="json")

    assert empty.status_code == 201, empty.json()
    assert empty.json()["title"] == ""
    assert number.status_code == 400
    assert number.json()["fields"] == {"title": ["must be a string, not int"]}


@pytest.mark.parametrize(
    ("url", "field"),
    [
        ("/api/threads/?status=", "status"),
        ("/api/threads/?owner=", "owner"),
        ("/api/threads/?archived=", "archived"),
        ("/api/approvals/?tool=", "tool"),
        ("/api/approvals/?status=&thread=t", "status"),
        ("/api/approvals/?older_than=", "older_than"),
        ("/api/tool-calls/?thread=", "thread"),
        ("/api/tools/?agent=", "agent"),
    ],
)
def test_empty_filter_parameters_are_400_naming_them(approver_api, url, field):
    response = approver_api.get(url)

    assert response.status_code == 400, response.json()
    assert response.json()["type"] == "validation_error"
    assert list(response.json()["fields"]) == [field]
    assert "must not be empty" in response.json()["fields"][field][0]


def test_schema_documents_the_idempotency_key_and_page_parameters(api):
    paths = _schema(api)["paths"]
    create = paths["/api/threads/"]["post"]
    (key,) = [p for p in create["parameters"] if p["name"] == "Idempotency-Key"]
    listing = {
        p["name"]: p["schema"] for p in paths["/api/approvals/"]["get"]["parameters"]
    }

    assert key["schema"] == {
        "type": "string",
        "minLength": 1,
        "maxLength": 255,
        "pattern": "^[!-~]([ -~]*[!-~])?$",
    }
    assert {"400", "422"} <= set(create["responses"])
    assert {"400", "422"} <= set(
        paths["/api/threads/{thread_id}/messages/"]["post"]["responses"]
    )
    assert listing["limit"] == {"type": "integer", "minimum": 1, "maximum": 200}
    assert listing["offset"] == {"type": "integer", "minimum": 0}


@pytest.mark.parametrize("key", [" padded ", "tab\there", "é-accent", "x" * 256])
def test_idempotency_keys_outside_the_documented_pattern_are_400(api, key):
    response = api.post(
        "/api/threads/", {"title": "t"}, format="json", HTTP_IDEMPOTENCY_KEY=key
    )

    assert response.status_code == 400
    assert response.json()["fields"] == {
        "Idempotency-Key": ["must be 1-255 printable characters"]
    }


@pytest.mark.parametrize(
    ("url", "field"),
    [
        ("/api/approvals/?offset=null", "offset"),
        ("/api/approvals/?offset=1&offset=2", "offset"),
        ("/api/approvals/?limit=0", "limit"),
        ("/api/approvals/?limit=201", "limit"),
        ("/api/tool-calls/?limit=-1", "limit"),
        ("/api/threads/?limit=null&limit=null", "limit"),
        ("/api/threads/?limit=1.5", "limit"),
    ],
)
def test_page_parameters_that_are_not_documented_integers_are_400(
    approver_api, url, field
):
    response = approver_api.get(url)

    assert response.status_code == 400, response.json()
    assert list(response.json()["fields"]) == [field]


APPROVAL_LIST_TAKES = "tool, thread, status, older_than, assigned, limit, offset"


@pytest.mark.parametrize(
    ("query", "name"),
    [
        ("risk=purple", "risk"),
        ("page=abc", "page"),
        ("page=0", "page"),
        ("page_size=-1", "page_size"),
    ],
)
def test_approval_list_refuses_parameters_it_does_not_take(approver_api, query, name):
    response = approver_api.get(f"/api/approvals/?{query}")

    assert response.status_code == 400, response.json()
    assert response.json() == {
        "type": "validation_error",
        "detail": f"Invalid value for {name!r}: this endpoint has no query "
        f"parameter {name!r}; it takes {APPROVAL_LIST_TAKES}",
        "fields": {
            name: [
                f"this endpoint has no query parameter {name!r}; it takes "
                + APPROVAL_LIST_TAKES
            ]
        },
    }


@pytest.mark.parametrize(
    ("path", "takes"),
    [
        ("/api/threads/", "status, owner, archived, cursor, limit"),
        ("/api/tool-calls/", "thread, state, name, limit, offset"),
        ("/api/grants/", "tool, active, limit, offset"),
        ("/api/approvals/decisions.csv", "tool, thread, status"),
        ("/api/threads/t-refund/runs/", "none"),
        ("/api/threads/t-refund/messages/", "none"),
        ("/api/threads/t-refund/events/", "after, limit"),
        ("/api/tools/", "agent"),
        ("/api/agents/", "none"),
    ],
)
def test_every_list_refuses_parameters_it_does_not_take(api, approval, path, takes):
    for query in ("page=abc", "page=0", "page_size=-1"):
        name = query.split("=")[0]
        response = api.get(f"{path}?{query}")

        assert response.status_code == 400, (path, response.content)
        assert response.json()["fields"] == {
            name: [f"this endpoint has no query parameter {name!r}; it takes {takes}"]
        }


@pytest.mark.parametrize(
    ("url", "name", "allowed"),
    [
        (
            "/api/approvals/?status=bogus",
            "status",
            "pending, approved, rejected, responded, expired, cancelled",
        ),
        ("/api/approvals/?assigned=you", "assigned", "me"),
        ("/api/threads/?status=bogus", "status", None),
        ("/api/tool-calls/?state=bogus", "state", None),
    ],
)
def test_filter_values_outside_their_choices_are_400_naming_the_allowed_ones(
    approver_api, url, name, allowed
):
    response = approver_api.get(url)

    assert response.status_code == 400, response.json()
    (message,) = response.json()["fields"][name]
    assert message.startswith(f'"{url.rsplit("=", 1)[1]}" is not allowed; use one of: ')
    if allowed is not None:
        assert message.endswith(allowed)


def test_a_filter_given_twice_is_400_instead_of_reading_the_last(approver_api):
    response = approver_api.get("/api/approvals/?status=pending&status=approved")

    assert response.status_code == 400
    assert response.json()["fields"] == {"status": ["must be given once"]}


def test_grant_list_refuses_a_value_that_is_not_a_boolean(approver_api):
    response = approver_api.get("/api/grants/?active=maybe")

    assert response.status_code == 400
    assert list(response.json()["fields"]) == ["active"]


def test_documented_filters_and_page_parameters_still_list(approver_api, approval):
    response = approver_api.get(
        "/api/approvals/?status=pending&tool=refund_order&limit=5&offset=0"
    )

    assert response.status_code == 200, response.json()
    assert [a["id"] for a in response.json()["results"]] == [approval.pk]


def test_a_grant_that_is_not_an_object_names_the_grant_field(approver_api, approval):
    response = approver_api.post(
        f"/api/approvals/{approval.pk}/approve/", {"grant": "always"}, format="json"
    )

    assert response.status_code == 400, response.json()
    assert response.json()["fields"] == {
        "grant": ["Invalid data. Expected a dictionary, but got str."]
    }
    assert response.json()["detail"] == (
        "Invalid value for 'grant': Invalid data. Expected a dictionary, but got str."
    )


def test_a_missing_field_is_named_as_missing(approver_api, approval):
    response = approver_api.post(
        f"/api/approvals/{approval.pk}/reject/", {}, format="json"
    )

    assert response.status_code == 400
    assert response.json() == {
        "type": "validation_error",
        "detail": "Missing 'reason': it is required; add it to the request",
        "fields": {"reason": ["This field is required."]},
    }
