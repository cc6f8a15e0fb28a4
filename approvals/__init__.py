"""The approval workflow: requests, votes, grants, executions, audit, notifications.

The domain above ``threads`` and below ``orchestration``: policy dispatch,
decisions, claims, the execution ledger and its audit chain. Its services do one
step and return what happened; ``orchestration`` decides what happens next. Other
packages import only the modules in :data:`PUBLIC_MODULES`.
"""

#: The modules other packages may import (tests/test_architecture.py).
PUBLIC_MODULES = frozenset(
    {
        "approvals.authorization",
        "approvals.crashpoints",
        "approvals.exceptions",
        "approvals.facts",
        "approvals.interrupt_ids",
        "approvals.labels",
        "approvals.models",
        "approvals.notifications.chat",
        "approvals.notifications.delivery",
        "approvals.notifications.links",
        "approvals.notifications.targets",
        "approvals.selectors",
        "approvals.services",
        "approvals.services.claims",
        "approvals.services.decisions",
        "approvals.services.dispatch",
        "approvals.services.elicitation",
        "approvals.services.escalation",
        "approvals.services.execution",
        "approvals.services.external",
        "approvals.services.grants",
        "approvals.services.resume",
        "approvals.services.snooze",
        "approvals.services.votes",
    }
)
