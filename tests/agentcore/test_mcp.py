"""MCP servers as a tool source, against a real MCP server over stdio and streamable HTTP.

The server is ``tests/mcp_test_server.py`` (the official SDK's ``MCPServer``); the
client side is the official SDK too. Nothing is mocked.
Rules: RT-01, RT-03, RT-10, LP-05, LP-07, TC-10, TC-11, TC-12, SEC-04, SEC-06.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from agentcore.dispatch import ToolCallRequest, ToolResult, execute_call
from agentcore.mcp import (
    IDEMPOTENCY_META_KEY,
    McpServerConfig,
    McpToolOverride,
    McpToolSource,
    content_from_mcp,
    policy_from_annotations,
)
from agentcore.tools import NAME_PATTERN, ToolContext, ToolDefinitionError, Toolset
from tests.mcp_servers import (
    HttpServer,
    executed,
    start_http_server,
    stdio_command,
)
from tests.mcp_test_server import PDF, PNG, WAV

SERVER_TOOLS = [
    "read_file",
    "delete_file",
    "count_words",
    "media",
    "weather",
    "only_structured",
    "broken",
    "slow",
    "toggle_extra",
    "widen_schema",
    "ask_name",
]


@pytest.fixture
def log(tmp_path: Path) -> Path:
    """Return the file the test server appends executed calls to."""
    return tmp_path / "calls.jsonl"


@pytest.fixture
def http_server(log: Path) -> Iterator[HttpServer]:
    """Start a test MCP server over streamable HTTP for one test."""
    server = start_http_server(log)
    yield server
    server.stop()


@pytest.fixture(params=["stdio", "http"])
def transport(request: Any) -> str:
    """Run the test over stdio and over streamable HTTP."""
    return str(request.param)


SourceFactory = Callable[..., McpToolSource]


@pytest.fixture
def make_source(request: Any, log: Path) -> Iterator[SourceFactory]:
    """Return a factory of sources connected to a test server over the test's transport."""
    sources: list[McpToolSource] = []

    def make(
        name: str = "files", *, transport: str = "stdio", **options: Any
    ) -> McpToolSource:
        if transport == "http":
            server: HttpServer = request.getfixturevalue("http_server")
            where: dict[str, Any] = {"url": server.url, "connect_timeout": 15}
        else:
            # A cold interpreter importing the mcp SDK: slow on a loaded machine.
            where = {**stdio_command(log), "connect_timeout": 60}
        source = McpToolSource(McpServerConfig(name=name, **where, **options))
        sources.append(source)
        return source

    yield make
    for source in sources:
        source.close()


def context(call_id: str = "call_1") -> ToolContext:
    return ToolContext(
        thread_id="thread_1",
        run_id="run_1",
        tool_call_id=call_id,
        idempotency_key=f"thread_1:{call_id}",
    )


async def call(
    toolset: Toolset, name: str, arguments: dict[str, Any], **kwargs: Any
) -> ToolResult:
    request = ToolCallRequest(tool_call_id="call_1", name=name, arguments=arguments)
    return await execute_call(
        request, tool=None, toolset=toolset, context=context(), **kwargs
    )


def wait_until(predicate: Callable[[], Any], timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {predicate!r}")


# --- listing --------------------------------------------------------------------------


def test_tools_are_listed_namespaced_with_schemas_unchanged(
    make_source: SourceFactory, transport: str, log: Path, request: Any
) -> None:
    """Every server tool becomes ``files__<tool>``, an application tool, its schema as listed (RT-01)."""
    source = make_source(transport=transport)

    tools = source.tools()

    assert [t.name for t in tools] == [f"files__{n}" for n in SERVER_TOOLS]
    assert all(NAME_PATTERN.fullmatch(t.name) for t in tools)
    assert {t.runs_on for t in tools} == {"application"}
    assert {t.namespace for t in tools} == {"files"}

    # The schemas are exactly what the SDK's own client lists.
    async def listing() -> dict[str, Any]:
        target: Any
        if transport == "http":
            target = request.getfixturevalue("http_server").url
        else:
            target = StdioServerParameters(**stdio_command(log))
        async with Client(target) as client:
            listed = await client.list_tools()
        return {t.name: t.input_schema for t in listed.tools}

    raw = asyncio.run(listing())
    assert {t.name: t.parameters for t in tools} == {
        f"files__{name}": schema for name, schema in raw.items()
    }
    read_file = next(t for t in tools if t.name == "files__read_file")
    assert read_file.parameters == {
        "type": "object",
        "properties": {"path": {"title": "Path", "type": "string"}},
        "required": ["path"],
        "title": "read_fileArguments",
    }
    assert read_file.description == "Read a file and return its text."


def test_relisting_an_unchanged_server_keeps_the_built_tools(
    make_source: SourceFactory,
) -> None:
    """Validators compile once: a relisting with no change returns the same Tool objects."""
    source = make_source()
    before = source.tools()

    source.refresh()

    assert all(a is b for a, b in zip(before, source.tools(), strict=True))


def test_two_servers_never_collide(make_source: SourceFactory) -> None:
    """The same server under two names gives two disjoint sets of tool names (RT-03)."""
    first = make_source("alpha").tools()
    second = make_source("beta").tools()

    toolset = Toolset.assemble(first, second)

    assert len(toolset) == 2 * len(SERVER_TOOLS)
    assert toolset.get("alpha__read_file") is not None
    assert toolset.get("beta__read_file") is not None


@pytest.mark.parametrize(
    "name", ["a__b", "", "-x", "x_", "has space", "x" * 31, "a-_b", "ünï"]
)
def test_ambiguous_server_names_are_refused(name: str) -> None:
    """A server name that could make two servers' tool names collide is a definition error."""
    with pytest.raises(ToolDefinitionError, match="server name"):
        McpServerConfig(name=name, url="http://127.0.0.1:1/mcp")


def test_exactly_one_transport_is_required() -> None:
    with pytest.raises(ToolDefinitionError, match="exactly one of 'url'"):
        McpServerConfig(name="x")
    with pytest.raises(ToolDefinitionError, match="exactly one of 'url'"):
        McpServerConfig(name="x", url="http://127.0.0.1:1/mcp", command="python")


# --- policy from annotations ----------------------------------------------------------


def test_untrusted_server_needs_approval_for_everything(
    make_source: SourceFactory,
) -> None:
    """Without ``trusted``, even a readOnlyHint tool needs approval (RT-10)."""
    tools = {t.name: t for t in make_source().tools()}

    assert {t.policy for t in tools.values()} == {"require_approval"}
    assert all(t.is_destructive for t in tools.values())
    label = tools["files__read_file"].describe_activity({"path": "/a"})
    assert label == (
        "MCP server 'files', tool 'read_file'; the server claims: readOnlyHint=true, "
        "destructiveHint=false (the server's own claims, unverified; untrusted "
        "server: hints not relied on)"
    )


def test_trusted_server_read_only_tools_run_automatically(
    make_source: SourceFactory,
) -> None:
    """A trusted server's readOnlyHint tool is ``auto``; destructive or unannotated ones are not."""
    tools = {t.name: t for t in make_source(trusted=True).tools()}

    read_file = tools["files__read_file"]
    assert (read_file.policy, read_file.is_read_only, read_file.is_destructive) == (
        "auto",
        True,
        False,
    )
    assert read_file.execution_mode == "parallel"
    delete_file = tools["files__delete_file"]
    assert (delete_file.policy, delete_file.is_destructive) == (
        "require_approval",
        True,
    )
    count_words = tools["files__count_words"]
    assert (count_words.policy, count_words.is_destructive) == (
        "require_approval",
        True,
    )
    assert "no annotations" in count_words.describe_activity({})
    assert "destructiveHint=true" in delete_file.describe_activity({})
    assert "trusted server" in delete_file.describe_activity({})


def test_configuration_overrides_the_annotations(make_source: SourceFactory) -> None:
    """Per-tool configuration wins over annotations, both ways."""
    tools = {
        t.name: t
        for t in make_source(
            trusted=True,
            tools={
                "read_file": McpToolOverride(policy="require_approval"),
                "count_words": McpToolOverride(policy="auto", timeout=2.5),
                "delete_file": McpToolOverride(policy="deny"),
            },
        ).tools()
    }

    assert tools["files__read_file"].policy == "require_approval"
    assert tools["files__count_words"].policy == "auto"
    assert tools["files__count_words"].timeout == 2.5
    assert tools["files__delete_file"].policy == "deny"


@pytest.mark.parametrize(
    ("annotations", "trusted", "expected"),
    [
        (None, True, "require_approval"),
        ({"read_only_hint": True}, True, "auto"),
        ({"read_only_hint": True}, False, "require_approval"),
        ({"read_only_hint": True, "destructive_hint": True}, True, "require_approval"),
        ({"destructive_hint": False}, True, "require_approval"),
    ],
)
def test_policy_from_annotations(
    annotations: dict[str, Any] | None, trusted: bool, expected: str
) -> None:
    from mcp_types import ToolAnnotations

    hints = ToolAnnotations(**annotations) if annotations is not None else None
    assert policy_from_annotations(hints, trusted=trusted) == expected
    assert policy_from_annotations(hints, trusted=trusted, override="deny") == "deny"


# --- list_changed ---------------------------------------------------------------------


async def test_list_changed_refreshes_the_tools(
    make_source: SourceFactory, transport: str
) -> None:
    """A tool added or removed on the server appears or disappears after its announcement."""
    source = make_source(transport=transport, trusted=True)
    toolset = Toolset(source.tools())
    assert source.protocol_version == "2026-07-28"
    assert "files__extra" not in toolset

    added = await call(toolset, "files__toggle_extra", {})
    assert added.content == "added"
    names = wait_until(
        lambda: [t.name for t in source.tools() if t.name == "files__extra"]
    )
    assert names == ["files__extra"]

    removed = await call(toolset, "files__toggle_extra", {})
    assert removed.content == "removed"
    wait_until(lambda: all(t.name != "files__extra" for t in source.tools()))
    assert len(source.tools()) == len(SERVER_TOOLS)


async def test_list_changed_on_a_handshake_era_connection(
    make_source: SourceFactory, transport: str
) -> None:
    """With the initialize handshake, notifications/tools/list_changed refreshes the list."""
    source = make_source(transport=transport, trusted=True, mode="legacy")
    toolset = Toolset(source.tools())
    assert source.protocol_version == "2025-11-25"

    added = await call(toolset, "files__toggle_extra", {})

    assert added.content == "added"
    wait_until(lambda: any(t.name == "files__extra" for t in source.tools()))
    await call(toolset, "files__toggle_extra", {})
    wait_until(lambda: all(t.name != "files__extra" for t in source.tools()))


# --- results ----------------------------------------------------------------------------


async def test_every_content_type_maps_to_agui_parts(
    make_source: SourceFactory, transport: str
) -> None:
    """Text, image, audio, resource link and embedded resources become AG-UI parts, in order (TC-10, TC-12)."""
    toolset = Toolset(make_source(transport=transport, trusted=True).tools())

    result = await call(toolset, "files__media", {})

    assert result.error is None
    assert result.content == [
        {"type": "text", "text": "here is everything"},
        {
            "type": "image",
            "source": {"type": "data", "value": PNG, "mimeType": "image/png"},
        },
        {
            "type": "audio",
            "source": {"type": "data", "value": WAV, "mimeType": "audio/wav"},
        },
        {
            "type": "document",
            "source": {
                "type": "url",
                "value": "https://files.example.test/report.pdf",
                "mimeType": "application/pdf",
            },
            "metadata": {
                "mcp": "resource_link",
                "name": "report",
                "description": "The quarterly report",
            },
        },
        {
            "type": "text",
            "text": "a note",
            "metadata": {
                "mcp": "resource",
                "uri": "file:///notes.txt",
                "mimeType": "text/plain",
            },
        },
        {
            "type": "document",
            "source": {"type": "data", "value": PDF, "mimeType": "application/pdf"},
            "metadata": {"mcp": "resource", "uri": "file:///scan.pdf"},
        },
    ]
    assert result.details == {"mcp_server": "files", "mcp_tool": "media"}


async def test_structured_content_is_text_once(make_source: SourceFactory) -> None:
    """structuredContent with a text copy stays one text result; without one it is serialized (TC-11)."""
    toolset = Toolset(make_source(trusted=True).tools())

    weather = await call(toolset, "files__weather", {"city": "Oslo"})
    only = await call(toolset, "files__only_structured", {})

    assert weather.content == '{\n  "city": "Oslo",\n  "celsius": 21.5\n}'
    assert weather.details == {
        "mcp_server": "files",
        "mcp_tool": "weather",
        "structured_content": {"city": "Oslo", "celsius": 21.5},
    }
    assert only.content == [
        {
            "type": "text",
            "text": '{"total":3}',
            "metadata": {"mcp": "structuredContent"},
        }
    ]


def test_unknown_content_blocks_are_dropped_not_fatal() -> None:
    """A block type the mapping does not know is dropped and noted (TC-14)."""
    from mcp_types import CallToolResult, TextContent, ToolUseContent

    # model_construct: a block of a type a later protocol revision may add, which
    # this SDK version would refuse to parse.
    result = CallToolResult.model_construct(
        content=[
            TextContent(text="kept"),
            ToolUseContent(id="t1", name="x", input={}),
        ]
    )

    content, details = content_from_mcp(result)

    assert content == "kept"
    assert details == {"dropped_blocks": ["tool_use"]}


async def test_is_error_result_becomes_an_error_tool_result(
    make_source: SourceFactory, transport: str
) -> None:
    """``isError: true`` is a failed call with the server's text, never a success (LP-08)."""
    toolset = Toolset(make_source(transport=transport, trusted=True).tools())

    result = await call(toolset, "files__broken", {"reason": "the backup"})

    assert result.error == "tool_error"
    assert result.message == (
        "MCP server 'files', tool 'broken' reported an error: Error executing tool "
        "broken: disk full while handling the backup"
    )
    assert result.content == (
        '{"error":"tool_error","detail":"MCP server \'files\', tool \'broken\' '
        "reported an error: Error executing tool broken: disk full while handling "
        'the backup"}'
    )


async def test_idempotency_key_travels_in_meta(
    make_source: SourceFactory, transport: str, log: Path
) -> None:
    """The call's idempotency key reaches the server in ``_meta`` (LP-07)."""
    toolset = Toolset(make_source(transport=transport).tools())

    result = await call(toolset, "files__delete_file", {"path": "/tmp/a"})

    assert result.content == "deleted /tmp/a"
    [entry] = executed(log)
    assert entry["tool"] == "delete_file"
    assert entry["arguments"] == {"path": "/tmp/a"}
    assert entry["meta"][IDEMPOTENCY_META_KEY] == "thread_1:call_1"


async def test_result_size_is_capped(make_source: SourceFactory) -> None:
    """The tool's max_result_bytes applies to MCP results too (LP-05)."""
    toolset = Toolset(make_source(trusted=True, max_result_bytes=256).tools())

    result = await call(toolset, "files__read_file", {"path": "x" * 2000})

    assert result.error is None
    assert result.details is not None
    assert result.details["truncated_bytes"] > 1700
    assert isinstance(result.content, str)
    assert len(result.content.encode("utf-8")) <= 256
    assert "bytes truncated" in result.content


# --- failures are answers ---------------------------------------------------------------


async def test_server_gone_before_the_call_is_upstream_unavailable(
    make_source: SourceFactory, http_server: HttpServer
) -> None:
    """A server that went away answers the call with a sanitized transient error (SEC-06)."""
    toolset = Toolset(make_source(transport="http", trusted=True).tools())
    http_server.stop()

    result = await call(toolset, "files__read_file", {"path": "/a"})

    assert result.error == "upstream_unavailable"
    assert result.message == (
        "MCP server 'files' is unreachable (a transient upstream failure); the call "
        "was not executed. Retry later, or tell the user the service is unavailable."
    )
    assert "127.0.0.1" not in result.content


async def test_server_gone_mid_call_is_an_error_not_a_hang(
    make_source: SourceFactory, http_server: HttpServer
) -> None:
    """The server dying while a call runs ends that call with an error, promptly."""
    toolset = Toolset(make_source(transport="http", trusted=True, timeout=20).tools())

    async def kill_soon() -> None:
        await asyncio.sleep(0.5)
        await asyncio.to_thread(http_server.stop)

    started = time.monotonic()
    result, _ = await asyncio.gather(
        call(toolset, "files__slow", {"seconds": 30}), kill_soon()
    )

    assert result.error in ("upstream_unavailable", "tool_error")
    assert time.monotonic() - started < 15
    assert "Traceback" not in result.content


def test_unreachable_server_lists_nothing_and_says_why(
    make_source: SourceFactory,
) -> None:
    """A server nobody listens on contributes no tools; listing does not hang or raise."""
    from tests.mcp_servers import free_port

    source = McpToolSource(
        McpServerConfig(
            name="gone", url=f"http://127.0.0.1:{free_port()}/mcp", connect_timeout=2
        )
    )
    try:
        started = time.monotonic()
        assert source.tools() == ()
        assert time.monotonic() - started < 5
        assert source.last_error is not None
    finally:
        source.close()


async def test_tool_removed_after_proposal_is_refused(
    make_source: SourceFactory, transport: str
) -> None:
    """A call to a tool the server removed meanwhile is answered ``unknown_tool``, not run."""
    source = make_source(transport=transport, trusted=True)
    toolset = Toolset(source.tools())
    await call(toolset, "files__toggle_extra", {})
    wait_until(lambda: any(t.name == "files__extra" for t in source.tools()))
    proposed = Toolset(source.tools())  # what the call was proposed against
    await call(toolset, "files__toggle_extra", {})  # the server removes it again

    result = await call(proposed, "files__extra", {})

    assert result.error == "unknown_tool"
    assert result.message == (
        "MCP server 'files' no longer offers the tool 'extra' (it was removed after "
        "the call was proposed); it was not executed. Do not retry; tell the user "
        "the tool is gone."
    )


async def test_schema_changed_after_proposal_is_refused(
    make_source: SourceFactory, transport: str, log: Path
) -> None:
    """A tool whose input schema changed since it was listed is not executed."""
    source = make_source(transport=transport, trusted=True)
    proposed = Toolset(source.tools())
    await call(proposed, "files__widen_schema", {})

    result = await call(proposed, "files__read_file", {"path": "/a"})

    assert result.error == "permission_denied"
    assert result.message == (
        "MCP server 'files' changed the input schema of 'read_file' after the call "
        "was proposed; it was not executed, because the approval covered the old "
        "schema. Propose the call again."
    )
    assert [e["tool"] for e in executed(log)] == []
    # The refreshed tool carries the new schema and runs.
    current = Toolset(source.tools())
    schema = current.get("files__read_file").parameters  # type: ignore[union-attr]
    assert "encoding" in schema["properties"]
    fresh = await call(current, "files__read_file", {"path": "/a"})
    assert fresh.content == "contents of /a"


async def test_slow_server_times_out_and_the_connection_survives(
    make_source: SourceFactory, transport: str
) -> None:
    """A call slower than the tool's timeout ends as ``timeout``; the next call works (LP-05)."""
    toolset = Toolset(
        make_source(
            transport=transport,
            trusted=True,
            tools={"slow": McpToolOverride(timeout=1.0)},
        ).tools()
    )

    started = time.monotonic()
    result = await call(toolset, "files__slow", {"seconds": 30})

    assert result.error == "timeout"
    assert time.monotonic() - started < 5
    after = await call(toolset, "files__read_file", {"path": "/b"})
    assert after.content == "contents of /b"


async def test_cancelling_the_run_cancels_the_call(make_source: SourceFactory) -> None:
    """The run's cancel signal stops a running MCP call (RT-01 abort signal)."""
    toolset = Toolset(make_source(trusted=True).tools())
    cancel = asyncio.Event()

    async def cancel_soon() -> None:
        await asyncio.sleep(0.5)
        cancel.set()

    started = time.monotonic()
    result, _ = await asyncio.gather(
        call(toolset, "files__slow", {"seconds": 30}, cancel=cancel), cancel_soon()
    )

    assert result.error == "cancelled"
    assert time.monotonic() - started < 5


async def test_elicitation_without_anyone_to_ask_is_declined(
    make_source: SourceFactory, transport: str
) -> None:
    """A server asking for user input mid-call, with no requester, is told 'decline'."""
    toolset = Toolset(make_source(transport=transport, trusted=True).tools())

    result = await call(toolset, "files__ask_name", {})

    assert result.error is None
    assert result.content == "elicitation answered: decline"


async def test_elicitation_is_answered_by_the_calls_input_requester(
    make_source: SourceFactory, transport: str, log: Path
) -> None:
    """The server's form request reaches the requester with its schema; the answer goes back."""
    toolset = Toolset(make_source(transport=transport, trusted=True).tools())
    asked: list[tuple[str, dict[str, Any], float]] = []

    def requester(
        message: str, schema: dict[str, Any], timeout: float
    ) -> tuple[str, dict[str, Any] | None]:
        asked.append((message, schema, timeout))
        return "accept", {"name": "Ada"}

    ctx = context()
    ctx.input_requester = requester
    request = ToolCallRequest(
        tool_call_id="call_1", name="files__ask_name", arguments={}
    )
    result = await execute_call(request, tool=None, toolset=toolset, context=ctx)

    assert result.content == "elicitation answered: accept, name Ada"
    [(message, schema, timeout)] = asked
    assert message == "What is your name?"
    assert schema["properties"]["name"]["type"] == "string"
    assert schema["required"] == ["name"]
    assert 0 < timeout <= 30


def test_mcp_blocks_from_content_is_the_inverse_of_content_from_mcp():
    """Every MCP block type survives AG-UI content and back (the gateway's answers)."""
    from mcp_types import (
        AudioContent,
        BlobResourceContents,
        CallToolResult,
        EmbeddedResource,
        ImageContent,
        ResourceLink,
        TextContent,
        TextResourceContents,
    )

    from agentcore.mcp import content_from_mcp, mcp_blocks_from_content

    result = CallToolResult(
        content=[
            TextContent(text="hi"),
            ImageContent(data=PNG, mime_type="image/png"),
            AudioContent(data=WAV, mime_type="audio/wav"),
            ResourceLink(
                name="report", uri="https://x.test/r.pdf", mime_type="application/pdf"
            ),
            EmbeddedResource(
                resource=TextResourceContents(
                    uri="file:///n.txt", mime_type="text/plain", text="a note"
                )
            ),
            EmbeddedResource(
                resource=BlobResourceContents(
                    uri="file:///s.pdf", mime_type="application/pdf", blob=PDF
                )
            ),
        ]
    )
    content, _ = content_from_mcp(result)

    assert (
        mcp_blocks_from_content(content)
        == result.model_dump(mode="json", by_alias=True, exclude_none=True)["content"]
    )
    assert mcp_blocks_from_content("plain") == [{"type": "text", "text": "plain"}]
    assert mcp_blocks_from_content([{"type": "video", "source": {"type": "file"}}]) == [
        {"type": "text", "text": '{"source": {"type": "file"}, "type": "video"}'}
    ]
