"""A staff-only account (``is_staff``, no permission, no group) acts on nobody's work.

``is_staff`` opens the Django admin, where every page checks model permissions;
everywhere else authorization is a named permission (docs/governance.md "Roles and
permissions"). Every endpoint and page that reads or acts on another user's
thread, events, runs, calls or approvals is tried as such an account: it gets
what an ordinary stranger gets. The holders of the named permissions can.
Implements SEC-06.
"""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from approvals.exceptions import ApprovalClaimed, ApprovalPermissionDenied
from approvals.models import ApprovalRequest
from approvals.services.cancellation import thread_pending_calls_cancel
from approvals.services.claims import approval_claim, approval_release
from orchestration.pipeline import approval_decide
from tests.helpers.api import pending_refund_thread, token_client
from threads.models import Run, ToolCall

pytestmark = pytest.mark.django_db


@pytest.fixture
def work(user, nonstaff_approver, second_approver):
    """Return olivia's pending refund (claimed by ada) and a decided one."""
    pending_refund_thread(user, thread_id="t-pending")
    pending = ApprovalRequest.objects.get(thread__client_thread_id="t-pending")
    approval_claim(approval=pending, user=nonstaff_approver)
    pending_refund_thread(user, thread_id="t-decided")
    decided = ApprovalRequest.objects.get(thread__client_thread_id="t-decided")
    approval_decide(
        approval=decided, decided_by=second_approver, decision="reject", reason="no"
    )
    return {
        "pending": ApprovalRequest.objects.get(pk=pending.pk),
        "decided": decided,
        "run": Run.objects.get(run_id="t-pending-run"),
        "call": ToolCall.objects.get(tool_call_id="t-pending-call"),
    }


def _session(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_staff_only_reads_none_of_another_users_work_over_the_api(staff_user, work):
    """Threads, events, runs, calls, approvals, grants, decisions.csv: empty or 404."""
    api = token_client(staff_user)
    pk, run, call = work["pending"].pk, work["run"].run_id, work["call"].tool_call_id

    assert api.get("/api/threads/").json()["results"] == []
    assert api.get("/api/tool-calls/").json()["results"] == []
    assert api.get("/api/approvals/").json()["count"] == 0
    assert api.get("/api/grants/").json()["results"] == []
    for url in (
        "/api/threads/t-pending/",
        "/api/threads/t-pending/events/",
        "/api/threads/t-pending/runs/",
        f"/api/runs/{run}/",
        f"/api/tool-calls/{call}/",
        f"/api/approvals/{pk}/",
        f"/api/approvals/{work['decided'].pk}/",
    ):
        response = api.get(url)
        assert response.status_code == 404, (url, response.status_code)
        assert response.json()["type"] == "not_found", url
    csv = api.get("/api/approvals/decisions.csv")
    assert csv.status_code == 200
    [header] = csv.content.decode().splitlines()
    assert header.startswith("id,")
    # the same export, for a holder of the view permission, has the decision
    staff_user.user_permissions.add(
        Permission.objects.get(codename="view_approvalrequest")
    )
    rows = token_client(staff_user).get("/api/approvals/decisions.csv")
    assert len(rows.content.decode().splitlines()) == 2


def test_staff_only_acts_on_none_of_another_users_work_over_the_api(staff_user, work):
    """Decide, undo, resolve, claim, release, cancel, archive, post, cancel a run: 404."""
    api = token_client(staff_user)
    pk, run = work["pending"].pk, work["run"].run_id
    for url, body in (
        (f"/api/approvals/{pk}/approve/", {}),
        (f"/api/approvals/{pk}/reject/", {"reason": "x"}),
        (f"/api/approvals/{pk}/undo/", {}),
        (f"/api/approvals/{pk}/resolve/", {"succeeded": False, "content": "x"}),
        (f"/api/approvals/{pk}/claim/", {}),
        (f"/api/approvals/{pk}/release/", {}),
        ("/api/threads/t-pending/cancel-pending/", {"reason": "mine now"}),
        ("/api/threads/t-pending/archive/", {}),
        ("/api/threads/t-pending/messages/", {"content": "hello"}),
        (f"/api/runs/{run}/cancel/", {}),
    ):
        response = api.post(url, body, format="json")
        assert response.status_code == 404, (url, response.status_code)
    pending = ApprovalRequest.objects.get(pk=pk)
    assert (pending.status, pending.claimed_by.username) == ("pending", "ada")
    assert ToolCall.objects.get(pk=work["call"].pk).state == "awaiting_approval"


def test_staff_only_services_refuse_other_peoples_claims_and_calls(
    staff_user, work, django_user_model
):
    """Below the API too: releasing ada's claim and cancelling olivia's calls are refused."""
    pending = work["pending"]
    with pytest.raises(ApprovalClaimed, match=r"approvals\.release_any_claim"):
        approval_release(approval=pending, user=staff_user)
    with pytest.raises(ApprovalPermissionDenied):
        thread_pending_calls_cancel(
            thread=pending.thread, cancelled_by=staff_user, reason="mine now"
        )
    assert ToolCall.objects.get(pk=work["call"].pk).state == "awaiting_approval"

    # the named permissions allow exactly that
    lead = django_user_model.objects.create_user(username="lee", password="pw-lee-1")
    lead.user_permissions.add(
        *Permission.objects.filter(
            codename__in=["release_any_claim", "cancel_any_pending"]
        )
    )
    lead = django_user_model.objects.get(pk=lead.pk)
    assert approval_release(approval=pending, user=lead).claimed_by is None
    assert thread_pending_calls_cancel(
        thread=pending.thread, cancelled_by=lead, reason="abandoned"
    ) == ["t-pending-call"]


def test_staff_only_sees_none_of_another_users_work_on_pages_and_agui(staff_user, work):
    """Thread page, state, list, attention, queue, context, AG-UI follow stream, admin."""
    browser = _session(staff_user)
    pk = work["pending"].pk

    assert browser.get("/threads/t-pending/").status_code == 404
    assert browser.get("/threads/t-pending/state.json").status_code == 404
    listing = json.loads(browser.get("/threads.json").content)
    assert "t-pending" not in json.dumps(listing)
    attention = browser.get("/attention.json")
    assert attention.status_code == 200
    assert "t-pending" not in attention.content.decode()
    assert browser.get("/approvals/").status_code == 403
    assert browser.get(f"/approvals/{pk}/context.json").status_code == 404
    api = token_client(staff_user)
    assert api.get("/agui/threads/t-pending/events").status_code == 404
    for admin_page in (
        "/admin/threads/thread/",
        "/admin/approvals/approvalrequest/",
        f"/admin/approvals/approvalrequest/{pk}/change/",
    ):
        assert browser.get(admin_page).status_code == 403, admin_page
