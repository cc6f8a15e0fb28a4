"""The threads app: threads, messages, runs, tool calls and their event log.

The domain below the approval workflow (``core``/``agentcore`` <- ``threads`` <-
``approvals`` <- ``orchestration`` <- ``web``): models, the one writer of the
event log (recording and projection), answers, transitions, locks, selectors and
services. Other packages import only the modules in :data:`PUBLIC_MODULES`; the
rest (projection, snapshots, ...) is this package's own.
"""

#: The modules other packages may import (tests/test_architecture.py).
PUBLIC_MODULES = frozenset(
    {
        "threads.agent_config",
        "threads.answers",
        "threads.checks",
        "threads.exceptions",
        "threads.execution",
        "threads.gateway",
        "threads.external",
        "threads.idempotency",
        "threads.ids",
        "threads.interrupt_sources",
        "threads.locks",
        "threads.logreader",
        "threads.mcp_servers",
        "threads.models",
        "threads.realtime",
        "threads.recording",
        "threads.selectors",
        "threads.services",
        "threads.tasks",
        "threads.transitions",
        "threads.validation",
        "threads.wire",
    }
)
