from django.apps import AppConfig


class DemoConfig(AppConfig):
    """The demo toolset and its refund ledger."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "demo"
