"""``manage.py audit_export --output bundle.zip``: the audit chain as a verifiable bundle.

The zip holds ``entries.jsonl`` (one entry a line, chain order), ``head.json``
(length, last hash, key id, mac), ``VERIFY.md`` (how to check it) and
``verify.py`` (``approvals.auditchain``, standard library only), so an auditor
verifies it offline with the audit key and no Django. docs/audit.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from approvals.services import audit_export


class Command(BaseCommand):
    help = "Write the audit chain, its head and an offline verifier to a zip bundle."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--output",
            required=True,
            help="the bundle to write (a .zip path; an existing file is refused)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        output = Path(options["output"])
        if output.exists():
            raise CommandError(f"--output {str(output)!r} exists; name a new file")
        if not output.parent.is_dir():
            raise CommandError(
                f"--output {str(output)!r}: folder {str(output.parent)!r} does not exist"
            )
        written = audit_export(output=output)
        self.stdout.write(f"wrote {written} audit entries and the head to {output}")
