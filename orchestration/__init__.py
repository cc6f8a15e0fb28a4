"""Work that needs both the threads app and the approval workflow.

The top of the domain layers (``agentcore`` ← ``threads`` ← ``approvals`` ←
``orchestration`` ← shells): the life of a tool call, step by step
(:mod:`orchestration.pipeline`), executing a run (:mod:`orchestration.runs`),
worker heartbeats (:mod:`orchestration.supervision`), the janitor
(:mod:`orchestration.janitor`) and the Celery tasks (:mod:`orchestration.tasks`).
Not a Django app: it has no models. See ``docs/architecture.md``.
"""

#: The modules other packages may import (tests/test_architecture.py).
PUBLIC_MODULES = frozenset(
    {
        "orchestration.chat",
        "orchestration.gateway",
        "orchestration.external",
        "orchestration.janitor",
        "orchestration.pipeline",
        "orchestration.resume",
        "orchestration.runs",
        "orchestration.supervision",
        "orchestration.tasks",
    }
)
