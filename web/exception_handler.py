"""The REST API's one exception handler: every 4xx has the same body.

``{"type": "<stable code>", "detail": "<sentence>", "fields": {"<field>": [...]}}``;
``fields`` is present only for validation errors. Domain errors
(:class:`core.errors.CountersignError` and every domain error deriving from it)
carry their own ``code`` and ``status``; DRF's exceptions map to their default
codes. Implements STYLE.md 20 and DC-05.
"""

from __future__ import annotations

import re
from typing import Any, Final

from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.db import IntegrityError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from rest_framework import exceptions, serializers, status
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import set_rollback

from core.errors import CountersignError

#: Domain errors that concern one request field: the field is named in ``fields``.
_ERROR_FIELDS: Final = {
    "invalid_arguments": "edited_arguments",
    "reason_required": "reason",
}

#: The database's unique constraints, by name (PostgreSQL) and by ``table.column``
#: (SQLite names the columns only): the public field each one protects and why.
_CONSTRAINTS: Final = {
    "uniq_message_id_per_thread": (
        "messageId",
        "a message of this thread already has this id",
    ),
    "threads_message.message_id": (
        "messageId",
        "a message of this thread already has this id",
    ),
    "uniq_tool_message_per_call": (
        "toolCallId",
        "this call is already answered; a call takes one answer",
    ),
    "threads_message.tool_call_id": (
        "toolCallId",
        "this call is already answered; a call takes one answer",
    ),
    "uniq_approval_per_interrupt": (
        "interruptId",
        "this interrupt already has its approval request",
    ),
    "uniq_run_id_per_thread": ("runId", "this runId was already used on this thread"),
    "threads_run.run_id": ("runId", "this runId was already used on this thread"),
    "uniq_tool_call_per_thread": (
        "toolCallId",
        "this tool call id is already used on this thread",
    ),
    "threads_toolcall.tool_call_id": (
        "toolCallId",
        "this tool call id is already used on this thread",
    ),
    "uniq_idempotency_key_per_user": (
        "Idempotency-Key",
        "this Idempotency-Key is already in use",
    ),
}
_PG_DETAIL: Final = re.compile(
    r"Key \((?P<columns>[^)]*)\)=\((?P<values>.*)\) already exists"
)
#: Columns holding internal primary keys: never shown (nor any digits-only ``*_id``
#: value, which is a foreign key's).
_INTERNAL_COLUMNS: Final = frozenset({"id", "thread_id", "user_id"})

_DRF_TYPES: Final = {
    exceptions.ValidationError: "validation_error",
    exceptions.ParseError: "parse_error",
    exceptions.AuthenticationFailed: "authentication_failed",
    exceptions.NotAuthenticated: "not_authenticated",
    exceptions.PermissionDenied: "permission_denied",
    exceptions.NotFound: "not_found",
    exceptions.MethodNotAllowed: "method_not_allowed",
    exceptions.NotAcceptable: "not_acceptable",
    exceptions.UnsupportedMediaType: "unsupported_media_type",
    exceptions.Throttled: "throttled",
}


def error_body(
    *, type: str, detail: str, fields: dict[str, list[str]] | None = None
) -> dict[str, Any]:
    """Return the API's error body."""
    body: dict[str, Any] = {"type": type, "detail": detail}
    if fields is not None:
        body["fields"] = fields
    return body


def flatten_errors(detail: Any, prefix: str = "") -> dict[str, list[str]]:
    """Flatten DRF's nested error detail into ``{"a.b.0": ["msg", ...]}``."""
    flat: dict[str, list[str]] = {}
    if isinstance(detail, dict):
        for key, value in detail.items():
            # A nested object's own error ("expected an object") is about that
            # field: name it ("grant"), not DRF's "grant.non_field_errors".
            if prefix and key == api_settings.NON_FIELD_ERRORS_KEY:
                name = prefix
            else:
                name = f"{prefix}.{key}" if prefix else str(key)
            for field, messages in flatten_errors(value, name).items():
                flat.setdefault(field, []).extend(messages)
    elif isinstance(detail, list):
        if all(not isinstance(item, dict | list) for item in detail):
            flat[prefix or "non_field_errors"] = [str(item) for item in detail]
        else:
            for index, item in enumerate(detail):
                name = f"{prefix}.{index}" if prefix else str(index)
                for field, messages in flatten_errors(item, name).items():
                    flat.setdefault(field, []).extend(messages)
    else:
        flat[prefix or "non_field_errors"] = [str(detail)]
    return flat


def _missing_messages() -> frozenset[str]:
    """Return DRF's messages for a field not given (or given as null / empty).

    Read from DRF itself, when needed (they are lazy translations), so that the
    words this handler recognises cannot drift from the words DRF writes.
    """
    return frozenset(
        {
            str(serializers.Field.default_error_messages["required"]),
            str(serializers.Field.default_error_messages["null"]),
            str(serializers.CharField.default_error_messages["blank"]),
        }
    )


def _validation_sentence(fields: dict[str, list[str]]) -> str:
    named = [f for f in fields if f != "non_field_errors"]
    if not named:
        first = fields.get("non_field_errors", ["the request is invalid"])[0]
        return f"The request is invalid: {first}"
    # A field left out is "missing", not an "invalid value" (DRF's own words for it).
    missing = [f for f in named if fields[f][0] in _missing_messages()]
    invalid = [f for f in named if f not in missing]
    parts = []
    if missing:
        parts.append(
            f"Missing {', '.join(repr(f) for f in missing)}: "
            + ("it is" if len(missing) == 1 else "they are")
            + " required; add "
            + ("it" if len(missing) == 1 else "them")
            + " to the request"
        )
    if invalid:
        listed = ", ".join(repr(f) for f in invalid)
        parts.append(f"Invalid value for {listed}: {fields[invalid[0]][0]}")
    return "; ".join(parts)


def integrity_conflict(
    error: IntegrityError, *, field: str | None = None, value: str | None = None
) -> dict[str, Any]:
    """Return the 409 body for a violated unique constraint, without database text.

    The body names the public field the constraint protects (``toolCallId``,
    ``messageId``, ``runId``...) and the conflicting public id when the caller
    passes ``value`` or PostgreSQL's detail shows it; never SQL, constraint names
    or internal primary keys, which would tell a caller about other users' rows.
    """
    cause = error.__cause__
    diag = getattr(cause, "diag", None)
    name = getattr(diag, "constraint_name", None) or ""
    text = str(cause or error)
    known = _CONSTRAINTS.get(name)
    if known is None:
        failed = re.search(r"UNIQUE constraint failed: (.*)$", text)
        if failed:
            columns = [c.strip() for c in failed.group(1).split(",")]
            known = next(
                (_CONSTRAINTS[c] for c in reversed(columns) if c in _CONSTRAINTS), None
            )
    public_field, why = known or (field or "body", "it conflicts with stored data")
    if value is None:
        detail = getattr(diag, "message_detail", None) or ""
        match = _PG_DETAIL.search(detail)
        if match:
            columns = [c.strip() for c in match.group("columns").split(",")]
            values = match.group("values").split(", ", len(columns) - 1)
            public = [
                v
                for c, v in zip(columns, values, strict=False)
                if c not in _INTERNAL_COLUMNS
                and not (c.endswith("_id") and v.strip().isdigit())
            ]
            value = public[-1] if public else None
    field = field or public_field
    shown = f" {value!r}" if value else ""
    sentence = f"{field}{shown} conflicts with stored data: {why}"
    return error_body(type="conflict", detail=sentence, fields={field: [sentence]})


def json_error_response(
    status_code: int, type_: str, detail: str, **extra: Any
) -> JsonResponse:
    """Return the project's error body as a plain Django response (outside DRF views)."""
    return JsonResponse({"type": type_, "detail": detail, **extra}, status=status_code)


#: Paths whose clients read JSON: Django's own error pages are JSON there.
JSON_PREFIXES: Final = ("/api/", "/agui/", "/healthz", "/readyz", "/metrics")


def not_found_view(
    request: HttpRequest, exception: Exception | None = None
) -> HttpResponse:
    """Django's ``handler404``: the JSON 404 body on API paths, the HTML page elsewhere."""
    if request.path.startswith(JSON_PREFIXES):
        return json_error_response(
            404, "not_found", "The resource was not found, or you may not see it."
        )
    return defaults.page_not_found(request, exception or Http404())


def server_error_view(request: HttpRequest) -> HttpResponse:
    """Django's ``handler500``: the JSON body (no exception text) on API paths."""
    if request.path.startswith(JSON_PREFIXES):
        return json_error_response(
            500,
            "server_error",
            "The server failed; the error was logged. Try again later.",
        )
    return defaults.server_error(request)


def bad_request_view(
    request: HttpRequest, exception: Exception | None = None
) -> HttpResponse:
    """Django's ``handler400``: the JSON body on API paths."""
    if request.path.startswith(JSON_PREFIXES):
        return json_error_response(400, "bad_request", "The request could not be read.")
    return defaults.bad_request(request, exception or Exception())


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """Return the error response for ``exc``, or ``None`` to let Django answer 500."""
    if isinstance(exc, IntegrityError):
        set_rollback()
        return Response(integrity_conflict(exc), status=409)
    if isinstance(exc, CountersignError):
        set_rollback()
        field = getattr(exc, "field", None) or _ERROR_FIELDS.get(exc.code)
        detail = str(exc) or exc.code.replace("_", " ")
        return Response(
            error_body(
                type=exc.code,
                detail=detail,
                fields={field: [detail]} if field else None,
            ),
            status=exc.status,
        )
    if isinstance(exc, RequestDataTooBig):
        set_rollback()
        return Response(
            error_body(
                type="payload_too_large",
                detail=f"the request body is larger than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} "
                "bytes; send less (split long content, or link to large files)",
            ),
            status=413,
        )
    if isinstance(exc, Http404):
        exc = exceptions.NotFound("The resource was not found, or you may not see it.")
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied(*exc.args)
    if not isinstance(exc, exceptions.APIException):
        return None
    headers: dict[str, str] = {}
    if getattr(exc, "auth_header", None):
        headers["WWW-Authenticate"] = exc.auth_header  # type: ignore[attr-defined]
    if getattr(exc, "wait", None):
        headers["Retry-After"] = f"{int(exc.wait)}"  # type: ignore[attr-defined]
    kind = next(
        (code for cls, code in _DRF_TYPES.items() if isinstance(exc, cls)),
        None,
    )
    if isinstance(exc, exceptions.ValidationError):
        fields = flatten_errors(exc.detail)
        body = error_body(
            type="validation_error", detail=_validation_sentence(fields), fields=fields
        )
    else:
        code = exc.get_codes()
        body = error_body(
            type=kind or (code if isinstance(code, str) else "error"),
            detail=str(exc.detail),
        )
        if isinstance(exc, exceptions.Throttled):
            body["detail"] = (
                f"Too many requests: {exc.detail} Slow down and retry after the "
                "Retry-After header's seconds."
            )
    set_rollback()
    return Response(
        body, status=exc.status_code or status.HTTP_400_BAD_REQUEST, headers=headers
    )
