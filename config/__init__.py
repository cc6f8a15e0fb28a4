"""Countersign project configuration: settings, URLs, ASGI entry point, Celery app.

The Celery app (:mod:`config.celery`) is not imported here: the web process pays
Celery's import (about a third of its start, bench B6) only when it first sends a
task (:func:`threads.execution.celery_app`), and ``celery -A config`` finds
``config.celery.app`` itself. ``config.celery_app`` still resolves, lazily.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from config.celery import app as celery_app

__all__ = ("celery_app",)


def __getattr__(name: str) -> Any:
    """Import the Celery app on first access of ``config.celery_app`` (PEP 562)."""
    if name == "celery_app":
        from config.celery import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
