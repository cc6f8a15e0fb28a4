"""Rate limits: per API token on the REST API and AG-UI, on failed tokens per address, and on logins.

Requests are counted with DRF's throttles (:class:`SimpleRateThrottle`: a sliding
window of timestamps per key) in the ``ratelimit`` cache (Redis when ``REDIS_URL``
is set, so every server process shares the counts; per process otherwise). The
rates are ``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]``, read when a request
comes (``API_RATE``, ``AGUI_RATE``, ``API_AUTH_FAILURE_RATE`` in the
environment, docs/configuration.md):

- ``api``: every REST request, per token (per user for a session, per address
  when anonymous), :class:`ApiRateThrottle`;
- ``agui``: every AG-UI request (a run, the follow stream, capabilities), per
  token likewise, :func:`agui_wait`;
- ``auth_failures``: requests with a token that does not exist, per client
  address: once over the rate every token request from that address is refused
  until the window moves on, so keys cannot be guessed (:func:`auth_failure_wait`).

Each answers 429 with ``Retry-After`` (seconds). A cache that cannot be reached
lets the request through: a rate limit never turns a broker outage into 500s.

Logins (the login page and the admin's) are limited by django-axes: after
``LOGIN_FAILURE_LIMIT`` wrong passwords for one username, or from one address,
that username or address is locked out for ``LOGIN_LOCKOUT_SECONDS``
(:func:`login_lockout_response` answers 429 with ``Retry-After``), and the
lockout is an audit entry (``approvals.services.logins``). Implements SEC-07.
"""

from __future__ import annotations

import hashlib
import logging
from typing import TYPE_CHECKING, Any

from axes.backends import AxesStandaloneBackend
from django.conf import settings
from django.core.cache import BaseCache, caches
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle

if TYPE_CHECKING:
    # Types only: DRF imports this module while rest_framework.views loads.
    from rest_framework.request import Request
    from rest_framework.views import APIView

logger = logging.getLogger(__name__)

#: The cache alias that holds the counters (config/settings.py ``CACHES``).
CACHE_ALIAS = "ratelimit"
#: Rates used when ``DEFAULT_THROTTLE_RATES`` leaves a scope out.
DEFAULT_RATES = {
    "api": "600/min",
    "agui": "120/min",
    "auth_failures": "20/min",
    "messages": "30/min",
}


def client_address(request: HttpRequest) -> str:
    """Return the client's address as the server saw it (``REMOTE_ADDR``).

    Behind a proxy every client shares the proxy's address unless the ASGI
    server is told to trust ``X-Forwarded-For`` (uvicorn ``--forwarded-allow-ips``,
    docs/deploy.md), which then sets ``REMOTE_ADDR`` itself.
    """
    return str(request.META.get("REMOTE_ADDR") or "unknown")


def login_client_address(request: HttpRequest) -> str | None:
    """Return ``REMOTE_ADDR`` for django-axes, or ``None`` when the request has none.

    Axes stores the address in an IP field: a placeholder such as ``"unknown"``
    (a login made in code, e.g. ``Client.login``, has no address) is refused by
    PostgreSQL's ``inet``, so no address is recorded as none.
    """
    address = request.META.get("REMOTE_ADDR")
    return str(address) if address else None


def token_ident(key: str) -> str:
    """Return the counter identity of API token ``key`` (a digest: keys never reach the cache)."""
    return "token:" + hashlib.sha256(key.encode()).hexdigest()[:32]


class CountingThrottle(SimpleRateThrottle):
    """A DRF throttle over the ``ratelimit`` cache, rate read per request, failing open.

    Subclasses name a ``scope`` and say whose requests count together
    (:meth:`get_cache_key`). :meth:`allow_ident` counts one request for an
    identity outside DRF (AG-UI views).
    """

    scope = "api"

    def __init__(self) -> None:
        # SimpleRateThrottle reads the rate in __init__: at request time here.
        self.rate = self.get_rate()
        self.num_requests, self.duration = self.parse_rate(self.rate)

    @property
    def cache(self) -> BaseCache:  # type: ignore[override]
        """The ``ratelimit`` cache (shared by every process when it is Redis)."""
        return caches[CACHE_ALIAS]

    def get_rate(self) -> str | None:
        """Return ``DEFAULT_THROTTLE_RATES[scope]``, or this scope's default."""
        rate = api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)
        return str(rate) if rate else DEFAULT_RATES[self.scope]

    def allow_request(self, request: Any, view: Any) -> bool:
        """Count ``request``; return whether it is within the rate (cache down: yes)."""
        if self.rate is None:
            return True
        key = self.get_cache_key(request, view)
        return True if key is None else self.allow_ident(key)

    def allow_ident(self, key: str) -> bool:
        """Count one request under cache key ``key``; return whether it is within the rate."""
        try:
            if self._over(key):
                return self.throttle_failure()
            return self.throttle_success()
        except Exception as error:  # a rate limit never fails a request
            logger.warning("rate limit %s not checked: %r", self.scope, error)
            return True

    def _over(self, key: str) -> bool:
        """Load ``key``'s requests within the window; return whether they reach the rate."""
        assert self.duration is not None
        assert self.num_requests is not None
        self.key = key
        self.history = self.cache.get(key, [])
        self.now = self.timer()
        while self.history and self.history[-1] <= self.now - self.duration:
            self.history.pop()
        return len(self.history) >= self.num_requests

    def ident_key(self, ident: str) -> str:
        """Return the cache key of ``ident`` in this scope."""
        return self.cache_format % {"scope": self.scope, "ident": ident}


class PerTokenThrottle(CountingThrottle):
    """Count per API token; per user for a session; per address when anonymous."""

    def get_cache_key(self, request: Request, view: APIView) -> str | None:
        """Return the key of the token, user or address ``request`` comes from."""
        token = getattr(request.auth, "key", None)
        if token:
            return self.ident_key(token_ident(token))
        if request.user and request.user.is_authenticated:
            return self.ident_key(f"user:{request.user.pk}")
        return self.ident_key(f"ip:{client_address(request)}")


class ApiRateThrottle(PerTokenThrottle):
    """Every REST API request, per token (``DEFAULT_THROTTLE_RATES["api"]``)."""

    scope = "api"


class AguiRateThrottle(CountingThrottle):
    """Every AG-UI request, per token (``DEFAULT_THROTTLE_RATES["agui"]``)."""

    scope = "agui"


class AuthFailureThrottle(CountingThrottle):
    """Requests carrying a token that does not exist, per client address."""

    scope = "auth_failures"

    def blocked(self, address: str) -> float | None:
        """Return the seconds ``address`` must wait, or ``None`` while under the rate.

        Reads without counting (a good token from an address under the rate is
        never counted here).
        """
        try:
            if self._over(self.ident_key(f"ip:{address}")):
                return self.wait()
        except Exception as error:  # a rate limit never fails a request
            logger.warning("rate limit %s not checked: %r", self.scope, error)
        return None


def auth_failure_wait(request: HttpRequest) -> float | None:
    """Return the seconds ``request``'s address must wait after failed tokens, or ``None``."""
    return AuthFailureThrottle().blocked(client_address(request))


def auth_failure_record(request: HttpRequest) -> float | None:
    """Count a failed token from ``request``'s address; return its wait once over the rate."""
    throttle = AuthFailureThrottle()
    if throttle.allow_ident(throttle.ident_key(f"ip:{client_address(request)}")):
        return None
    return throttle.wait()


def agui_wait(*, user: Any, token_key: str | None) -> float | None:
    """Count one AG-UI request of ``user`` (with ``token_key``); return its wait when over the rate."""
    throttle = AguiRateThrottle()
    ident = token_ident(token_key) if token_key else f"user:{user.pk}"
    if throttle.allow_ident(throttle.ident_key(ident)):
        return None
    return throttle.wait()


def retry_after(wait: float | None) -> str:
    """Return the ``Retry-After`` value (whole seconds, at least 1) for ``wait`` seconds."""
    return str(max(1, int(wait or 0) + (1 if (wait or 0) % 1 else 0)))


class LoginLockoutBackend(AxesStandaloneBackend):
    """django-axes' lockout check, for logins made by a request.

    A login without a request (``authenticate()`` called by code, such as the test
    client's ``login``) has no address to count and no client to lock out; it
    goes on to the next backend instead of being refused.
    """

    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> None:
        """Raise ``AxesBackendPermissionDenied`` while the username or address is locked out."""
        if request is not None:
            super().authenticate(request, username, password, **kwargs)
        # This backend never logs anyone in: the next one does.


def login_lockout_response(
    request: HttpRequest, original_response: Any = None, credentials: Any = None
) -> HttpResponse:
    """Answer a locked-out login: 429, ``Retry-After``, the login page saying why.

    django-axes calls it (``AXES_LOCKOUT_CALLABLE``) for a login refused because
    its username or address failed ``LOGIN_FAILURE_LIMIT`` times.
    """
    seconds = int(settings.AXES_COOLOFF_TIME.total_seconds())
    response = render(
        request,
        "registration/locked_out.html",
        {"seconds": seconds, "minutes": max(1, round(seconds / 60))},
        status=429,
    )
    response["Retry-After"] = str(seconds)
    return response
