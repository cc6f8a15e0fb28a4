"""The admin's decide form refuses JSON no entry point accepts, without a 500."""

from __future__ import annotations

import html

import pytest
from django.urls import reverse

from approvals.models import ApprovalRequest


@pytest.mark.parametrize("executor", ["embedded"], indirect=True)
@pytest.mark.parametrize(
    ("edited", "says"),
    [
        ('{"a": ' + "[" * 20_000 + "]" * 20_000 + "}", "levels deep"),
        ('{"a": ' + "[" * 150 + "]" * 150 + "}", "levels deep"),
        ('{"order_id": "A-1001", "amount": NaN, "reason": "x"}', "finite number"),
        ('{"order_id": "A-1001", "amount": 1e999, "reason": "x"}', "too large"),
        ('{"order_id": "\\ud800", "amount": 1, "reason": "x"}', "surrogate"),
        ('{"order_id": "\\u0000", "amount": 1, "reason": "x"}', "NUL"),
    ],
)
def test_admin_decide_form_refuses_unstorable_edited_arguments(
    client, approver, pending_refund, executor, edited, says
):
    approval = ApprovalRequest.objects.get(tool_call=pending_refund)
    client.force_login(approver)
    decide = reverse("admin:approvals_approvalrequest_decide", args=[approval.pk])

    response = client.post(
        decide,
        {"decision": "approve", "reason": "", "edited_arguments": edited},
        follow=True,
    )

    assert response.status_code == 200
    text = html.unescape(html.unescape(response.content.decode()))
    assert "Invalid decision" in text
    assert "edited_arguments" in text
    assert says in text
    approval.refresh_from_db()
    assert approval.status == "pending"
