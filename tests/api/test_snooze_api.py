"""``POST``/``DELETE /api/approvals/<id>/snooze/``: a personal "not now" on a pending request.

A snooze takes the request out of the snoozer's own "I can decide" (``mine``) and
``?assigned=me`` until its time; it stays pending and visible to everyone else,
and expiry still applies. Malformed input is refused with 4xx. Implements DC-03.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from approvals.models import ApprovalRequest, ApprovalSnooze
from approvals.selectors import approval_queue
from orchestration.pipeline import approvals_expire
from tests.helpers.api import pending_refund_thread, token_client

pytestmark = pytest.mark.django_db


def _pending(user, thread_id="t-refund") -> ApprovalRequest:
    pending_refund_thread(user, thread_id=thread_id)
    return ApprovalRequest.objects.get(thread__thread_id=thread_id)


def _assigned_ids(client) -> list[int]:
    body = client.get("/api/approvals/?assigned=me&status=pending").json()
    return [a["id"] for a in body["results"]]


def _queue_ids(user, **kwargs) -> list[int]:
    return [c["id"] for c in approval_queue(user=user, **kwargs)["cards"]]


def test_a_snooze_hides_the_request_from_the_snoozer_only_until_its_time(
    user, approver_api, nonstaff_approver, second_approver
):
    """ada's snooze: gone from her mine and assigned=me, listed as snoozed; grace sees it."""
    approval = _pending(user)
    grace_api = token_client(second_approver)

    response = approver_api.post(
        f"/api/approvals/{approval.pk}/snooze/", {"seconds": 3600}, format="json"
    )

    assert response.status_code == 200, response.json()
    snooze = ApprovalSnooze.objects.get()
    assert response.json() == {
        "approvalId": approval.pk,
        "until": snooze.until.isoformat().replace("+00:00", "Z"),
    }
    assert 3590 < (snooze.until - timezone.now()).total_seconds() <= 3600
    assert _assigned_ids(approver_api) == []
    assert _assigned_ids(grace_api) == [approval.pk]
    assert _queue_ids(nonstaff_approver, mine=True) == []
    assert _queue_ids(nonstaff_approver, mine=False) == [approval.pk]
    assert _queue_ids(nonstaff_approver, view="snoozed") == [approval.pk]
    assert _queue_ids(second_approver, mine=True) == [approval.pk]
    assert _queue_ids(second_approver, view="snoozed") == []
    assert ApprovalRequest.objects.get(pk=approval.pk).status == "pending"

    # when the time is up it is back, without anyone doing anything
    ApprovalSnooze.objects.update(until=timezone.now() - timedelta(seconds=1))
    assert _assigned_ids(approver_api) == [approval.pk]
    assert _queue_ids(nonstaff_approver, mine=True) == [approval.pk]
    assert _queue_ids(nonstaff_approver, view="snoozed") == []


def test_snoozing_again_replaces_the_time_and_delete_brings_it_back(
    user, approver_api, nonstaff_approver
):
    approval = _pending(user)
    path = f"/api/approvals/{approval.pk}/snooze/"
    approver_api.post(path, {"seconds": 3600}, format="json")
    approver_api.post(path, {"seconds": 86400}, format="json")
    assert ApprovalSnooze.objects.count() == 1
    assert (ApprovalSnooze.objects.get().until - timezone.now()).total_seconds() > 86000

    deleted = approver_api.delete(path)
    again = approver_api.delete(path)

    assert (deleted.status_code, again.status_code) == (204, 204)
    assert not ApprovalSnooze.objects.exists()
    assert _queue_ids(nonstaff_approver, mine=True) == [approval.pk]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({}, "This field is required."),
        ({"seconds": None}, "This field may not be null."),
        ({"seconds": "3600"}, "must be a number, not str"),
        ({"seconds": True}, "must be a number, not bool"),
        ({"seconds": [3600]}, "must be a number, not list"),
        ({"seconds": 59}, "greater than or equal to 60"),
        ({"seconds": -3600}, "greater than or equal to 60"),
        ({"seconds": 7 * 24 * 3600 + 1}, "less than or equal to 604800"),
        ({"seconds": 3600, "until": "tomorrow"}, "unknown field 'until'"),
    ],
)
def test_malformed_snoozes_are_refused_naming_the_field(
    user, approver_api, body, message
):
    approval = _pending(user)

    response = approver_api.post(
        f"/api/approvals/{approval.pk}/snooze/", body, format="json"
    )

    assert response.status_code == 400, response.content
    fields = response.json()["fields"]
    assert any(message in m for ms in fields.values() for m in ms), fields
    assert not ApprovalSnooze.objects.exists()


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_a_non_finite_duration_is_refused(user, approver_api, value):
    """NaN or Infinity in the body (not JSON, but Python's parser takes them): 400."""
    approval = _pending(user)

    response = approver_api.post(
        f"/api/approvals/{approval.pk}/snooze/",
        '{"seconds": %s}' % ("NaN" if value != value else "Infinity"),
        content_type="application/json",
    )

    assert response.status_code == 400, response.content
    assert not ApprovalSnooze.objects.exists()


def test_a_decided_request_cannot_be_snoozed_and_unknown_ids_are_404(
    user, approver_api
):
    approval = _pending(user)
    approver_api.post(f"/api/approvals/{approval.pk}/approve/", {}, format="json")

    decided = approver_api.post(
        f"/api/approvals/{approval.pk}/snooze/", {"seconds": 3600}, format="json"
    )
    missing = approver_api.post(
        "/api/approvals/999999/snooze/", {"seconds": 3600}, format="json"
    )
    missing_delete = approver_api.delete("/api/approvals/999999/snooze/")

    assert (decided.status_code, decided.json()["type"]) == (409, "already_decided")
    assert "nothing to snooze" in decided.json()["detail"]
    assert (missing.status_code, missing_delete.status_code) == (404, 404)


def test_a_snoozed_request_still_expires_for_everyone(
    user, approver_api, nonstaff_approver
):
    approval = _pending(user)
    approver_api.post(
        f"/api/approvals/{approval.pk}/snooze/", {"seconds": 3600}, format="json"
    )
    ApprovalRequest.objects.filter(pk=approval.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )

    assert approvals_expire() == 1

    assert ApprovalRequest.objects.get(pk=approval.pk).status == "expired"
    assert _queue_ids(nonstaff_approver, view="snoozed") == []
    assert _queue_ids(nonstaff_approver, view="decided") == [approval.pk]


def test_a_user_who_cannot_see_the_request_gets_404(user):
    """A user with no right to see the request cannot snooze it: 404, nothing stored."""
    from django.contrib.auth import get_user_model

    approval = _pending(user)
    stranger = get_user_model().objects.create_user(username="eve", password="pw-1")

    response = token_client(stranger).post(
        f"/api/approvals/{approval.pk}/snooze/", {"seconds": 3600}, format="json"
    )

    assert response.status_code == 404
    assert not ApprovalSnooze.objects.exists()
