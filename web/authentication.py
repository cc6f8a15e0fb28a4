"""API token authentication under both header keywords integrations send.

DRF's :class:`~rest_framework.authentication.TokenAuthentication` reads only
``Authorization: Token <key>``; HTTP clients and SDKs commonly send ``Bearer``.
The same token (``manage.py createtoken``) is accepted under either keyword, for
the REST API and for AG-UI (``web.agui`` reads both).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework.authentication import TokenAuthentication


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
