"""Fixtures for the approval workflow."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission

from threads.models import ToolCall
from threads.services import message_post, thread_create


@pytest.fixture
def approver(django_user_model):
    """Return a staff user holding approvals.decide_approvalrequest (and admin view rights)."""
    user = django_user_model.objects.create_user(
        username="ada", password="pw-ada-1", is_staff=True
    )
    user.user_permissions.add(
        Permission.objects.get(codename="decide_approvalrequest"),
        Permission.objects.get(codename="view_approvalrequest"),
        Permission.objects.get(codename="view_thread"),
        Permission.objects.get(codename="add_refund"),
    )
    return django_user_model.objects.get(pk=user.pk)


@pytest.fixture
def second_approver(django_user_model):
    """Return another user holding the decide permission."""
    user = django_user_model.objects.create_user(
        username="grace", password="pw-grace-1"
    )
    user.user_permissions.add(
        Permission.objects.get(codename="decide_approvalrequest"),
        Permission.objects.get(codename="add_refund"),
    )
    return django_user_model.objects.get(pk=user.pk)


@pytest.fixture
def pending_refund(user, executor):
    """Run the demo agent on a refund request until refund_order awaits approval."""
    thread = thread_create(owner=user, title="refund")
    message_post(thread=thread, content="refund order A-1001 25.00")
    executor.settle(thread)
    call = ToolCall.objects.filter(thread=thread, name="refund_order").first()
    log = executor.worker.log_path.read_text()[-3000:] if executor.worker else ""
    assert call is not None, (
        [(r.status, r.error_code, r.pending_tool_call_ids) for r in thread.runs.all()],
        list(ToolCall.objects.filter(thread=thread).values_list("name", "state")),
        log,
    )
    assert call.state == ToolCall.State.AWAITING_APPROVAL, (call.state, log)
    return call
