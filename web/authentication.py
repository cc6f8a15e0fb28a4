"""API token authentication under both header keywords integrations send.

DRF's :class:`~rest_framework.authentication.TokenAuthentication` reads only
``Authorization: Token <key>``; HTTP clients and SDKs commonly send ``Bearer``.
The same token (``manage.py createtoken``) is accepted under either keyword, for
the REST API and for AG-UI (``web.agui`` reads both). A token that does not exist
counts against the client's address: past ``API_AUTH_FAILURE_RATE`` every token
from that address is answered 429 with ``Retry-After`` until the window moves on
(``web.ratelimit``), so keys cannot be guessed at speed. Implements SEC-07.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication
from rest_framework.exceptions import AuthenticationFailed, Throttled
from rest_framework.request import Request

from web.ratelimit import auth_failure_record, auth_failure_wait

#: What a client refused for its failed tokens is told (with ``Retry-After``).
TOO_MANY_FAILURES = (
    "too many requests with an unknown token from this address; retry after the "
    "Retry-After header's seconds"
)


class TokenAuthentication(authentication.TokenAuthentication):
    """DRF's ``Authorization: Token <key>``, counting unknown tokens per client address."""

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        """Return ``(user, token)`` or ``None``; raise 401 for a bad token, 429 past the rate."""
        parts = authentication.get_authorization_header(request).split()
        if not parts or parts[0].lower() != self.keyword.lower().encode():
            return None
        wait = auth_failure_wait(request._request)
        if wait is not None:
            raise Throttled(wait, detail=TOO_MANY_FAILURES)
        try:
            return super().authenticate(request)
        except AuthenticationFailed:
            wait = auth_failure_record(request._request)
            if wait is not None:
                raise Throttled(wait, detail=TOO_MANY_FAILURES) from None
            raise


class BearerTokenAuthentication(TokenAuthentication):
    """``Authorization: Bearer <key>``: DRF's token authentication under RFC 6750's keyword.

    A wrong key answers 401 ``Invalid token.`` as under ``Token``. Listed after
    ``TokenAuthentication`` so the challenge (``WWW-Authenticate``) stays ``Token``.
    """

    keyword = "Bearer"


class BearerTokenScheme(OpenApiAuthenticationExtension):
    """The OpenAPI security scheme of :class:`BearerTokenAuthentication`: HTTP bearer."""

    target_class = BearerTokenAuthentication
    name = "bearerAuth"
    priority = 1

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        """Return ``{"type": "http", "scheme": "bearer"}`` (the key is the API token)."""
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "The API token (manage.py createtoken) as a bearer token",
        }
