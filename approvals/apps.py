from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.apps import AppConfig

if TYPE_CHECKING:
    from threads.models import Run


def _run_interrupts(run: Run) -> list[dict[str, Any]]:
    # Deferred: approvals.interrupts loads the agents' toolsets (MCP sources
    # among them), which must not happen while the app registry is starting.
    from approvals.interrupts import run_interrupts

    return run_interrupts(run)


def _login_lockout_audit(sender: Any, **kwargs: Any) -> None:
    # Deferred: importing approvals.services loads the whole approval stack (and
    # the protocol models) into every process's setup; a lockout is rare.
    from approvals.services.logins import login_lockout_audit

    login_lockout_audit(sender, **kwargs)


class ApprovalsConfig(AppConfig):
    """The approval queue and its audit trail."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "approvals"

    def ready(self) -> None:
        # Deferred: these import models, importable only once the registry is ready.
        # The registry is a leaf module: threads.wire would import the recording
        # stack and the protocol models into every process's setup (bench B6).
        from axes.signals import user_locked_out

        from approvals import checks  # noqa: F401  (registers system checks)
        from approvals.notifications import receivers  # noqa: F401  (connects signals)
        from threads.interrupt_sources import interrupt_source_register

        # A wire run held for an operator ends with the run's approval requests
        # as interrupts (IR-01); threads cannot import approvals, so it is handed in.
        interrupt_source_register(_run_interrupts)
        user_locked_out.connect(
            _login_lockout_audit, dispatch_uid="approvals.login_lockout_audit"
        )
