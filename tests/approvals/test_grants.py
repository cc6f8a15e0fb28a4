"""Scoped grants ("always allow"): the constraint, revocation and who a grant stands for.

The end-to-end flows run on the embedded pool and on a real Celery worker
process (``executor``), through the REST API; the direct tests of
:mod:`approvals.services.grants` need neither. Implements SEC-02, LP-01.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from agentcore.policy import PolicyDecision
from agentcore.tools import Toolset
from approvals.exceptions import (
    ApprovalAlreadyDecided,
    ApprovalPermissionDenied,
    GrantRefused,
)
from approvals.models import ApprovalGrant, ApprovalRequest, AuditEntry, ToolExecution
from approvals.services.grants import (
    grant_constraint,
    grant_find,
    grant_refusal,
    grant_revoke,
)
from demo.models import Refund
from demo.tools import DEMO_TOOLS
from orchestration.pipeline import pending_calls_dispatch
from tests.helpers.governance import (
    approve_as,
    get_as,
    held_refund,
    post_as,
    refund_policy,
)
from threads.models import Run, ToolCall


def test_grant_matches_later_calls_inside_its_constraint_only(
    user, finance_and_support, client, executor
):
    """Approve with a thread grant amount<=50: 30 later runs unasked, 60 and another thread wait."""
    refund_policy()
    ada, _, _ = finance_and_support
    call = held_refund(user, executor)
    approval = ApprovalRequest.objects.get(tool_call=call)
    response = post_as(
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
    listed = get_as(client, ada, "/api/grants/?active=true").json()
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
    bare = post_as(
        client,
        ada,
        f"/api/approvals/{approval.pk}/approve/",
        {"grant": {"scope": "user", "durationSeconds": 60}},
    )
    assert bare.status_code == 400, bare.content
    assert "constraint" in bare.json()["detail"]
    too_much = post_as(
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
        response = post_as(
            client, ada, f"/api/grants/{grant.pk}/revoke/", {"reason": "too broad"}
        )
        assert response.status_code == 200, response.content
    executor.settle(call.thread)
    execution.refresh_from_db()
    assert (execution.state, execution.error) == ("failed", "refused")
    assert not Refund.objects.filter(order_id="A-1003").exists()
    revoked = AuditEntry.objects.get(action="grant.revoked")
    assert (revoked.actor_label, revoked.after["reason"]) == ("ada", "too broad")
    second = post_as(client, ada, f"/api/grants/{grant.pk}/revoke/")
    assert second.status_code == 409


REFUND_ARGS = {"order_id": "A-1001", "amount": 25.0, "reason": "customer request"}
REQUIRE_APPROVAL = PolicyDecision(action="require_approval")


def _refund_tool():
    return Toolset(list(DEMO_TOOLS)).resolve("refund_order")


def _grant(approval, granted_by, **fields):
    values = {
        "tool_name": "refund_order",
        "agent": "demo",
        "scope": ApprovalGrant.Scope.AGENT,
        "constraint": grant_constraint({"ranges": {"amount": {"max": 50}}}),
        "granted_by": granted_by,
        "approval": approval,
        "expires_at": timezone.now() + timedelta(hours=1),
    }
    return ApprovalGrant.objects.create(**{**values, **fields})


def test_grant_constraint_makes_one_schema_of_exact_values_and_ranges():
    """``exact`` becomes ``const`` properties, each range a number bound; all must hold."""
    constraint = grant_constraint(
        {"exact": {"order_id": "A-1"}, "ranges": {"amount": {"max": 50, "gt": 0}}}
    )

    assert constraint == {
        "allOf": [
            {
                "type": "object",
                "properties": {"order_id": {"const": "A-1"}},
                "required": ["order_id"],
            },
            {
                "type": "object",
                "properties": {
                    "amount": {"type": "number", "maximum": 50, "exclusiveMinimum": 0}
                },
                "required": ["amount"],
            },
        ]
    }


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({}, "a grant needs a constraint"),
        ({"ranges": {"amount": {"most": 5}}}, "grant range 'amount' must be an object"),
        ({"ranges": {"amount": {"max": "5"}}}, "bounds must be numbers"),
        ({"ranges": {"amount": {"max": True}}}, "bounds must be numbers"),
        ({"schema": {"type": 5}}, "not valid JSON Schema 2020-12"),
        ({"exact": ["A-1"]}, "must be JSON objects"),
    ],
)
def test_grant_constraint_refuses_a_spec_that_allows_too_much_or_is_malformed(
    spec, message
):
    """A grant without a constraint would allow every call: refused, naming the bad part."""
    with pytest.raises(GrantRefused, match=message):
        grant_constraint(spec)


@pytest.mark.django_db
def test_grant_find_returns_a_live_grant_only_inside_its_constraint(approval, approver):
    """Inside ``amount <= 50`` the grant allows the call; 60 or an expired grant do not."""
    grant = _grant(approval, approver)
    thread, tool = approval.thread, _refund_tool()

    def found(arguments):
        return grant_find(
            tool=tool,
            agent="demo",
            thread=thread,
            arguments=arguments,
            decision=REQUIRE_APPROVAL,
        )

    assert found(REFUND_ARGS) == grant
    assert found({**REFUND_ARGS, "amount": 60.0}) is None
    assert grant_refusal(
        grant=grant,
        tool=tool,
        agent="demo",
        thread=thread,
        arguments={**REFUND_ARGS, "amount": 60.0},
        decision=REQUIRE_APPROVAL,
    ) == (f"the arguments are outside grant {grant.pk}'s constraint")
    grant.expires_at = timezone.now() - timedelta(seconds=1)
    grant.save(update_fields=["expires_at"])
    assert found(REFUND_ARGS) is None


@pytest.mark.django_db
def test_grant_refusal_names_why_the_granter_could_not_approve_alone(
    approval, approver
):
    """A grant stands in for one approval: two approvals, deny or other groups refuse it."""
    grant = _grant(approval, approver)
    thread, tool = approval.thread, _refund_tool()

    def refusal(decision):
        return grant_refusal(
            grant=grant,
            tool=tool,
            agent="demo",
            thread=thread,
            arguments=REFUND_ARGS,
            decision=decision,
        )

    assert refusal(REQUIRE_APPROVAL) is None
    assert refusal(PolicyDecision(action="require_approval", approvals_required=2)) == (
        "the call needs 2 approvals; a grant stands in for one approver only"
    )
    assert refusal(PolicyDecision(action="deny")) == "the tool's policy denies the call"
    assert refusal(PolicyDecision(action="require_approval", groups=("finance",))) == (
        "the granter 'ada' is not in the policy's approver groups"
    )


@pytest.mark.django_db
def test_grant_revoke_needs_the_decide_permission_and_happens_once(
    approval, approver, user
):
    """Revoking is audited once; a second revoke and a user without the permission are refused."""
    grant = _grant(approval, approver)

    with pytest.raises(ApprovalPermissionDenied, match="may not revoke grants"):
        grant_revoke(grant=grant, revoked_by=user)
    revoked = grant_revoke(grant=grant, revoked_by=approver, reason="too broad")

    assert (revoked.revoked_by, revoked.revoke_reason) == (approver, "too broad")
    assert AuditEntry.objects.filter(action="grant.revoked").count() == 1
    with pytest.raises(ApprovalAlreadyDecided, match="was already revoked"):
        grant_revoke(grant=grant, revoked_by=approver)
