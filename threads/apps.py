from django.apps import AppConfig


class ThreadsConfig(AppConfig):
    """Threads, messages, runs, tool calls and the event log."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "threads"

    def ready(self) -> None:
        from threads import checks  # noqa: F401  (registers system checks)
