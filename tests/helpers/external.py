"""External agents for the approval API's tests, and a declaration helper."""

from __future__ import annotations

from typing import Any, Final

#: ``billing`` is strict (only the tools its policies name); ``helper`` is not.
EXTERNAL_AGENTS: Final[dict[str, Any]] = {
    "billing": {
        "provider": "external",
        "strict": True,
        "policies": {
            "refund": {"action": "require_approval"},
            "lookup": "auto",
            "wipe": "deny",
        },
    },
    "helper": {"provider": "external"},
}

REFUND_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "order_id": {"type": "string"},
        "amount": {"type": "number", "exclusiveMinimum": 0},
    },
    "required": ["order_id", "amount"],
    "additionalProperties": False,
}


def declare(client: Any, **change: Any) -> Any:
    """POST a refund declaration of the ``billing`` agent, with ``change`` applied."""
    body: dict[str, Any] = {
        "agent": "billing",
        "tool": "refund",
        "arguments": {"order_id": "A-1", "amount": 25},
        "inputSchema": REFUND_SCHEMA,
        **change,
    }
    if change.get("tool") not in (None, "refund") and "inputSchema" not in change:
        del body["inputSchema"]
    return client.post("/api/external/tool-calls/", body, format="json")


class DjangoTransport:
    """httpx's WSGI transport into this process's Django, inside the test's transaction.

    As Django's test client does, the request neither opens nor closes database
    connections (a closed connection would end the test's transaction).
    """

    def __init__(self) -> None:
        import httpx
        from django.core.wsgi import get_wsgi_application

        self.inner = httpx.WSGITransport(app=get_wsgi_application())

    def handle_request(self, request: Any) -> Any:
        from django.core.signals import request_finished, request_started
        from django.db import close_old_connections

        request_started.disconnect(close_old_connections)
        request_finished.disconnect(close_old_connections)
        try:
            response = self.inner.handle_request(request)
            # Django's request_finished fires when the WSGI body is closed: here.
            response.read()
            response.close()
            return response
        finally:
            request_started.connect(close_old_connections)
            request_finished.connect(close_old_connections)

    def close(self) -> None:
        self.inner.close()
