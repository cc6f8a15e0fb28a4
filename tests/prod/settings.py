"""Settings for the processes tests/prod starts: production settings plus test agents.

The janitor's windows are shortened (heartbeat 0.5 s, so a dead worker's run
is reaped 2 s after its last refresh; stale after 3 s without a heartbeat; queued
items lost after 2 s, a sweep every second), as is the execution lease's grace (1 s), and two agents are added:

- ``slow``: a remote AG-UI agent (``tests.prod.slow_agent``) streaming text deltas
  at a pace the test chooses, at ``SLOW_AGENT_URL``;
- ``fragile``: the scripted rules with ``tests.prod.toolsets.FRAGILE_TOOLS``, whose
  ``refund_order`` needs approval and is NOT idempotent (it appends to a ledger file).
"""

from __future__ import annotations

import os

from config.settings import *  # noqa: F403
from config.settings import (
    CELERY_BEAT_SCHEDULE,
    CELERY_IMPORTS,
    COUNTERSIGN,
    COUNTERSIGN_AGENTS,
)

COUNTERSIGN = {
    **COUNTERSIGN,
    # A test may lengthen them for every process of its stack (Stack.env).
    "RUN_HEARTBEAT_SECONDS": float(
        os.environ.get("COUNTERSIGN_RUN_HEARTBEAT_SECONDS") or 0.5
    ),
    "RUN_STALE_SECONDS": float(os.environ.get("COUNTERSIGN_RUN_STALE_SECONDS") or 3.0),
    # A redelivered execution waits for the lease (tool timeout + grace) to end.
    "EXECUTION_LEASE_GRACE_SECONDS": 1.0,
    # The janitor sweeps every second; a queued item is taken for lost after 2 s.
    "JANITOR_INTERVAL_SECONDS": 1.0,
    "QUEUED_STALE_SECONDS": 2.0,
}
CELERY_BEAT_SCHEDULE = {
    **CELERY_BEAT_SCHEDULE,
    "reap-stale-runs": {"task": "threads.janitor.reap_stale_runs", "schedule": 1.0},
}
TEST_AGENTS = {
    "slow": {
        "provider": "agui_http",
        "url": os.environ.get("SLOW_AGENT_URL") or "http://127.0.0.1:9/",
    },
    "fragile": {
        "provider": "scripted",
        "model": "scripted",
        "system_prompt": "Test agent with a non-idempotent refund.",
        "toolsets": ["tests.prod.toolsets.FRAGILE_TOOLS"],
    },
}
COUNTERSIGN_AGENTS = {**COUNTERSIGN_AGENTS, **TEST_AGENTS}

# Test workers load the crash-point hook (it does nothing unless
# COUNTERSIGN_TEST_CRASH_AT is set in their environment).
CELERY_IMPORTS = (*CELERY_IMPORTS, "tests.crashpoints")
