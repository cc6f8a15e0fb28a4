"""Governance end to end: policy with context, four-eyes and N of M.

Every flow runs on the embedded pool and on a real Celery worker process
(``executor``). Policies the worker must see are rows of
:class:`approvals.models.ToolPolicy` (the database is shared) or the agent
``governed`` given to the worker through ``COUNTERSIGN_AGENTS_JSON``.
LP-01, SEC-02, DC-03.
"""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Group, Permission

from approvals.exceptions import ApprovalPermissionDenied
from approvals.models import (
    ApprovalRequest,
    ApprovalVote,
    ToolExecution,
)
from demo.models import Refund
from tests.helpers.governance import approve_as, decider, held_refund, refund_policy

GOVERNED_AGENT = {
    "provider": "scripted",
    "model": "scripted",
    "system_prompt": "You are Countersign's governed demo agent.",
    "toolsets": ["tests.approvals.governed_tools.GOVERNED_TOOLS"],
}


@pytest.fixture
def governed_agent(monkeypatch, settings):
    """Configure agent ``governed`` here and for any worker started after this fixture."""
    agents = {**settings.COUNTERSIGN_AGENTS, "governed": GOVERNED_AGENT}
    settings.COUNTERSIGN_AGENTS = agents
    monkeypatch.setenv(
        "COUNTERSIGN_AGENTS_JSON", json.dumps({"governed": GOVERNED_AGENT})
    )
    return "governed"


def test_requester_may_not_approve_their_own_call(user, finance, client, executor):
    """Four-eyes: the user whose thread asked for the call is refused (403); it stays pending."""
    refund_policy()
    user.user_permissions.add(
        Permission.objects.get(codename="decide_approvalrequest"),
        Permission.objects.get(codename="add_refund"),
    )
    user.groups.add(Group.objects.get(name="finance"))
    call = held_refund(user, executor)
    approval = ApprovalRequest.objects.get(tool_call=call)
    requester = type(user).objects.get(pk=user.pk)
    with pytest.raises(ApprovalPermissionDenied, match="requested this call"):
        approve_as(approval, requester)
    client.force_login(requester)
    response = client.post(
        f"/api/approvals/{approval.pk}/approve/", {}, content_type="application/json"
    )
    assert response.status_code == 403, response.content
    assert "four-eyes" in response.json()["detail"]
    approval.refresh_from_db()
    assert approval.status == "pending"
    assert not ApprovalVote.objects.filter(approval=approval).exists()

    decided = approve_as(approval, finance[0])
    assert decided.status == "approved"
    executor.settle(call.thread)
    assert Refund.objects.filter(order_id="A-1001").count() == 1


def test_a_decider_outside_the_groups_is_refused(
    user, finance, django_user_model, executor
):
    """Routing: holding the decide permission is not enough outside the request's groups."""
    refund_policy()
    outsider = decider(django_user_model, "linus", "support")
    call = held_refund(user, executor)
    approval = ApprovalRequest.objects.get(tool_call=call)
    with pytest.raises(ApprovalPermissionDenied, match="finance"):
        approve_as(approval, outsider)
    assert ApprovalRequest.objects.get(pk=approval.pk).status == "pending"


def test_context_policy_routes_and_a_raising_policy_fails_closed(
    governed_agent, user, finance, django_user_model, executor, caplog
):
    """A (params, context) policy: 25 → finance, 1 by olivia → auto; 999 raises → the strictest group."""
    call = held_refund(user, executor, agent=governed_agent)
    approval = ApprovalRequest.objects.get(tool_call=call)
    assert (approval.policy_source, approval.risk_level) == ("tool", "medium")
    assert list(approval.approver_groups.values_list("name", flat=True)) == ["finance"]

    auto = held_refund(
        user, executor, text="refund order A-1002 1.00", agent=governed_agent
    )
    assert ToolExecution.objects.get(tool_call=auto).authorized_by == "policy"

    raised = held_refund(
        user, executor, text="refund order A-1003 999", agent=governed_agent
    )
    failed = ApprovalRequest.objects.get(tool_call=raised)
    assert (failed.status, failed.policy_source, failed.risk_level) == (
        "pending",
        "fail_closed",
        "high",
    )
    assert "RuntimeError" in failed.risk_reason
    assert list(failed.approver_groups.values_list("name", flat=True)) == [
        "approvers-strict"
    ]
    with pytest.raises(ApprovalPermissionDenied, match="approvers-strict"):
        approve_as(failed, finance[0])
    if executor.worker is not None:
        log = executor.worker.log_path.read_text()
    else:
        log = caplog.text
    assert "policy of tool 'refund_order' failed" in log
    strict = decider(django_user_model, "margaret", "approvers-strict")
    assert approve_as(failed, strict).status == "approved"
