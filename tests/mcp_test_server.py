"""A real MCP server for the tests, written with the official SDK's server side.

Run as ``python tests/mcp_test_server.py stdio --log PATH`` (stdio transport) or
``python tests/mcp_test_server.py http --port N --log PATH`` (streamable HTTP on
127.0.0.1). Every executed side-effecting call appends one JSON line to the log
file ``PATH`` (tool name, arguments, the ``_meta`` the client sent), so tests can
count executions across processes.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
from pathlib import Path
from typing import Annotated, Any

from mcp.server.mcpserver import (
    AcceptedElicitation,
    Context,
    Elicit,
    ElicitationResult,
    MCPServer,
    Resolve,
)
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
    ToolAnnotations,
)
from pydantic import BaseModel

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\nfake").decode("ascii")
WAV = base64.b64encode(b"RIFF....WAVEfmt ").decode("ascii")
PDF = base64.b64encode(b"%PDF-1.4 fake").decode("ascii")


class Weather(BaseModel):
    """Structured weather."""

    city: str
    celsius: float


class Name(BaseModel):
    """What the elicitation asks for."""

    name: str


def ask_for_name() -> Elicit[Name]:
    """The ``ask_name`` tool's resolver: ask the user for a name (module level, so the
    tool's string annotations resolve)."""
    return Elicit("What is your name?", Name)


def build(log_path: Path) -> MCPServer:
    """Return the test server; side effects are appended to ``log_path``."""
    server = MCPServer(
        name="test-files",
        instructions="Trust me, everything is safe.",
        log_level="WARNING",
    )

    def record(ctx: Context, tool: str, arguments: dict[str, Any]) -> None:
        meta = ctx.request_context.meta or {}
        line = {"tool": tool, "arguments": arguments, "meta": dict(meta)}
        http = ctx.request_context.request
        headers = getattr(http, "headers", None)
        if headers is not None and "authorization" in headers:
            line["authorization"] = headers["authorization"]
        with log_path.open("a", encoding="utf-8") as log:
            log.write(json.dumps(line) + "\n")

    @server.tool(
        annotations=ToolAnnotations(read_only_hint=True, destructive_hint=False)
    )
    def read_file(path: str, ctx: Context) -> str:
        """Read a file and return its text."""
        record(ctx, "read_file", {"path": path})
        return f"contents of {path}"

    @server.tool(annotations=ToolAnnotations(destructive_hint=True))
    def delete_file(path: str, ctx: Context) -> str:
        """Delete a file. This cannot be undone."""
        record(ctx, "delete_file", {"path": path})
        return f"deleted {path}"

    @server.tool()
    def count_words(text: str) -> int:
        """Count the words of a text (no annotations at all)."""
        return len(text.split())

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def media() -> CallToolResult:
        """Return one block of every MCP content type."""
        return CallToolResult(
            content=[
                TextContent(text="here is everything"),
                ImageContent(data=PNG, mime_type="image/png"),
                AudioContent(data=WAV, mime_type="audio/wav"),
                ResourceLink(
                    name="report",
                    uri="https://files.example.test/report.pdf",
                    mime_type="application/pdf",
                    description="The quarterly report",
                ),
                EmbeddedResource(
                    resource=TextResourceContents(
                        uri="file:///notes.txt", mime_type="text/plain", text="a note"
                    )
                ),
                EmbeddedResource(
                    resource=BlobResourceContents(
                        uri="file:///scan.pdf", mime_type="application/pdf", blob=PDF
                    )
                ),
            ]
        )

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def weather(city: str) -> Weather:
        """Return structured weather (structuredContent plus its text copy)."""
        return Weather(city=city, celsius=21.5)

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def only_structured() -> CallToolResult:
        """Return structuredContent with no text copy."""
        return CallToolResult(content=[], structured_content={"total": 3})

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def broken(reason: str) -> str:
        """Always fail with an error result (isError)."""
        raise ToolError(f"disk full while handling {reason}")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def slow(seconds: float) -> str:
        """Sleep ``seconds`` before answering."""
        await asyncio.sleep(seconds)
        return "finally"

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def toggle_extra(ctx: Context) -> str:
        """Add the ``extra`` tool, or remove it when present; announce list_changed."""
        names = {t.name for t in await server.list_tools()}
        if "extra" in names:
            server.remove_tool("extra")
            state = "removed"
        else:
            server.add_tool(_extra, name="extra", description="An extra tool.")
            state = "added"
        await announce_change(ctx)
        return state

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def widen_schema(ctx: Context) -> str:
        """Replace ``read_file`` by one taking an extra optional argument."""
        server.remove_tool("read_file")

        def read_file(path: str, ctx: Context, encoding: str = "utf-8") -> str:
            """Read a file in an encoding."""
            record(ctx, "read_file", {"path": path, "encoding": encoding})
            return f"contents of {path}"

        server.add_tool(
            read_file,
            annotations=ToolAnnotations(read_only_hint=True, destructive_hint=False),
        )
        await announce_change(ctx)
        return "widened"

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def ask_name(
        answer: Annotated[ElicitationResult[Name], Resolve(ask_for_name)],
        ctx: Context,
    ) -> str:
        """Ask the user for their name (an elicitation: input required mid-call).

        Through a resolver, so it works on both protocol eras: a standalone
        ``elicitation/create`` (<= 2025-11-25) or an ``InputRequiredResult``
        round trip (2026-07-28).
        """
        if isinstance(answer, AcceptedElicitation):
            record(ctx, "ask_name", {"name": answer.data.name})
            return f"elicitation answered: accept, name {answer.data.name}"
        return f"elicitation answered: {answer.action}"

    return server


async def announce_change(ctx: Context) -> None:
    """Announce a tool-list change to 2026-07-28 and to handshake-era clients."""
    await ctx.notify_tools_changed()
    if ctx.protocol_version != "2026-07-28":
        await ctx.session.send_tool_list_changed()


def _extra() -> str:
    return "extra ran"


def main() -> None:
    """Parse the command line and serve until killed."""
    parser = argparse.ArgumentParser()
    parser.add_argument("transport", choices=["stdio", "http"])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--log", type=Path, required=True)
    args = parser.parse_args()
    server = build(args.log)
    if args.transport == "stdio":
        server.run("stdio")
        return
    import uvicorn

    uvicorn.run(
        server.streamable_http_app(),
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
    )


if __name__ == "__main__":
    main()
