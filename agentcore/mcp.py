"""MCP servers as a tool source: their tools become ordinary :class:`~agentcore.tools.Tool` objects.

An :class:`McpToolSource` keeps one connection to one MCP server, made with the
official ``mcp`` SDK (:class:`mcp.Client`), over streamable HTTP or stdio. It lists
the server's tools once, refreshes the list when the server announces a change
(``subscriptions/listen`` on 2026-07-28 servers, ``notifications/tools/list_changed``
on handshake-era ones) and builds one :class:`Tool` per MCP tool:

- the name is ``<server>__<tool>`` (checked against :data:`~agentcore.tools.NAME_PATTERN`),
  so two servers never collide; the input schema passes through unchanged (RT-01);
- every MCP tool runs on the application side (``runs_on="application"``): it goes
  through the same pending-call dispatch, policy, approval queue and exactly-once
  execution as a local application tool;
- the policy comes from the annotations read as *untrusted hints*: only a server the
  configuration marks ``trusted`` may have a ``readOnlyHint`` tool run without
  approval; anything else needs approval unless the configuration overrides it per
  tool (RT-10: a server's description never widens a permission).

The connection lives on a private event loop in a daemon thread, so sync callers
(Django views, Celery tasks) and async callers (the tool runtime's loop) share it.
A call checks the live listing first: a tool removed since the call was proposed,
or whose input schema changed, is refused with an actionable error instead of being
run. A server that asks for more input mid-call (form-mode elicitation) is answered
by the call's :attr:`ToolContext.input_requester` (the product queues a request of
kind ``input`` and waits, within the tool's timeout, for an operator's answer);
without one, or when the request cannot be tied to exactly one running call, it is
declined.

This module never imports Django.

Over 400 lines because it holds the whole MCP client side: configuration, the per-
process connection on its own loop, listing and refresh, policy from annotations,
content mapping and call execution; each part is only used by the others.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal, TextIO, cast, get_args

from agentcore.tools import (
    NAME_PATTERN,
    ErrorType,
    Policy,
    Tool,
    ToolContext,
    ToolDefinitionError,
    ToolError,
    ToolOutput,
    ToolPermissionDenied,
    ToolTimeout,
    ToolUpstreamUnavailable,
    define_tool,
)

if TYPE_CHECKING:
    from mcp import Client
    from mcp.shared.exceptions import MCPError
    from mcp_types import (
        CallToolResult,
        ContentBlock,
        Implementation,
        RequestParamsMeta,
        ToolAnnotations,
    )
    from mcp_types import Tool as McpTool

    from agentcore.content import Content, MediaKind

# agentcore.content (the protocol's part models) is imported where a result is
# mapped: configuring and checking MCP servers, which every Django process does at
# setup (threads.checks), needs none of it (bench B6).

__all__ = [
    "IDEMPOTENCY_META_KEY",
    "NAME_SEPARATOR",
    "SUPPORTED_PROTOCOL_VERSIONS",
    "TRANSPORTS",
    "McpServerConfig",
    "McpToolOverride",
    "McpToolRemoved",
    "McpToolSource",
    "content_from_mcp",
    "namespaced_name",
    "policy_from_annotations",
]

logger = logging.getLogger(__name__)

#: Between the server name and the MCP tool name in a tool's name.
NAME_SEPARATOR: Final = "__"
#: The ``_meta`` key carrying a call's idempotency key to the server (LP-07).
IDEMPOTENCY_META_KEY: Final = "io.countersign/idempotencyKey"
Transport = Literal["streamable_http", "stdio"]
TRANSPORTS: Final = get_args(Transport)
#: Protocol revisions this client speaks (RT-10): the 2026-07-28 revision, and the
#: handshake-era ones the SDK falls back to when a server does not answer
#: ``server/discover``.
SUPPORTED_PROTOCOL_VERSIONS: Final = (
    "2026-07-28",
    "2025-11-25",
    "2025-06-18",
    "2025-03-26",
    "2024-11-05",
)
_LIST_PAGE_CAP: Final = 50
#: Seconds between liveness pings on a connection without a listen stream.
_PING_INTERVAL: Final = 30.0
_RECONNECT_BACKOFF: Final = (0.5, 1.0, 2.0, 5.0, 10.0)
_POLICIES: Final = frozenset(get_args(Policy))
_MEDIA_PREFIXES: Final[tuple[tuple[str, MediaKind], ...]] = (
    ("image/", "image"),
    ("audio/", "audio"),
    ("video/", "video"),
)


class McpToolRemoved(ToolError):
    """The server no longer offers the tool a call names."""

    error_type: ErrorType = "unknown_tool"


@dataclass(frozen=True)
class McpToolOverride:
    """Per-tool settings that override what the annotations suggest.

    ``policy`` replaces the annotation-derived policy; ``timeout`` (seconds),
    ``max_result_bytes`` and ``idempotent`` replace the server's defaults.
    """

    policy: Policy | None = None
    timeout: float | None = None
    max_result_bytes: int | None = None
    idempotent: bool | None = None


@dataclass(frozen=True)
class McpServerConfig:
    """How to reach one MCP server and how far to trust it.

    ``name`` (``[A-Za-z0-9]`` words joined by single ``-`` or ``_``) prefixes its
    tools. Exactly one of ``url`` (streamable HTTP; ``headers`` are sent with every
    request, already resolved by the caller, e.g. from environment variables) or
    ``command`` (stdio: ``command`` with ``args``, ``env`` and ``cwd``) is set.
    ``trusted`` lets ``readOnlyHint`` annotations choose the ``auto`` policy.
    ``timeout`` and ``max_result_bytes`` apply to each of its tools (LP-05);
    ``connect_timeout`` bounds connecting and listing. ``tools`` overrides per MCP
    tool name; ``permission`` is the Django permission its tools require.
    ``mode`` ``"auto"`` negotiates the version (``server/discover``, else the
    initialize handshake); ``"legacy"`` always uses the initialize handshake.
    Raises :class:`ToolDefinitionError` when a field is invalid.
    """

    name: str
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    command: str | None = None
    args: Sequence[str] = ()
    env: Mapping[str, str] | None = field(default=None, repr=False)
    cwd: str | None = None
    trusted: bool = False
    timeout: float = 30.0
    max_result_bytes: int = 64 * 1024
    connect_timeout: float = 10.0
    tools: Mapping[str, McpToolOverride] = field(default_factory=dict)
    permission: str | None = None
    mode: Literal["auto", "legacy"] = "auto"

    def __post_init__(self) -> None:
        """Check the fields. Raises :class:`ToolDefinitionError`."""
        problems = config_problems(self)
        if problems:
            raise ToolDefinitionError(
                f"MCP server {self.name!r}: " + "; ".join(problems)
            )

    @property
    def transport(self) -> Transport:
        """Return ``"streamable_http"`` or ``"stdio"``."""
        return "streamable_http" if self.url else "stdio"


_SERVER_NAME_CHARS: Final = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
)


def server_name_ok(name: object) -> bool:
    """Return whether ``name`` may prefix tool names without ambiguity.

    Alphanumeric words joined by a single ``-`` or ``_``, so the first ``__`` of a
    tool name always ends the server name and two servers cannot produce the
    same tool name.
    """
    if not isinstance(name, str) or not name or len(name) > 30:
        return False
    if NAME_SEPARATOR in name or "--" in name or "-_" in name or "_-" in name:
        return False
    if name[0] in "-_" or name[-1] in "-_":
        return False
    return all(c in _SERVER_NAME_CHARS or c in "-_" for c in name)


def config_problems(config: McpServerConfig) -> list[str]:
    """Return what is wrong with ``config``, one sentence each (empty when valid)."""
    problems: list[str] = []
    if not server_name_ok(config.name):
        problems.append(
            "the server name must be 1-30 letters or digits, in words joined by a "
            "single '-' or '_' (it prefixes tool names as '<server>__<tool>')"
        )
    if bool(config.url) == bool(config.command):
        problems.append(
            "give exactly one of 'url' (streamable HTTP) or 'command' (stdio)"
        )
    if config.url and not config.url.startswith(("http://", "https://")):
        problems.append("'url' must be an http:// or https:// URL")
    for label, value in (
        ("timeout", config.timeout),
        ("connect_timeout", config.connect_timeout),
    ):
        if not _positive(value):
            problems.append(f"{label!r} must be a positive number of seconds")
    if (
        isinstance(config.max_result_bytes, bool)
        or not isinstance(config.max_result_bytes, int)
        or config.max_result_bytes < 256
    ):
        problems.append("'max_result_bytes' must be an integer >= 256")
    if config.mode not in ("auto", "legacy"):
        problems.append("'mode' must be 'auto' or 'legacy'")
    for tool_name, override in config.tools.items():
        if not isinstance(override, McpToolOverride):
            problems.append(f"tools[{tool_name!r}] must be an McpToolOverride")
        elif override.policy is not None and override.policy not in _POLICIES:
            problems.append(
                f"tools[{tool_name!r}].policy must be one of {sorted(_POLICIES)}"
            )
        elif override.timeout is not None and not _positive(override.timeout):
            problems.append(
                f"tools[{tool_name!r}].timeout must be a positive number of seconds"
            )
        elif override.max_result_bytes is not None and not (
            isinstance(override.max_result_bytes, int)
            and not isinstance(override.max_result_bytes, bool)
            and override.max_result_bytes >= 256
        ):
            problems.append(f"tools[{tool_name!r}].max_result_bytes must be >= 256")
    if config.permission is not None and (
        not isinstance(config.permission, str) or "." not in config.permission
    ):
        problems.append(
            "'permission' must be a Django permission string such as 'demo.use_files'"
        )
    return problems


def _positive(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float) and value > 0


def namespaced_name(server: str, tool: str) -> str:
    """Return the tool name ``<server>__<tool>`` the model sees."""
    return f"{server}{NAME_SEPARATOR}{tool}"


# --- policy from annotations --------------------------------------------------------


@dataclass(frozen=True)
class _Claims:
    """What a server's annotations say about a tool (hints, never verified)."""

    read_only: bool | None
    destructive: bool | None
    idempotent: bool | None
    open_world: bool | None

    @classmethod
    def of(cls, annotations: ToolAnnotations | None) -> _Claims | None:
        if annotations is None:
            return None
        return cls(
            read_only=getattr(annotations, "read_only_hint", None),
            destructive=getattr(annotations, "destructive_hint", None),
            idempotent=getattr(annotations, "idempotent_hint", None),
            open_world=getattr(annotations, "open_world_hint", None),
        )

    def summary(self) -> str:
        parts = []
        for label, value in (
            ("readOnlyHint", self.read_only),
            ("destructiveHint", self.destructive),
            ("idempotentHint", self.idempotent),
            ("openWorldHint", self.open_world),
        ):
            if value is not None:
                parts.append(f"{label}={str(value).lower()}")
        return ", ".join(parts) or "no hints"


def policy_from_annotations(
    annotations: ToolAnnotations | None,
    *,
    trusted: bool,
    override: Policy | None = None,
) -> Policy:
    """Return the policy for an MCP tool from its (untrusted) annotations.

    ``override`` (from the configuration) wins. Otherwise ``readOnlyHint: true``
    without ``destructiveHint: true`` gives ``auto`` only when the server is
    ``trusted``; a destructive hint, missing annotations or an untrusted server
    give ``require_approval``. Implements RT-10, LP-01.
    """
    if override is not None:
        return override
    claims = _Claims.of(annotations)
    if (
        trusted
        and claims is not None
        and claims.read_only is True
        and claims.destructive is not True
    ):
        return "auto"
    return "require_approval"


# --- content mapping ----------------------------------------------------------------


def _media_kind(mime_type: str | None) -> MediaKind:
    for prefix, kind in _MEDIA_PREFIXES:
        if mime_type and mime_type.startswith(prefix):
            return kind
    return "document"


def _metadata(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v not in (None, "")}


def _block_part(block: ContentBlock) -> dict[str, Any] | None:
    """Return the AG-UI part for one MCP content block, or ``None`` to drop it."""
    from mcp_types import (
        AudioContent,
        EmbeddedResource,
        ImageContent,
        ResourceLink,
        TextContent,
        TextResourceContents,
    )

    from agentcore.content import data_source, media_part, text_part, url_source

    if isinstance(block, TextContent):
        return text_part(block.text)
    if isinstance(block, ImageContent):
        return media_part("image", data_source(block.data, mime_type=block.mime_type))
    if isinstance(block, AudioContent):
        return media_part("audio", data_source(block.data, mime_type=block.mime_type))
    if isinstance(block, ResourceLink):
        return media_part(
            _media_kind(block.mime_type),
            url_source(block.uri, mime_type=block.mime_type),
            metadata=_metadata(
                mcp="resource_link",
                name=block.name,
                title=block.title,
                description=block.description,
            ),
        )
    if isinstance(block, EmbeddedResource):
        resource = block.resource
        mime = resource.mime_type
        if isinstance(resource, TextResourceContents):
            return text_part(
                resource.text,
                metadata=_metadata(mcp="resource", uri=resource.uri, mimeType=mime),
            )
        return media_part(
            _media_kind(mime),
            data_source(resource.blob, mime_type=mime or "application/octet-stream"),
            metadata=_metadata(mcp="resource", uri=resource.uri),
        )
    return None


def content_from_mcp(result: CallToolResult) -> tuple[Content, dict[str, Any]]:
    """Map an MCP ``CallToolResult`` to AG-UI result content and log details.

    Text, image, audio, resource links (a media part of the kind their MIME type
    names, document otherwise, with a URL source and their name in ``metadata``)
    and embedded resources (text parts, or media parts with inline data, their URI
    in ``metadata``) keep their order. ``structuredContent`` is serialized into a
    text part only when no text block carries it already (MCP servers send its
    JSON copy as text; TC-11); it is always kept in the details. A block of an
    unknown type is dropped, never fatal (TC-14). A single plain text part is
    returned as a string. Implements TC-10, TC-11, TC-12, TC-14.
    """
    from agentcore.content import serialize_structured, text_part

    parts: list[dict[str, Any]] = []
    dropped: list[str] = []
    for block in result.content or ():
        try:
            part = _block_part(block)
        except Exception:  # a malformed block from a server is data, not a crash
            logger.warning("dropped a malformed MCP content block", exc_info=True)
            part = None
        if part is None:
            dropped.append(str(getattr(block, "type", type(block).__name__)))
        else:
            parts.append(part)
    details: dict[str, Any] = {}
    structured = getattr(result, "structured_content", None)
    if structured is not None:
        details["structured_content"] = structured
        if not any(p["type"] == "text" for p in parts):
            parts.append(
                text_part(
                    serialize_structured(structured),
                    metadata={"mcp": "structuredContent"},
                )
            )
    if dropped:
        details["dropped_blocks"] = dropped
    if len(parts) == 1 and parts[0]["type"] == "text" and "metadata" not in parts[0]:
        return parts[0]["text"], details
    return (parts if parts else ""), details


def mcp_blocks_from_content(content: Any) -> list[dict[str, Any]]:
    """Return AG-UI result content (a string or parts) as MCP content blocks (JSON).

    The inverse of :func:`content_from_mcp`, for an answer sent to an MCP client
    (the gateway, docs/mcp.md): text parts as text (an embedded text resource
    again when its ``metadata`` names a URI), inline image and audio as such,
    parts with a URL source as resource links, other inline media as embedded
    blob resources; anything else as its JSON text, never dropped. Implements TC-10.
    """
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    blocks: list[dict[str, Any]] = []
    for part in content if isinstance(content, list) else [content]:
        blocks.append(_part_block(part))
    return blocks


def _part_block(part: Any) -> dict[str, Any]:
    """Return the MCP content block for one AG-UI part."""
    if not isinstance(part, dict):
        return {"type": "text", "text": str(part)}
    kind = part.get("type")
    raw_source = part.get("source")
    source: dict[str, Any] = raw_source if isinstance(raw_source, dict) else {}
    raw_meta = part.get("metadata")
    meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
    mime = source.get("mimeType") or meta.get("mimeType")
    if kind == "text":
        if meta.get("mcp") == "resource" and meta.get("uri"):
            resource = {"uri": meta["uri"], "text": str(part.get("text", ""))}
            if mime:
                resource["mimeType"] = mime
            return {"type": "resource", "resource": resource}
        return {"type": "text", "text": str(part.get("text", ""))}
    if source.get("type") == "url":
        link = {"type": "resource_link", "uri": source.get("value", ""), "name": ""}
        link["name"] = str(meta.get("name") or source.get("value", ""))
        if mime:
            link["mimeType"] = mime
        return link
    if source.get("type") == "data":
        data = source.get("value", "")
        if kind in ("image", "audio") and meta.get("mcp") != "resource":
            return {
                "type": kind,
                "data": data,
                "mimeType": mime or "application/octet-stream",
            }
        uri = str(meta.get("uri") or f"data:{mime or 'application/octet-stream'}")
        blob = {
            "uri": uri,
            "blob": data,
            "mimeType": mime or "application/octet-stream",
        }
        return {"type": "resource", "resource": blob}
    return {
        "type": "text",
        "text": json.dumps(part, sort_keys=True, ensure_ascii=False),
    }


def _error_text(result: CallToolResult) -> str:
    from mcp_types import TextContent

    texts = [b.text for b in result.content or () if isinstance(b, TextContent)]
    return " ".join(texts).strip() or "no details given"


# --- the connection -----------------------------------------------------------------


@dataclass(frozen=True)
class _Listed:
    """One MCP tool as last listed: its built Tool and the raw schema."""

    tool: Tool
    mcp_name: str
    schema_json: str
    listing_json: str


def _schema_key(schema: Any) -> str:
    return json.dumps(schema, sort_keys=True, separators=(",", ":"))


def _listing_key(mcp_tool: McpTool) -> str:
    """Return everything a built Tool depends on, as canonical JSON."""
    annotations = mcp_tool.annotations
    return json.dumps(
        {
            "description": mcp_tool.description,
            "schema": mcp_tool.input_schema,
            "annotations": annotations.model_dump(mode="json")
            if annotations is not None
            else None,
        },
        sort_keys=True,
        separators=(",", ":"),
        default=str,
    )


class McpToolSource:
    """One MCP server's tools, kept current, and the calls to them.

    :meth:`tools` connects on first use (waiting at most ``connect_timeout``) and
    returns the tools as last listed; a server that cannot be reached yields the
    last known list (empty before the first success) and is retried with backoff.
    Thread-safe; each instance owns a daemon thread running its event loop.
    Implements RT-01, RT-03, RT-10, LP-05, LP-07, SEC-04, SEC-05.
    """

    def __init__(
        self,
        config: McpServerConfig,
        *,
        on_change: Callable[[McpToolSource], None] | None = None,
    ) -> None:
        """Prepare (not yet connect) the source for ``config``; ``on_change`` runs after each relisting."""
        self.config = config
        self._on_change = on_change
        self._lock = threading.Lock()
        self._listed: dict[str, _Listed] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._client: Client | None = None
        self._ready = threading.Event()
        self._closed = False
        self._refresh_wanted: asyncio.Event | None = None
        self._stop: asyncio.Event | None = None
        # Set by a call that finds no connection: the reconnect backoff ends now.
        self._reconnect_now: asyncio.Event | None = None
        self._last_error: str | None = None
        self._protocol_version: str | None = None
        self._generation = 0
        self._pid = os.getpid()
        #: Calls in flight on this connection: their context and deadline
        #: (``time.monotonic()``), so an elicitation can be tied to its call.
        self._inflight: dict[int, tuple[ToolContext, float]] = {}
        #: Per call in flight: set to the protocol fault that ends it early.
        self._faults: dict[int, asyncio.Future[BaseException]] = {}
        #: Set (on the loop) when a call found the connection gone: reconnect now.
        self._lost: asyncio.Event | None = None
        _register(self)

    # -- public ---------------------------------------------------------------------

    def tools(self) -> tuple[Tool, ...]:
        """Return this server's tools as last listed, connecting first if needed."""
        self._ensure_started()
        self._ready.wait(self.config.connect_timeout)
        with self._lock:
            return tuple(item.tool for item in self._listed.values())

    @property
    def generation(self) -> int:
        """Return how many times the tool list was (re)built; callers cache on it."""
        return self._generation

    @property
    def protocol_version(self) -> str | None:
        """Return the protocol version of the last connection, or ``None`` before one."""
        return self._protocol_version

    @property
    def last_error(self) -> str | None:
        """Return why the last connection attempt failed (sanitized type only), or ``None``."""
        return self._last_error

    def refresh(self, timeout: float | None = None) -> None:
        """Relist the tools now and wait for it (at most ``timeout`` seconds)."""
        self._ensure_started()
        loop = self._loop
        if loop is None:
            return
        future = asyncio.run_coroutine_threadsafe(self._refresh_now(), loop)
        try:
            future.result(timeout or self.config.connect_timeout)
        except Exception as error:  # refreshing is best effort; calls check again
            logger.warning(
                "MCP server %r: relisting failed: %s",
                self.config.name,
                type(error).__name__,
            )

    def close(self) -> None:
        """Disconnect and stop the thread (the stdio server process is ended)."""
        self._closed = True
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(stop.set)
        if self._thread is not None:
            self._thread.join(timeout=10)

    async def call(
        self,
        mcp_name: str,
        arguments: dict[str, Any],
        *,
        schema_json: str,
        context: ToolContext,
        timeout: float,
    ) -> CallToolResult:
        """Call MCP tool ``mcp_name`` and return its ``CallToolResult``; awaitable from any loop.

        The live listing is checked first: a tool the server no longer offers
        raises :class:`McpToolRemoved`; one whose input schema differs from
        ``schema_json`` (the schema the call was proposed and approved against)
        raises :class:`ToolPermissionDenied`. The idempotency key travels in
        ``_meta`` (LP-07). Cancelling the awaiting task cancels the request.
        Raises :class:`ToolUpstreamUnavailable`, :class:`ToolTimeout` or
        :class:`ToolError` for failures. Implements LP-05, LP-07, SEC-06.
        """
        self._ensure_started()
        loop = self._loop
        if loop is None:
            raise ToolUpstreamUnavailable(self._unreachable_message())
        future = asyncio.run_coroutine_threadsafe(
            self._call_in_loop(mcp_name, arguments, schema_json, context, timeout), loop
        )
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            future.cancel()
            raise

    # -- the loop thread ------------------------------------------------------------

    def _ensure_started(self) -> None:
        if os.getpid() != self._pid:
            # A forked worker child inherits no running thread: start afresh.
            self._pid = os.getpid()
            self._thread = None
            self._loop = None
            self._ready.clear()
        with self._lock:
            if self._closed:
                raise ToolUpstreamUnavailable(
                    f"the connection to MCP server {self.config.name!r} was closed"
                )
            if self._thread is not None and self._thread.is_alive():
                return
            ready = threading.Event()
            self._thread = threading.Thread(
                target=self._thread_main,
                args=(ready,),
                name=f"mcp-{self.config.name}",
                daemon=True,
            )
            self._thread.start()
        ready.wait(5)

    def _thread_main(self, started: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self._loop = loop
        self._refresh_wanted = asyncio.Event()
        self._stop = asyncio.Event()
        self._reconnect_now = asyncio.Event()
        self._lost = asyncio.Event()
        started.set()
        try:
            loop.run_until_complete(self._maintain())
        finally:
            self._client = None
            loop.close()

    async def _maintain(self) -> None:
        """Keep one connection open; relist on change; reconnect with backoff."""
        assert self._stop is not None
        attempt = 0
        while not self._stop.is_set():
            try:
                async with self._make_client() as client:
                    if self._lost is not None:
                        self._lost.clear()
                    self._client = client
                    self._protocol_version = client.protocol_version
                    await self._refresh(client)
                    self._last_error = None
                    attempt = 0
                    self._ready.set()
                    await self._watch(client)
            except asyncio.CancelledError:
                raise
            except BaseException as error:
                self._last_error = type(error).__name__
                logger.warning(
                    "MCP server %r (%s): connection failed or lost: %s: %.300s",
                    self.config.name,
                    self.config.transport,
                    type(error).__name__,
                    error,
                )
            finally:
                self._client = None
            self._ready.set()
            if self._stop.is_set():
                break
            delay = _RECONNECT_BACKOFF[min(attempt, len(_RECONNECT_BACKOFF) - 1)]
            attempt += 1
            await self._backoff(delay)

    async def _backoff(self, delay: float) -> None:
        """Wait ``delay`` seconds before reconnecting, less if stopped or a call waits."""
        assert self._stop is not None
        assert self._reconnect_now is not None
        waits = [
            asyncio.ensure_future(self._stop.wait()),
            asyncio.ensure_future(self._reconnect_now.wait()),
        ]
        try:
            await asyncio.wait(
                waits, timeout=delay, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            for wait in waits:
                wait.cancel()
            self._reconnect_now.clear()

    def _make_client(self) -> Any:
        from mcp import Client, StdioServerParameters

        config = self.config
        common: dict[str, Any] = {
            "read_timeout_seconds": config.connect_timeout,
            "message_handler": self._on_message,
            "client_info": _client_info(),
            # The tool list must be fetched live: a cached listing would hide a
            # removed tool or a changed schema from the checks in ``call``.
            "cache": None,
            "mode": config.mode,
            "elicitation_callback": self._on_elicit,
        }
        if config.url:
            import httpx2

            http = httpx2.AsyncClient(
                headers=dict(config.headers),
                timeout=httpx2.Timeout(config.connect_timeout, read=300.0),
            )
            from mcp.client.streamable_http import streamable_http_client

            return _ClosingClient(
                Client(streamable_http_client(config.url, http_client=http), **common),
                http,
            )
        from mcp.client.stdio import stdio_client

        params = StdioServerParameters(
            command=config.command or "",
            args=list(config.args),
            env=dict(config.env) if config.env is not None else None,
            cwd=config.cwd,
        )
        return Client(
            _screened(stdio_client(params, errlog=_child_stderr()), self._on_stray),
            **common,
        )

    def _on_stray(self, reply_id: object) -> None:
        """Fail the calls in flight: the server answered an id never sent (a protocol error)."""
        logger.warning(
            "MCP server %r answered request id %r, which was never sent",
            self.config.name,
            reply_id,
        )
        for fault in list(self._faults.values()):
            if not fault.done():
                fault.set_result(
                    _MalformedReply(f"a reply for request id {reply_id!r}, never sent")
                )

    async def _on_elicit(self, context: Any, params: Any) -> Any:
        """Answer a server's ``elicitation/create`` through the running call's requester.

        Returns an ``ElicitResult``: the operator's ``accept`` with content,
        ``decline``, or ``cancel`` (nobody answered within the call's timeout).
        Declined when no single call is in flight or it has no requester, and for
        URL-mode requests (nothing here can open a URL for the user).
        """
        from mcp_types import ElicitRequestFormParams, ElicitResult

        inflight = list(self._inflight.values())
        if (
            len(inflight) != 1
            or inflight[0][0].input_requester is None
            or not isinstance(params, ElicitRequestFormParams)
        ):
            logger.warning(
                "MCP server %r asked for input that cannot be routed; declined",
                self.config.name,
            )
            return ElicitResult(action="decline")
        call_context, deadline = inflight[0]
        requester = call_context.input_requester
        assert requester is not None
        remaining = max(deadline - time.monotonic(), 0.0)
        action, content = await asyncio.to_thread(
            requester, params.message, dict(params.requested_schema), remaining
        )
        if action == "accept":
            return ElicitResult(action="accept", content=content or {})
        return ElicitResult(action="decline" if action == "decline" else "cancel")

    async def _on_message(self, message: Any) -> None:
        """Relist on a handshake-era ``notifications/tools/list_changed``; fail calls on a malformed reply.

        A line the SDK cannot read as JSON-RPC (a ``result`` that is a bare
        string) reaches here as an exception while its call would wait for its
        timeout: every call in flight on this connection ends now with a protocol
        error (the reply cannot be told apart, so none of them can be trusted).
        """
        from mcp_types import ToolListChangedNotification

        if isinstance(message, Exception):
            logger.warning(
                "MCP server %r sent a malformed message: %s",
                self.config.name,
                type(message).__name__,
            )
            for fault in list(self._faults.values()):
                if not fault.done():
                    fault.set_result(_MalformedReply(_malformed_summary(message)))
            return

        if isinstance(message, ToolListChangedNotification) and self._refresh_wanted:
            self._refresh_wanted.set()

    async def _watch(self, client: Client) -> None:
        """Return when the connection is lost or the source is closed."""
        from mcp.client.subscriptions import ListenNotSupportedError
        from mcp.shared.exceptions import MCPError

        assert self._stop is not None
        assert self._refresh_wanted is not None
        assert self._lost is not None
        stop_task = asyncio.ensure_future(self._stop.wait())
        lost_task = asyncio.ensure_future(self._lost.wait())
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                events = subscription.__aiter__()
                while True:
                    event_task = asyncio.ensure_future(events.__anext__())
                    done, _ = await asyncio.wait(
                        {event_task, stop_task, lost_task},
                        return_when=asyncio.FIRST_COMPLETED,
                    )
                    if stop_task in done:
                        event_task.cancel()
                        return
                    if lost_task in done:
                        event_task.cancel()
                        raise ConnectionError("a call found the connection gone")
                    try:
                        event_task.result()
                    except StopAsyncIteration:
                        # The server closed the stream: reconnect and relist.
                        raise ConnectionError("listen stream closed") from None
                    await self._refresh(client)
        except (ListenNotSupportedError, MCPError) as error:
            if isinstance(error, MCPError) and _connection_lost(error):
                raise
            # A handshake-era server (or one without listen streams) announces
            # changes as notifications; a ping now and then notices a dead server.
            while True:
                wanted = asyncio.ensure_future(self._refresh_wanted.wait())
                done, _ = await asyncio.wait(
                    {wanted, stop_task, lost_task},
                    timeout=_PING_INTERVAL,
                    return_when=asyncio.FIRST_COMPLETED,
                )
                if stop_task in done:
                    wanted.cancel()
                    return
                if lost_task in done:
                    wanted.cancel()
                    raise ConnectionError("a call found the connection gone") from None
                if wanted not in done:
                    wanted.cancel()
                    await asyncio.wait_for(
                        client.send_ping(), self.config.connect_timeout
                    )
                    continue
                self._refresh_wanted.clear()
                await self._refresh(client)
        finally:
            stop_task.cancel()
            lost_task.cancel()

    async def _refresh_now(self) -> None:
        client = self._client
        if client is not None:
            await self._refresh(client)

    async def _refresh(self, client: Client) -> None:
        """List every page of tools and rebuild the Tool objects."""
        listed: list[McpTool] = []
        cursor: str | None = None
        for _ in range(_LIST_PAGE_CAP):
            page = await client.list_tools(cursor=cursor)
            listed.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        built: dict[str, _Listed] = {}
        with self._lock:
            previous = dict(self._listed)
        for mcp_tool in listed:
            item = self._reuse(previous, mcp_tool) or self._build(mcp_tool)
            if item is not None and item.tool.name not in built:
                built[item.tool.name] = item
        with self._lock:
            changed = {k: v.schema_json for k, v in built.items()} != {
                k: v.schema_json for k, v in self._listed.items()
            }
            self._listed = built
            self._generation += 1
        if changed:
            logger.info(
                "MCP server %r lists %d tool(s): %s",
                self.config.name,
                len(built),
                ", ".join(built),
            )
        if self._on_change is not None:
            try:
                self._on_change(self)
            except Exception:
                logger.exception("on_change of MCP server %r failed", self.config.name)

    def _reuse(
        self, previous: Mapping[str, _Listed], mcp_tool: McpTool
    ) -> _Listed | None:
        """Return the already built entry for ``mcp_tool`` when its listing is unchanged."""
        item = previous.get(namespaced_name(self.config.name, mcp_tool.name))
        if item is None or item.listing_json != _listing_key(mcp_tool):
            return None
        return item

    def _build(self, mcp_tool: McpTool) -> _Listed | None:
        """Return the Tool for one listed MCP tool, or ``None`` (logged) when unusable."""
        config = self.config
        name = namespaced_name(config.name, mcp_tool.name)
        if not NAME_PATTERN.fullmatch(name):
            logger.warning(
                "MCP server %r: tool %r skipped: %r is not a valid tool name",
                config.name,
                mcp_tool.name,
                name,
            )
            return None
        override = config.tools.get(mcp_tool.name, McpToolOverride())
        claims = _Claims.of(mcp_tool.annotations)
        policy = policy_from_annotations(
            mcp_tool.annotations, trusted=config.trusted, override=override.policy
        )
        read_only = bool(
            config.trusted
            and claims is not None
            and claims.read_only is True
            and claims.destructive is not True
        )
        destructive = not read_only and (
            not config.trusted or claims is None or claims.destructive is not False
        )
        schema = mcp_tool.input_schema
        schema_json = _schema_key(schema)
        description = (mcp_tool.description or "").strip() or (
            f"Tool {mcp_tool.name!r} of MCP server {config.name!r}."
        )
        label = _approval_label(config, mcp_tool.name, claims)
        timeout = override.timeout or config.timeout
        try:
            tool = define_tool(
                name=name,
                description=description,
                parameters=schema,
                execute=self._executor(mcp_tool.name, schema_json, timeout),
                namespace=config.name if NAME_PATTERN.fullmatch(config.name) else None,
                runs_on="application",
                policy=policy,
                is_read_only=read_only,
                is_destructive=destructive,
                # Trusted read-only tools may overlap (LP-03); anything else runs alone.
                execution_mode="parallel" if read_only else "sequential",
                timeout=timeout,
                max_result_bytes=override.max_result_bytes or config.max_result_bytes,
                idempotent=bool(override.idempotent),
                permission=config.permission,
                activity=lambda params, _label=label: _label,
                completed_activity=lambda params, result, _label=label: (
                    "Done: " + _label
                ),
            )
        except ToolDefinitionError as error:
            logger.warning(
                "MCP server %r: tool %r skipped: %s", config.name, mcp_tool.name, error
            )
            return None
        return _Listed(
            tool=tool,
            mcp_name=mcp_tool.name,
            schema_json=schema_json,
            listing_json=_listing_key(mcp_tool),
        )

    def _executor(
        self, mcp_name: str, schema_json: str, timeout: float
    ) -> Callable[[dict[str, Any], ToolContext], Any]:
        source = self

        async def execute(params: dict[str, Any], context: ToolContext) -> ToolOutput:
            result = await source.call(
                mcp_name,
                params,
                schema_json=schema_json,
                context=context,
                timeout=timeout,
            )
            if result.is_error:
                raise ToolError(
                    f"MCP server {source.config.name!r}, tool {mcp_name!r} reported "
                    f"an error: {_error_text(result)}"
                )
            content, details = content_from_mcp(result)
            return ToolOutput(
                content=content,
                details={
                    "mcp_server": source.config.name,
                    "mcp_tool": mcp_name,
                    **details,
                },
            )

        return execute

    async def _call_in_loop(
        self,
        mcp_name: str,
        arguments: dict[str, Any],
        schema_json: str,
        context: ToolContext,
        timeout: float,
    ) -> CallToolResult:
        from mcp.shared.exceptions import MCPError

        server = self.config.name
        deadline = time.monotonic() + min(self.config.connect_timeout, timeout)
        if self._client is None and self._reconnect_now is not None:
            # A server that came back is tried now, not after the backoff.
            self._reconnect_now.set()
        while self._client is None and not self._closed:
            if time.monotonic() >= deadline:
                raise ToolUpstreamUnavailable(self._unreachable_message())
            await asyncio.sleep(0.05)
        client = self._client
        if client is None:
            raise ToolUpstreamUnavailable(self._unreachable_message())
        try:
            await asyncio.wait_for(self._refresh(client), self.config.connect_timeout)
        except (TimeoutError, MCPError, OSError, ConnectionError) as error:
            raise ToolUpstreamUnavailable(self._unreachable_message()) from error
        with self._lock:
            current = self._listed.get(namespaced_name(server, mcp_name))
        if current is None:
            raise McpToolRemoved(
                f"MCP server {server!r} no longer offers the tool {mcp_name!r} (it was "
                "removed after the call was proposed); it was not executed. Do not "
                "retry; tell the user the tool is gone."
            )
        if current.schema_json != schema_json:
            raise ToolPermissionDenied(
                f"MCP server {server!r} changed the input schema of {mcp_name!r} after "
                "the call was proposed; it was not executed, because the approval "
                "covered the old schema. Propose the call again."
            )
        # An open TypedDict (extra_items=Any) that type checkers do not model yet.
        meta = cast(
            "RequestParamsMeta", {IDEMPOTENCY_META_KEY: context.idempotency_key}
        )
        key = id(context)
        self._inflight[key] = (context, time.monotonic() + timeout)
        fault: asyncio.Future[BaseException] = (
            asyncio.get_running_loop().create_future()
        )
        self._faults[key] = fault
        try:
            return await _first_of(
                client.call_tool(
                    mcp_name, arguments, read_timeout_seconds=timeout, meta=meta
                ),
                fault,
            )
        except TimeoutError as error:
            raise ToolTimeout(
                f"MCP server {server!r} did not answer {mcp_name!r} within "
                f"{timeout:g} seconds; the request was cancelled. Retry later or "
                "tell the user the server is slow."
            ) from error
        except MCPError as error:
            if _connection_lost(error):
                self._connection_dropped(client)
            raise _mcp_error(server, mcp_name, error) from error
        except (OSError, ConnectionError) as error:
            self._connection_dropped(client)
            raise ToolUpstreamUnavailable(self._unreachable_message()) from error
        except _MalformedReply as error:
            raise ToolError(
                f"MCP server {server!r} sent a malformed reply to {mcp_name!r} "
                f"(a protocol error: {error}); the outcome is unknown. Tell the user, "
                "or check before retrying."
            ) from error
        except Exception as error:
            if _is_transport_failure(error):
                self._connection_dropped(client)
                raise ToolUpstreamUnavailable(self._unreachable_message()) from error
            raise
        finally:
            self._inflight.pop(key, None)
            self._faults.pop(key, None)

    def _connection_dropped(self, client: Any) -> None:
        """Forget ``client``, whose connection a call found gone, and reconnect at once.

        Without this a dead stdio server was noticed only by the next keep-alive
        ping (up to :data:`_PING_INTERVAL` seconds), every call meanwhile failing
        as unreachable; the next call now waits for the new connection.
        """
        if self._client is client:
            self._client = None
        # A call saw the server go: the reconnect should not wait out a backoff.
        if self._reconnect_now is not None:
            self._reconnect_now.set()
        if self._lost is not None:
            self._lost.set()

    def _unreachable_message(self) -> str:
        return (
            f"MCP server {self.config.name!r} is unreachable (a transient upstream "
            "failure); the call was not executed. Retry later, or tell the user the "
            "service is unavailable."
        )


@contextlib.asynccontextmanager
async def _screened(
    transport: Any, on_stray: Callable[[object], None]
) -> AsyncIterator[tuple[Any, Any]]:
    """Wrap a stdio transport: a reply to an id never sent goes to ``on_stray``.

    The SDK drops such a reply (at debug level) and the call it was meant for
    waits for its timeout; here the ids of the requests written are remembered
    and a response or error naming any other id is reported instead of passed
    on. Everything else passes unchanged, in order.
    """
    import anyio
    from mcp_types import JSONRPCError, JSONRPCRequest, JSONRPCResponse

    async with transport as (read, write):
        sent: set[object] = set()
        inbound_send, inbound = anyio.create_memory_object_stream[Any](64)
        outbound, outbound_receive = anyio.create_memory_object_stream[Any](64)

        async def pump_in() -> None:
            async with inbound_send:
                async for item in read:
                    message = getattr(item, "message", None)
                    if (
                        isinstance(message, JSONRPCResponse | JSONRPCError)
                        and message.id is not None
                        and message.id not in sent
                    ):
                        on_stray(message.id)
                        continue
                    await inbound_send.send(item)

        async def pump_out() -> None:
            async with outbound_receive:
                async for item in outbound_receive:
                    message = getattr(item, "message", None)
                    if isinstance(message, JSONRPCRequest):
                        sent.add(message.id)
                    await write.send(item)

        async with anyio.create_task_group() as group:
            group.start_soon(pump_in)
            group.start_soon(pump_out)
            try:
                yield inbound, outbound
            finally:
                group.cancel_scope.cancel()


class _MalformedReply(Exception):
    """A reply the SDK could not read as JSON-RPC (a protocol error of the server)."""


def _malformed_summary(error: BaseException) -> str:
    """Return a short, secret-free description of a malformed message's fault."""
    text = str(error).splitlines()[0] if str(error) else type(error).__name__
    return f"{type(error).__name__}: {text[:200]}"


async def _first_of(call: Any, fault: asyncio.Future[BaseException]) -> CallToolResult:
    """Await ``call``; raise the exception ``fault`` resolves to if it comes first."""
    task = asyncio.ensure_future(call)
    done, _ = await asyncio.wait({task, fault}, return_when=asyncio.FIRST_COMPLETED)
    if task in done:
        return cast("CallToolResult", task.result())
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
    raise fault.result()


class _ClosingClient:
    """An ``mcp.Client`` context that also closes the HTTP client it was given."""

    def __init__(self, client: Any, http: Any) -> None:
        self._client = client
        self._http = http

    async def __aenter__(self) -> Any:
        await self._http.__aenter__()
        try:
            return await self._client.__aenter__()
        except BaseException:
            await self._http.__aexit__(None, None, None)
            raise

    async def __aexit__(self, *exc: Any) -> None:
        try:
            await self._client.__aexit__(*exc)
        finally:
            await self._http.__aexit__(None, None, None)


def _child_stderr() -> TextIO:
    """Return a real file for a stdio server's stderr.

    Celery replaces ``sys.stderr`` by a logging proxy without a file descriptor,
    which a child process cannot inherit; the process's original stderr (or the
    null device) is used instead.
    """
    import sys

    for stream in (sys.stderr, sys.__stderr__):
        try:
            if stream is not None:
                stream.fileno()
                return stream
        except (AttributeError, OSError, ValueError):
            continue
    # Kept open for the process lifetime: every stdio child may inherit it.
    return open(os.devnull, "w")


def _client_info() -> Implementation:
    from mcp_types import Implementation

    return Implementation(name="countersign", version="1")


#: The message the SDK gives the ``MCPError`` it raises itself when the transport
#: ends. Its code, -32000, is also JSON-RPC's generic server-error code, which a
#: server may answer a call with: only this message (and no data) is a lost connection.
_SDK_CLOSED_MESSAGE: Final = "Connection closed"


def _connection_lost(error: MCPError) -> bool:
    """Return whether an ``MCPError`` means the connection is gone (not a refused request).

    The SDK reports a closed transport as code ``-32000`` "Connection closed";
    a server's own ``-32000`` error (any other message, or data) is its answer.
    """
    from mcp_types import CONNECTION_CLOSED

    return (
        getattr(error, "code", None) == CONNECTION_CLOSED
        and str(getattr(error, "message", "")) == _SDK_CLOSED_MESSAGE
        and getattr(error, "data", None) is None
    )


def _is_transport_failure(error: BaseException) -> bool:
    """Return whether ``error`` (maybe an exception group) is a lost connection."""
    import anyio

    kinds: tuple[type[BaseException], ...] = (
        OSError,
        ConnectionError,
        anyio.ClosedResourceError,
        anyio.BrokenResourceError,
        anyio.EndOfStream,
    )
    try:
        import httpx2

        kinds = (*kinds, httpx2.TransportError)
    except ImportError:  # pragma: no cover - httpx2 comes with mcp
        pass
    if isinstance(error, kinds):
        return True
    if isinstance(error, BaseExceptionGroup):
        return any(_is_transport_failure(e) for e in error.exceptions)
    return False


def _mcp_error(server: str, tool: str, error: MCPError) -> ToolError:
    """Map a JSON-RPC error from the server to a sanitized tool error (SEC-06)."""
    from mcp_types import INVALID_PARAMS, REQUEST_TIMEOUT

    code = getattr(error, "code", None)
    text = str(getattr(error, "message", "") or error)
    if _connection_lost(error):
        return ToolUpstreamUnavailable(
            f"MCP server {server!r} closed the connection during {tool!r}; the outcome "
            "is unknown. Tell the user, or check before retrying."
        )
    if code == REQUEST_TIMEOUT:
        return ToolTimeout(
            f"MCP server {server!r} did not answer {tool!r} in time; retry later."
        )
    if "elicitation" in text.lower():
        return ToolPermissionDenied(
            f"MCP server {server!r} asked for more input from the user (elicitation) "
            f"during {tool!r}; Countersign does not answer elicitation requests yet, so "
            "it was declined and the call did not complete. Tell the user."
        )
    if code == INVALID_PARAMS:
        error_class: type[ToolError] = _InvalidParams
    else:
        error_class = ToolError
    return error_class(f"MCP server {server!r} refused {tool!r}: {text}")


class _InvalidParams(ToolError):
    error_type: ErrorType = "invalid_arguments"


def _approval_label(config: McpServerConfig, tool: str, claims: _Claims | None) -> str:
    """Return the label shown on the thread page and the approval card. Implements RT-10."""
    claimed = claims.summary() if claims is not None else "no annotations"
    trust = (
        "trusted server" if config.trusted else "untrusted server: hints not relied on"
    )
    return (
        f"MCP server {config.name!r}, tool {tool!r}; the server claims: {claimed} "
        f"(the server's own claims, unverified; {trust})"
    )


_sources_lock = threading.Lock()
_all_sources: list[McpToolSource] = []


def _register(source: McpToolSource) -> None:
    with _sources_lock:
        _all_sources.append(source)


def close_all() -> None:
    """Close every source created in this process (at exit; tests)."""
    with _sources_lock:
        sources = list(_all_sources)
        _all_sources.clear()
    for source in sources:
        try:
            source.close()
        except Exception:
            logger.exception("closing MCP server %r failed", source.config.name)


atexit.register(close_all)
