"""``manage.py audit_verify``: check the audit chain and report its first broken link.

Exit status 0 when intact, 1 when broken (the message names the entry, its
position and what is wrong), so a cron job or a CI step can alert on it.
docs/audit.md. Implements SEC-04.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from approvals.services import audit_verify


class Command(BaseCommand):
    help = "Verify the audit chain (entries, links and head); exit 1 at the first broken link."

    def handle(self, *args: Any, **options: Any) -> None:
        result = audit_verify()
        link = result.first_broken
        if link is None:
            self.stdout.write(f"audit chain intact: {result.entries} entries")
            return
        where = (
            f"entry id {link.entry_id}" if link.entry_id is not None else "chain head"
        )
        raise CommandError(
            f"audit chain broken at position {link.position} ({where}): {link.reason}",
            returncode=1,
        )
