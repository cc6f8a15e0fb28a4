"""Governance helpers: deciders in groups, tool policies, a refund held for approval."""

from __future__ import annotations

from django.contrib.auth.models import Group, Permission

from approvals.models import ApprovalRequest, ToolPolicy
from orchestration.pipeline import approval_decide
from threads.models import ToolCall
from threads.services import message_post, thread_create


def decider(django_user_model, username, *groups):
    """Create ``username`` with the decide, view and refund permissions, in ``groups``."""
    user = django_user_model.objects.create_user(username=username, password="pw-1")
    user.user_permissions.add(
        Permission.objects.get(codename="decide_approvalrequest"),
        Permission.objects.get(codename="view_approvalrequest"),
        Permission.objects.get(codename="add_refund"),
    )
    for name in groups:
        user.groups.add(Group.objects.get_or_create(name=name)[0])
    return django_user_model.objects.get(pk=user.pk)


def refund_policy(**fields):
    """Create a ``refund_order`` policy routed to ``groups`` (default ``["finance"]``)."""
    groups = fields.pop("groups", ["finance"])
    policy = ToolPolicy.objects.create(tool_name="refund_order", **fields)
    policy.groups.set([Group.objects.get_or_create(name=g)[0] for g in groups])
    return policy


def held_refund(user, executor, text="refund order A-1001 25.00", agent="demo"):
    """Run ``agent`` on ``text`` until it settles; return its ``refund_order`` call."""
    thread = thread_create(owner=user, title="refund", agent=agent)
    message_post(thread=thread, content=text)
    executor.settle(thread)
    return ToolCall.objects.get(thread=thread, name="refund_order")


def approve_as(approval, user, **kwargs):
    """Approve a fresh copy of ``approval`` as ``user``; return the decided request."""
    return approval_decide(
        approval=ApprovalRequest.objects.get(pk=approval.pk),
        decided_by=user,
        decision="approve",
        **kwargs,
    )


def post_as(client, user, path, body=None):
    """POST JSON ``body`` to ``path`` logged in as ``user``; return the response."""
    client.force_login(user)
    return client.post(path, body or {}, content_type="application/json")


def get_as(client, user, path):
    """GET ``path`` logged in as ``user``; return the response."""
    client.force_login(user)
    return client.get(path)
