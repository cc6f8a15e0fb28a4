"""Start the real MCP test server (``tests/mcp_test_server.py``) over stdio or streamable HTTP.

Helpers shared by the agentcore and product tests; nothing here mocks the SDK.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SERVER_SCRIPT = Path(__file__).resolve().parent / "mcp_test_server.py"


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class HttpServer:
    """A test MCP server process serving streamable HTTP on 127.0.0.1."""

    port: int
    log: Path
    process: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        """Return the MCP endpoint URL."""
        return f"http://127.0.0.1:{self.port}/mcp"

    def stop(self) -> None:
        """End the server process (as a server going away would)."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


def start_http_server(log: Path, *, port: int | None = None) -> HttpServer:
    """Start the test server over streamable HTTP and wait until it accepts connections."""
    port = port or free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            str(SERVER_SCRIPT),
            "http",
            "--port",
            str(port),
            "--log",
            str(log),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"MCP test server exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), 0.2):
                return HttpServer(port=port, log=log, process=process)
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise RuntimeError("MCP test server did not start listening within 30 s")


def stdio_command(log: Path) -> dict[str, Any]:
    """Return the ``command``/``args`` of a stdio server entry for the test server."""
    return {
        "command": sys.executable,
        "args": [str(SERVER_SCRIPT), "stdio", "--log", str(log)],
    }


def executed(log: Path) -> list[dict[str, Any]]:
    """Return the side-effecting calls the server executed, oldest first."""
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line]
