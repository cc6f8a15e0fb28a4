"""The OpenAPI schema, its docs page, and schemathesis over every operation (DC-05).

The schema is loaded from ``/api/schema/`` through the WSGI app in-process;
schemathesis generates requests for every operation and checks that none answers
500 and that every response matches the documented status codes, content types
and schemas. Path parameters are pointed at real objects (a thread waiting for an
approval, an idle thread, its run and call) so the happy paths are exercised too.
"""

from __future__ import annotations

import re

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from hypothesis import HealthCheck, settings
from rest_framework.authtoken.models import Token
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from approvals.models import ApprovalRequest
from tests.helpers.api import pending_refund_thread
from threads.models import Run, Thread

pytestmark = pytest.mark.django_db


def test_dc05_schema_is_openapi_3_with_every_operation(api):
    """/api/schema/ is OpenAPI 3 and documents each endpoint with its error bodies."""
    response = api.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")

    assert response.status_code == 200
    schema = response.json()
    assert schema["openapi"].startswith("3.")
    operations = {
        op["operationId"]: (path, method, op)
        for path, item in schema["paths"].items()
        for method, op in item.items()
    }
    assert set(operations) == {
        "threads_list",
        "threads_create",
        "threads_retrieve",
        "threads_archive",
        "threads_cancel_pending",
        "threads_messages_list",
        "threads_messages_create",
        "threads_events_list",
        "threads_runs_list",
        "runs_retrieve",
        "runs_cancel",
        "tool_calls_list",
        "tool_calls_retrieve",
        "approvals_list",
        "approvals_retrieve",
        "approvals_approve",
        "approvals_undo",
        "approvals_decisions_csv",
        "approvals_reject",
        "approvals_respond",
        "approvals_snooze",
        "approvals_unsnooze",
        "approvals_resolve",
        "approvals_claim",
        "approvals_release",
        "grants_list",
        "grants_retrieve",
        "grants_revoke",
        "tools_list",
        "agents_list",
        "external_tool_calls_create",
        "external_tool_calls_retrieve",
        "external_tool_calls_claim",
        "external_tool_calls_outcome",
        "external_tool_calls_events",
    }
    for name, (_, _, op) in operations.items():
        for code in ("401", "403"):
            assert op["responses"][code]["content"]["application/json"]["schema"] == {
                "$ref": "#/components/schemas/Error"
            }, name
    _, _, post_message = operations["threads_messages_create"]
    assert {"400", "404", "409", "422", "429"} <= set(post_message["responses"])
    assert any(p["name"] == "Idempotency-Key" for p in post_message["parameters"])
    schemes = schema["components"]["securitySchemes"]
    assert set(schemes) == {"tokenAuth", "bearerAuth", "cookieAuth"}
    assert schemes["bearerAuth"]["type"] == "http"
    assert schemes["bearerAuth"]["scheme"] == "bearer"


def test_schema_documents_one_run_per_request_and_one_interrupt_spelling(api):
    """Runs carry their segments and interruptIds; approvals name both interrupt ids."""
    schema = api.get(
        "/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json"
    ).json()
    components = schema["components"]["schemas"]

    run = components["RunOutput"]
    approval = components["ApprovalOutput"]["properties"]

    assert run["properties"]["segments"]["items"] == {
        "$ref": "#/components/schemas/RunSegment"
    }
    assert run["properties"]["interruptIds"]["items"] == {"type": "string"}
    assert {"segments", "interruptIds"} <= set(run["required"])
    assert approval["interruptId"]["type"] == "string"
    assert "nullable" not in approval["interruptId"]
    assert "cs-approval-<id>" in approval["interruptId"]["description"]
    assert approval["remoteInterruptId"] == {
        "type": "string",
        "nullable": True,
        "description": approval["remoteInterruptId"]["description"],
    }
    runs = schema["paths"]["/api/threads/{thread_id}/runs/"]["get"]
    assert runs["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/RunList"
    }


def test_dc05_docs_page_loads_no_external_assets(client):
    """/api/docs/ serves Swagger UI from local static files: no CDN, no external URL."""
    response = client.get("/api/docs/")

    assert response.status_code == 200
    html = response.content.decode()
    sources = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert any("drf_spectacular_sidecar/swagger-ui-dist" in s for s in sources), sources
    assert not [s for s in sources if s.startswith(("http:", "https:", "//"))], sources
    assert "cdn." not in html
    assert "/api/schema/" in html


#: The schema, loaded through the WSGI app in-process (no database access needed).
schema = schemathesis.openapi.from_wsgi("/api/schema/", get_wsgi_application())


@pytest.fixture
def in_process_requests():
    """Keep the test's database connection open across in-process WSGI requests.

    Django closes old connections when a request starts and finishes; the test
    client disconnects that for the same reason.
    """
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@schema.parametrize()
@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
def test_dc05_sec02_every_operation_conforms_and_never_fails(
    case, django_user_model, in_process_requests, settings
):
    """No generated request gets a 500 or a response that breaks the schema (DC-05, SEC-02)."""
    # Given a superuser's token, a thread waiting for an approval, an idle thread
    # to post to and one to archive; a rate limit the examples do not reach
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"messages": "10000/min"},
    }
    owner = django_user_model.objects.filter(username="root").first()
    if owner is None:
        owner = django_user_model.objects.create_superuser(
            username="root", password="pw-root-1"
        )
        pending_refund_thread(owner, thread_id="t-fuzz")
        Thread.objects.create(owner=owner, thread_id="t-idle", title="idle")
        Thread.objects.create(owner=owner, thread_id="t-archive", title="archive me")
    token, _ = Token.objects.get_or_create(user=owner)
    thread_for = {"threads_messages_create": "t-idle", "threads_archive": "t-archive"}
    real = {
        "thread_id": thread_for.get(
            case.operation.definition.raw.get("operationId"), "t-fuzz"
        ),
        "run_id": Run.objects.get(run_id="t-fuzz-run").run_id,
        "tool_call_id": "t-fuzz-call",
        "id": ApprovalRequest.objects.get(thread__client_thread_id="t-fuzz").pk,
    }
    for name in list(case.path_parameters or {}):
        if name in real:
            case.path_parameters[name] = real[name]

    # When schemathesis sends its generated request, then the response conforms
    case.call_and_validate(
        headers={"Authorization": f"Token {token.key}"},
        checks=[
            not_a_server_error,
            status_code_conformance,
            content_type_conformance,
            response_schema_conformance,
        ],
    )
