#!/usr/bin/env python3
"""Smoke test of a running prod-like stack (``make smoke`` starts and stops it).

Over HTTP and WebSocket only: a user and an API token are created with
``manage.py``; the refund flow runs end to end through the REST API
(thread → message → automatic lookup → approval request → approve → refund →
final answer) while a WebSocket logged in with a session cookie watches the
thread; the streamed events must equal the stored log (gapless ``seq``), the
refund must have happened once, ``/healthz`` must be ok and the workers' JSON log
lines must carry the run, thread and toolCallId. Exit status 0 on success.

Environment: ``PROD_LIKE_URL`` (http://127.0.0.1:8100), ``PROD_LIKE_DIR`` (logs),
plus the stack's own variables for ``manage.py``.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT))

from tests.prod.client import (  # noqa: E402
    EventWatcher,
    api_client,
    session_cookie,
    wait_until,
)

CREATE_USER = """
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token
users = get_user_model()
user, _ = users.objects.get_or_create(username="smoke")
user.is_staff = user.is_superuser = True
user.set_password({password!r})
user.save()
token, _ = Token.objects.get_or_create(user=user)
print(token.key)
"""


# A cent, so that runs against a kept database do not exhaust the order's total.
AMOUNT = "0.01"


def step(text: str) -> None:
    print(f"smoke: {text}", flush=True)


def create_user(password: str) -> str:
    """Create (or reset) the superuser ``smoke`` and return its API token."""
    out = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "shell",
            "-c",
            CREATE_USER.format(password=password),
        ],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip().splitlines()[-1]


def main() -> int:
    base = os.environ.get("PROD_LIKE_URL") or "http://127.0.0.1:8100"
    ws_base = base.replace("http://", "ws://", 1)
    started = time.monotonic()

    health = api_client(base, "").get("/healthz")
    assert health.status_code == 200, health.text
    assert health.json() == {"status": "ok", "database": "ok", "redis": "ok"}, (
        health.json()
    )
    step(f"healthz {health.json()}")

    password = secrets.token_urlsafe(16)
    token = create_user(password)
    api = api_client(base, token)
    cookie = session_cookie(base, "smoke", password)
    step("user, token and session ready")

    created = api.post("/api/threads/", json={"title": "smoke test", "agent": "demo"})
    assert created.status_code == 201, created.text
    thread_id = created.json()["threadId"]
    watcher = EventWatcher(ws_base, thread_id, cookie=cookie, origin=base)
    watcher.start()
    watcher.connected.wait(10)
    assert watcher.connects == 1, watcher.errors
    step(f"thread {thread_id}; WebSocket open")

    posted = api.post(
        f"/api/threads/{thread_id}/messages/",
        json={"content": f"refund order A-1001 {AMOUNT}"},
    )
    assert posted.status_code == 201, posted.text

    def pending_approval():
        page = api.get(
            "/api/approvals/", params={"thread": thread_id, "status": "pending"}
        )
        assert page.status_code == 200, page.text
        results = page.json()["results"]
        return results[0] if results else None

    approval = wait_until(pending_approval, timeout=60, what="a pending approval")
    assert approval["tool"] == "refund_order", approval
    assert approval["proposedArguments"]["order_id"] == "A-1001", approval
    step(f"approval {approval['id']} pending for {approval['toolCallId']}")

    decided = api.post(
        f"/api/approvals/{approval['id']}/approve/", json={"reason": "smoke"}
    )
    assert decided.status_code == 200, decided.text
    step("approved")

    watcher.wait_for(
        # One client-visible run per request: the first ends with the
        # refund's interrupt, the approval's continuation is the second.
        lambda w: (
            w.types().count("RUN_FINISHED") + w.types().count("RUN_ERROR") >= 2
            and "Refund done" in w.text()
        ),
        timeout=60,
        what="the continuation run's final answer on the WebSocket",
    )
    watcher.stop()
    assert "Refund done" in watcher.text(), watcher.text()
    assert not watcher.gaps, (watcher.gaps, watcher.errors)
    assert watcher.connects == 1, (watcher.gaps, watcher.errors)

    log = api.get(
        f"/api/threads/{thread_id}/events/", params={"after": 0, "limit": 1000}
    )
    assert log.status_code == 200, log.text
    stored = log.json()["results"]
    assert [e["seq"] for e in stored] == list(range(1, len(stored) + 1))
    assert watcher.events == stored, "WebSocket events differ from the stored log"
    step(f"{len(stored)} events streamed, equal to the log, gapless")

    calls = api.get("/api/tool-calls/", params={"thread": thread_id})
    assert calls.status_code == 200, calls.text
    states = {c["name"]: c["state"] for c in calls.json()["results"]}
    assert states == {"lookup_order": "succeeded", "refund_order": "succeeded"}, states

    run_dir = Path(os.environ.get("PROD_LIKE_DIR") or "/tmp/countersign-prod-like")
    tagged = []
    for path in run_dir.glob("worker*.log"):
        for line in path.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                record = json.loads(line)
                if record.get("thread") == thread_id:
                    tagged.append(record)
    assert any("run" in r for r in tagged), "no worker log line carries this run"
    assert any(r.get("toolCallId") == approval["toolCallId"] for r in tagged), (
        "no worker log line carries the refund's toolCallId"
    )
    step(f"{len(tagged)} JSON log lines tagged with the thread")
    step(f"OK in {time.monotonic() - started:.1f}s")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (AssertionError, TimeoutError, RuntimeError) as error:
        print(f"smoke: FAILED: {error!r}", file=sys.stderr)
        sys.exit(1)
