"""Rate limits: logins locked out per account and per address, API and AG-UI per token.

Each limit answers 429 with ``Retry-After``; the rates come from settings, read
per request (``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]``, ``AXES_*``). Implements
SEC-07.
"""

from __future__ import annotations

import pytest
from axes.models import AccessAttempt
from django.test import Client
from rest_framework.test import APIClient

from approvals.models import AuditEntry
from tests.helpers.api import token_client

pytestmark = pytest.mark.django_db


def _rates(settings, **rates: str) -> None:
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {
            **settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"],
            **rates,
        },
    }


def _login(client: Client, username: str, password: str, address: str) -> int:
    response = client.post(
        "/accounts/login/",
        {"username": username, "password": password},
        REMOTE_ADDR=address,
    )
    return response.status_code


def test_wrong_passwords_lock_the_account_out_with_429_retry_after_and_an_audit_entry(
    user, settings
):
    """5 wrong passwords: the right one is refused 429 too, from any address; audited."""
    settings.AXES_FAILURE_LIMIT = 5
    client = Client()
    statuses = [_login(client, "olivia", "wrong", f"10.0.0.{i}") for i in range(5)]
    assert statuses == [200, 200, 200, 200, 429]  # the login form again, then locked

    locked = client.post(
        "/accounts/login/",
        {"username": "olivia", "password": "pw-olivia-1"},
        REMOTE_ADDR="10.9.9.9",
    )
    assert locked.status_code == 429
    assert locked["Retry-After"] == "900"
    assert "Too many failed logins" in locked.content.decode()
    assert "_auth_user_id" not in client.session
    [entry] = AuditEntry.objects.filter(action="login.locked_out")
    assert entry.after == {"username": "olivia", "ipAddress": "10.0.0.4"}
    assert entry.target_type == "axes.accessattempt"
    assert entry.actor is None
    # another account from another address is not affected
    assert _login(Client(), "mallory", "wrong", "10.1.1.1") == 200


def test_wrong_passwords_from_one_address_lock_that_address_out(
    user, other_user, settings
):
    """Guessing across accounts from one address: that address is locked out."""
    settings.AXES_FAILURE_LIMIT = 3
    client = Client()
    for name in ("a", "b", "c"):
        _login(client, name, "wrong", "10.0.0.7")

    assert _login(client, "olivia", "pw-olivia-1", "10.0.0.7") == 429
    # the account itself is fine from elsewhere, and a success resets its failures
    assert _login(Client(), "olivia", "pw-olivia-1", "10.0.0.8") == 302
    assert AccessAttempt.objects.filter(ip_address="10.0.0.7").exists()


def test_the_admin_login_is_locked_out_too(user, settings):
    """The admin's login form goes through the same lockout."""
    settings.AXES_FAILURE_LIMIT = 2
    client = Client()
    for _ in range(2):
        client.post(
            "/admin/login/",
            {"username": "olivia", "password": "wrong"},
            REMOTE_ADDR="10.2.0.1",
        )
    response = client.post(
        "/admin/login/",
        {"username": "olivia", "password": "pw-olivia-1"},
        REMOTE_ADDR="10.2.0.2",
    )
    assert response.status_code == 429


def test_api_requests_beyond_the_rate_get_429_with_retry_after(
    user, other_user, settings
):
    """``api`` counts per token: the 4th GET of one token is 429, another token goes on."""
    _rates(settings, api="3/min")
    api = token_client(user)

    statuses = [api.get("/api/threads/").status_code for _ in range(4)]

    assert statuses == [200, 200, 200, 429]
    refused = api.get("/api/threads/")
    assert refused.json()["type"] == "throttled"
    assert 1 <= int(refused["Retry-After"]) <= 60
    assert token_client(other_user).get("/api/threads/").status_code == 200


def test_unknown_tokens_from_one_address_get_429_even_for_a_good_token(user, settings):
    """``auth_failures`` counts bad tokens per address; then every token from it waits."""
    _rates(settings, auth_failures="3/min")
    guesser = APIClient(REMOTE_ADDR="10.3.0.1")
    statuses = []
    for i in range(4):
        guesser.credentials(HTTP_AUTHORIZATION=f"Token guess{i:036d}")
        statuses.append(guesser.get("/api/threads/").status_code)

    assert statuses == [401, 401, 401, 429]
    good = token_client(user)
    refused = good.get("/api/threads/", REMOTE_ADDR="10.3.0.1")
    assert refused.status_code == 429
    assert int(refused["Retry-After"]) >= 1
    assert good.get("/api/threads/", REMOTE_ADDR="10.3.0.2").status_code == 200
    bearer = APIClient(REMOTE_ADDR="10.3.0.1")
    bearer.credentials(HTTP_AUTHORIZATION="Bearer another-guess")
    assert bearer.get("/api/threads/").status_code == 429


def test_agui_requests_beyond_the_rate_get_429_with_retry_after(user, settings):
    """``agui`` counts per token across AG-UI endpoints; bad tokens count per address."""
    _rates(settings, agui="2/min", auth_failures="2/min")
    api = token_client(user)
    statuses = [api.get("/agui/demo/capabilities").status_code for _ in range(3)]
    assert statuses == [200, 200, 429]
    refused = api.get("/agui/threads/anything/events")
    assert refused.status_code == 429
    assert refused.json()["type"] == "throttled"
    assert int(refused["Retry-After"]) >= 1

    stranger = APIClient(REMOTE_ADDR="10.4.0.1")
    stranger.credentials(HTTP_AUTHORIZATION="Bearer nope")
    guesses = [stranger.get("/agui/demo/capabilities").status_code for _ in range(3)]
    assert guesses == [401, 401, 429]


def test_a_rate_limit_with_its_cache_down_lets_requests_through(user, settings):
    """The counters' cache unreachable (Redis down): requests are served, not 500."""
    settings.CACHES = {
        **settings.CACHES,
        "ratelimit": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "redis://127.0.0.1:9/0",
            "OPTIONS": {"socket_connect_timeout": 0.2},
        },
    }
    _rates(settings, api="1/min")
    api = token_client(user)

    assert [api.get("/api/threads/").status_code for _ in range(3)] == [200] * 3
