"""B10: the approval queue with 1,000 pending requests.

Server time of ``GET /approvals/`` (the first page, as a decider who may decide
every request sees it: facts, risk, context for each card on the page) against a
bare paginated list of the same requests (``GET /bench/pending/``: Django's
``ListView``, 25 a page, one line each). Both run in this process through
Django's test client against the bench database (PostgreSQL), so the figure is
server time only: no network, no browser. Target: under 1 s.

    python -m bench.queue
"""

from __future__ import annotations

import json
import time
from datetime import timedelta

from bench.common import Row, median, print_rows, save_rows, setup_django

PENDING = 1000
REPEAT = 7
TITLE = "bench-queue"


def seed() -> None:
    """Make exactly :data:`PENDING` pending refund requests (threads titled ``bench-queue``)."""
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from approvals.models import ApprovalRequest
    from threads.models import Run, Thread, ToolCall

    owner, _ = get_user_model().objects.get_or_create(username="bench-requester")
    ApprovalRequest.objects.filter(status="pending").exclude(
        thread__title=TITLE
    ).update(status="cancelled")
    have = ApprovalRequest.objects.filter(thread__title=TITLE, status="pending").count()
    now = timezone.now()
    for index in range(have, PENDING):
        thread = Thread.objects.create(owner=owner, title=TITLE, agent="demo")
        run = Run.objects.create(
            thread=thread,
            status=Run.Status.AWAITING_TOOLS,
            agent="demo",
            pending_tool_call_ids=[f"q{index}"],
        )
        args = {"order_id": "A-1001", "amount": float(index % 50) + 0.5, "reason": "r"}
        call = ToolCall.objects.create(
            thread=thread,
            run=run,
            tool_call_id=f"q{index}",
            name="refund_order",
            arguments_text=json.dumps(args),
            arguments=args,
            state=ToolCall.State.AWAITING_APPROVAL,
        )
        ApprovalRequest.objects.create(
            tool_call=call,
            thread=thread,
            run=run,
            tool_name="refund_order",
            is_destructive=True,
            requested_by=owner,
            proposed_arguments=args,
            expires_at=now + timedelta(hours=1, seconds=index),
        )
    ApprovalRequest.objects.filter(thread__title=TITLE, status="pending").update(
        expires_at=now + timedelta(hours=2)
    )


def server_seconds(client: object, path: str) -> float:
    """Return the median seconds ``client`` takes to GET ``path`` (after a warm-up)."""
    samples = []
    client.get(path, secure=True)  # type: ignore[attr-defined]
    for _ in range(REPEAT):
        start = time.perf_counter()
        response = client.get(path, secure=True)  # type: ignore[attr-defined]
        samples.append(time.perf_counter() - start)
        assert response.status_code == 200, (path, response.status_code)
    return median(samples)


def main() -> list[Row]:
    setup_django()
    from django.test import Client

    from approvals.models import ApprovalRequest
    from bench.common import bench_user

    seed()
    pending = ApprovalRequest.objects.filter(status="pending").count()
    client = Client(HTTP_HOST="localhost")
    client.force_login(bench_user())
    ours = server_seconds(client, "/approvals/")
    baseline = server_seconds(client, "/bench/pending/")
    last = server_seconds(client, f"/approvals/?page={PENDING // 25}")
    return [
        Row(
            "B10",
            f"queue page 1 with {pending:,} pending",
            ours * 1000,
            baseline * 1000,
            "ms",
            target="< 1,000 ms",
            note="server time; baseline: bare paginated ListView",
        ),
        Row(
            "B10",
            f"queue page {PENDING // 25} with {pending:,} pending",
            last * 1000,
            baseline * 1000,
            "ms",
            target="< 1,000 ms",
        ),
    ]


if __name__ == "__main__":
    result = main()
    print_rows(result)
    save_rows("b10", result)
