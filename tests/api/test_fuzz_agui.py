"""Fuzzing AG-UI input and WebSocket frames: never a 500, always the JSON error shape.

Hypothesis mutates a valid ``RunAgentInput`` (fields replaced by arbitrary JSON,
lone surrogates, NUL, deep nesting, fields dropped, junk messages and tools, raw
bytes) and POSTs it to ``/agui/demo/`` through the real WSGI stack; every answer
is below 500, and every 4xx is ``application/json`` with string ``type`` and
``detail``. Frames and paths sent to the real ASGI application's WebSocket
routing never crash a consumer: a frame is answered with nothing or an error frame
``{"kind": "error", "type", "detail"}`` and the socket stays usable; a close is
always an application code (4xxx). Example counts are bounded (``max_examples``)
so the module runs in well under a minute; ``derandomize`` makes it repeatable.
Implements SEC-06, DC-05.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from config.asgi import application
from tests.helpers.ws import (
    NO_POLL,
    WebsocketCommunicator,
    owned_thread,
    session_headers,
)

pytestmark = pytest.mark.django_db(transaction=True)

FUZZ = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)

#: Any character, lone surrogates and NUL included (JSON escapes carry them).
ANY_CHAR = st.characters(codec=None, exclude_categories=())
TEXT = st.text(ANY_CHAR, max_size=20)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT
)
# Containers hold at least one value (empty ones are leaves), so max_leaves bounds
# the depth too: nested empty lists have no leaves and once nested past
# json.dumps' recursion limit.
JSON = st.recursive(
    SCALARS | st.just([]) | st.just({}),
    lambda inner: (
        st.lists(inner, min_size=1, max_size=4)
        | st.dictionaries(TEXT, inner, min_size=1, max_size=4)
    ),
    max_leaves=12,
)
FIELDS = (
    "threadId",
    "runId",
    "state",
    "messages",
    "tools",
    "context",
    "forwardedProps",
)
ROLES = st.sampled_from(["user", "assistant", "system", "developer", "tool", "x"])


def _nested(depth: int) -> Any:
    value: Any = {}
    for _ in range(depth):
        value = {"a": value}
    return value


MESSAGE = st.fixed_dictionaries(
    {"id": TEXT | JSON, "role": ROLES},
    optional={
        "content": TEXT | JSON,
        "toolCallId": TEXT | JSON,
        "toolCalls": JSON,
        "name": TEXT,
    },
)
TOOL = st.fixed_dictionaries(
    {"name": TEXT | JSON}, optional={"description": TEXT, "parameters": JSON}
)


@st.composite
def agui_bodies(draw: Any) -> bytes:
    """A RunAgentInput with one or more mutations, serialised (or raw bytes)."""
    body: dict[str, Any] = {
        "threadId": f"fz-{draw(st.uuids()).hex[:12]}",
        "runId": f"r-{draw(st.uuids()).hex[:12]}",
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
        "messages": [{"id": "u1", "role": "user", "content": "hi"}],
    }
    kind = draw(
        st.sampled_from(["replace", "drop", "messages", "tools", "deep", "raw"])
    )
    if kind == "raw":
        return draw(st.binary(max_size=64))
    if kind == "replace":
        for name in draw(st.lists(st.sampled_from(FIELDS), min_size=1, max_size=3)):
            body[name] = draw(JSON)
    elif kind == "drop":
        for name in draw(st.lists(st.sampled_from(FIELDS), min_size=1, max_size=3)):
            body.pop(name, None)
    elif kind == "messages":
        body["messages"] = draw(st.lists(MESSAGE, max_size=4))
    elif kind == "tools":
        body["tools"] = draw(st.lists(TOOL, min_size=1, max_size=3))
    else:
        body[draw(st.sampled_from(["state", "forwardedProps"]))] = _nested(
            draw(st.integers(min_value=50, max_value=3000))
        )
    if draw(st.booleans()):
        body[draw(TEXT)] = draw(JSON)
    return json.dumps(body).encode()


def assert_error_shape(response: Any) -> None:
    assert response.status_code < 500, (response.status_code, response.content[:500])
    if response.status_code >= 400:
        assert response["Content-Type"].startswith("application/json"), response[
            "Content-Type"
        ]
        error = json.loads(response.content)
        assert isinstance(error["type"], str), error
        assert error["type"], error
        assert isinstance(error["detail"], str), error
        assert error["detail"], error


@pytest.fixture
def agui_client(user: Any) -> APIClient:
    client = APIClient(raise_request_exception=False)
    client.credentials(
        HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}"
    )
    return client


def test_sec06_fuzzed_agui_input_never_gets_a_500(agui_client: APIClient) -> None:
    """Mutated RunAgentInput bodies get a 2xx stream or a JSON 4xx, never a 500."""

    @FUZZ
    @given(body=agui_bodies())
    def post(body: bytes) -> None:
        response = agui_client.post(
            "/agui/demo/", data=body, content_type="application/json"
        )
        try:
            assert_error_shape(response)
            if response.status_code < 300:
                assert response["Content-Type"].startswith("text/event-stream")
        finally:
            response.close()

    post()


FRAMES = st.one_of(
    st.builds(
        lambda b: {"type": "websocket.receive", "bytes": b}, st.binary(max_size=32)
    ),
    st.builds(lambda t: {"type": "websocket.receive", "text": t}, TEXT),
    st.builds(
        lambda v: {"type": "websocket.receive", "text": json.dumps(v)},
        JSON | st.fixed_dictionaries({"type": st.just("resync"), "after": JSON}),
    ),
)


async def _frames_answered(
    path: str, headers: Any, frames: list[dict[str, Any]]
) -> None:
    socket = WebsocketCommunicator(application, path, headers=headers)
    await socket.send_input({"type": "websocket.connect"})
    first = await socket.receive_output(10)
    if first["type"] == "websocket.close":
        assert 4000 <= first.get("code", 0) < 5000, first
        return
    assert first["type"] == "websocket.accept", first
    for frame in frames:
        await socket.send_input(frame)
    # Every frame was taken without killing the consumer: a resync still answers.
    await socket.send_input(
        {
            "type": "websocket.receive",
            "text": json.dumps({"type": "resync", "after": 0}),
        }
    )
    seen: list[dict[str, Any]] = []
    while True:
        output = await socket.receive_output(10)
        if output["type"] == "websocket.close":
            assert 4000 <= output.get("code", 0) < 5000, output
            break
        assert output["type"] == "websocket.send", output
        message = json.loads(output["text"])
        seen.append(message)
        if message.get("kind") == "error":
            assert isinstance(message["type"], str), message
            assert message["detail"], message
        if message.get("seq") == 2:
            break
    await socket.send_input({"type": "websocket.disconnect", "code": 1000})
    await socket.wait(5)


def test_sec06_fuzzed_websocket_frames_never_crash_the_consumer(
    user: Any, settings: Any
) -> None:
    """Arbitrary frames on a thread socket: error frames or nothing, the socket still served."""
    settings.COUNTERSIGN = NO_POLL
    thread = async_to_sync(owned_thread)(user)
    headers = session_headers(user)

    @FUZZ
    @given(frames=st.lists(FRAMES, min_size=1, max_size=4))
    def send(frames: list[dict[str, Any]]) -> None:
        async_to_sync(_frames_answered)(
            f"/ws/threads/{thread.thread_id}/?after=0", headers, frames
        )

    send()


PATH_CHARS = st.characters(codec="utf-8", exclude_characters="\x00")


def test_sec06_fuzzed_websocket_paths_close_with_an_application_code(
    user: Any,
) -> None:
    """Arbitrary paths and ``after`` values: accepted or closed with a 4xxx code, never a crash."""
    headers = session_headers(user)
    thread = async_to_sync(owned_thread)(user)

    @settings(max_examples=25, deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(
        path=st.one_of(
            st.builds(lambda t: f"/ws/{t}/", st.text(PATH_CHARS, max_size=20)),
            st.builds(lambda t: f"/ws/threads/{t}/", st.text(PATH_CHARS, max_size=20)),
            st.builds(
                lambda q: f"/ws/threads/{thread.thread_id}/?after={q}",
                st.text(PATH_CHARS, max_size=12),
            ),
        )
    )
    def connect(path: str) -> None:
        async_to_sync(_connect_only)(path, headers)

    connect()


async def _connect_only(path: str, headers: Any) -> None:
    socket = WebsocketCommunicator(application, path, headers=headers)
    await socket.send_input({"type": "websocket.connect"})
    first = await socket.receive_output(10)
    if first["type"] == "websocket.accept":
        output = await socket.receive_output(10)
        if output["type"] == "websocket.close":
            assert 4000 <= output.get("code", 0) < 5000, (path, output)
        await socket.send_input({"type": "websocket.disconnect", "code": 1000})
        await socket.wait(5)
    else:
        assert first["type"] == "websocket.close", first
        assert 4000 <= first.get("code", 0) < 5000, (path, first)


@pytest.mark.parametrize("tool_calls", [1.5, "x", [None], [True], [{"id": 1}]])
def test_sec06_tool_calls_on_a_non_assistant_message_are_no_calls(
    agui_client: APIClient, tool_calls: Any
) -> None:
    """``toolCalls`` on a system message (an untyped extra) is not read as calls (was a 500)."""
    from threads.models import ToolCall

    body = {
        "threadId": "fz-extra",
        "runId": "r-extra",
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
        "messages": [
            {
                "id": "s1",
                "role": "system",
                "content": "be brief",
                "toolCalls": tool_calls,
            },
            {"id": "u1", "role": "user", "content": "hi"},
        ],
    }

    response = agui_client.post(
        "/agui/demo/", data=json.dumps(body), content_type="application/json"
    )

    try:
        assert_error_shape(response)
        assert response.status_code == 200
    finally:
        response.close()
    assert not ToolCall.objects.filter(thread__client_thread_id="fz-extra").exists()
