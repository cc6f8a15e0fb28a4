"""The one classification of transport faults (``agentcore.providers.errors``, SEC-06).

Real exception objects of each library are classified; the end-to-end proofs against
servers that really fail are in ``test_llmock.py`` and ``test_agui_http_faults.py``.
"""

from __future__ import annotations

import email.utils
import json
import time

import anthropic
import httpx
import openai
import pytest
from google.genai import errors as genai_errors

from agentcore.providers.base import ProviderError
from agentcore.providers.errors import (
    retry_after_seconds,
    sanitized_errors,
    transport_error,
)

REQUEST = httpx.Request("POST", "http://10.0.0.3/v1/chat/completions")


def response(status: int, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.Response(
        status, headers=headers, request=REQUEST, json={"error": "sk-secret"}
    )


@pytest.mark.parametrize(
    ("exc", "code", "retryable"),
    [
        (
            httpx.RemoteProtocolError("peer closed", request=REQUEST),
            "upstream_unavailable",
            True,
        ),
        (httpx.ReadTimeout("read", request=REQUEST), "timeout", True),
        (httpx.ConnectError("refused", request=REQUEST), "upstream_unavailable", True),
        (ConnectionResetError(104, "reset"), "upstream_unavailable", True),
        (json.JSONDecodeError("Expecting value", "{x", 1), "malformed_stream", True),
        (genai_errors.UnknownApiResponseError("bad chunk"), "malformed_stream", True),
        (
            openai.APIConnectionError(request=REQUEST),
            "upstream_unavailable",
            True,
        ),
        (openai.APITimeoutError(request=REQUEST), "timeout", True),
        (
            anthropic.InternalServerError("x", response=response(529), body=None),
            "upstream_unavailable",
            True,
        ),
        (
            openai.BadRequestError("x", response=response(400), body=None),
            "bad_request",
            False,
        ),
        (
            anthropic.AuthenticationError("x", response=response(401), body=None),
            "authentication",
            False,
        ),
        (
            genai_errors.ServerError(503, {"error": {"message": "x"}}),
            "upstream_unavailable",
            True,
        ),
        (
            genai_errors.ClientError(429, {"error": {"message": "x"}}),
            "rate_limited",
            True,
        ),
        (
            httpx.HTTPStatusError("x", request=REQUEST, response=response(502)),
            "upstream_unavailable",
            True,
        ),
    ],
)
def test_each_library_fault_maps_to_one_sanitized_code(
    exc: BaseException, code: str, retryable: bool
) -> None:
    """Every SDK's and httpx's fault gets one code; the message leaks nothing (SEC-06)."""
    error = transport_error(exc, provider="p")
    assert error is not None
    assert (error.code, error.retryable) == (code, retryable)
    assert "10.0.0.3" not in str(error)
    assert "sk-secret" not in str(error)
    assert str(error).startswith("p: ")


def test_error_event_inside_a_200_stream_uses_its_body_type() -> None:
    """Anthropic's ``error`` event (status 200) is classified by its error type."""
    exc = anthropic.APIStatusError(
        "x",
        response=response(200),
        body={"type": "error", "error": {"type": "overloaded_error"}},
    )
    assert transport_error(exc, provider="p").code == "upstream_unavailable"
    exc = anthropic.APIStatusError(
        "x",
        response=response(200),
        body={"type": "error", "error": {"type": "rate_limit_error"}},
    )
    assert transport_error(exc, provider="p").code == "rate_limited"


def test_retry_after_is_carried_from_the_response() -> None:
    """``Retry-After`` on a 429 becomes ``retry_after``."""
    exc = openai.RateLimitError(
        "x", response=response(429, {"Retry-After": "1.5"}), body=None
    )
    error = transport_error(exc, provider="p")
    assert (error.code, error.retry_after) == ("rate_limited", 1.5)


def test_gemini_retry_info_detail_is_read() -> None:
    """Gemini's ``RetryInfo.retryDelay`` is used when no header says how long."""
    body = {
        "error": {
            "code": 429,
            "details": [
                {
                    "@type": "type.googleapis.com/google.rpc.RetryInfo",
                    "retryDelay": "7s",
                }
            ],
        }
    }
    error = transport_error(genai_errors.ClientError(429, body), provider="p")
    assert (error.code, error.retry_after) == ("rate_limited", 7.0)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "3"}, 3.0),
        ({"Retry-After": "0.25"}, 0.25),
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),
        ({"retry-after": "soon"}, None),
        ({"retry-after": "-1"}, None),
        ({"retry-after": "99999"}, None),
        ({}, None),
        (None, None),
    ],
)
def test_retry_after_header_forms(
    headers: dict[str, str] | None, expected: float | None
) -> None:
    assert retry_after_seconds(headers) == expected


def test_retry_after_http_date() -> None:
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    value = retry_after_seconds({"Retry-After": when})
    assert value is not None
    assert 25 <= value <= 31


def test_our_own_bug_is_not_classified() -> None:
    """An exception that is not an upstream fault propagates unchanged, with its traceback."""
    assert transport_error(KeyError("x"), provider="p") is None
    with pytest.raises(KeyError), sanitized_errors("p"):
        raise KeyError("x")


def test_sanitized_errors_replaces_the_cause() -> None:
    """The raised ProviderError does not chain the upstream's exception (no text leaks)."""
    with pytest.raises(ProviderError) as info, sanitized_errors("p"):
        raise httpx.ReadTimeout("read from 10.0.0.3", request=REQUEST)
    assert info.value.code == "timeout"
    assert info.value.__cause__ is None
    assert info.value.__suppress_context__
