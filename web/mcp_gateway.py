"""The MCP gateway endpoint: ``/mcp/<gateway>/`` over streamable HTTP (docs/mcp.md).

A shell on the official ``mcp`` SDK's server side (its low-level ``Server`` and
``StreamableHTTPSessionManager``, one per gateway, started on first use): it
authenticates the bearer token, parses the request and calls one step of
:mod:`orchestration.gateway` per request, then serializes the outcome as an MCP
result. Waiting for a person happens here, outside any transaction: the request is
held up to the gateway's ``hold_seconds`` (progress notifications every
``progress_seconds`` when the client sent a progress token), then answered with a
pending result telling the model how to check again. The SDK answers malformed
JSON-RPC, oversized bodies and a session used with another token itself.

Routes (:func:`application`, mounted in ``config.asgi``): ``/mcp/<gateway>/``
(POST, GET, DELETE) and ``/.well-known/oauth-protected-resource/mcp/<gateway>/``
(RFC 9728 protected-resource metadata, so clients discover the bearer scheme).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import time
from dataclasses import dataclass, field
from typing import Any, Final

import anyio
import mcp_types as types
from asgiref.sync import sync_to_async
from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import (
    AuthenticatedUser,
    BearerAuthBackend,
    RequireAuthMiddleware,
)
from mcp.server.auth.provider import AccessToken
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.auth import ProtectedResourceMetadata
from mcp.shared.exceptions import MCPError
from pydantic import AnyHttpUrl
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from agentcore.arguments import canonical_sha256
from core.types import User
from orchestration.gateway import (
    IDEMPOTENCY_META_KEY,
    STATUS_TOOL,
    GatewayOutcome,
    GatewayRefused,
    GatewayStarted,
    gateway_call_brief,
    gateway_call_cancel,
    gateway_call_execute,
    gateway_call_finish,
    gateway_call_kept,
    gateway_call_outcome,
    gateway_call_start,
    gateway_call_state,
    gateway_check,
    gateway_tool_call_id,
    gateway_tools,
)
from threads.agent_config import agent_settings

logger = logging.getLogger(__name__)

#: Seconds a call waiting for a person holds its request before the pending result.
DEFAULT_HOLD_SECONDS: Final = 50.0
#: Seconds between progress notifications while a request is held.
DEFAULT_PROGRESS_SECONDS: Final = 5.0
#: Seconds a call that is approved or executing may hold its request past the hold:
#: it waits for its upstream (bounded by the tool's own timeout), not for a person.
EXECUTION_GRACE_SECONDS: Final = 120.0
#: States in which a call waits for a person (or a client): held only ``hold_seconds``.
_WAITING_STATES: Final = frozenset({"pending", "awaiting_approval"})
#: The largest request body accepted, in bytes (larger: HTTP 413, nothing recorded).
MAX_REQUEST_BYTES: Final = 1024 * 1024
#: Sessions told about tool-list changes, at most (the oldest is forgotten first).
_MAX_WATCHED_SESSIONS: Final = 10_000
#: Polling of a held call's answer: the first pause, the longest one while the call
#: is young (an auto-approved call is answered within its upstream's latency), and
#: the longest one after :data:`_YOUNG_SECONDS` (it waits for a person), in seconds.
_FIRST_POLL: Final = 0.002
_LONGEST_YOUNG_POLL: Final = 0.02
_YOUNG_SECONDS: Final = 2.0
_LONGEST_POLL: Final = 0.25

_PATH = re.compile(r"^/mcp/(?P<gateway>[A-Za-z0-9][A-Za-z0-9_-]{0,99})/?$")
_METADATA_PATH = re.compile(
    r"^/\.well-known/oauth-protected-resource/mcp/(?P<gateway>[A-Za-z0-9][A-Za-z0-9_-]{0,99})/?$"
)

_JSONRPC_INVALID_PARAMS: Final = -32602
_ERROR_CODES: Final = {
    "unknown_gateway": -32601,
    "unknown_tool": _JSONRPC_INVALID_PARAMS,
    "invalid_arguments": _JSONRPC_INVALID_PARAMS,
    "conflict": _JSONRPC_INVALID_PARAMS,
    "not_found": _JSONRPC_INVALID_PARAMS,
}

STATUS_TOOL_DEFINITION: Final = types.Tool(
    name=STATUS_TOOL,
    description=(
        "Check a call that came back pending (it waits for a person's approval in "
        "Countersign): waits a while, then returns its result or says it still waits."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "toolCallId": {
                "type": "string",
                "description": "The toolCallId the pending result named.",
            }
        },
        "required": ["toolCallId"],
        "additionalProperties": False,
    },
    annotations=types.ToolAnnotations(read_only_hint=True, destructive_hint=False),
)


def _token_user(key: str) -> User | None:
    """Return the active user of API token ``key``, or ``None``."""
    from rest_framework.authtoken.models import Token

    token = Token.objects.select_related("user").filter(key=key).first()
    if token is None or not token.user.is_active:
        return None
    user: User = token.user
    return user


class CountersignTokenVerifier:
    """The SDK's ``TokenVerifier`` for Countersign API tokens (``manage.py createtoken``).

    The principal is the token (a session opened with one token answers 404 to
    another, the SDK's session-owner check); its ``subject`` is the user's pk.
    """

    async def verify_token(self, token: str) -> AccessToken | None:
        """Return the token's access info, or ``None`` for an unknown or inactive one."""
        user = await sync_to_async(_token_user)(token)
        if user is None:
            return None
        return AccessToken(
            token=token,
            client_id="token-" + hashlib.sha256(token.encode()).hexdigest()[:24],
            scopes=[],
            subject=str(user.pk),
        )


def _user_of(ctx: ServerRequestContext[Any, Any]) -> User:
    """Return the Countersign user the request's bearer token belongs to."""
    from django.contrib.auth import get_user_model

    request = ctx.request
    principal = request.scope.get("user") if request is not None else None
    if not isinstance(principal, AuthenticatedUser):
        raise MCPError(
            -32001, "authentication required: send Authorization: Bearer <token>"
        )
    user: User = get_user_model().objects.get(
        pk=int(principal.access_token.subject or 0)
    )
    return user


def _session_of(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """Return the request's ``Mcp-Session-Id``, or ``None`` (2026-07-28 has no sessions)."""
    request = ctx.request
    if request is None:
        return None
    value = request.headers.get("mcp-session-id")
    return str(value) if value else None


@dataclass
class _Gateway:
    """One gateway's MCP server, its session manager and the calls answered pending."""

    name: str
    server: Server[Any]
    manager: StreamableHTTPSessionManager
    started: asyncio.Event = field(default_factory=asyncio.Event)
    #: (user pk, session, tool, arguments hash) -> call pk, for calls answered pending.
    pending: dict[tuple[int, str, str, str], int] = field(default_factory=dict)
    #: Mcp-Session-Id -> a ``ServerSession`` of it, for the handshake-era sessions
    #: that listed tools: told on the session's standalone stream when the list
    #: changes (a session whose send fails is forgotten).
    sessions: dict[str, Any] = field(default_factory=dict)


class GatewayApp:
    """The ASGI app of every gateway: routes, authentication, lazily started managers."""

    def __init__(self) -> None:
        self._gateways: dict[str, _Gateway] = {}
        self._lock = asyncio.Lock()
        self._verifier = CountersignTokenVerifier()
        self._runners: set[asyncio.Task[None]] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve a gateway path; anything else answers 404."""
        path = scope.get("path", "")
        if (found := _METADATA_PATH.match(path)) is not None:
            await self._metadata(found["gateway"], scope, receive, send)
            return
        found = _PATH.match(path)
        if found is None:
            await JSONResponse({"error": "not found"}, status_code=404)(
                scope, receive, send
            )
            return
        try:
            gateway_check(gateway=found["gateway"])
        except GatewayRefused as refused:
            await JSONResponse({"error": str(refused)}, status_code=404)(
                scope, receive, send
            )
            return
        entry = await self._gateway(found["gateway"])
        app: ASGIApp = RequireAuthMiddleware(
            entry.manager.handle_request,
            [],
            AnyHttpUrl(_metadata_url(scope, found["gateway"])),
        )
        app = AuthContextMiddleware(app)
        app = AuthenticationMiddleware(app, backend=BearerAuthBackend(self._verifier))
        await app(scope, receive, send)

    async def _metadata(
        self, gateway: str, scope: Scope, receive: Receive, send: Send
    ) -> None:
        """Answer the gateway's RFC 9728 protected-resource metadata."""
        try:
            gateway_check(gateway=gateway)
        except GatewayRefused as refused:
            await JSONResponse({"error": str(refused)}, status_code=404)(
                scope, receive, send
            )
            return
        base = _base_url(scope)
        metadata = ProtectedResourceMetadata(
            resource=AnyHttpUrl(f"{base}/mcp/{gateway}/"),
            authorization_servers=[AnyHttpUrl(f"{base}/")],
            resource_name=f"Countersign MCP gateway {gateway!r}",
            resource_documentation=AnyHttpUrl(f"{base}/api/docs/"),
        )
        body = metadata.model_dump_json(by_alias=True, exclude_none=True)
        await Response(body, media_type="application/json")(scope, receive, send)

    async def _gateway(self, name: str) -> _Gateway:
        """Return gateway ``name``'s server and manager, starting them on first use."""
        entry = self._gateways.get(name)
        if entry is None:
            async with self._lock:
                entry = self._gateways.get(name)
                if entry is None:
                    entry = self._build(name)
                    self._gateways[name] = entry
                    task = asyncio.get_running_loop().create_task(self._run(entry))
                    self._runners.add(task)
                    task.add_done_callback(self._runners.discard)
        await entry.started.wait()
        return entry

    async def _run(self, entry: _Gateway) -> None:
        """Keep ``entry``'s session manager running, and its tool list watched, for good."""
        async with entry.manager.run():
            entry.started.set()
            await _watch_tools(entry)

    def _build(self, name: str) -> _Gateway:
        """Build gateway ``name``'s low-level MCP server and its session manager."""
        config = agent_settings(name)
        holder: dict[str, _Gateway] = {}

        async def list_tools(
            ctx: ServerRequestContext[Any, Any],
            params: types.PaginatedRequestParams | None,
        ) -> types.ListToolsResult:
            session = _session_of(ctx)
            if session is not None:
                sessions = holder["entry"].sessions
                sessions[session] = ctx.session
                if len(sessions) > _MAX_WATCHED_SESSIONS:
                    sessions.pop(next(iter(sessions)))
            tools = await sync_to_async(gateway_tools)(gateway=name)
            listed = [
                types.Tool(
                    name=tool.name,
                    description=tool.description or None,
                    input_schema=tool.agui_tool().parameters or {"type": "object"},
                )
                for tool in tools
            ]
            return types.ListToolsResult(tools=[*listed, STATUS_TOOL_DEFINITION])

        async def call_tool(
            ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
        ) -> types.CallToolResult:
            return await _call(holder["entry"], ctx, params)

        server: Server[Any] = Server(
            f"countersign-{name}",
            version="1",
            instructions=config.get("description")
            or "Tools behind Countersign: risky calls wait for a person's approval.",
            on_list_tools=list_tools,
            on_call_tool=call_tool,
        )
        manager = StreamableHTTPSessionManager(
            app=server,
            max_request_body_size=MAX_REQUEST_BYTES,
            security_settings=_transport_security(),
        )
        entry = _Gateway(name=name, server=server, manager=manager)
        holder["entry"] = entry
        return entry


#: Seconds between two looks at a gateway's tool list (upstreams' list changes).
TOOLS_WATCH_SECONDS: Final = 0.5


def _tools_signature(gateway: str) -> str:
    """Return a hash of gateway ``gateway``'s tool list (names, descriptions, schemas)."""
    return canonical_sha256(
        [
            [tool.name, tool.description, tool.agui_tool().parameters]
            for tool in gateway_tools(gateway=gateway)
        ]
    )


async def _watch_tools(entry: _Gateway) -> None:
    """Send ``notifications/tools/list_changed`` to ``entry``'s sessions when its tools change.

    The upstream sources follow their servers' own list changes (``agentcore.mcp``);
    this compares the gateway's whole list every :data:`TOOLS_WATCH_SECONDS` while
    some session listed tools. Never raises: a failed look is tried again.
    """
    signature: str | None = None
    while True:
        await asyncio.sleep(TOOLS_WATCH_SECONDS)
        if not entry.sessions:
            signature = None
            continue
        try:
            current = await sync_to_async(_tools_signature)(entry.name)
        except Exception:
            logger.warning("gateway %r: listing its tools failed", entry.name)
            continue
        if signature is not None and current != signature:
            logger.info(
                "gateway %r: tool list changed; telling %d sessions",
                entry.name,
                len(entry.sessions),
            )
            for key, session in list(entry.sessions.items()):
                try:
                    with anyio.fail_after(5):
                        await session.send_tool_list_changed()
                except Exception:
                    logger.info("gateway %r: session gone", entry.name, exc_info=True)
                    entry.sessions.pop(key, None)
        signature = current


def _transport_security() -> TransportSecuritySettings | None:
    """Return the SDK's Host/Origin checks for ``ALLOWED_HOSTS`` (DNS rebinding), or ``None``.

    Django's own Host check does not see these paths, so the SDK's is turned on with
    the same hosts (any port). ``*`` or a ``.domain`` wildcard, which the SDK cannot
    express, leaves the check off.
    """
    from django.conf import settings

    hosts = [str(h) for h in settings.ALLOWED_HOSTS]
    if not hosts or any(h == "*" or h.startswith(".") for h in hosts):
        return None
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[form for h in hosts for form in (h, f"{h}:*")],
        allowed_origins=[
            f"{scheme}://{h}{port}"
            for h in hosts
            for scheme in ("http", "https")
            for port in ("", ":*")
        ],
    )


def _settings_float(gateway: str, key: str, default: float) -> float:
    """Return gateway ``gateway``'s ``key`` setting in seconds, or ``default``."""
    value = agent_settings(gateway).get(key)
    return float(value) if isinstance(value, (int, float)) else default


async def _call(
    entry: _Gateway,
    ctx: ServerRequestContext[Any, Any],
    params: types.CallToolRequestParams,
) -> types.CallToolResult:
    """Serve one ``tools/call``: start (or find) the call, then wait for its answer."""
    gateway = entry.name
    user = await sync_to_async(_user_of)(ctx)
    arguments = dict(params.arguments or {})
    if params.name == STATUS_TOOL:
        return await _status(entry, ctx, user=user, arguments=arguments)
    meta: dict[str, Any] = dict(params.meta or {})
    key = meta.get(IDEMPOTENCY_META_KEY)
    if key is not None and not isinstance(key, str):
        raise MCPError(
            _JSONRPC_INVALID_PARAMS,
            f"_meta[{IDEMPOTENCY_META_KEY!r}] must be a string, got {type(key).__name__}",
        )
    session = _session_of(ctx)
    thread_session = (
        session or f"sessionless-{time.strftime('%Y-%m-%d', time.gmtime())}"
    )
    pending_key = (user.pk, thread_session, params.name, canonical_sha256(arguments))
    tool_call_pk = entry.pending.get(pending_key) if key is None else None
    tool_call_id: str | None = None
    if tool_call_pk is None:
        tool_call_id = gateway_tool_call_id(
            gateway=gateway,
            user_pk=user.pk,
            session=session,
            request_id=ctx.request_id,
            idempotency_key=key,
        )
        try:
            started = await sync_to_async(gateway_call_start)(
                gateway=gateway,
                user=user,
                session=thread_session,
                tool_call_id=tool_call_id,
                name=params.name,
                arguments=arguments,
                metadata={
                    "requestId": ctx.request_id,
                    "session": bool(session),
                    "protocolVersion": ctx.protocol_version,
                },
                keyed=key is not None,
            )
        except GatewayRefused as refused:
            raise MCPError(_ERROR_CODES[refused.code], str(refused)) from None
        if started.run_here is not None:
            return _result(await _run_here(ctx, started=started))
        tool_call_pk, tool_call_id = started.tool_call_pk, started.tool_call_id
    result = await _wait(entry, ctx, tool_call_pk=tool_call_pk, name=params.name)
    if result.meta and result.meta.get("io.countersign/status") == "pending":
        entry.pending[pending_key] = tool_call_pk
    else:
        entry.pending.pop(pending_key, None)
    return result


async def _run_here(
    ctx: ServerRequestContext[Any, Any], *, started: GatewayStarted
) -> GatewayOutcome:
    """Run a call reserved at its start in this request (the short path); return its outcome.

    A client that gives up meanwhile does not stop it: the cancellation is
    audited as after start (``gateway_call_cancel``) and the outcome is still
    recorded (kept, never sent).
    """
    running = asyncio.ensure_future(_execute_and_finish(started))
    try:
        return await asyncio.shield(running)
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True):
            user = await sync_to_async(_user_of)(ctx)
            await sync_to_async(gateway_call_cancel)(
                tool_call_pk=started.tool_call_pk, cancelled_by=user
            )
            await running
        raise


async def _execute_and_finish(started: GatewayStarted) -> GatewayOutcome:
    result = await gateway_call_execute(started=started)
    return await sync_to_async(gateway_call_finish)(started=started, result=result)


async def _status(
    entry: _Gateway,
    ctx: ServerRequestContext[Any, Any],
    *,
    user: User,
    arguments: dict[str, Any],
) -> types.CallToolResult:
    """Serve the status tool: wait on a call the client was told is pending."""
    tool_call_id = arguments.get("toolCallId")
    if not isinstance(tool_call_id, str) or set(arguments) != {"toolCallId"}:
        raise MCPError(
            _JSONRPC_INVALID_PARAMS,
            f"{STATUS_TOOL} takes exactly one argument, toolCallId (a string from a "
            "pending result)",
        )
    call = await sync_to_async(gateway_call_kept)(
        gateway=entry.name, user=user, tool_call_id=tool_call_id
    )
    if call is None:
        raise MCPError(
            _JSONRPC_INVALID_PARAMS,
            f"no call {tool_call_id!r} of yours on gateway {entry.name!r}; "
            "give the toolCallId a pending result named",
        )
    return await _wait(entry, ctx, tool_call_pk=call.pk, name=call.name, cancel=False)


async def _wait(
    entry: _Gateway,
    ctx: ServerRequestContext[Any, Any],
    *,
    tool_call_pk: int,
    name: str,
    cancel: bool = True,
) -> types.CallToolResult:
    """Hold the request until call ``tool_call_pk`` is answered or the hold ends.

    A client's cancellation (``notifications/cancelled``, or the response stream
    closed) cancels the call when ``cancel`` (``orchestration.gateway.gateway_call_cancel``).
    """
    hold = _settings_float(entry.name, "hold_seconds", DEFAULT_HOLD_SECONDS)
    every = _settings_float(entry.name, "progress_seconds", DEFAULT_PROGRESS_SECONDS)
    start = time.monotonic()
    next_progress = start + every
    pause = _FIRST_POLL
    try:
        while True:
            outcome = await sync_to_async(gateway_call_outcome)(
                tool_call_pk=tool_call_pk
            )
            if outcome is not None:
                return _result(outcome)
            now = time.monotonic()
            if now - start >= hold:
                state = await sync_to_async(gateway_call_state)(
                    tool_call_pk=tool_call_pk
                )
                if (
                    state in _WAITING_STATES
                    or now - start >= hold + EXECUTION_GRACE_SECONDS
                ):
                    return await _pending(tool_call_pk=tool_call_pk, name=name)
            if now >= next_progress:
                next_progress = now + every
                state = await sync_to_async(gateway_call_state)(
                    tool_call_pk=tool_call_pk
                )
                await ctx.session.report_progress(
                    round(now - start, 1),
                    hold,
                    f"{name} is {state or 'waiting'} in Countersign",
                )
            await anyio.sleep(min(pause, max(0.001, hold - (now - start))))
            young = now - start < _YOUNG_SECONDS
            pause = min(pause * 2, _LONGEST_YOUNG_POLL if young else _LONGEST_POLL)
    except anyio.get_cancelled_exc_class():
        if cancel:
            with anyio.CancelScope(shield=True):
                user = await sync_to_async(_user_of)(ctx)
                await sync_to_async(gateway_call_cancel)(
                    tool_call_pk=tool_call_pk, cancelled_by=user
                )
        raise


async def _pending(*, tool_call_pk: int, name: str) -> types.CallToolResult:
    """Return the result that tells the model its call still waits, and how to check again."""
    brief = await sync_to_async(gateway_call_brief)(tool_call_pk=tool_call_pk)
    call_id, state = brief if brief is not None else ("?", "gone")
    waiting = (
        "waits for a person's approval in Countersign"
        if state in _WAITING_STATES
        else "is approved and still running in Countersign"
    )
    ran = (
        "it has not run yet" if state in _WAITING_STATES else "its result is not in yet"
    )
    text = (
        f"PENDING: the call of {name} {waiting} "
        f"(state {state}, toolCallId {call_id}); {ran}. To check again, "
        f"call {name} again with the same arguments, or call {STATUS_TOOL} with "
        f'{{"toolCallId": "{call_id}"}}.'
    )
    return types.CallToolResult(
        content=[types.TextContent(text=text)],
        is_error=False,
        _meta={
            "io.countersign/status": "pending",
            "io.countersign/toolCallId": call_id,
        },
    )


def _result(outcome: GatewayOutcome) -> types.CallToolResult:
    """Return ``outcome`` as the MCP ``CallToolResult``."""
    return types.CallToolResult.model_validate(
        {
            "content": outcome.content,
            "isError": outcome.is_error,
            "_meta": {"io.countersign/status": outcome.status},
        }
    )


def _base_url(scope: Scope) -> str:
    """Return ``scheme://host`` of the request."""
    headers = dict(scope.get("headers") or [])
    host = headers.get(b"host", b"localhost").decode("latin-1")
    return f"{scope.get('scheme', 'http')}://{host}"


def _metadata_url(scope: Scope, gateway: str) -> str:
    """Return the protected-resource metadata URL of ``gateway`` (RFC 9728 §3.1)."""
    return f"{_base_url(scope)}/.well-known/oauth-protected-resource/mcp/{gateway}/"


#: The ASGI app ``config.asgi`` routes ``/mcp/`` and its metadata path to.
application = GatewayApp()
