"""B1's WebSocket clients, in a process of their own.

    python -m bench.ws_clients        # a JSON spec on stdin; see ClientsProcess

The clients used to run on a thread of the bench process, which also runs the
agent and the recorder (ours) or the publisher (the baseline): the three shared
one interpreter's GIL, so part of the latency measured was the bench's own
contention, not the server's. In their own process they compete for the CPU
only, for ours and the baseline alike.

Protocol: the parent writes ``{"urls", "headers", "origin", "done_type"}`` (one
JSON line) to stdin; the child connects every socket, prints ``ready`` and
reads until each socket has seen a frame of type ``done_type``, then prints one
JSON line with the figures (:meth:`Clients.figures`) and exits. Latencies are
wall-clock receipt - the frame's ``timestamp`` (microseconds), so both
processes read the same clock.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def now_us() -> int:
    return int(time.time() * 1_000_000)


class Clients:
    """N websocket clients on one loop; record latency per stamped message."""

    def __init__(
        self,
        urls: list[str],
        headers: dict[str, str],
        origin: str | None,
        done_type: str,
    ) -> None:
        self.urls, self.headers, self.origin, self.done_type = (
            urls,
            headers,
            origin,
            done_type,
        )
        self.latencies: list[float] = []
        #: Latency to the first sighting (a preview, else the committed frame).
        self.first_seen: list[float] = []
        self.received = 0
        self.finished_at: list[float] = []

    def figures(self) -> dict[str, Any]:
        """Return what was recorded: latencies in ms, ``finished_at`` in epoch seconds."""
        return {
            "latencies": self.latencies,
            "first_seen": self.first_seen,
            "received": self.received,
            "finished_at": self.finished_at,
        }

    async def main(self, ready: Any) -> None:
        from websockets.asyncio.client import connect
        from websockets.typing import Origin

        sockets = [
            await connect(
                u,
                additional_headers=self.headers,
                origin=Origin(self.origin) if self.origin else None,
                compression=None,
                max_size=None,
                max_queue=None,
            )
            for u in self.urls
        ]
        ready()

        async def read(socket: Any) -> None:
            # Stamps already seen on this socket: a committed merged delta carries
            # its first fragment's stamp, which a preview may have shown already.
            seen: set[int] = set()
            async for raw in socket:
                message = json.loads(raw)
                kind = message.get("kind")
                if kind == "confirmed":
                    continue
                if kind == "preview":
                    arrived = now_us()
                    for item in message["previews"]:
                        stamp = item["event"].get("timestamp")
                        if stamp and stamp not in seen:
                            seen.add(stamp)
                            self.first_seen.append((arrived - stamp) / 1000)
                    continue
                stamp = message.get("timestamp")
                if stamp:
                    latency = (now_us() - stamp) / 1000
                    self.latencies.append(latency)
                    if stamp not in seen:
                        seen.add(stamp)
                        self.first_seen.append(latency)
                self.received += 1
                if message.get("type") == self.done_type:
                    self.finished_at.append(time.time())
                    return

        await asyncio.wait_for(asyncio.gather(*(read(s) for s in sockets)), timeout=180)
        for socket in sockets:
            await socket.close()


class ClientsProcess:
    """The parent's handle on a ``bench.ws_clients`` child (same figures as :class:`Clients`)."""

    def __init__(
        self,
        urls: list[str],
        headers: dict[str, str],
        origin: str | None,
        done_type: str,
    ) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench.ws_clients"],
            cwd=Path(__file__).resolve().parent.parent,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        spec = {
            "urls": urls,
            "headers": headers,
            "origin": origin,
            "done_type": done_type,
        }
        # Left open: communicate() closes it when the figures are collected.
        self.process.stdin.write(json.dumps(spec) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline().strip()
        if line != "ready":
            self.process.kill()
            raise RuntimeError(f"bench.ws_clients did not connect: {line!r}")
        self.latencies: list[float] = []
        self.first_seen: list[float] = []
        self.received = 0
        self.finished_at: list[float] = []

    def join(self, timeout: float = 200) -> None:
        """Wait for the child's figures; raise when it failed or took too long."""
        try:
            out, _ = self.process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise
        if self.process.returncode != 0 or not out.strip():
            raise RuntimeError(f"bench.ws_clients failed ({self.process.returncode})")
        figures = json.loads(out.strip().splitlines()[-1])
        self.latencies = figures["latencies"]
        self.first_seen = figures["first_seen"]
        self.received = figures["received"]
        self.finished_at = figures["finished_at"]


def _child() -> None:
    spec = json.loads(sys.stdin.readline())
    clients = Clients(spec["urls"], spec["headers"], spec["origin"], spec["done_type"])

    def ready() -> None:
        print("ready", flush=True)

    asyncio.run(clients.main(ready))
    print(json.dumps(clients.figures()), flush=True)


if __name__ == "__main__":
    _child()
