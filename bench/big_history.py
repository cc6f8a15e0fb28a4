"""B9: an AG-UI POST carrying a 10,000-message history, vs parsing and inserting the same rows.

A client (``HttpAgent``) sends its whole conversation with every run. Measured:
server time from the request to the response's headers (the history parsed,
validated, its 10,000 messages stored, the run created) for ``POST /agui/demo/``
through the Django test client on the bench database. Baseline in the same run:
``json.loads`` of the same body plus one ``bulk_create`` of the same 10,000
Message rows, the least any server storing them must do.

    python -m bench.big_history
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from bench.common import Row, bench_user, print_rows, save_rows, setup_django

MESSAGES = 10_000


def _body() -> str:
    messages: list[dict[str, Any]] = []
    for i in range(MESSAGES // 2):
        messages.append({"id": f"u{i}", "role": "user", "content": f"question {i}"})
        messages.append(
            {"id": f"a{i}", "role": "assistant", "content": f"answer number {i}"}
        )
    messages[-1] = {"id": "last", "role": "user", "content": "weather in Oslo?"}
    return json.dumps(
        {
            "threadId": str(uuid.uuid4()),
            "runId": str(uuid.uuid4()),
            "state": {},
            "messages": messages,
            "tools": [],
            "context": [],
            "forwardedProps": {},
        }
    )


def ours(user: Any) -> float:
    """Seconds from ``POST /agui/demo/`` to its response headers."""
    from django.test import Client
    from rest_framework.authtoken.models import Token

    token, _ = Token.objects.get_or_create(user=user)
    client = Client(HTTP_AUTHORIZATION=f"Token {token.key}")
    body = _body()
    start = time.perf_counter()
    response = client.post(
        "/agui/demo/",
        body,
        content_type="application/json",
        HTTP_HOST="127.0.0.1",
        secure=True,
    )
    elapsed = time.perf_counter() - start
    assert response.status_code == 200, response.content[:500]
    return elapsed


def baseline(user: Any) -> float:
    """Seconds to ``json.loads`` the same body and ``bulk_create`` its messages."""
    from threads.models import Message, Thread

    body = _body()
    start = time.perf_counter()
    data = json.loads(body)
    thread = Thread.objects.create(thread_id=data["threadId"], owner=user)
    Message.objects.bulk_create(
        [
            Message(
                thread=thread,
                message_id=m["id"],
                role=m["role"],
                content=m["content"],
                position=1,
            )
            for m in data["messages"]
        ],
        batch_size=1000,
    )
    return time.perf_counter() - start


def main() -> list[Row]:
    """Medians of ``BENCH_REPEAT`` (3) interleaved runs of each: one run swings with load."""
    import os
    import statistics

    setup_django()
    user = bench_user()
    repeat = max(1, int(os.environ.get("BENCH_REPEAT") or 3))
    base: list[float] = []
    mine: list[float] = []
    for _ in range(repeat):
        base.append(baseline(user))
        mine.append(ours(user))
    return [
        Row(
            "B9",
            f"AG-UI POST, {MESSAGES:,}-message history: s to headers",
            statistics.median(mine),
            statistics.median(base),
            "s",
            target="< 2 s",
            note=f"medians of {repeat}; baseline = json.loads + bulk_create of the same rows",
        )
    ]


if __name__ == "__main__":
    rows = main()
    print_rows(rows)
    save_rows("b9", rows)
