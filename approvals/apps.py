from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    """The approval queue and its audit trail."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "approvals"

    def ready(self) -> None:
        # Deferred: models are importable only once the app registry is ready.
        from approvals.interrupts import run_interrupts
        from threads.wire import interrupt_source_register

        # A wire run held for an operator ends with the run's approval requests
        # as interrupts (IR-01); threads cannot import approvals, so it is handed in.
        interrupt_source_register(run_interrupts)
