"""The Python client against Countersign in process (Django's WSGI app as httpx's transport).

The requests go through the real HTTP stack of Countersign (authentication,
views, the pipeline, the database); only the socket is skipped. Waiting for a
person to decide is proven against a live server (test_end_to_end.py).
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from countersign_client import (
    Client,
    Conflict,
    Expired,
    InvalidRequest,
    NotAuthorized,
    Rejected,
    Responded,
    require_approval,
)
from django.utils import timezone
from rest_framework.authtoken.models import Token

from approvals.models import ApprovalRequest, ToolExecution
from tests.helpers.external import REFUND_SCHEMA, DjangoTransport
from threads.models import Message, ToolCall

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("external_agents")]

ROOT = Path(__file__).resolve().parents[2]


class Flaky(httpx.BaseTransport):
    """Fail the first ``failures`` requests as a network error or a 503, then pass them on."""

    def __init__(self, inner: Any, failures: list[str]) -> None:
        self.inner = inner
        self.failures = list(failures)
        self.requests = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.requests += 1
        if self.failures:
            kind = self.failures.pop(0)
            if kind == "network":
                raise httpx.ConnectError("connection refused", request=request)
            return httpx.Response(503, json={"detail": "busy"}, request=request)
        return self.inner.handle_request(request)


def make_client(
    user: Any, *, failures: list[str] | None = None, **options: Any
) -> Client:
    transport: Any = DjangoTransport()
    if failures is not None:
        transport = Flaky(transport, failures)
    token = Token.objects.get_or_create(user=user)[0].key
    return Client(
        "http://testserver",
        token=token,
        agent="billing",
        transport=transport,
        backoff=0.001,
        **options,
    )


def test_an_auto_approved_function_runs_once_and_its_result_is_reported(
    user: Any,
) -> None:
    """require_approval as a decorator: declared, claimed, run, reported."""
    client = make_client(user)
    ran: list[dict[str, Any]] = []

    @require_approval(client, tool="lookup", summary="Look the order up")
    def lookup(order_id: str) -> dict[str, Any]:
        ran.append({"order_id": order_id})
        return {"order_id": order_id, "status": "shipped"}

    assert lookup("A-1") == {"order_id": "A-1", "status": "shipped"}
    assert ran == [{"order_id": "A-1"}]
    call = ToolCall.objects.get()
    assert call.state == "succeeded"
    assert call.name == "lookup"
    assert Message.objects.get(role="tool").content == (
        '{"order_id":"A-1","status":"shipped"}'
    )
    assert ToolExecution.objects.get().holder == client.holder


def test_the_edited_arguments_are_the_ones_that_run(
    user: Any, approver_api: Any
) -> None:
    """A person's edit reaches the context manager's body; the call runs once with it."""
    client = make_client(user)
    state = client.declare(
        "refund", {"order_id": "A-1", "amount": 25}, input_schema=REFUND_SCHEMA
    )
    assert state.status == "pending"
    approver_api.post(
        f"/api/approvals/{state.approval_id}/approve/",
        {"editedArguments": {"order_id": "A-1", "amount": 10}},
        format="json",
    )
    decided = client.wait(state.tool_call_id, timeout=5)
    assert decided.status == "approved"
    claimed = client.claim(decided.tool_call_id)
    assert claimed.status == "claimed"
    assert claimed.decision is not None
    assert claimed.decision.arguments == {"order_id": "A-1", "amount": 10}
    assert claimed.decision.edited
    reported = client.report(decided.tool_call_id, result={"refunded": 10})
    assert reported.status == "succeeded"
    assert reported.outcome == {"content": '{"refunded":10}', "error": None}


def test_a_rejection_raises_rejected_with_the_reason(
    user: Any, approver_api: Any
) -> None:
    client = make_client(user)
    state = client.declare(
        "refund", {"order_id": "A-1", "amount": 25}, input_schema=REFUND_SCHEMA
    )
    approver_api.post(
        f"/api/approvals/{state.approval_id}/reject/",
        {"reason": "duplicate"},
        format="json",
    )
    with pytest.raises(Rejected) as caught:
        client.wait(state.tool_call_id, timeout=5).raise_unless_approved()
    assert caught.value.reason == "duplicate"
    assert caught.value.status_name == "rejected"


def test_a_response_raises_responded_with_the_text_and_nothing_runs(
    user: Any, approver_api: Any
) -> None:
    """A person answered the call with text: the caller gets it as the call's result."""
    client = make_client(user)
    client.declare(
        "refund", {"order_id": "A-1", "amount": 25}, input_schema=REFUND_SCHEMA
    )
    approval = ApprovalRequest.objects.get()
    answered = approver_api.post(
        f"/api/approvals/{approval.pk}/respond/",
        {"text": "Already refunded by voucher."},
        format="json",
    )
    assert answered.status_code == 200, answered.json()

    state = client.wait(ToolCall.objects.get().tool_call_id, timeout=5)

    assert state.status == "responded"
    assert state.decided
    assert state.decision is not None
    assert (state.decision.approved, state.decision.response) == (
        False,
        "Already refunded by voucher.",
    )
    assert state.decision.decided_by == "ada"
    with pytest.raises(Responded) as caught:
        state.raise_unless_approved()
    assert isinstance(caught.value, Rejected)
    assert caught.value.response == "Already refunded by voucher."
    assert caught.value.reason == "Already refunded by voucher."
    assert caught.value.status_name == "responded"
    assert not ToolExecution.objects.exists()


def test_a_denied_call_raises_rejected_and_the_function_never_runs(user: Any) -> None:
    client = make_client(user)
    ran: list[int] = []

    @require_approval(client, tool="wipe")
    def wipe() -> None:
        ran.append(1)

    with pytest.raises(Rejected) as caught:
        wipe()
    assert caught.value.status_name == "denied"
    assert ran == []


def test_an_expired_request_raises_expired(user: Any) -> None:
    from orchestration.pipeline import approvals_expire

    client = make_client(user)
    state = client.declare(
        "refund", {"order_id": "A-1", "amount": 25}, input_schema=REFUND_SCHEMA
    )
    ApprovalRequest.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert approvals_expire() == 1
    with pytest.raises(Expired):
        client.get(state.tool_call_id).raise_unless_approved()


def test_a_bad_token_raises_not_authorized(user: Any) -> None:
    client = Client(
        "http://testserver",
        token="nope",
        agent="billing",
        transport=DjangoTransport(),
    )
    with pytest.raises(NotAuthorized) as caught:
        client.declare("lookup", {"order_id": "A-1"})
    assert caught.value.status == 401


def test_invalid_arguments_raise_invalid_request_naming_the_field(user: Any) -> None:
    client = make_client(user)
    with pytest.raises(InvalidRequest) as caught:
        client.declare("refund", {"order_id": 7}, input_schema=REFUND_SCHEMA)
    assert "arguments" in caught.value.fields
    assert ToolCall.objects.count() == 0


def test_a_second_replica_gets_conflict_naming_the_holder(user: Any) -> None:
    first = make_client(user, holder="replica-a")
    second = make_client(user, holder="replica-b")
    state = first.declare("lookup", {"order_id": "A-1"})
    first.claim(state.tool_call_id)
    with pytest.raises(Conflict) as caught:
        second.claim(state.tool_call_id)
    assert caught.value.holder == "replica-a"


def test_requests_are_retried_with_backoff_and_declared_once(user: Any) -> None:
    """A network error and a 503 are retried; the idempotency key keeps one call."""
    client = make_client(user, failures=["network", "503"])
    state = client.declare("lookup", {"order_id": "A-1"})
    assert state.status == "approved"
    assert ToolCall.objects.count() == 1


def test_retries_give_up_after_the_last_attempt(user: Any) -> None:
    from countersign_client import CountersignError

    client = make_client(user, failures=["network"] * 3, retries=2)
    with pytest.raises(CountersignError):
        client.declare("lookup", {"order_id": "A-1"})
    assert ToolCall.objects.count() == 0


def test_an_exception_in_the_body_is_reported_as_a_failure(user: Any) -> None:
    client = make_client(user)

    def run() -> None:
        with require_approval(client, "lookup", {"order_id": "A-1"}) as approval:
            assert approval.arguments == {"order_id": "A-1"}
            raise RuntimeError("upstream down")

    with pytest.raises(RuntimeError, match="upstream down"):
        run()
    call = ToolCall.objects.get()
    assert call.state == "failed"
    assert Message.objects.get(role="tool").error == "RuntimeError"


def test_the_client_package_imports_no_django() -> None:
    """The client is installable on its own: its sources import neither Django nor the app."""
    sources = (ROOT / "clients/python/src/countersign_client").rglob("*.py")
    offenders = [
        str(path)
        for path in sources
        for line in path.read_text().splitlines()
        if line.lstrip().startswith(("import django", "from django", "from threads"))
    ]
    assert offenders == []


def test_the_client_builds_a_wheel(tmp_path: Path) -> None:
    """The package builds a wheel holding its modules and its typing marker."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT / "clients/python"),
        ],
        check=True,
        timeout=120,
    )
    (wheel,) = tmp_path.glob("countersign_client-0.1.0-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "countersign_client/client.py" in names
    assert "countersign_client/py.typed" in names
    assert "countersign_client/adapters/__init__.py" in names
    metadata = (
        zipfile.ZipFile(wheel)
        .read("countersign_client-0.1.0.dist-info/METADATA")
        .decode()
    )
    assert "Name: countersign-client" in metadata
    assert "Requires-Dist: httpx>=0.27" in metadata
