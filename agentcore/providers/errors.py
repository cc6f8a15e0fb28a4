"""The one mapping from transport and SDK failures to sanitized :class:`ProviderError` codes.

Every adapter streams inside :func:`sanitized_errors`; whatever the ``openai``,
``anthropic`` or ``google-genai`` SDK, ``httpx`` or the socket raises while a turn is
requested or streamed is classified here, once (SEC-06):

==========================================================  ========================  =========
failure                                                     code                      retryable
==========================================================  ========================  =========
HTTP 429                                                    ``rate_limited``          yes
HTTP 408, read/connect/pool timeout, SDK timeout            ``timeout``               yes
HTTP 5xx (and 529), connection refused/reset/dropped,       ``upstream_unavailable``  yes
``httpx.RemoteProtocolError``, an SDK connection error,
an ``error`` event inside the stream
a chunk that is not JSON (``json.JSONDecodeError``),        ``malformed_stream``      yes
Gemini's ``UnknownApiResponseError``
HTTP 400, 404, 409, 413, 422                                ``bad_request``           no
HTTP 401, 403                                               ``authentication``        no
==========================================================  ========================  =========

A ``Retry-After`` (or ``retry-after-ms``) header, or a Gemini ``RetryInfo`` detail,
becomes :attr:`ProviderError.retry_after`. The agent loop retries the retryable codes
within its limits (``agentcore.loop``). Messages name the provider and the kind of
failure only: never the key, the URL or the upstream's own text. An exception not in
this table is ours, not the upstream's, and propagates unchanged (the loop logs it
and ends the run with ``internal_error``).

SDK modules are looked up in :data:`sys.modules` rather than imported, so classifying
never imports an SDK the process does not use.
"""

from __future__ import annotations

import email.utils
import json
import math
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import Any, Final

import httpx

from agentcore.providers.base import ProviderError

__all__ = [
    "error_for_status",
    "retry_after_seconds",
    "sanitized_errors",
    "transport_error",
]

_STATUS_CODES: Final[dict[int, str]] = {
    400: "bad_request",
    401: "authentication",
    403: "authentication",
    404: "bad_request",
    408: "timeout",
    409: "bad_request",
    413: "bad_request",
    422: "bad_request",
    429: "rate_limited",
}

#: Error types inside a 200 stream (Anthropic ``error`` events, OpenAI error chunks).
_BODY_TYPES: Final[dict[str, str]] = {
    "invalid_request_error": "bad_request",
    "authentication_error": "authentication",
    "permission_error": "authentication",
    "not_found_error": "bad_request",
    "request_too_large": "bad_request",
    "rate_limit_error": "rate_limited",
    "rate_limit_exceeded": "rate_limited",
    "timeout_error": "timeout",
    "overloaded_error": "upstream_unavailable",
    "api_error": "upstream_unavailable",
    "server_error": "upstream_unavailable",
}

#: Longest ``Retry-After`` honoured as given; longer values are capped by the caller.
_MAX_RETRY_AFTER: Final = 3600.0


def error_for_status(
    status: int | None,
    *,
    provider: str,
    during_stream: bool = False,
    retry_after: float | None = None,
) -> ProviderError:
    """Return a sanitized :class:`ProviderError` for an HTTP ``status`` from ``provider``.

    ``None`` means no status (connection failure or an error event inside the
    stream). The message names the provider and status only: never the key, the
    URL or the upstream's text. Codes: ``bad_request``, ``authentication``,
    ``rate_limited``, ``timeout``, ``upstream_unavailable``. Implements SEC-06.
    """
    if status is None:
        code = "upstream_unavailable"
        where = "the stream failed" if during_stream else "the request failed"
        return ProviderError(
            f"{provider}: {where} ({code})", code=code, retry_after=retry_after
        )
    code = _STATUS_CODES.get(status, "upstream_unavailable")
    return ProviderError(
        f"{provider}: HTTP {status} ({code})", code=code, retry_after=retry_after
    )


def retry_after_seconds(headers: Mapping[str, str] | None) -> float | None:
    """Return the wait a ``retry-after-ms`` or ``Retry-After`` header asks for, in seconds.

    ``Retry-After`` may be seconds (a float is accepted) or an HTTP date. Returns
    ``None`` when absent, unparseable, negative or over an hour. Raises nothing.
    """
    if not headers:
        return None
    lowered = {str(k).lower(): str(v) for k, v in headers.items()}
    candidates: list[float] = []
    with suppress(KeyError, ValueError):
        candidates.append(float(lowered["retry-after-ms"]) / 1000)
    raw = lowered.get("retry-after")
    if raw is not None and not candidates:
        try:
            candidates.append(float(raw))
        except ValueError:
            with suppress(TypeError, ValueError, IndexError):
                when = email.utils.parsedate_to_datetime(raw)
                candidates.append(when.timestamp() - time.time())
    for value in candidates:
        if math.isfinite(value) and 0 <= value <= _MAX_RETRY_AFTER:
            return value
    return None


def transport_error(exc: BaseException, *, provider: str) -> ProviderError | None:
    """Return the :class:`ProviderError` for ``exc``, or ``None`` when it is not an upstream fault.

    ``exc`` is anything raised while an SDK requested or streamed a turn; see the
    module docstring for the table. Raises nothing. Implements SEC-06.
    """
    if isinstance(exc, ProviderError):
        return exc
    for sdk_name in ("openai", "anthropic"):
        sdk = sys.modules.get(sdk_name)
        if sdk is not None and isinstance(exc, sdk.APIError):
            return _stainless_error(exc, sdk, provider=provider)
    genai_errors = sys.modules.get("google.genai.errors")
    if genai_errors is not None:
        if isinstance(exc, genai_errors.APIError):
            return _genai_error(exc, provider=provider)
        if isinstance(exc, genai_errors.UnknownApiResponseError):
            return _malformed(provider)
    if isinstance(exc, httpx.HTTPStatusError):
        return error_for_status(
            exc.response.status_code,
            provider=provider,
            retry_after=retry_after_seconds(exc.response.headers),
        )
    if isinstance(exc, httpx.TimeoutException | TimeoutError):
        return _timeout(provider)
    if isinstance(exc, httpx.HTTPError | ConnectionError):
        return error_for_status(None, provider=provider, during_stream=True)
    if isinstance(exc, json.JSONDecodeError):
        return _malformed(provider)
    return None


@contextmanager
def sanitized_errors(provider: str) -> Iterator[None]:
    """Turn every upstream fault raised in the block into a sanitized :class:`ProviderError`.

    Wrap an adapter's request and stream iteration in it. A :class:`ProviderError`
    passes unchanged; an exception :func:`transport_error` does not classify (a bug
    of ours) propagates unchanged, with its traceback. Implements SEC-06.
    """
    try:
        yield
    except ProviderError:
        raise
    except Exception as exc:
        error = transport_error(exc, provider=provider)
        if error is None:
            raise
        raise error from None


def error_from_sdk(exc: BaseException, sdk: Any, *, provider: str) -> ProviderError:
    """Map an exception of a Stainless-generated SDK (``openai``, ``anthropic``) to a ProviderError.

    Kept for callers of the earlier API; :func:`transport_error` is the general form.
    """
    return _stainless_error(exc, sdk, provider=provider)


def _stainless_error(exc: BaseException, sdk: Any, *, provider: str) -> ProviderError:
    """Classify an ``openai`` / ``anthropic`` exception (same class names in both SDKs)."""
    if isinstance(exc, sdk.APIStatusError):
        status = exc.status_code
        if status >= 400:
            return error_for_status(
                status,
                provider=provider,
                retry_after=retry_after_seconds(exc.response.headers),
            )
        # an ``error`` event inside a 200 stream: its body names the error type
        return _body_error(getattr(exc, "body", None), provider=provider)
    if isinstance(exc, sdk.APITimeoutError):
        return _timeout(provider)
    if isinstance(exc, sdk.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        if isinstance(cause, httpx.TimeoutException):
            return _timeout(provider)
        return error_for_status(None, provider=provider)
    if isinstance(exc, sdk.APIResponseValidationError):
        return _malformed(provider)
    return _body_error(getattr(exc, "body", None), provider=provider)


def _genai_error(exc: Any, *, provider: str) -> ProviderError:
    """Classify a ``google.genai.errors.APIError`` (status in ``code``)."""
    status = exc.code if isinstance(exc.code, int) else None
    response = getattr(exc, "response", None)
    retry_after = retry_after_seconds(getattr(response, "headers", None))
    if retry_after is None:
        retry_after = _retry_info(getattr(exc, "details", None))
    if status is None or status < 400:
        return error_for_status(
            None, provider=provider, during_stream=True, retry_after=retry_after
        )
    return error_for_status(status, provider=provider, retry_after=retry_after)


def _retry_info(details: Any) -> float | None:
    """Return the ``RetryInfo.retryDelay`` of a Google error body (``"1.5s"``), if any."""
    error = details.get("error", details) if isinstance(details, dict) else None
    entries = error.get("details") if isinstance(error, dict) else None
    for entry in entries if isinstance(entries, list) else ():
        delay = entry.get("retryDelay") if isinstance(entry, dict) else None
        if isinstance(delay, str) and delay.endswith("s"):
            with suppress(ValueError):
                value = float(delay[:-1])
                if math.isfinite(value) and 0 <= value <= _MAX_RETRY_AFTER:
                    return value
    return None


def _body_error(body: Any, *, provider: str) -> ProviderError:
    """Classify an error reported inside the stream by its body's error type."""
    error = body.get("error", body) if isinstance(body, dict) else None
    kind = error.get("type") or error.get("code") if isinstance(error, dict) else None
    code = _BODY_TYPES.get(
        kind if isinstance(kind, str) else "", "upstream_unavailable"
    )
    return ProviderError(f"{provider}: the stream failed ({code})", code=code)


def _timeout(provider: str) -> ProviderError:
    return ProviderError(f"{provider}: request timed out", code="timeout")


def _malformed(provider: str) -> ProviderError:
    # A corrupted chunk is a transport fault (a proxy, a cut buffer), so worth a retry.
    return ProviderError(
        f"{provider}: the stream sent a chunk that is not valid JSON (malformed_stream)",
        code="malformed_stream",
        retryable=True,
    )
