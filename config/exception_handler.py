"""The REST API's one exception handler: every 4xx has the same body.

``{"type": "<stable code>", "detail": "<sentence>", "fields": {"<field>": [...]}}``;
``fields`` is present only for validation errors. Domain errors
(:class:`threads.exceptions.ThreadsError` and the approval errors deriving from it)
carry their own ``code`` and ``status``; DRF's exceptions map to their default
codes. Implements STYLE.md 20 and DC-05.
"""

from __future__ import annotations

from typing import Any, Final

from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import set_rollback

from threads.exceptions import ThreadsError

#: Domain errors that concern one request field: the field is named in ``fields``.
_ERROR_FIELDS: Final = {
    "invalid_arguments": "edited_arguments",
    "reason_required": "reason",
}

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


def _validation_sentence(fields: dict[str, list[str]]) -> str:
    named = [f for f in fields if f != "non_field_errors"]
    if not named:
        first = fields.get("non_field_errors", ["the request is invalid"])[0]
        return f"The request is invalid: {first}"
    listed = ", ".join(repr(f) for f in named)
    first = fields[named[0]][0]
    return f"Invalid value for {listed}: {first}"


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """Return the error response for ``exc``, or ``None`` to let Django answer 500."""
    if isinstance(exc, ThreadsError):
        set_rollback()
        field = _ERROR_FIELDS.get(exc.code)
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
