"""Browser helpers: chromium, a live uvicorn server, users, login, screenshots.

The server runs in a subprocess on ``127.0.0.1:<ephemeral port>`` against the test
database (``transactional_db``, so both processes see committed rows). In the
embedded mode it runs runs and executions on its own thread pool; in the Celery
mode it gets the worker's ``REDIS_URL``. Playwright never downloads a browser and
the suite installs nothing: without ``/usr/bin/chromium`` (``apt-get install
chromium``; ``.ci/run`` installs it) the browser tests skip, or fail with
``COUNTERSIGN_REQUIRE_SERVICES=1``, like the other service checks.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.utils import timezone

from approvals.models import ApprovalRequest
from tests.helpers.executors import ROOT
from tests.helpers.services import service_missing
from threads.models import Run, ToolCall
from threads.services import thread_create

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]
SCREENSHOTS = ROOT / "artifacts" / "screenshots"
PASSWORD = "pw-ui-test-1"
ASYNC_UNSAFE = "DJANGO_ALLOW_ASYNC_UNSAFE"


def require_chromium(path: str = CHROMIUM) -> str:
    """Return ``path`` when chromium is there; else skip, or fail in CI.

    Installs nothing: a test suite does not change the machine's packages.
    """
    if not os.path.exists(path):
        service_missing(
            f"chromium for the browser tests: {path} is missing "
            "(install it with `apt-get install chromium`)"
        )
    return path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class LiveServer:
    """A uvicorn process serving ``config.asgi`` against the test database."""

    env: dict[str, str]
    log_path: Path
    port: int = field(default_factory=_free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Start the server on :attr:`port` and wait until it answers."""
        log = open(self.log_path, "ab")  # noqa: SIM115 - closed with the process
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "uvicorn",
                "config.asgi:application",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--lifespan",
                "off",
                "--no-access-log",
            ],
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"uvicorn exited:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(
                    f"{self.url}/accounts/login/", timeout=2
                ) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"uvicorn did not answer:\n{self.log_tail()}")

    def kill(self) -> None:
        """SIGKILL the server (as a crash would); in-process embedded work dies with it."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)
        self.process = None

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
        self.process = None

    def restart(self) -> None:
        """Kill the server and start a new one on the same port."""
        self.kill()
        self.start()

    def log_tail(self, size: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-size:]
        except OSError:
            return ""


def make_user(username: str, *permissions: str) -> Any:
    """Create a user with ``PASSWORD`` and ``permissions`` (``app_label.codename``)."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission

    user = get_user_model().objects.create_user(username=username, password=PASSWORD)
    for dotted in permissions:
        app_label, codename = dotted.split(".")
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
    return user


def watch_errors(page: Any) -> list[str]:
    """Collect the page's uncaught errors and console errors (CSP violations among them)."""
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(f"pageerror: {error}"))
    page.on(
        "console",
        lambda message: (
            errors.append(f"console: {message.text}")
            if message.type == "error"
            else None
        ),
    )
    page.js_errors = errors
    return errors


def login(
    browser: Any,
    server: LiveServer,
    username: str,
    *,
    viewport: dict[str, int] | None = None,
    permissions: list[str] | None = None,
    init_script: str | None = None,
) -> tuple[Any, Any]:
    """Open a new browser context logged in as ``username``; return ``(context, page)``.

    ``viewport`` defaults to 1200x900; ``permissions`` are granted to the context
    (e.g. ``["notifications"]``); ``init_script`` runs in every page before its own.
    """
    context = browser.new_context(
        viewport=viewport or {"width": 1200, "height": 900},
        permissions=permissions or [],
    )
    context.set_default_timeout(20_000)
    if init_script is not None:
        context.add_init_script(init_script)
    page = context.new_page()
    watch_errors(page)
    page.goto(f"{server.url}/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{server.url}/")
    return context, page


def screenshot(page: Any, name: str) -> Path:
    """Write a full-page screenshot to ``artifacts/screenshots/<name>.png``; return its path."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def pending_request(owner, *, call_id: str, amount: float) -> ApprovalRequest:
    """Return a pending refund request, as ``pending_calls_dispatch`` leaves one."""
    thread = thread_create(owner=owner, title=f"refund {call_id}")
    args = {"order_id": "A-1001", "amount": amount, "reason": "customer request"}
    run = Run.objects.create(
        thread=thread,
        status=Run.Status.AWAITING_TOOLS,
        pending_tool_call_ids=[call_id],
        input={"tools": [{"name": "lookup_order"}, {"name": "refund_order"}]},
    )
    call = ToolCall.objects.create(
        thread=thread,
        run=run,
        tool_call_id=call_id,
        name="refund_order",
        arguments_text=json.dumps(args),
        arguments=args,
        state=ToolCall.State.AWAITING_APPROVAL,
    )
    return ApprovalRequest.objects.create(
        tool_call=call,
        thread=thread,
        run=run,
        tool_name="refund_order",
        is_destructive=True,
        requested_by=owner,
        expires_at=timezone.now() + timedelta(hours=1),
        proposed_arguments=args,
    )


def open_as(
    browser: Any,
    server: Any,
    username: str,
    *,
    viewport: dict[str, int],
    notifications: bool = False,
) -> tuple[Any, Any]:
    """Log ``username`` in at ``viewport``; with ``notifications`` granted and recorded."""
    return login(
        browser,
        server,
        username,
        viewport=viewport,
        permissions=["notifications"] if notifications else None,
        init_script=WRAP_NOTIFICATION if notifications else None,
    )


def no_horizontal_scroll(page: Any) -> None:
    """Assert the document is no wider than the viewport (no horizontal scroll)."""
    widths = page.evaluate(
        "() => [document.documentElement.scrollWidth, window.innerWidth]"
    )
    assert widths[0] <= widths[1], f"page {widths[0]} px wide in {widths[1]} px"


def start_refund(page: Any, server: Any, title: str, text: str) -> str:
    """Create a thread as the page's user and ask for a refund; return the thread URL."""
    from playwright.sync_api import expect

    page.get_by_label("Title").fill(title)
    page.get_by_role("button", name="Create thread").click()
    page.wait_for_url(re.compile(r".*/threads/[^/]+/$"))
    expect(page.locator("#thread")).to_have_attribute("data-ready", "1")
    page.get_by_label("Message", exact=True).fill(text)
    page.get_by_role("button", name="Send").click()
    expect(card(page, "refund_order").locator(".call-state")).to_have_text(
        "pending approval", timeout=30_000
    )
    return page.url


# Records every Notification the page constructs (the browser shows none headless).
WRAP_NOTIFICATION = """(() => {
  const Real = window.Notification;
  window.__notifications = [];
  class Recorded extends Real {
    constructor(title, options) {
      super(title, options);
      window.__notifications.push({ title, body: (options && options.body) || "", tag: (options && options.tag) || "" });
    }
  }
  Object.defineProperty(Recorded, "permission", { get: () => Real.permission });
  Recorded.requestPermission = (...args) => Real.requestPermission(...args);
  window.Notification = Recorded;
})();"""


def card(page: Any, name: str) -> Any:
    """Return the locator of the tool-call card named ``name`` on the thread page."""
    return page.locator(".call", has=page.locator(".call-name", has_text=name))
