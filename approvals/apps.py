from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    """The approval queue and its audit trail."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "approvals"
