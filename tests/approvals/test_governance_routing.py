"""Governance end to end: routing and claims, scoped grants, escalation, static policies.

Flows run on the embedded pool and on a real Celery worker process (``executor``),
through the REST API where an operator would use it. LP-01, SEC-02, DC-03.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.utils import timezone

from approvals.checks import check_policies
from approvals.interrupts import run_interrupts
from approvals.models import ApprovalRequest, AuditEntry
from approvals.signals import approval_escalated
from demo.models import Refund
from orchestration.tasks import expire_approvals
from tests.helpers.governance import (
    approve_as,
    decider,
    get_as,
    held_refund,
    post_as,
    refund_policy,
)
from threads.execution import start_embedded_beat, stop_embedded_beat
from threads.models import Run, ToolCall


def test_assigned_to_me_claim_and_release_over_rest(
    user, finance_and_support, client, executor
):
    """Routed to finance: only finance sees it assigned; a claim keeps grace out until released."""
    refund_policy(approvals_required=1)
    ada, grace, linus = finance_and_support
    call = held_refund(user, executor)
    approval = ApprovalRequest.objects.get(tool_call=call)

    def assigned(who):
        page = get_as(client, who, "/api/approvals/?assigned=me").json()
        return [a["id"] for a in page["results"]]

    assert assigned(ada) == [approval.pk]
    assert assigned(linus) == []
    outsider = get_as(client, linus, f"/api/approvals/{approval.pk}/").json()
    assert (outsider["canAuthorize"], outsider["approverGroups"]) == (
        False,
        ["finance"],
    )
    refused = post_as(client, linus, f"/api/approvals/{approval.pk}/approve/")
    assert refused.status_code == 403, refused.content

    claimed = post_as(client, ada, f"/api/approvals/{approval.pk}/claim/")
    assert (claimed.status_code, claimed.json()["claimedBy"]) == (200, "ada")
    assert assigned(grace) == []
    assert (
        get_as(client, grace, f"/api/approvals/{approval.pk}/").json()["canAuthorize"]
        is False
    )
    blocked = post_as(client, grace, f"/api/approvals/{approval.pk}/approve/")
    assert (blocked.status_code, blocked.json()["type"]) == (409, "claimed"), (
        blocked.content
    )
    assert (
        post_as(client, grace, f"/api/approvals/{approval.pk}/claim/").status_code
        == 409
    )
    assert (
        post_as(client, grace, f"/api/approvals/{approval.pk}/release/").status_code
        == 409
    )

    released = post_as(client, ada, f"/api/approvals/{approval.pk}/release/")
    assert (released.status_code, released.json()["claimedBy"]) == (200, None)
    assert assigned(grace) == [approval.pk]
    approved = post_as(client, grace, f"/api/approvals/{approval.pk}/approve/")
    assert (approved.status_code, approved.json()["status"]) == (200, "approved")
    executor.settle(call.thread)
    assert Refund.objects.filter(order_id="A-1001").count() == 1
    actions = list(
        AuditEntry.objects.filter(target_id=str(approval.pk))
        .filter(action__in=["approval.claimed", "approval.released"])
        .values_list("actor_label", "action")
    )
    assert actions == [("ada", "approval.claimed"), ("ada", "approval.released")]


def test_assigned_to_me_follows_the_authorization_rules(
    user, finance_and_support, client, executor, django_user_model
):
    """The "assigned to me" list: a lapsed claim frees a request; superusers are in every group."""
    refund_policy(approvals_required=1)
    ada, grace, _linus = finance_and_support
    root = django_user_model.objects.create_superuser("root", password="pw")
    call = held_refund(user, executor)
    approval = ApprovalRequest.objects.get(tool_call=call)

    def assigned(who):
        page = get_as(client, who, "/api/approvals/?assigned=me").json()
        return [a["id"] for a in page["results"]]

    def can_authorize(who):
        return get_as(client, who, f"/api/approvals/{approval.pk}/").json()[
            "canAuthorize"
        ]

    assert (assigned(root), can_authorize(root)) == ([approval.pk], True)
    assert (
        post_as(client, ada, f"/api/approvals/{approval.pk}/claim/").status_code == 200
    )
    assert (assigned(grace), can_authorize(grace)) == ([], False)
    # The claim lapses: grace may decide again, and the list says so.
    ApprovalRequest.objects.filter(pk=approval.pk).update(
        claimed_at=timezone.now() - timedelta(days=1)
    )
    assert (assigned(grace), can_authorize(grace)) == ([approval.pk], True)
    assert assigned(ada) == [approval.pk]  # still hers too: she holds the claim


def test_n_of_m_state_is_the_same_in_rest_snapshot_and_interrupt(
    user, finance_and_support, client, executor
):
    """After one of two approvals: REST, the AG-UI interrupt metadata and the admin say 1 of 2 by ada."""
    refund_policy(approvals_required=2, risk_level="high", risk_reason="large refunds")
    ada = finance_and_support[0]
    call = held_refund(user, executor)
    approval = ApprovalRequest.objects.get(tool_call=call)
    approve_as(approval, ada)

    rest = get_as(client, ada, f"/api/approvals/{approval.pk}/").json()
    assert rest["approvals"]["required"] == 2
    assert (rest["approvals"]["given"], rest["approvals"]["by"]) == (1, ["ada"])
    # The policy's declared risk joins the computed one in the one `risk` object.
    assert rest["risk"]["level"] == "high"
    assert rest["risk"]["reasons"][-1] == "policy: large refunds"
    assert rest["canAuthorize"] is True  # ada may still edit; her vote is counted once
    [interrupt] = run_interrupts(Run.objects.get(pk=call.run_id))
    assert interrupt["metadata"]["approvals"] == {
        "required": 2,
        "given": 1,
        "by": ["ada"],
        "reset": [],
    }
    assert interrupt["metadata"]["approverGroups"] == ["finance"]
    assert interrupt["metadata"]["risk"] == rest["risk"]
    type(ada).objects.filter(pk=ada.pk).update(is_staff=True)
    client.force_login(ada)
    page = client.get("/admin/approvals/approvalrequest/")
    assert b"1 of 2 (ada)" in page.content


def _beat(executor, done):
    """Let the beat schedule's task run (embedded beat, or the worker) until ``done()``."""
    if executor.mode == "embedded":
        # The schedule's 30 s intervals, scaled down for the test.
        stop_embedded_beat()
        assert start_embedded_beat(interval_scale=0.01) is True
        try:
            executor.wait_for(done, timeout=20)
        finally:
            stop_embedded_beat()
    else:
        expire_approvals.delay()  # what Celery beat sends, run by the worker
        executor.wait_for(done, timeout=30)


def test_escalation_on_the_beat_moves_groups_then_only_final_expiry_expires(
    user, finance_and_support, django_user_model, executor
):
    """Step 1 → leads (signal sent, audited); the call stays held until its final expiry."""
    refund_policy(
        escalation=[{"groups": ["leads"], "after_seconds": 60}],
        expiry_seconds=3600,
    )
    ada, _, _ = finance_and_support
    lead = decider(django_user_model, "barbara", "leads")
    call = held_refund(user, executor)
    approval = ApprovalRequest.objects.get(tool_call=call)
    assert approval.step_deadline is not None
    received: list[tuple[int, str | None, list[str]]] = []

    def receiver(sender, approval, group, groups, step, **kwargs):
        received.append((approval.pk, group, groups))

    approval_escalated.connect(receiver)
    try:
        ApprovalRequest.objects.filter(pk=approval.pk).update(
            step_deadline=timezone.now() - timedelta(seconds=1)
        )
        _beat(
            executor,
            lambda: ApprovalRequest.objects.get(pk=approval.pk).escalation_step == 1,
        )
    finally:
        approval_escalated.disconnect(receiver)
    approval.refresh_from_db()
    assert (approval.status, approval.escalation_step, approval.step_deadline) == (
        "pending",
        1,
        None,
    )
    assert list(approval.approver_groups.values_list("name", flat=True)) == ["leads"]
    if executor.mode == "embedded":  # a worker process's receivers are its own
        assert received == [(approval.pk, "leads", ["leads"])]
    entry = AuditEntry.objects.get(action="approval.escalated")
    assert (entry.before["groups"], entry.after["groups"]) == (["finance"], ["leads"])
    from approvals.exceptions import ApprovalPermissionDenied

    with pytest.raises(ApprovalPermissionDenied):
        approve_as(approval, ada)
    assert ToolCall.objects.get(pk=call.pk).state == "awaiting_approval"

    ApprovalRequest.objects.filter(pk=approval.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    _beat(
        executor,
        lambda: ApprovalRequest.objects.get(pk=approval.pk).status == "expired",
    )
    executor.settle(call.thread)
    assert ToolCall.objects.get(pk=call.pk).state == "expired"
    assert lead.pk  # the lead could have approved until then


# Embedded only: a Celery worker process reads COUNTERSIGN_AGENTS from its own settings,
# not from this test's; the policy code path past the lookup is the admin policy's, which
# the Celery-mode tests cover.
@pytest.mark.parametrize("executor", ["embedded"], indirect=True)
def test_static_policy_in_settings_routes_and_checks_validate_it(
    user, finance_and_support, settings, executor
):
    """COUNTERSIGN_AGENTS[...]["policies"] routes the call; the system checks refuse bad entries."""
    settings.COUNTERSIGN_AGENTS = {
        "demo": {
            **settings.COUNTERSIGN_AGENTS["demo"],
            "policies": {
                "refund_order": {
                    "action": "require_approval",
                    "groups": ["finance"],
                    "approvals_required": 2,
                }
            },
        }
    }
    assert check_policies() == []
    call = held_refund(user, executor)
    approval = ApprovalRequest.objects.get(tool_call=call)
    assert (approval.policy_source, approval.approvals_required) == ("settings", 2)

    settings.COUNTERSIGN_AGENTS = {
        "demo": {
            **settings.COUNTERSIGN_AGENTS["demo"],
            "policies": {
                "refund_order": {"approvals_required": 0},
                "no_such_tool": "auto",
                "lookup_order": {
                    "escalation": [{"groups": ["leads"], "after_seconds": 600}],
                    "expiry_seconds": 60,
                },
            },
        }
    }
    found = sorted((m.id, m.msg) for m in check_policies())
    assert [i for i, _ in found] == [
        "approvals.E070",
        "approvals.E070",
        "approvals.E071",
    ]
    assert (
        "['lookup_order'] is invalid: expiry_seconds (60) must be longer" in found[0][1]
    )
    assert (
        "['refund_order'] is invalid: approvals_required must be an integer >= 1"
        in (found[1][1])
    )
    assert "['no_such_tool'] names a tool agent 'demo' does not have" in found[2][1]
    settings.COUNTERSIGN = {"POLICY_FAIL_CLOSED_GROUP": ""}
    with pytest.raises(SystemCheckError, match=r"approvals\.E072"):
        call_command("check")


def test_admin_tool_policy_form_refuses_nonsense(finance_and_support, client):
    """The admin's ToolPolicy form validates the row as a declaration before saving."""
    from django.contrib.auth import get_user_model

    admin_user = get_user_model().objects.create_superuser(
        "root", "r@x.test", "pw-root-1"
    )
    client.force_login(admin_user)
    response = client.post(
        "/admin/approvals/toolpolicy/add/",
        {
            "agent": "",
            "tool_name": "refund_order",
            "enabled": "on",
            "action": "require_approval",
            "reason": "",
            "approvals_required": "2",
            "rejections_required": "1",
            "expiry_seconds": "60",
            "escalation": '[{"groups": ["leads"], "after_seconds": 600}]',
            "risk_level": "high",
            "risk_reason": "",
        },
    )
    assert response.status_code == 200
    assert b"must be longer than the escalation steps" in response.content


def test_an_external_agents_policies_pass_the_checks(settings):
    """An external agent declares each call's tool with the call: its policies name
    tools no toolset holds (docs/integrations.md's example), and are still checked."""
    settings.COUNTERSIGN_AGENTS = {
        "billing": {
            "provider": "external",
            "strict": True,
            "policies": {
                "lookup": "auto",
                "refund": {
                    "action": "require_approval",
                    "groups": ["finance"],
                    "approvals_required": 2,
                },
                "wipe": "deny",
            },
        }
    }
    assert check_policies() == []
    settings.COUNTERSIGN_AGENTS["billing"]["policies"]["refund"] = {
        "approvals_required": 0
    }
    assert [m.id for m in check_policies()] == ["approvals.E070"]
