#!/usr/bin/env python3
"""Bounded, repeatable fault trials against the prod-like stack (``make chaos``).

    CHAOS_TRIALS=200 CHAOS_SEED=1 CHAOS_SECONDS=300 python scripts/chaos.py

Starts a ``redis-server`` of its own (``CHAOS_REDIS_PORT``, default 6390, no
persistence; restarting it never touches the machine's shared Redis) and the
prod-like stack (``scripts/prodlike.py``: uvicorn, workers, beat; ``PORT``,
``PROD_LIKE_DIR``, ``PROD_LIKE_DATABASE_URL``) on it, then runs trials in batches
of ``CHAOS_BATCH`` (10). A trial is one demo refund over the REST API: a thread, the
message ``refund order A-1001 0.01``, the automatic lookup, the approval request,
then a decision while a fault is injected. Each batch gets one stack fault chosen by
the seeded RNG, fired at a random moment (0-1.5 s) after the decisions start:

- ``none``;
- ``kill_child``: SIGKILL one prefork child of a worker;
- ``kill_master``: SIGKILL a worker master (and its session), then start it again
  as ``prodlike`` does;
- ``restart_redis``: shut the chaos Redis down (``nosave``: queued messages lost,
  or ``save``: kept), keep it down 0.2-2 s, start it again.

and each trial one decision mode: ``approve``; ``approve_twice`` (the same approve
POSTed again after the first answered); ``concurrent_approves`` (two at once);
``approve_vs_reject`` (at once); ``republish`` (approve, then the execute task
published twice more on the broker, a duplicate delivery).

After each trial: exactly one refund for an approved call and none for a rejected
one (the demo ledger, by the execution's idempotency key), one tool message and
one ``TOOL_CALL_RESULT`` per call, the thread settled (no run queued, running or
awaiting tools; every call in a final state) within ``CHAOS_STUCK_SECONDS`` (150) of
the decisions, the thread ending with the agent's final answer (its last run
finished, its last message the assistant's text; not owed while a call's outcome is
unknown), the ``code`` of every ``RUN_ERROR`` in its log, and the recovery time
(decisions sent -> thread settled). Prints a table per fault and decision, a total
and the RUN_ERROR codes seen; writes ``chaos-results.json`` in the run directory;
exits 1 on any duplicate, missing answer, stuck thread, 5xx answer or trial without
its final answer.
``CHAOS_FAULTS`` (a comma list) limits the faults drawn. ``CHAOS_SECONDS`` (300) bounds the run: no batch starts after it (trials not run
are reported).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import shutil
import signal
import socket
import sys
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import prodlike  # noqa: E402

from tests.prod.client import RedisServer  # noqa: E402

FAULTS = {"none": 1, "kill_child": 3, "kill_master": 2, "restart_redis": 3}
DECISIONS = (
    "approve",
    "approve_twice",
    "concurrent_approves",
    "approve_vs_reject",
    "republish",
)
SETTLED_RUN = {"finished", "error", "cancelled"}
FINAL_CALL = {
    "succeeded",
    "failed",
    "declined",
    "expired",
    "cancelled",
    "outcome_unknown",
}
AMOUNT = "0.01"


def knob(name: str, default: float) -> float:
    return float(os.environ.get(name) or default)


@dataclass
class Trial:
    """One refund under one fault and one decision mode, and what was found."""

    index: int
    fault: str
    decision: str
    thread_id: str = ""
    approval_id: int = 0
    statuses: list[int] = field(default_factory=list)
    refunds: int = 0
    expected_refunds: int = 0
    duplicates: int = 0
    missing: int = 0
    stuck: bool = False
    server_errors: int = 0
    outcome_unknown: int = 0
    recovery: float = 0.0
    #: The ``code`` of every ``RUN_ERROR`` in the thread's log, in order.
    error_codes: list[str] = field(default_factory=list)
    #: Whether the thread ends with the agent's answer: its last run finished and
    #: its last message is the assistant's text (not owed when a call's outcome is
    #: unknown: an operator resolves it first).
    answered: bool = False
    note: str = ""

    @property
    def unanswered(self) -> bool:
        """Whether the trial settled without the agent's final answer it was owed."""
        return not self.stuck and not self.outcome_unknown and not self.answered


def port_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def children(pid: int) -> list[int]:
    """Return the pids whose parent is ``pid`` (a prefork worker's pool children)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The command name is in parentheses and may hold spaces: split after it.
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid:
            found.append(int(entry.name))
    return found


class Chaos:
    """The stack under trial: its Redis, processes, database and an API client."""

    def __init__(self) -> None:
        self.directory = prodlike.run_dir()
        self.seed = int(knob("CHAOS_SEED", 1))
        self.rng = random.Random(self.seed)
        self.stuck_after = knob("CHAOS_STUCK_SECONDS", 150)
        wanted = int(knob("CHAOS_REDIS_PORT", 6390))
        port = wanted if port_free(wanted) else free_port()
        workdir = self.directory / "redis"
        workdir.mkdir(parents=True, exist_ok=True)
        self.redis = RedisServer(port=port, workdir=workdir)
        self.env: dict[str, str] = {}
        self.base = ""
        self.api: httpx.Client | None = None
        self.app: Any = None
        self.fault_log: list[str] = []

    # --- the stack -----------------------------------------------------------------

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.redis.start()
        os.environ["PROD_LIKE_REDIS_URL"] = self.redis.url
        # A trial posts many messages per minute with one token.
        os.environ.setdefault("API_MESSAGE_RATE", "100000/min")
        if prodlike.start() != 0:
            raise SystemExit("chaos: the prod-like stack did not start")
        self.env = prodlike.stack_env(self.directory)
        self.base = self.env["PROD_LIKE_URL"]
        os.environ.update(self.env)
        import django

        django.setup()
        # One line per HTTP request of the trials would bury the summary.
        logging.getLogger("httpx").setLevel(logging.WARNING)
        from config.celery import app
        from demo.ledger import ledger_reset

        self.app = app
        ledger_reset(order_id="A-1001")
        self.api = httpx.Client(
            base_url=self.base,
            headers={"Authorization": f"Token {api_token('chaos')}"},
            timeout=30,
        )

    def stop(self) -> None:
        if self.api is not None:
            self.api.close()
        prodlike.stop()
        self.redis.stop()

    def workers(self) -> dict[str, int]:
        return {
            name: int((self.directory / f"{name}.pid").read_text())
            for name in prodlike.commands()
            if name.startswith("worker") and (self.directory / f"{name}.pid").exists()
        }

    def restart_worker(self, name: str) -> None:
        """Start worker ``name`` again as prodlike does; wait for its ``ready.``."""
        log = self.directory / f"{name}.log"
        offset = log.stat().st_size if log.exists() else 0
        process = prodlike.spawn(
            self.directory, name, prodlike.commands()[name], self.env
        )
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            with open(log, "rb") as handle:
                handle.seek(offset)
                if b" ready." in handle.read():
                    return
            if process.poll() is not None:
                raise SystemExit(f"chaos: {name} exited on restart; see {log}")
            time.sleep(0.2)
        raise SystemExit(f"chaos: {name} not ready 90 s after its restart; see {log}")

    # --- faults ----------------------------------------------------------------------

    def inject(self, fault: str) -> None:
        """Inject ``fault`` now; return once the stack is whole again (restarted)."""
        if fault == "kill_child":
            name, master = self.rng.choice(sorted(self.workers().items()))
            pool = children(master)
            if pool:
                child = self.rng.choice(sorted(pool))
                os.kill(child, signal.SIGKILL)
                self.fault_log.append(f"SIGKILL child {child} of {name}")
        elif fault == "kill_master":
            name, master = self.rng.choice(sorted(self.workers().items()))
            os.kill(master, signal.SIGKILL)
            time.sleep(0.3)
            # What a supervisor restarting a dead container does: nothing of the
            # old worker survives it (pool children are killed with their session).
            with contextlib.suppress(ProcessLookupError):
                os.killpg(master, signal.SIGKILL)
            self.fault_log.append(f"SIGKILL master {master} of {name}; restarted")
            self.restart_worker(name)
        elif fault == "restart_redis":
            keep = self.rng.random() < 0.5
            down = self.rng.uniform(0.2, 2.0)
            if keep:
                self.redis.restart_keeping_data(down_for=down)
            else:
                self.redis.shutdown_nosave()
                time.sleep(down)
                self.redis.start()
            self.fault_log.append(
                f"Redis restarted ({'save' if keep else 'nosave'}, down {down:.1f} s)"
            )

    # --- one batch -------------------------------------------------------------------

    def prepare(self, trial: Trial) -> None:
        assert self.api is not None
        created = self.api.post(
            "/api/threads/", json={"title": f"chaos {trial.index}", "agent": "demo"}
        )
        created.raise_for_status()
        trial.thread_id = created.json()["threadId"]
        posted = self.api.post(
            f"/api/threads/{trial.thread_id}/messages/",
            json={"content": f"refund order A-1001 {AMOUNT}"},
        )
        posted.raise_for_status()

    def wait_pending(self, trials: list[Trial], timeout: float = 90) -> None:
        from approvals.models import ApprovalRequest

        deadline = time.monotonic() + timeout
        waiting = {t.thread_id: t for t in trials}
        while waiting and time.monotonic() < deadline:
            found = ApprovalRequest.objects.filter(
                thread__thread_id__in=list(waiting), status="pending"
            ).values_list("thread__thread_id", "pk")
            for thread_id, pk in found:
                waiting.pop(thread_id).approval_id = pk
            time.sleep(0.1)
        for trial in waiting.values():
            trial.stuck = True
            trial.note = "no approval request before the decision"

    def decide(self, trial: Trial) -> None:
        assert self.api is not None
        url = f"/api/approvals/{trial.approval_id}"
        approve = (f"{url}/approve/", {"reason": "chaos"})
        reject = (f"{url}/reject/", {"reason": "chaos rejects"})
        plan = {
            "approve": [[approve]],
            "approve_twice": [[approve], [approve]],
            "concurrent_approves": [[approve, approve]],
            "approve_vs_reject": [[approve, reject]],
            "republish": [[approve]],
        }[trial.decision]
        for wave in plan:
            with ThreadPoolExecutor(len(wave)) as pool:
                answers = list(pool.map(self._post, wave))
            trial.statuses.extend(answers)
        if trial.decision == "republish":
            from threads.models import ToolCall

            pk = ToolCall.objects.get(approval__pk=trial.approval_id).pk
            for _ in range(2):
                self.publish("approvals.tasks.execute_tool_call", {"tool_call_pk": pk})

    def publish(self, task: str, kwargs: dict[str, Any]) -> None:
        """Publish ``task`` on the broker, retrying while the chaos Redis is down."""
        from kombu.exceptions import OperationalError

        deadline = time.monotonic() + 60
        while True:
            try:
                self.app.send_task(task, kwargs=kwargs)
                return
            except OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def decide_safely(self, trial: Trial) -> None:
        """:meth:`decide`, a harness failure recorded on the trial (the batch goes on)."""
        try:
            self.decide(trial)
        except Exception as error:  # reported with the trial, counted as a 5xx
            trial.statuses.append(0)
            trial.note = f"decision failed: {type(error).__name__}: {error}"

    def _post(self, request: tuple[str, dict[str, str]]) -> int:
        assert self.api is not None
        try:
            return self.api.post(request[0], json=request[1]).status_code
        except httpx.HTTPError:
            return 0

    def settled(self, trial: Trial) -> bool:
        from threads.models import Message, Run, ToolCall

        if Run.objects.filter(thread__thread_id=trial.thread_id).exclude(
            status__in=SETTLED_RUN
        ):
            return False
        calls = list(
            ToolCall.objects.filter(thread__thread_id=trial.thread_id).values_list(
                "tool_call_id", "state"
            )
        )
        if not calls or any(state not in FINAL_CALL for _, state in calls):
            return False
        answered = set(
            Message.objects.filter(
                thread__thread_id=trial.thread_id, role="tool"
            ).values_list("tool_call_id", flat=True)
        )
        return {c for c, _ in calls} <= answered

    def check(self, trial: Trial) -> None:
        """Count refunds, tool answers and results of ``trial``'s thread."""
        from approvals.models import ApprovalRequest, ToolExecution
        from demo.models import Refund
        from threads.models import Event, Message, ToolCall

        thread = trial.thread_id
        approval = ApprovalRequest.objects.get(pk=trial.approval_id)
        trial.expected_refunds = 1 if approval.status == "approved" else 0
        keys = ToolExecution.objects.filter(
            tool_call__thread__thread_id=thread, tool_call__name="refund_order"
        ).values_list("idempotency_key", flat=True)
        trial.refunds = Refund.objects.filter(idempotency_key__in=list(keys)).count()
        calls = list(
            ToolCall.objects.filter(thread__thread_id=thread).values_list(
                "tool_call_id", "state"
            )
        )
        trial.outcome_unknown = sum(s == "outcome_unknown" for _, s in calls)
        answers: dict[str, int] = defaultdict(int)
        for call_id in Message.objects.filter(
            thread__thread_id=thread, role="tool"
        ).values_list("tool_call_id", flat=True):
            answers[str(call_id)] += 1
        results: dict[str, int] = defaultdict(int)
        for payload in Event.objects.filter(
            thread__thread_id=thread, type="TOOL_CALL_RESULT"
        ).values_list("payload", flat=True):
            results[str(payload.get("toolCallId"))] += 1
        ids = [c for c, _ in calls]
        trial.duplicates = (
            max(0, trial.refunds - 1)
            + sum(max(0, answers[c] - 1) for c in ids)
            + sum(max(0, results[c] - 1) for c in ids)
        )
        # An approved refund not made (and not left to an operator) is missing too.
        lost_refund = (
            trial.expected_refunds == 1
            and trial.refunds == 0
            and trial.outcome_unknown == 0
        )
        # A stuck thread is counted as stuck only; missing is a settled thread's gap.
        if not trial.stuck:
            trial.missing = sum(answers[c] == 0 for c in ids) + int(lost_refund)
        trial.error_codes = [
            str(payload.get("code"))
            for payload in Event.objects.filter(
                thread__thread_id=thread, type="RUN_ERROR"
            )
            .order_by("seq")
            .values_list("payload", flat=True)
        ]
        trial.answered = final_answer(thread)
        if trial.unanswered and not trial.note:
            trial.note = f"no final answer; RUN_ERROR codes {trial.error_codes}"
        if approval.status == "rejected" and trial.refunds:
            trial.duplicates += trial.refunds
            trial.note = "refunded although rejected"
        trial.server_errors = sum(s >= 500 or s == 0 for s in trial.statuses)

    def batch(self, trials: list[Trial], fault: str) -> None:
        from django.db import close_old_connections

        close_old_connections()
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(self.prepare, trials))
        self.wait_pending(trials)
        ready = [t for t in trials if t.approval_id]
        delay = self.rng.uniform(0.0, 1.5)

        failures: list[BaseException] = []

        def fire() -> None:
            time.sleep(delay)
            try:
                self.inject(fault)
            except BaseException as error:  # re-raised below, in the main thread
                failures.append(error)

        injector = threading.Thread(target=fire, daemon=True)
        started = time.monotonic()
        injector.start()
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(self.decide_safely, ready))
        injector.join()
        if failures:
            raise failures[0]
        waiting = list(ready)
        while waiting and time.monotonic() - started < self.stuck_after:
            close_old_connections()
            for trial in list(waiting):
                if self.settled(trial):
                    trial.recovery = time.monotonic() - started
                    waiting.remove(trial)
            time.sleep(0.25)
        for trial in waiting:
            trial.stuck = True
            trial.recovery = time.monotonic() - started
            trial.note = self.describe(trial)
        for trial in ready:
            self.check(trial)

    def describe(self, trial: Trial) -> str:
        from threads.models import Run, ToolCall

        runs = list(
            Run.objects.filter(thread__thread_id=trial.thread_id).values_list(
                "status", flat=True
            )
        )
        calls = list(
            ToolCall.objects.filter(thread__thread_id=trial.thread_id).values_list(
                "name", "state", "execution__state"
            )
        )
        return f"runs {runs} calls {calls}"


def final_answer(thread_id: str) -> bool:
    """Return whether ``thread_id`` ends with the agent's answer.

    Its latest run finished, and its last message is the assistant's non-empty
    text (the reply to the last tool result, not a call).
    """
    from threads.models import Message, Run, ToolCall

    run = Run.objects.filter(thread__thread_id=thread_id).order_by("id").last()
    last = (
        Message.objects.filter(thread__thread_id=thread_id).order_by("position").last()
    )
    return (
        run is not None
        and run.status == "finished"
        and last is not None
        and last.role == "assistant"
        and bool(last.content)
        and not ToolCall.objects.filter(
            thread__thread_id=thread_id, parent_message_id=last.message_id
        ).exists()
    )


def api_token(username: str) -> str:
    """Create (or reuse) superuser ``username`` without a password; return its API token."""
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    user, _ = get_user_model().objects.get_or_create(username=username)
    user.is_staff = user.is_superuser = True
    user.set_unusable_password()
    user.save()
    token, _ = Token.objects.get_or_create(user=user)
    return str(token.key)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def summary(trials: list[Trial]) -> list[str]:
    """Return the table: one row per fault, per decision, and the total."""
    rows = [
        "group                 trials  dup  missing  stuck  5xx  unknown  "
        "no answer  worst s"
    ]

    def row(name: str, group: list[Trial]) -> str:
        worst = max((t.recovery for t in group), default=0.0)
        return (
            f"{name:21} {len(group):6} {sum(t.duplicates for t in group):4} "
            f"{sum(t.missing for t in group):8} {sum(t.stuck for t in group):6} "
            f"{sum(t.server_errors for t in group):4} "
            f"{sum(t.outcome_unknown for t in group):8} "
            f"{sum(t.unanswered for t in group):10} {worst:8.1f}"
        )

    for name in FAULTS:
        rows.append(row(f"fault {name}", [t for t in trials if t.fault == name]))
    for name in DECISIONS:
        rows.append(row(name, [t for t in trials if t.decision == name]))
    rows.append(row("TOTAL", trials))
    codes: dict[str, int] = defaultdict(int)
    for trial in trials:
        for code in trial.error_codes:
            codes[code] += 1
    rows.append(
        "RUN_ERROR codes: "
        + (", ".join(f"{code} {n}" for code, n in sorted(codes.items())) or "none")
    )
    return rows


def main() -> int:
    if shutil.which("redis-server") is None:
        print("chaos: redis-server is not installed", file=sys.stderr)
        return 2
    wanted = int(knob("CHAOS_TRIALS", 200))
    size = int(knob("CHAOS_BATCH", 10))
    budget = knob("CHAOS_SECONDS", 300)
    chaos = Chaos()
    print(
        f"chaos: {wanted} trials, seed {chaos.seed}, batches of {size}, budget "
        f"{budget:.0f} s, stuck after {chaos.stuck_after:.0f} s, Redis port "
        f"{chaos.redis.port}",
        flush=True,
    )
    trials: list[Trial] = []
    began = time.monotonic()
    try:
        chaos.start()
        chosen = {
            name: weight
            for name, weight in FAULTS.items()
            if name in (os.environ.get("CHAOS_FAULTS") or ",".join(FAULTS)).split(",")
        }
        if not chosen:
            raise SystemExit(f"chaos: CHAOS_FAULTS names none of {sorted(FAULTS)}")
        faults, weights = zip(*chosen.items(), strict=True)
        while len(trials) < wanted and time.monotonic() - began < budget:
            fault = chaos.rng.choices(faults, weights)[0]
            batch = [
                Trial(len(trials) + i, fault, chaos.rng.choice(DECISIONS))
                for i in range(min(size, wanted - len(trials)))
            ]
            chaos.batch(batch, fault)
            trials.extend(batch)
            bad = [
                t for t in batch if t.duplicates or t.missing or t.stuck or t.unanswered
            ]
            print(
                f"chaos: {len(trials):5} trials, {time.monotonic() - began:6.0f} s, "
                f"fault {fault:13} worst {max(t.recovery for t in batch):5.1f} s"
                + (f", {len(bad)} BAD" if bad else ""),
                flush=True,
            )
            for trial in bad:
                print(f"chaos:   trial {trial.index} {trial.decision}: {trial.note}")
    finally:
        chaos.stop()
    elapsed = time.monotonic() - began
    print(
        f"\nchaos: {len(trials)} of {wanted} trials in {elapsed:.0f} s (seed {chaos.seed})"
    )
    for line in summary(trials):
        print(line)
    load = (
        Path("/proc/loadavg").read_text().split()[:3]
        if Path("/proc/loadavg").exists()
        else []
    )
    (chaos.directory / "chaos-results.json").write_text(
        json.dumps(
            {
                "seed": chaos.seed,
                "elapsed": elapsed,
                "load": load,
                "faults": chaos.fault_log,
                "trials": [asdict(t) for t in trials],
            },
            indent=1,
        )
    )
    print(f"chaos: details in {chaos.directory / 'chaos-results.json'}; load {load}")
    failed = [
        t
        for t in trials
        if t.duplicates or t.missing or t.stuck or t.server_errors or t.unanswered
    ]
    if not trials:
        print("chaos: FAILED: no trial ran")
        return 1
    if failed:
        print(f"chaos: FAILED: {len(failed)} trial(s) with an anomaly")
        return 1
    print("chaos: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
