"""Work that needs both the threads app and the approval workflow.

The top of the domain layers (``agentcore`` ← ``threads`` ← ``approvals`` ←
``orchestration`` ← ``web``): executing a run and dispatching its calls
(:mod:`orchestration.runs`), executing an approved call under supervision
(:mod:`orchestration.executions`), worker heartbeats (:mod:`orchestration.supervision`)
and the janitor (:mod:`orchestration.janitor`). Not a Django app: it has no models.
See ``docs/architecture.md``.
"""

#: The modules other packages may import (tests/test_architecture.py).
PUBLIC_MODULES = frozenset(
    {
        "orchestration.executions",
        "orchestration.janitor",
        "orchestration.resume",
        "orchestration.runs",
    }
)
