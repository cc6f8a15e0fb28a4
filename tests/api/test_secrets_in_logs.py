"""Credentials in a URL's query string never reach a log line.

A client that sends its token as ``?token=`` or ``?access_token=`` is refused
(401: tokens go in the ``Authorization`` header), and the ASGI application
replaces the value before anything logs the request (``config.asgi``,
``core.logging.query_redact``); the log handlers' ``RedactFilter`` and the JSON
formatter catch anything else. The same over real uvicorn processes is in
``tests/prod/test_health_logging_janitor.py``. Implements SEC-05.
"""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
from asgiref.testing import ApplicationCommunicator

from core.logging import JsonFormatter, RedactFilter, query_redact, text_redact
from tests.helpers.api import token_client

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        (b"token=s3cr3t", b"token=REDACTED"),
        (b"after=3&access_token=s3cr3t&x=1", b"after=3&access_token=REDACTED&x=1"),
        (b"Access%5FToken=s3cr3t", b"Access%5FToken=REDACTED"),
        (
            b"api_key=a&password=b&client_secret=c",
            b"api_key=REDACTED&password=REDACTED&client_secret=REDACTED",
        ),
        (b"after=3&preview=1", b"after=3&preview=1"),
        (b"token", b"token"),
        (b"tokens=keep&mytoken=keep", b"tokens=keep&mytoken=keep"),
        (b"", b""),
    ],
)
def test_query_redact_replaces_only_credential_values(query, expected):
    assert query_redact(query) == expected


def test_text_redact_finds_credentials_inside_logged_text():
    line = "GET /api/threads/?after=1&token=abc123&x=2 HTTP/1.1\" 401; <ASGIRequest: GET '/agui/x?access_token=zz'>"

    assert text_redact(line) == (
        'GET /api/threads/?after=1&token=REDACTED&x=2 HTTP/1.1" 401; '
        "<ASGIRequest: GET '/agui/x?access_token=REDACTED'>"
    )


async def _get(path: str, query: bytes) -> tuple[int, dict]:
    application = _application()
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query,
        "headers": [(b"host", b"localhost")],
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 80),
    }
    app = ApplicationCommunicator(application, scope)
    await app.send_input({"type": "http.request", "body": b""})
    start = await app.receive_output(10)
    await app.wait(10)
    return start["status"], scope


def _application():
    # Its first import runs django.setup(), which configures logging afresh
    # (dropping handlers added before): import it before capturing.
    from config.asgi import application

    return application


class _Records(logging.Handler):
    """Keep every record as emitted, before any filter or formatter of ours."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def key(user) -> str:
    """Return olivia's real API token key."""
    return str(token_client(user)._credentials["HTTP_AUTHORIZATION"].split()[1])


async def test_a_token_in_the_query_string_is_refused_and_logged_nowhere(key, settings):
    """``?token=<real key>`` and ``?access_token=``: 401, and no record holds the key."""
    settings.ALLOWED_HOSTS = ["localhost"]
    _application()
    captured = _Records()
    root = logging.getLogger()
    root.addHandler(captured)
    try:
        status, scope = await _get("/api/threads/", f"after=1&token={key}".encode())
        agui, _ = await _get("/agui/threads/t1/events", f"access_token={key}".encode())
        # Django logs a 4xx from a worker thread: wait for both lines.
        for _ in range(100):
            if len([r for r in captured.records if r.name == "django.request"]) >= 2:
                break
            await asyncio.sleep(0.05)
    finally:
        root.removeHandler(captured)

    assert (status, agui) == (401, 401)
    assert scope["query_string"] == b"after=1&token=REDACTED"
    # every record, its message and every attribute (a request's repr holds its
    # URL), unredacted by any formatter: the key was gone before it was logged
    raw = [f"{r.getMessage()} {vars(r)!r}" for r in captured.records]
    assert [m for m in raw if "Unauthorized: /api/threads/" in m]
    assert [m for m in raw if "token=REDACTED" in m]
    assert not [m for m in raw if key in m]


def test_the_redact_filter_rewrites_a_record_before_any_handler_formats_it():
    record = logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        __file__,
        1,
        '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5000", "GET", "/api/threads/?token=k3y", "1.1", 401),
        None,
    )

    assert RedactFilter().filter(record) is True
    assert record.getMessage() == (
        '127.0.0.1:5000 - "GET /api/threads/?token=REDACTED HTTP/1.1" 401'
    )


def test_the_json_formatter_redacts_extras_and_stays_json():
    """An ``extra=`` value logged as its repr (a request's holds its URL): redacted, valid JSON."""

    class Request:
        def __repr__(self) -> str:
            return "<ASGIRequest: GET '/api/threads/?token=k3y\\\"x'>"

    record = logging.LogRecord(
        "django.request",
        logging.WARNING,
        __file__,
        1,
        "Unauthorized: %s",
        ("/api/threads/",),
        None,
    )
    record.request = Request()

    line = JsonFormatter().format(record)

    assert "k3y" not in line
    assert json.loads(line)["request"].startswith(
        "<ASGIRequest: GET '/api/threads/?token=REDACTED"
    )
