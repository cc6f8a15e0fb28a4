"""The registry of a wire run's interrupt sources (IR-01), a leaf module.

The approval workflow registers its source when its app is ready (approvals.apps);
keeping the registry out of :mod:`threads.wire` lets it do so without importing the
recording stack and the protocol models at Django setup (bench B6).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from threads.models import Run

#: Functions returning the open interrupts (AG-UI ``Interrupt`` JSON objects) of an
#: ``awaiting_tools`` run; the approval workflow registers one (approvals.apps).
InterruptSource = Callable[["Run"], list[dict[str, Any]]]
_INTERRUPT_SOURCES: list[InterruptSource] = []


def interrupt_source_register(source: InterruptSource) -> None:
    """Register ``source`` as a provider of a run's open interrupts (idempotent)."""
    if source not in _INTERRUPT_SOURCES:
        _INTERRUPT_SOURCES.append(source)


def open_interrupts(*, run: Run) -> list[dict[str, Any]]:
    """Return the open interrupts of ``run``, from every registered source, in call order."""
    return [item for source in _INTERRUPT_SOURCES for item in source(run)]
