"""``manage.py createroles``: the operator, approver and admin groups, and demo users.

docs/governance.md "Roles and permissions"; SEC-02 (an approver can
authorize the demo refund: the decide permission and the tool's own).
"""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.contrib.auth import authenticate, get_user_model
from django.contrib.auth.models import Group
from django.core.management import call_command

pytestmark = pytest.mark.django_db


def _run(*args: str) -> str:
    out = StringIO()
    call_command("createroles", *args, stdout=out)
    return out.getvalue()


def _perms(group: str) -> set[str]:
    return {
        f"{p.content_type.app_label}.{p.codename}"
        for p in Group.objects.get(name=group).permissions.select_related(
            "content_type"
        )
    }


def test_createroles_gives_each_group_its_permissions():
    """operator starts and reads threads; approver also decides and holds the tool's
    permission; admin holds every app permission; nobody else gets the decide right."""
    output = _run()
    assert "Created group 'operator'" in output
    assert _perms("operator") == {
        "threads.add_thread",
        "threads.view_thread",
        "threads.add_message",
        "threads.view_message",
    }
    approver = _perms("approver")
    assert {
        "approvals.decide_approvalrequest",
        "approvals.view_approvalrequest",
        "demo.add_refund",
    } <= approver
    assert "approvals.decide_approvalrequest" not in _perms("operator")
    admin = _perms("admin")
    assert approver <= admin
    assert {"approvals.delete_approvalrequest", "auth.change_user"} <= admin

    # Idempotent: a second run updates, and restores a permission removed by hand.
    Group.objects.get(name="approver").permissions.clear()
    assert "Updated group 'approver'" in _run()
    assert _perms("approver") == approver
    assert Group.objects.count() == 3


def test_createroles_demo_users_print_passwords_once_and_can_act():
    """--demo-users creates one user per role with a working password, shown once."""
    output = _run("--demo-users")
    passwords = dict(re.findall(r"'(demo-\w+)' with password: (\S+)", output))
    assert sorted(passwords) == ["demo-admin", "demo-approver", "demo-operator"]
    users = get_user_model()
    for name, password in passwords.items():
        assert authenticate(username=name, password=password) is not None
    approver = users.objects.get(username="demo-approver")
    assert approver.has_perm("approvals.decide_approvalrequest")
    assert approver.has_perm("demo.add_refund")
    assert not approver.is_staff
    operator = users.objects.get(username="demo-operator")
    assert not operator.has_perm("approvals.decide_approvalrequest")
    admin = users.objects.get(username="demo-admin")
    assert admin.is_staff
    assert not admin.is_superuser
    assert admin.has_perm("approvals.decide_approvalrequest")

    again = _run("--demo-users")
    assert "password:" not in again
    assert "User 'demo-approver' exists; left unchanged" in again
    assert authenticate(username="demo-approver", password=passwords["demo-approver"])
