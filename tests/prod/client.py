"""Clients for a running stack: REST with a token, a session cookie, a WebSocket watcher;
and a restartable private ``redis-server`` (tests/prod and ``scripts/chaos.py``).

No Django here: these talk to the processes over HTTP and WebSocket only, as an
integration or a browser would.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx


def api_client(base_url: str, token: str) -> httpx.Client:
    """Return an HTTP client sending ``Authorization: Token <token>`` (if given)."""
    headers = {"Authorization": f"Token {token}"} if token else {}
    return httpx.Client(base_url=base_url, headers=headers, timeout=15)


def session_cookie(base_url: str, username: str, password: str) -> str:
    """Log in through ``/accounts/login/`` and return the ``sessionid`` cookie value."""
    with httpx.Client(base_url=base_url, timeout=15) as client:
        page = client.get("/accounts/login/")
        page.raise_for_status()
        match = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        if match is None:
            raise RuntimeError("the login page has no CSRF token")
        response = client.post(
            "/accounts/login/",
            data={
                "username": username,
                "password": password,
                "csrfmiddlewaretoken": match.group(1),
            },
            headers={"Referer": f"{base_url}/accounts/login/", "Origin": base_url},
        )
        if response.status_code != 302 or "sessionid" not in client.cookies:
            raise RuntimeError(
                f"login failed: {response.status_code} {response.text[:300]}"
            )
        return client.cookies["sessionid"]


def wait_until(predicate: Callable[[], Any], *, timeout: float, what: str) -> Any:
    """Poll ``predicate`` every 50 ms until truthy; return its value or raise TimeoutError."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what}")


class EventWatcher(threading.Thread):
    """Follow ``ws/threads/<threadId>/`` in a background thread, resuming by ``seq``.

    Every AG-UI event (a message with ``seq``) is appended to :attr:`events` in
    arrival order; duplicates (``seq`` already seen) are counted in
    :attr:`duplicates` and dropped, as a browser would; a jump in ``seq`` is
    recorded in :attr:`gaps`. When the socket closes, the watcher reconnects with
    ``?after=<last seq>`` (``reconnect=True``); :attr:`connects` counts connections.
    """

    def __init__(
        self,
        ws_base: str,
        thread_id: str,
        *,
        cookie: str,
        origin: str,
        reconnect: bool = True,
    ) -> None:
        super().__init__(name=f"watch-{thread_id}", daemon=True)
        self.url = f"{ws_base}/ws/threads/{thread_id}/"
        self.cookie = cookie
        self.origin = origin
        self.reconnect = reconnect
        self.events: list[dict[str, Any]] = []
        self.notifications: list[dict[str, Any]] = []
        self.duplicates = 0
        self.gaps: list[tuple[int, int]] = []
        self.connects = 0
        self.errors: list[str] = []
        self.connected = threading.Event()
        self._halt = threading.Event()

    @property
    def last_seq(self) -> int:
        return self.events[-1]["seq"] if self.events else 0

    def run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        from websockets.asyncio.client import connect
        from websockets.exceptions import WebSocketException
        from websockets.typing import Origin

        while not self._halt.is_set():
            try:
                async with connect(
                    f"{self.url}?after={self.last_seq}",
                    additional_headers={"Cookie": f"sessionid={self.cookie}"},
                    origin=Origin(self.origin),
                    open_timeout=5,
                    compression=None,
                ) as socket:
                    self.connects += 1
                    self.connected.set()
                    while not self._halt.is_set():
                        try:
                            raw = await asyncio.wait_for(socket.recv(), 0.2)
                        except TimeoutError:
                            continue
                        self._take(json.loads(raw))
            except (OSError, WebSocketException, TimeoutError) as error:
                self.errors.append(f"{type(error).__name__}: {error}")
            if not self.reconnect:
                return
            await asyncio.sleep(0.2)

    def _take(self, message: dict[str, Any]) -> None:
        seq = message.get("seq")
        if seq is None:
            self.notifications.append(message)
            return
        if seq <= self.last_seq:
            self.duplicates += 1
            return
        if seq != self.last_seq + 1:
            self.gaps.append((self.last_seq, seq))
        self.events.append(message)

    def types(self) -> list[str]:
        return [e["type"] for e in self.events]

    def text(self) -> str:
        return "".join(
            e.get("delta", "")
            for e in self.events
            if e["type"] == "TEXT_MESSAGE_CONTENT"
        )

    def wait_for(
        self, predicate: Callable[[EventWatcher], Any], *, timeout: float, what: str
    ) -> Any:
        return wait_until(lambda: predicate(self), timeout=timeout, what=what)

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=5)


@dataclass
class RedisServer:
    """A private redis-server for this test session (restartable)."""

    port: int
    workdir: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def command(self) -> list[str]:
        # As .ci/run starts the machine's Redis, on another port, in the foreground.
        return [
            "redis-server", "--bind", "127.0.0.1", "--port", str(self.port),
            "--save", "", "--appendonly", "no", "--dir", str(self.workdir),
        ]  # fmt: skip

    def start(self) -> None:
        log = open(self.workdir / "redis.log", "ab")  # noqa: SIM115 - the child keeps it
        self.process = subprocess.Popen(
            self.command(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.ping():
                return
            time.sleep(0.05)
        raise RuntimeError(f"redis-server on {self.port} did not start")

    def ping(self) -> bool:
        import redis

        try:
            return bool(redis.Redis(port=self.port, socket_timeout=0.5).ping())
        except redis.RedisError:
            return False

    def shutdown_nosave(self) -> None:
        subprocess.run(
            ["redis-cli", "-p", str(self.port), "shutdown", "nosave"],
            capture_output=True,
        )
        if self.process is not None:
            self.process.wait(10)

    def restart_keeping_data(self, down_for: float = 0.5) -> None:
        """Shut down with ``SHUTDOWN SAVE``, stay down ``down_for`` s, start and reload it.

        As a Redis with persistence restarts: queues and unacknowledged messages
        survive. The dump is deleted once loaded, so a later plain restart of this
        session's server starts empty as before.
        """
        subprocess.run(
            ["redis-cli", "-p", str(self.port), "shutdown", "save"],
            capture_output=True,
        )
        if self.process is not None:
            self.process.wait(10)
        time.sleep(down_for)
        self.start()
        (self.workdir / "dump.rdb").unlink(missing_ok=True)

    def flush(self) -> None:
        import redis

        redis.Redis(port=self.port).flushall()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)
