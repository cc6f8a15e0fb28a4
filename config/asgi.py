"""ASGI entry point: HTTP through Django, WebSockets through Channels.

Importing this module starts no background work (tests import it to drive the
consumers in-process). The embedded beat starts when a server starts serving:
on the ASGI lifespan ``startup`` event, which uvicorn sends (``--lifespan auto``,
its default), and stops on ``shutdown``.
"""

from __future__ import annotations

import os
from typing import Any

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

from core.tracing import tracing_configure

# Before the handler is built: the Django instrumentation adds its middleware.
# Does nothing without OTEL_* variables (docs/observability.md).
tracing_configure()
django_asgi_app = get_asgi_application()

from threads.checks import raise_on_configuration_errors  # noqa: E402

raise_on_configuration_errors()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from core.logging import query_redact  # noqa: E402
from threads.execution import start_embedded_beat, stop_embedded_beat  # noqa: E402
from web.routing import (  # noqa: E402
    mcp_gateway_app,
    mcp_gateway_handles,
    websocket_urlpatterns,
)


async def http_application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Serve HTTP: MCP gateway paths (``web.mcp_gateway``), everything else by Django."""
    if mcp_gateway_handles(scope.get("path", "")):
        await mcp_gateway_app(scope, receive, send)
        return
    await django_asgi_app(scope, receive, send)


router = ProtocolTypeRouter(
    {
        "http": http_application,
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
    }
)


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Serve ``router``; answer the lifespan protocol, which Channels' router has not.

    Lifespan ``startup`` starts the embedded beat: without Celery beat (the
    embedded default, ``make run``) approvals still expire and abandoned runs are
    still reaped, on the server's own pool. ``shutdown`` stops it. With Celery
    :func:`start_embedded_beat` does nothing (Celery beat runs the schedule).
    HTTP and WebSocket scopes go to ``router`` with credentials removed from
    their query string (``?token=``, ``?access_token=``...:
    :func:`core.logging.query_redact`) first, so no log line (the server's
    access log, Django's request log) ever holds one; tokens are accepted only
    in the ``Authorization`` header.
    """
    if scope["type"] != "lifespan":
        if scope.get("query_string"):
            # In place: the server logs the request from this same scope object.
            scope["query_string"] = query_redact(scope["query_string"])
        await router(scope, receive, send)
        return
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            start_embedded_beat()
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            stop_embedded_beat()
            await send({"type": "lifespan.shutdown.complete"})
            return
