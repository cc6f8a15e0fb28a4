"""A hand-written MCP server over stdio that misbehaves on purpose (no SDK on its side).

Run as ``python tests/mcp_misbehaving_server.py``: newline-delimited JSON-RPC on
stdin/stdout, the ``2025-06-18`` initialize handshake, and one tool per fault:

- ``ok``: answers ``{"content": [{"type": "text", "text": "ok"}]}``;
- ``server_error``: answers the JSON-RPC error ``{"code": -32000, "message":
  "database is locked; try again in a minute"}`` (the generic server-error code);
- ``crash``: the process exits without answering (a crash mid-call);
- ``wrong_id``: answers under an id the client never sent;
- ``bare_string``: answers ``"result": "ok"`` (a string, not a CallToolResult).

Written by hand because the SDK's server side cannot be made to send these.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

TOOLS = ["ok", "server_error", "crash", "wrong_id", "bare_string"]


def _send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _answer(request: dict[str, Any]) -> None:
    method, rid = request.get("method"), request.get("id")
    if rid is None:
        return  # a notification
    if method == "initialize":
        _send(
            {
                "jsonrpc": "2.0",
                "id": rid,
                "result": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "misbehaving", "version": "1"},
                },
            }
        )
    elif method == "tools/list":
        tools = [
            {
                "name": name,
                "description": f"fault: {name}",
                "inputSchema": {"type": "object", "properties": {}},
                "annotations": {"readOnlyHint": True},
            }
            for name in TOOLS
        ]
        _send({"jsonrpc": "2.0", "id": rid, "result": {"tools": tools}})
    elif method == "tools/call":
        name = (request.get("params") or {}).get("name")
        if name == "server_error":
            error = {
                "code": -32000,
                "message": "database is locked; try again in a minute",
            }
            _send({"jsonrpc": "2.0", "id": rid, "error": error})
        elif name == "crash":
            os._exit(3)
        elif name == "wrong_id":
            content = [{"type": "text", "text": "late"}]
            _send({"jsonrpc": "2.0", "id": 999_999, "result": {"content": content}})
        elif name == "bare_string":
            _send({"jsonrpc": "2.0", "id": rid, "result": "ok"})
        else:
            content = [{"type": "text", "text": "ok"}]
            _send({"jsonrpc": "2.0", "id": rid, "result": {"content": content}})
    elif method == "ping":
        _send({"jsonrpc": "2.0", "id": rid, "result": {}})
    else:
        error = {"code": -32601, "message": f"method {method!r} not found"}
        _send({"jsonrpc": "2.0", "id": rid, "error": error})


def main() -> None:
    for line in sys.stdin:
        if line.strip():
            _answer(json.loads(line))


if __name__ == "__main__":
    main()
