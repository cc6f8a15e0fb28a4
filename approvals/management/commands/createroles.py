"""Create the groups ``operator``, ``approver`` and ``admin`` (and, optionally, demo users).

docs/governance.md "Roles and permissions" says what each role may do. Idempotent: each run
sets the groups' permissions to exactly the lists below; existing users are never
changed.
"""

from __future__ import annotations

import secrets
from typing import Any, Final

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.utils.module_loading import import_string

from approvals.models import DECIDE_PERMISSION

#: What an operator needs: start threads, post messages, watch their own threads
#: (every signed-in user can; the group makes the role explicit and assignable).
OPERATOR_PERMISSIONS: Final = (
    "threads.add_thread",
    "threads.view_thread",
    "threads.add_message",
    "threads.view_message",
)
#: An approver also sees the queue and decides; the tools' own permissions (such
#: as ``demo.add_refund``) are added from the configured toolsets.
APPROVER_PERMISSIONS: Final = (
    *OPERATOR_PERMISSIONS,
    "approvals.view_approvalrequest",
    DECIDE_PERMISSION,
    "approvals.view_toolexecution",
)
#: Apps whose every permission the admin group holds (its users are also staff).
ADMIN_APPS: Final = ("threads", "approvals", "demo", "authtoken")
ADMIN_EXTRA: Final = (
    "auth.view_user",
    "auth.add_user",
    "auth.change_user",
    "auth.view_group",
)
#: Permissions of the admin apps the admin group does not get: deciding outside
#: the groups a request is routed to would let an admin bypass group routing
#: (grant it to a person explicitly when that is wanted).
ADMIN_WITHHELD: Final = frozenset({"approvals.decide_any_group"})
#: Demo user name -> (group, is_staff).
DEMO_USERS: Final = {
    "demo-operator": ("operator", False),
    "demo-approver": ("approver", False),
    "demo-admin": ("admin", True),
}


def tool_permissions() -> list[str]:
    """Return the Django permissions the configured agents' tools require, sorted.

    Read from each agent's ``toolsets`` (``Tool.permission``, e.g. ``demo.add_refund``);
    tools from MCP servers declare none. A toolset path that does not import is
    skipped (the system checks report it).
    """
    found: set[str] = set()
    for config in getattr(settings, "COUNTERSIGN_AGENTS", {}).values():
        for path in config.get("toolsets") or ():
            try:
                tools = import_string(path)
            except ImportError:
                continue
            found.update(t.permission for t in tools if getattr(t, "permission", None))
    return sorted(found)


def _permissions(names: list[str]) -> list[Permission]:
    """Return the permissions named ``app_label.codename``; raise naming any unknown."""
    wanted = {tuple(name.split(".", 1)) for name in names}
    found = [
        p
        for p in Permission.objects.select_related("content_type")
        if (p.content_type.app_label, p.codename) in wanted
    ]
    missing = wanted - {(p.content_type.app_label, p.codename) for p in found}
    if missing:
        raise CommandError(
            "unknown permissions: "
            + ", ".join(sorted(".".join(m) for m in missing))
            + "; run 'manage.py migrate' first"
        )
    return found


def role_permissions() -> dict[str, list[str]]:
    """Return each role's permission names (``app_label.codename``)."""
    admin = [
        f"{p.content_type.app_label}.{p.codename}"
        for p in Permission.objects.select_related("content_type").filter(
            content_type__app_label__in=ADMIN_APPS
        )
        if f"{p.content_type.app_label}.{p.codename}" not in ADMIN_WITHHELD
    ]
    return {
        "operator": list(OPERATOR_PERMISSIONS),
        "approver": [*APPROVER_PERMISSIONS, *tool_permissions()],
        "admin": sorted({*admin, *ADMIN_EXTRA, *tool_permissions()}),
    }


class Command(BaseCommand):
    help = (
        "Create the groups operator, approver and admin with their permissions; with "
        "--demo-users also the users demo-operator, demo-approver and demo-admin, "
        "printing their passwords once."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--demo-users",
            action="store_true",
            help="Also create one demo user per role (passwords printed once).",
        )

    def handle(self, *args: Any, demo_users: bool, **options: Any) -> None:
        with transaction.atomic():
            groups: dict[str, Group] = {}
            for role, names in role_permissions().items():
                group, created = Group.objects.get_or_create(name=role)
                group.permissions.set(_permissions(names))
                groups[role] = group
                self.stdout.write(
                    f"{'Created' if created else 'Updated'} group {role!r}: "
                    f"{len(names)} permissions"
                )
            if demo_users:
                self._demo_users(groups)

    def _demo_users(self, groups: dict[str, Group]) -> None:
        users = get_user_model()
        created = 0
        for username, (role, staff) in DEMO_USERS.items():
            if users.objects.filter(username=username).exists():
                self.stdout.write(
                    f"User {username!r} exists; left unchanged (reset its password "
                    f"with: .venv/bin/python manage.py changepassword {username})."
                )
                continue
            password = secrets.token_urlsafe(12)
            user = users.objects.create_user(
                username=username, password=password, is_staff=staff
            )
            user.groups.add(groups[role])
            created += 1
            self.stdout.write(
                self.style.SUCCESS(
                    f"Created {role} {username!r} with password: {password}"
                )
            )
        if created:
            self.stdout.write("These passwords are shown only once.")
