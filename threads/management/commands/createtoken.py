"""Print the REST API token of a user, creating it if needed."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from rest_framework.authtoken.models import Token


class Command(BaseCommand):
    help = (
        "Print the API token of USERNAME (created if it has none). Use it as "
        "'Authorization: Token <key>'. --rotate replaces an existing token."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("username")
        parser.add_argument(
            "--rotate",
            action="store_true",
            help="Delete the user's current token and create a new one.",
        )

    def handle(self, *args: Any, username: str, rotate: bool, **options: Any) -> None:
        users = get_user_model()
        try:
            user = users.objects.get(**{users.USERNAME_FIELD: username})
        except users.DoesNotExist as error:
            raise CommandError(
                f"no user {username!r}; create one first (manage.py createsuperuser)"
            ) from error
        if not user.is_active:
            raise CommandError(f"user {username!r} is inactive; activate it first")
        if rotate:
            Token.objects.filter(user=user).delete()
        token, _ = Token.objects.get_or_create(user=user)
        self.stdout.write(token.key)
