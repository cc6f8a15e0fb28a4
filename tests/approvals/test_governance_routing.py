"""Governance end to end (issue 16): routing and claims, scoped grants, escalation, static policies.

Flows run on the embedded pool and on a real Celery worker process (``executor``),
through the REST API where an operator would use it. Implements the tests of
issue 16 items 1, 3, 4, 5 and 6 (LP-01, SEC-02, DC-03).
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.db import transaction
from django.utils import timezone

from approvals.checks import check_policies
from approvals.interrupts import run_interrupts
from approvals.models import ApprovalGrant, ApprovalRequest, AuditEntry, ToolExecution
from approvals.services import pending_calls_dispatch
from approvals.signals import approval_escalated
from approvals.tasks import expire_approvals
from demo.models import Refund
from tests.helpers.governance import approve_as, decider, held_refund, refund_policy
from threads.execution import start_embedded_beat, stop_embedded_beat
from threads.models import Run, ToolCall


def _post(client, user, path, body=None):
    client.force_login(user)
    return client.post(path, body or {}, content_type="application/json")


def _get(client, user, path):
    client.force_login(user)
    return client.get(path)


def test_assigned_to_me_claim_and_release_over_rest(
    user, finance_and_support, client, executor
):
    """Routed to finance: only finance sees it assigned; a claim keeps grace out until released."""
    refund_policy(approvals_required=1)
    ada, grace, linus = finance_and_support
    call = held_refund(user, executor)
    approval = ApprovalRequest.objects.get(tool_call=call)

    def assigned(who):
        page = _get(client, who, "/api/approvals/?assigned=me").json()
        return [a["id"] for a in page["results"]]

    assert assigned(ada) == [approval.pk]
    assert assigned(linus) == []
    outsider = _get(client, linus, f"/api/approvals/{approval.pk}/").json()
    assert (outsider["canAuthorize"], outsider["approverGroups"]) == (
        False,
        ["finance"],
    )
    refused = _post(client, linus, f"/api/approvals/{approval.pk}/approve/")
    assert refused.status_code == 403, refused.content

    claimed = _post(client, ada, f"/api/approvals/{approval.pk}/claim/")
    assert (claimed.status_code, claimed.json()["claimedBy"]) == (200, "ada")
    assert assigned(grace) == []
    assert (
        _get(client, grace, f"/api/approvals/{approval.pk}/").json()["canAuthorize"]
        is False
    )
    blocked = _post(client, grace, f"/api/approvals/{approval.pk}/approve/")
    assert (blocked.status_code, blocked.json()["type"]) == (409, "claimed"), (
        blocked.content
    )
    assert (
        _post(client, grace, f"/api/approvals/{approval.pk}/claim/").status_code == 409
    )
    assert (
        _post(client, grace, f"/api/approvals/{approval.pk}/release/").status_code
        == 409
    )

    released = _post(client, ada, f"/api/approvals/{approval.pk}/release/")
    assert (released.status_code, released.json()["claimedBy"]) == (200, None)
    assert assigned(grace) == [approval.pk]
    approved = _post(client, grace, f"/api/approvals/{approval.pk}/approve/")
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
        page = _get(client, who, "/api/approvals/?assigned=me").json()
        return [a["id"] for a in page["results"]]

    def can_authorize(who):
        return _get(client, who, f"/api/approvals/{approval.pk}/").json()[
            "canAuthorize"
        ]

    assert (assigned(root), can_authorize(root)) == ([approval.pk], True)
    assert _post(client, ada, f"/api/approvals/{approval.pk}/claim/").status_code == 200
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

    rest = _get(client, ada, f"/api/approvals/{approval.pk}/").json()
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


def test_grant_matches_later_calls_inside_its_constraint_only(
    user, finance_and_support, client, executor
):
    """Approve with a thread grant amount<=50: 30 later runs unasked, 60 and another thread wait."""
    refund_policy()
    ada, _, _ = finance_and_support
    call = held_refund(user, executor)
    approval = ApprovalRequest.objects.get(tool_call=call)
    response = _post(
        client,
        ada,
        f"/api/approvals/{approval.pk}/approve/",
        {
            "grant": {
                "scope": "thread",
                "ranges": {"amount": {"max": 50}},
                "durationSeconds": 3600,
            }
        },
    )
    assert response.status_code == 200, response.content
    executor.settle(call.thread)
    grant = ApprovalGrant.objects.get()
    assert (grant.scope, grant.thread_id, grant.granted_by) == (
        "thread",
        call.thread_id,
        ada,
    )
    listed = _get(client, ada, "/api/grants/?active=true").json()
    assert [g["id"] for g in listed["results"]] == [grant.pk]

    from threads.services import message_post

    message_post(thread=call.thread, content="refund order A-1003 30.00")
    executor.settle(call.thread)
    granted = ToolCall.objects.filter(thread=call.thread, name="refund_order").latest(
        "id"
    )
    execution = ToolExecution.objects.get(tool_call=granted)
    assert (execution.authorized_by, execution.grant_id, execution.state) == (
        "grant",
        grant.pk,
        "succeeded",
    )
    assert not ApprovalRequest.objects.filter(tool_call=granted).exists()
    assert Refund.objects.filter(order_id="A-1003").count() == 1
    assert AuditEntry.objects.filter(action="tool_call.granted").count() == 1

    message_post(thread=call.thread, content="refund order A-1001 60.00")
    executor.settle(call.thread)
    outside = ToolCall.objects.filter(thread=call.thread, name="refund_order").latest(
        "id"
    )
    assert outside.state == "awaiting_approval"
    other = held_refund(user, executor, text="refund order A-1003 10.00")
    assert other.state == "awaiting_approval"


def test_grant_needs_a_constraint_and_cannot_exceed_its_granter(
    user, finance_and_support, client, executor
):
    """No constraint → 400; on a two-approval call a grant would exceed one approver → 400."""
    refund_policy(approvals_required=2)
    ada, _, _ = finance_and_support
    call = held_refund(user, executor)
    approval = ApprovalRequest.objects.get(tool_call=call)
    bare = _post(
        client,
        ada,
        f"/api/approvals/{approval.pk}/approve/",
        {"grant": {"scope": "user", "durationSeconds": 60}},
    )
    assert bare.status_code == 400, bare.content
    assert "constraint" in bare.json()["detail"]
    too_much = _post(
        client,
        ada,
        f"/api/approvals/{approval.pk}/approve/",
        {
            "grant": {
                "scope": "user",
                "exact": {"order_id": "A-1001"},
                "durationSeconds": 60,
            }
        },
    )
    assert too_much.status_code == 400, too_much.content
    assert "one approver only" in too_much.json()["detail"]
    assert not ApprovalGrant.objects.exists()
    assert ApprovalRequest.objects.get(pk=approval.pk).votes.count() == 0


def test_grant_revoked_between_policy_and_execution_stops_the_queued_call(
    user, finance_and_support, client, executor
):
    """A call queued under a grant that is revoked before it runs is refused, not run."""
    refund_policy()
    ada, _, _ = finance_and_support
    call = held_refund(user, executor)
    approval = ApprovalRequest.objects.get(tool_call=call)
    approve_as(
        approval,
        ada,
        grant={
            "scope": "user",
            "schema": {"properties": {"amount": {"maximum": 40}}},
            "durationSeconds": 600,
        },
    )
    executor.settle(call.thread)
    grant = ApprovalGrant.objects.get()
    # A run that ended with a refund call the worker has not dispatched yet.
    run = Run.objects.create(
        thread=call.thread,
        agent="demo",
        status=Run.Status.AWAITING_TOOLS,
        started_at=timezone.now(),
        input={"tools": [{"name": "refund_order"}]},
        pending_tool_call_ids=["call_queued_under_grant"],
    )
    queued_arguments = {
        "order_id": "A-1003",
        "amount": 15.0,
        "reason": "customer request",
    }
    queued = ToolCall.objects.create(
        thread=call.thread,
        run=run,
        tool_call_id="call_queued_under_grant",
        name="refund_order",
        arguments=queued_arguments,
        arguments_text=json.dumps(queued_arguments),
        state=ToolCall.State.PENDING,
    )
    with transaction.atomic():
        pending_calls_dispatch(run=run)
        execution = ToolExecution.objects.get(tool_call=queued)
        assert (execution.authorized_by, execution.state) == ("grant", "queued")
        # Revoked before the execution is enqueued (on commit) and picked up.
        response = _post(
            client, ada, f"/api/grants/{grant.pk}/revoke/", {"reason": "too broad"}
        )
        assert response.status_code == 200, response.content
    executor.settle(call.thread)
    execution.refresh_from_db()
    assert (execution.state, execution.error) == ("failed", "refused")
    assert not Refund.objects.filter(order_id="A-1003").exists()
    revoked = AuditEntry.objects.get(action="grant.revoked")
    assert (revoked.actor_label, revoked.after["reason"]) == ("ada", "too broad")
    second = _post(client, ada, f"/api/grants/{grant.pk}/revoke/")
    assert second.status_code == 409


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
    assert [i for i, _ in found] == ["threads.E070", "threads.E070", "threads.E071"]
    assert (
        "['lookup_order'] is invalid: expiry_seconds (60) must be longer" in found[0][1]
    )
    assert (
        "['refund_order'] is invalid: approvals_required must be an integer >= 1"
        in (found[1][1])
    )
    assert "['no_such_tool'] names a tool agent 'demo' does not have" in found[2][1]
    settings.COUNTERSIGN = {"POLICY_FAIL_CLOSED_GROUP": ""}
    with pytest.raises(SystemCheckError, match=r"threads\.E072"):
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
