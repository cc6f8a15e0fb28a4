"""What every Countersign package stands on: settings access, base errors, shared types.

``core`` sits below every other package (``agentcore`` excepted, which has no Django
and takes its configuration as arguments) and imports none of them:
:mod:`core.conf` (``countersign_settings``), :mod:`core.errors` (the base of every
domain error), :mod:`core.types` (the user type), :mod:`core.text` (sentences composed
for people around words written elsewhere), and what every process reports:
:mod:`core.metrics` (Prometheus) and :mod:`core.tracing` (OpenTelemetry).
"""

#: The modules other packages may import (tests/test_architecture.py).
PUBLIC_MODULES = frozenset(
    {
        "core.conf",
        "core.errors",
        "core.logging",
        "core.metrics",
        "core.text",
        "core.tracing",
        "core.types",
    }
)
