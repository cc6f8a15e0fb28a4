"""Browser fixtures: Debian's chromium driven by Playwright against a live uvicorn server.

The server runs in a subprocess on ``127.0.0.1:<ephemeral port>`` against the test
database (``transactional_db``, so both processes see committed rows). In the
embedded mode it runs runs and executions on its own thread pool; in the Celery
mode it gets the worker's ``REDIS_URL``. Playwright never downloads a browser and
the suite installs nothing: without ``/usr/bin/chromium`` (``apt-get install
chromium``; ``.ci/run`` installs it) the browser tests skip, or fail with
``COUNTERSIGN_REQUIRE_SERVICES=1``, like the other service checks.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import service_missing
from tests.executors import ROOT, database_url_for_subprocess

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


@pytest.fixture(scope="session")
def chromium_path() -> str:
    """Return the path of Debian's chromium; skip (or fail in CI) when it is missing."""
    return require_chromium()


@pytest.fixture(scope="module")
def browser(chromium_path: str, django_db_setup: Any) -> Iterator[Any]:
    """Return a headless chromium driven by Playwright's sync API, per test module.

    Module scope, not session: while Playwright's sync API lives, an event loop is
    marked running on the main thread, which would break every asyncio test that
    runs after the browser tests.

    Playwright's sync API keeps an event loop marked running on the main thread, so
    Django's async-safety check would refuse every ORM call the tests make; the
    tests are plain synchronous code, so the check is switched off while the browser
    lives (and never passed on to the server processes, see ``ui_server_factory``).
    """
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:  # pragma: no cover - a dev dependency
        service_missing("the playwright package is not installed")
    from playwright.sync_api import expect

    expect.set_options(timeout=20_000)
    previous = os.environ.get(ASYNC_UNSAFE)
    os.environ[ASYNC_UNSAFE] = "true"
    manager = sync_playwright().start()
    try:
        instance = manager.chromium.launch(
            executable_path=chromium_path, args=CHROMIUM_ARGS
        )
        yield instance
        instance.close()
    finally:
        manager.stop()
        if previous is None:
            os.environ.pop(ASYNC_UNSAFE, None)
        else:
            os.environ[ASYNC_UNSAFE] = previous


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


@pytest.fixture
def ui_server_factory(
    transactional_db: Any, tmp_path: Path
) -> Iterator[Callable[..., LiveServer]]:
    """Return a factory ``(redis_url="", extra_env=None) -> LiveServer`` (started).

    ``extra_env`` adds environment variables (e.g. ``COUNTERSIGN_DECISION_UNDO_SECONDS``);
    every server is stopped after the test.
    """
    servers: list[LiveServer] = []
    db_url = database_url_for_subprocess()

    def make(
        *, redis_url: str = "", extra_env: dict[str, str] | None = None
    ) -> LiveServer:
        env = {
            **{k: v for k, v in os.environ.items() if k != ASYNC_UNSAFE},
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DATABASE_URL": db_url,
            "REDIS_URL": redis_url,
            "DEBUG": "1",
            "PYTHONUNBUFFERED": "1",
            **(extra_env or {}),
        }
        server = LiveServer(env=env, log_path=tmp_path / f"uvicorn-{len(servers)}.log")
        servers.append(server)
        server.start()
        return server

    yield make
    for server in servers:
        server.stop()
        # Shown by pytest only when the test failed.
        print(f"--- {server.log_path.name} ---\n{server.log_tail()}")


@pytest.fixture
def ui_server(ui_server_factory: Callable[..., LiveServer]) -> LiveServer:
    """Return a started server in the embedded mode (no Redis)."""
    return ui_server_factory()


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
