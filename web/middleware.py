"""HTTP middleware for the operator UI: a strict Content-Security-Policy.

Every UI page is served with a policy that allows scripts, styles, fonts and
connections from this origin only (images also from ``data:`` URLs, sockets over
``ws:``/``wss:``), no plugins, no ``<base>`` rewriting and no framing. Pages pass
data to their ES modules through ``json_script`` and ``data-`` attributes, never
inline scripts, so a tool result that smuggles markup cannot run anything even if
it were ever inserted as HTML. The Django admin and the API documentation pages are
left to their own headers. Implements SEC-03.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from django.http import HttpRequest, HttpResponse

CONTENT_SECURITY_POLICY: Final = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self' ws: wss:; object-src 'none'; base-uri 'none'; "
    "frame-ancestors 'none'"
)
#: Path prefixes served by other components with their own needs (inline admin
#: assets, the API schema browser).
EXEMPT_PREFIXES: Final = ("/admin/", "/api/")


class ContentSecurityPolicyMiddleware:
    """Add :data:`CONTENT_SECURITY_POLICY` to responses outside :data:`EXEMPT_PREFIXES`.

    A response that already carries a ``Content-Security-Policy`` header keeps it.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if not request.path.startswith(EXEMPT_PREFIXES):
            response.headers.setdefault(
                "Content-Security-Policy", CONTENT_SECURITY_POLICY
            )
        return response
