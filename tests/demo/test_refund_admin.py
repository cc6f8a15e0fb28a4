"""The admin refuses what a user may not do with a plain 403, and keeps refunds.

A permission refusal is an expected answer, not a server fault: it is logged at
WARNING at most, without a traceback. Refunds are the audit record of calls that
ran, so nobody deletes one from the admin.
"""

from __future__ import annotations

import logging
from decimal import Decimal

import pytest
from django.urls import reverse

from demo.models import Refund
from tests.helpers.ui import make_user

pytestmark = pytest.mark.django_db


def _staff(username: str, *permissions: str):
    user = make_user(username, *permissions)
    user.is_staff = True
    user.save()
    return user


def test_admin_add_page_without_the_add_permission_is_a_plain_403(client, caplog):
    client.force_login(_staff("viewer", "approvals.view_approvalrequest"))

    with caplog.at_level(logging.DEBUG):
        response = client.get(reverse("admin:approvals_approvalrequest_add"))

    assert response.status_code == 403
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []
    assert [r for r in caplog.records if r.exc_info] == []


def test_refund_admin_refuses_to_delete_a_refund(client):
    refund = Refund.objects.create(
        order_id="A-1001",
        amount=Decimal("25.00"),
        reason="customer request",
        idempotency_key="k-1",
    )
    client.force_login(_staff("root", "demo.view_refund", "demo.delete_refund"))

    page = client.get(reverse("admin:demo_refund_delete", args=[refund.pk]))
    posted = client.post(
        reverse("admin:demo_refund_delete", args=[refund.pk]), {"post": "yes"}
    )
    changelist = client.post(
        reverse("admin:demo_refund_changelist"),
        {"action": "delete_selected", "_selected_action": [refund.pk]},
    )

    assert page.status_code == 403
    assert posted.status_code == 403
    assert changelist.status_code in (200, 302)
    assert Refund.objects.filter(pk=refund.pk).exists()
