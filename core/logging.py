"""Structured logging: one JSON object per line, tagged with the run, thread and call.

:class:`JsonFormatter` renders a record as a single-line JSON object (``ts``,
``level``, ``logger``, ``message``, optional ``exc``, and anything passed with
``extra=``). :class:`ContextFilter` copies the current :func:`log_context` values
(``run``, ``thread``, ``toolCallId``) onto every record, so a line written deep
inside a tool or a provider adapter still says which run it belongs to.
Context lives in :mod:`contextvars`, so it follows asyncio tasks; a worker thread
started inside a context gets a copy when started with ``contextvars.copy_context``.

Nothing here imports Django: ``settings.LOGGING`` names these classes, and
:func:`log_context` is used by ``orchestration.pipeline.run_execute`` and
``orchestration.pipeline.tool_call_execute``.
"""

from __future__ import annotations

import contextvars
import json
import logging
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final
from urllib.parse import unquote_plus

CONTEXT_KEYS: Final = ("run", "thread", "toolCallId")

#: Query parameters whose values are credentials: never written to a log. A
#: client that sends its API token in the URL (``?token=``, ``?access_token=``)
#: is refused (tokens go in the ``Authorization`` header), but the URL is logged.
SECRET_PARAMS: Final = frozenset(
    {
        "token",
        "access_token",
        "id_token",
        "refresh_token",
        "api_key",
        "apikey",
        "password",
        "secret",
        "client_secret",
    }
)
#: What a secret's value is replaced by.
REDACTED: Final = "REDACTED"
_SECRET_IN_TEXT: Final = re.compile(
    r"(?i)(?<![\w-])("
    + "|".join(sorted(SECRET_PARAMS, key=len, reverse=True))
    + r")=[^&;\s\\\"'#<>]+"
)

_context: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar(
    "countersign_log_context", default=None
)

# Attributes every LogRecord has; anything else on a record came from ``extra=``.
_RESERVED: Final = frozenset(
    vars(logging.LogRecord("", 0, "", 0, "", (), None)).keys()
) | {"message", "asctime", "taskName", "color_message"}


def current_context() -> dict[str, str]:
    """Return a copy of the log context in force (``run``, ``thread``, ``toolCallId``)."""
    return dict(_context.get() or {})


@contextmanager
def log_context(**values: Any) -> Iterator[dict[str, str]]:
    """Add ``values`` (``run=``, ``thread=``, ``toolCallId=``) to every log line inside.

    ``None`` values are skipped; nested contexts add to the outer one and restore it
    on exit.
    """
    merged = {
        **(_context.get() or {}),
        **{k: str(v) for k, v in values.items() if v is not None},
    }
    token = _context.set(merged)
    try:
        yield merged
    finally:
        _context.reset(token)


def query_redact(query: bytes) -> bytes:
    """Return the raw query string ``query`` with every :data:`SECRET_PARAMS` value replaced.

    ``b"after=3&token=abc"`` -> ``b"after=3&token=REDACTED"``; names compare
    case-insensitively, percent-decoded. Everything else is kept byte for byte.
    """
    if b"=" not in query:
        return query
    parts = query.split(b"&")
    changed = False
    for index, part in enumerate(parts):
        name, sep, _ = part.partition(b"=")
        decoded = unquote_plus(name.decode("latin-1")).lower()
        if sep and decoded in SECRET_PARAMS:
            parts[index] = name + b"=" + REDACTED.encode()
            changed = True
    return b"&".join(parts) if changed else query


def text_redact(text: str) -> str:
    """Return ``text`` with the value of every ``<secret param>=<value>`` replaced."""
    return _SECRET_IN_TEXT.sub(lambda m: f"{m.group(1)}={REDACTED}", text)


class RedactFilter(logging.Filter):
    """Replace credentials in a record's message (``?token=...`` in a logged URL).

    The second line of defence: the ASGI application already removes them from
    every request's query string before anything logs it (``config.asgi``).
    """

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = text_redact(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        return True


class ClientErrorFilter(logging.Filter):
    """Drop the traceback from a logged 4xx response: a refusal is an answer, not a fault.

    Django logs a refused request (a ``PermissionDenied`` answered 403, say an
    admin add page without the add permission) with the exception's whole
    traceback; the WARNING line saying what was refused stays, the traceback
    (which points at no bug) goes. 5xx records keep theirs.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        status = getattr(record, "status_code", None)
        if isinstance(status, int) and status < 500:
            record.exc_info = None
            record.exc_text = None
        return True


class ContextFilter(logging.Filter):
    """Attach the :func:`log_context` values to each record as ``record.context``.

    (A dict, not one attribute per key: ``LogRecord`` already has a ``thread``.)
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "context"):
            record.context = dict(_context.get() or {})
        return True


class JsonFormatter(logging.Formatter):
    """Format a record as one line of JSON.

    Keys: ``ts`` (ISO 8601 UTC, milliseconds), ``level``, ``logger``, ``message``,
    ``run``/``thread``/``toolCallId`` when known, ``exc`` for an exception, plus
    every ``extra=`` attribute (values that are not JSON become their ``repr``).
    """

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        context = getattr(record, "context", None)
        if context is None:
            context = _context.get() or {}
        data.update(context)
        for key, value in vars(record).items():
            if key not in _RESERVED and key != "context" and not key.startswith("_"):
                data[key] = value
        if record.exc_info:
            data["exc"] = self.formatException(record.exc_info)
        if record.stack_info:
            data["stack"] = self.formatStack(record.stack_info)
        # Extras are logged as their repr (a request's shows its URL).
        return text_redact(json.dumps(data, default=repr, ensure_ascii=False))
