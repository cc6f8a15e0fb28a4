"""Record a demo thread: a refund request whose ``refund_order`` call awaits approval.

``--reset`` first empties the demo refund ledger, so the demo order can be refunded
again once what is left reaches zero (``demo.ledger.ledger_reset``).
"""

from __future__ import annotations

import time
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from demo.ledger import ledger_reset
from threads.execution import uses_celery, wait_embedded
from threads.models import Run, ToolCall
from threads.services import message_post, thread_create


class Command(BaseCommand):
    help = (
        "Run the scripted demo agent on 'refund order A-1001 25.00' for a user (default: "
        "admin) and wait until its refund_order call is pending approval. --reset "
        "first deletes every demo refund, so the orders can be refunded again."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--user", default="admin")
        parser.add_argument("--message", default="refund order A-1001 25.00")
        parser.add_argument("--timeout", type=float, default=60.0)
        parser.add_argument(
            "--reset",
            action="store_true",
            help="delete the demo refund ledger (every demo.Refund) first",
        )

    def handle(
        self,
        *args: Any,
        user: str,
        message: str,
        timeout: float,
        reset: bool = False,
        **options: Any,
    ) -> None:

        owner = get_user_model().objects.filter(username=user).first()
        if owner is None:
            raise CommandError(
                f"user {user!r} does not exist; run '.venv/bin/python manage.py ensureadmin'"
            )
        if reset:
            deleted = ledger_reset()
            self.stdout.write(
                f"Reset the demo refund ledger ({deleted} refunds deleted)."
            )
        thread = thread_create(owner=owner, title=f"Demo: {message}")
        message_post(thread=thread, content=message)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not uses_celery():
                wait_embedded(timeout=max(0.1, deadline - time.monotonic()))
            latest = thread.runs.order_by("-created_at", "-id").first()
            if (
                latest is not None
                and latest.status not in Run.ACTIVE_STATUSES
                # Under Celery a call auto-approved by policy is still on its way
                # (pending, approved, executing) after the run that proposed it ended.
                and not ToolCall.objects.filter(
                    thread=thread, state__in=["pending", "approved", "executing"]
                ).exists()
            ):
                break
            time.sleep(0.2)
        calls = ", ".join(
            f"{c.name}={c.state}"
            for c in ToolCall.objects.filter(thread=thread).order_by("position")
        )
        self.stdout.write(
            self.style.SUCCESS(
                f"Recorded thread {thread.thread_id} ({thread.events.count()} events; calls: {calls})"
            )
        )
