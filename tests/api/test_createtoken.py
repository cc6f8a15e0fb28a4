"""``manage.py createtoken``: the token integrations authenticate with (DC-05)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


def _createtoken(*args: str) -> str:
    out = StringIO()
    call_command("createtoken", *args, stdout=out)
    return out.getvalue().strip()


def test_dc05_createtoken_prints_a_key_that_authenticates(user):
    """The printed key is the user's token; the API accepts it; a second call prints it again."""
    key = _createtoken("olivia")
    again = _createtoken("olivia")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")

    assert key == again == Token.objects.get(user=user).key
    assert client.get("/api/threads/").status_code == 200


def test_createtoken_rotate_replaces_the_key(user):
    """--rotate deletes the old token; the old key stops working."""
    old = _createtoken("olivia")

    new = _createtoken("olivia", "--rotate")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {old}")

    assert new != old
    assert Token.objects.get(user=user).key == new
    assert client.get("/api/threads/").status_code == 401


def test_createtoken_for_an_unknown_user_fails_clearly():
    """An unknown username is a CommandError saying what to do."""
    with pytest.raises(CommandError, match="no user 'ghost'; create one first"):
        _createtoken("ghost")


@pytest.mark.parametrize("keyword", ["Token", "Bearer"])
def test_the_api_accepts_the_token_under_both_keywords(user, keyword):
    """``Authorization: Token <key>`` (DRF's) and ``Bearer <key>`` (RFC 6750) both work."""
    key = _createtoken("olivia")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"{keyword} {key}")

    answer = client.get("/api/threads/")

    assert answer.status_code == 200
    assert answer.json()["results"] == []


@pytest.mark.parametrize("keyword", ["Token", "Bearer"])
def test_a_wrong_token_is_refused_under_both_keywords(user, keyword):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"{keyword} not-a-real-key")

    answer = client.get("/api/threads/")

    assert answer.status_code == 401
    assert answer.json() == {
        "type": "authentication_failed",
        "detail": "Invalid token.",
    }
