"""Create the ``admin`` superuser with a random password, printed once."""

from __future__ import annotations

import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = (
        "Create the 'admin' superuser if it does not exist and print its password once."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--username", default="admin")

    def handle(self, *args: Any, username: str, **options: Any) -> None:
        users = get_user_model()
        if users.objects.filter(username=username).exists():
            self.stdout.write(
                f"User {username!r} exists; its password was printed when it was created "
                f"(reset it with: .venv/bin/python manage.py changepassword {username})."
            )
            return
        password = secrets.token_urlsafe(12)
        users.objects.create_superuser(username=username, email="", password=password)
        self.stdout.write(
            self.style.SUCCESS(
                f"Created superuser {username!r} with password: {password}"
            )
        )
        self.stdout.write("This password is shown only once.")
