"""The thread and approval-queue WebSockets, through the real ASGI application.

Runs execute on the embedded pool and on a real Celery worker process (the
``executor`` fixture); the socket is a channels ``WebsocketCommunicator`` against
``config.asgi.application`` with a real session cookie. The consumer's periodic
re-read of the log is pushed out of reach (``SOCKET_POLL_SECONDS`` = 1 hour) in the
streaming tests, so every live event must come through the channel layer's
doorbell: across threads on the server's loop (embedded) and across processes
through Redis (Celery). Implements DC-02.

``channels.testing`` imports daphne, which is not a dependency here, so
:class:`WebsocketCommunicator` below is the same few lines over asgiref's
``ApplicationCommunicator``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Permission
from django.db import transaction

from tests.agentcore.helpers import coalesced
from tests.helpers.agui import REFUND_RUN_TYPES
from tests.helpers.ws import (
    NO_POLL,
    WebsocketCommunicator,
    expect_close,
    open_socket,
    record_silently,
    session_headers,
)
from threads.models import Event, Message, Run, Thread, ToolCall
from threads.services import message_post, thread_create

pytestmark = pytest.mark.django_db(transaction=True)

WEATHER_TYPES = [
    "RUN_STARTED",
    "TOOL_CALL_START",
    "TOOL_CALL_ARGS",
    "TOOL_CALL_END",
    "TOOL_CALL_RESULT",
    "TEXT_MESSAGE_START",
    "TEXT_MESSAGE_CONTENT",
    "TEXT_MESSAGE_END",
    "RUN_FINISHED",
]
# One client-visible run (docs/agui.md): lookup_order is Countersign's own (auto)
# tool, answered inside the run (FT-09); the agent goes on and the run ends with
# refund_order held for an operator, as an interrupt (IR-01).
REFUND_TYPES = REFUND_RUN_TYPES


ANONYMOUS = [(b"origin", b"http://testserver")]


async def receive_until(
    communicator: WebsocketCommunicator,
    done: Callable[[list[dict[str, Any]]], bool],
    *,
    timeout: float = 30.0,
    what: str,
) -> list[dict[str, Any]]:
    """Collect JSON messages until ``done(messages)``; fail naming ``what`` on timeout."""
    received: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while not done(received):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            pytest.fail(
                f"timed out after {timeout}s waiting for {what}; got {received!r}"
            )
        try:
            received.append(await communicator.receive_json_from(timeout=remaining))
        except TimeoutError:
            pytest.fail(
                f"timed out after {timeout}s waiting for {what}; got {received!r}"
            )
    return received


def events_of(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Return the AG-UI events (they carry ``seq``), dropping notifications."""
    return [m for m in messages if "seq" in m]


def finished_runs(count: int) -> Callable[[list[dict[str, Any]]], bool]:
    def done(messages: list[dict[str, Any]]) -> bool:
        return (
            sum(1 for m in events_of(messages) if m["type"] == "RUN_FINISHED") >= count
        )

    return done


async def log_of(thread: Thread) -> list[tuple[int, str]]:
    return await sync_to_async(list)(
        Event.objects.filter(thread=thread).order_by("seq").values_list("seq", "type")
    )


# -- streaming -------------------------------------------------------------------


async def test_dc02_ws_streams_every_event_of_a_run_in_order(user, executor, settings):
    """A socket opened before the message receives seq 1..N of the run, no gap, no duplicate (DC-02)."""
    settings.COUNTERSIGN = NO_POLL
    thread = await sync_to_async(thread_create)(owner=user, title="ws")
    headers = await sync_to_async(session_headers)(user)
    socket = await open_socket(f"/ws/threads/{thread.thread_id}/?after=0", headers)

    # when
    await sync_to_async(message_post)(
        thread=thread, content="What is the weather in Oslo?"
    )
    received = await receive_until(socket, finished_runs(1), what="the weather run")
    await socket.disconnect()

    # then
    events = events_of(received)
    assert [(e["seq"], e["type"]) for e in events] == await log_of(thread)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    events = coalesced(events)
    assert [e["type"] for e in events] == WEATHER_TYPES
    assert events[0]["protocolVersion"] == "1.0"
    call = await ToolCall.objects.aget(thread=thread)
    assert events[1] == {
        "seq": 2,
        "type": "TOOL_CALL_START",
        "toolCallId": call.tool_call_id,
        "toolCallName": "get_weather",
        "parentMessageId": call.parent_message_id,
    }
    assert events[2]["delta"] == '{"city": "Oslo"}'
    assert "Oslo" in events[6]["delta"]
    assert "light rain" in events[6]["delta"]


async def test_dc02_ws_follows_refund_across_runs_with_notifications_apart(
    user, executor, settings
):
    """The refund run arrives in seq order; call changes arrive as notifications (DC-02, IR-01)."""
    settings.COUNTERSIGN = NO_POLL
    thread = await sync_to_async(thread_create)(owner=user, title="refund")
    headers = await sync_to_async(session_headers)(user)
    socket = await open_socket(f"/ws/threads/{thread.thread_id}/?after=0", headers)

    def refund_awaits_approval(messages: list[dict[str, Any]]) -> bool:
        return finished_runs(1)(messages) and any(
            m.get("kind") == "notification" and m.get("state") == "awaiting_approval"
            for m in messages
        )

    await sync_to_async(message_post)(
        thread=thread, content="refund order A-1001 25.00"
    )
    received = await receive_until(
        socket, refund_awaits_approval, what="both refund runs and the approval request"
    )
    await socket.disconnect()

    events = events_of(received)
    assert [(e["seq"], e["type"]) for e in events] == await log_of(thread)
    events = coalesced(events)
    assert [e["type"] for e in events] == REFUND_TYPES
    lookup = await ToolCall.objects.aget(thread=thread, name="lookup_order")
    refund = await ToolCall.objects.aget(thread=thread, name="refund_order")
    assert (events[4]["toolCallId"], events[4]["messageId"]) == (
        lookup.tool_call_id,
        (
            await Message.objects.aget(
                thread=thread, role="tool", tool_call_id=lookup.tool_call_id
            )
        ).message_id,
    )
    # Countersign mints the answer's id in its own namespace (threads.ids).
    assert re.fullmatch(r"cs-tool-[0-9a-f]{32}", events[4]["messageId"])
    assert events[8]["outcome"]["type"] == "interrupt"
    assert [i["toolCallId"] for i in events[8]["outcome"]["interrupts"]] == [
        refund.tool_call_id
    ]
    notifications = [m for m in received if "seq" not in m]
    assert all(m["kind"] == "notification" for m in notifications)
    assert all(m["type"] == "tool_call.state" for m in notifications)
    lookup_states = [
        m["state"] for m in notifications if m["toolCallId"] == lookup.tool_call_id
    ]
    assert lookup_states == ["approved", "executing", "succeeded"]
    (approval_note,) = [
        m for m in notifications if m["toolCallId"] == refund.tool_call_id
    ]
    assert approval_note["state"] == "awaiting_approval"
    assert approval_note["approval"]["tool"] == "refund_order"
    assert approval_note["approval"]["status"] == "pending"
    assert approval_note["approval"]["proposedArguments"] == {
        "order_id": "A-1001",
        "amount": 25.0,
        "reason": "customer request",
    }


async def test_dc02_ws_reconnect_with_after_misses_and_repeats_nothing(
    user, executor, settings
):
    """Reconnecting with ?after=<last seq> mid-stream resumes exactly after it (DC-02)."""
    settings.COUNTERSIGN = NO_POLL
    thread = await sync_to_async(thread_create)(owner=user, title="resume")
    headers = await sync_to_async(session_headers)(user)
    first = await open_socket(f"/ws/threads/{thread.thread_id}/?after=0", headers)

    await sync_to_async(message_post)(
        thread=thread, content="refund order A-1001 25.00"
    )
    # Leave after the first run's third event, while the flow is still going.
    part_one = await receive_until(
        first, lambda m: len(events_of(m)) >= 3, what="the first three events"
    )
    await first.disconnect()
    last_seq = events_of(part_one)[-1]["seq"]

    second = await open_socket(
        f"/ws/threads/{thread.thread_id}/?after={last_seq}", headers
    )
    part_two = await receive_until(
        second,
        lambda m: any(e["type"] == "RUN_FINISHED" for e in events_of(m)),
        what="the run's RUN_FINISHED",
    )
    await second.disconnect()

    seqs = [e["seq"] for e in events_of(part_one) + events_of(part_two)]
    assert seqs == [seq for seq, _ in await log_of(thread)]
    assert seqs == list(range(1, len(REFUND_TYPES) + 1))


async def test_dc02_ws_poll_recovers_events_whose_doorbell_never_rang(user, settings):
    """Events written without a doorbell still arrive, by the consumer's re-read of the log."""
    settings.COUNTERSIGN = {"SOCKET_POLL_SECONDS": 0.05}
    thread = await sync_to_async(Thread.objects.create)(thread_id="quiet", owner=user)
    run = await sync_to_async(Run.objects.create)(
        thread=thread, run_id="r-quiet", status=Run.Status.RUNNING
    )
    headers = await sync_to_async(session_headers)(user)
    socket = await open_socket("/ws/threads/quiet/?after=0", headers)

    await sync_to_async(record_silently)(
        run,
        [
            {"type": "RUN_STARTED", "threadId": "quiet", "runId": "r-quiet"},
            {"type": "RUN_FINISHED", "threadId": "quiet", "runId": "r-quiet"},
        ],
    )
    received = await receive_until(socket, finished_runs(1), what="the silent run")
    await socket.disconnect()

    assert [(m["seq"], m["type"]) for m in received] == [
        (1, "RUN_STARTED"),
        (2, "RUN_FINISHED"),
    ]


async def test_dc02_ws_resync_request_resends_the_log_after_seq(user, settings):
    """A client that noticed a gap asks {"type": "resync", "after": n} and gets seq n+1.. again."""
    thread = await sync_to_async(Thread.objects.create)(thread_id="resync", owner=user)
    run = await sync_to_async(Run.objects.create)(
        thread=thread, run_id="r1", status=Run.Status.RUNNING
    )
    await sync_to_async(record_silently)(
        run,
        [
            {"type": "RUN_STARTED", "threadId": "resync", "runId": "r1"},
            {"type": "STEP_STARTED", "stepName": "s"},
            {"type": "STEP_FINISHED", "stepName": "s"},
            {"type": "RUN_FINISHED", "threadId": "resync", "runId": "r1"},
        ],
    )
    headers = await sync_to_async(session_headers)(user)
    socket = await open_socket("/ws/threads/resync/?after=0", headers)
    backlog = await receive_until(socket, lambda m: len(m) == 4, what="the backlog")

    await socket.send_json_to({"type": "resync", "after": 2})
    again = await receive_until(socket, lambda m: len(m) == 2, what="the resent events")
    await socket.disconnect()

    assert [m["seq"] for m in backlog] == [1, 2, 3, 4]
    assert again == backlog[2:]


# -- who may watch ---------------------------------------------------------------


async def test_dc02_ws_refuses_anonymous_other_users_and_bad_after(user, other_user):
    """No session → 4401; another user's or an unknown thread → 4404; bad after → 4400."""
    thread = await sync_to_async(Thread.objects.create)(thread_id="private", owner=user)
    mallory = await sync_to_async(session_headers)(other_user)
    olivia = await sync_to_async(session_headers)(user)

    anonymous = await open_socket(f"/ws/threads/{thread.thread_id}/?after=0", ANONYMOUS)
    await expect_close(anonymous, 4401)
    stranger = await open_socket(f"/ws/threads/{thread.thread_id}/?after=0", mallory)
    await expect_close(stranger, 4404)
    unknown = await open_socket("/ws/threads/no-such-thread/?after=0", olivia)
    await expect_close(unknown, 4404)
    bad_after = await open_socket(f"/ws/threads/{thread.thread_id}/?after=-3", olivia)
    await expect_close(bad_after, 4400)


async def test_ws_client_thread_ids_are_per_owner(user, other_user):
    """A client id finds its owner's thread; to anyone else it is an unknown id (4404)."""
    thread = await sync_to_async(Thread.objects.create)(
        client_thread_id="t-mine", owner=user
    )
    mallory = await sync_to_async(session_headers)(other_user)
    olivia = await sync_to_async(session_headers)(user)

    for path in (thread.client_thread_id, thread.thread_id):
        stranger = await open_socket(f"/ws/threads/{path}/?after=0", mallory)
        await expect_close(stranger, 4404)
    run = await sync_to_async(Run.objects.create)(
        thread=thread, run_id="r1", status=Run.Status.RUNNING
    )
    await sync_to_async(record_silently)(
        # An agent knows the thread by its global id.
        run,
        [{"type": "RUN_STARTED", "threadId": thread.thread_id, "runId": "r1"}],
    )
    for path in (thread.client_thread_id, thread.thread_id):
        owner = await open_socket(f"/ws/threads/{path}/?after=0", olivia)
        received = await receive_until(
            owner, lambda m: len(m) == 1, what="the owner's log"
        )
        await owner.disconnect()
        assert received == [
            {
                "seq": 1,
                "type": "RUN_STARTED",
                "threadId": thread.thread_id,
                "runId": "r1",
            }
        ]


async def test_dc02_ws_a_reader_of_every_thread_may_watch_any_thread(
    user, thread_reader, staff_user
):
    """``threads.view_any_thread`` receives another user's log; ``is_staff`` alone gets 4404."""
    thread = await sync_to_async(Thread.objects.create)(thread_id="owned", owner=user)
    run = await sync_to_async(Run.objects.create)(
        thread=thread, run_id="r1", status=Run.Status.RUNNING
    )
    await sync_to_async(record_silently)(
        run,
        [
            {"type": "RUN_STARTED", "threadId": "owned", "runId": "r1"},
            {"type": "RUN_FINISHED", "threadId": "owned", "runId": "r1"},
        ],
    )
    staff = await sync_to_async(session_headers)(staff_user)
    refused = await open_socket("/ws/threads/owned/?after=0", staff)
    await expect_close(refused, 4404)
    headers = await sync_to_async(session_headers)(thread_reader)
    socket = await open_socket("/ws/threads/owned/?after=0", headers)
    received = await receive_until(
        socket, lambda m: len(m) == 2, what="the owner's log"
    )
    await socket.disconnect()

    assert received == [
        {"seq": 1, "type": "RUN_STARTED", "threadId": "owned", "runId": "r1"},
        {"seq": 2, "type": "RUN_FINISHED", "threadId": "owned", "runId": "r1"},
    ]


async def test_ws_thread_notification_reaches_browser_as_notification(user, settings):
    """notify_call_changed reaches the thread socket as {"kind": "notification", ...}, without seq."""
    from approvals.services import notify_call_changed

    settings.COUNTERSIGN = NO_POLL
    thread = await sync_to_async(Thread.objects.create)(thread_id="notes", owner=user)
    run = await sync_to_async(Run.objects.create)(
        thread=thread, run_id="r1", status=Run.Status.AWAITING_TOOLS
    )
    call = await sync_to_async(ToolCall.objects.create)(
        thread=thread,
        run=run,
        tool_call_id="tc1",
        name="lookup_order",
        state=ToolCall.State.EXECUTING,
    )
    headers = await sync_to_async(session_headers)(user)
    socket = await open_socket("/ws/threads/notes/?after=0", headers)

    def notify() -> None:
        with transaction.atomic():
            notify_call_changed(call)

    await sync_to_async(notify)()
    (message,) = await receive_until(
        socket, lambda m: len(m) == 1, what="the notification"
    )
    await socket.disconnect()

    assert message == {
        "kind": "notification",
        "type": "tool_call.state",
        "toolCallId": "tc1",
        "state": "executing",
        "approval": None,
    }


# -- the approval queue ------------------------------------------------------------


def grant(user: Any, codename: str) -> Any:
    user.user_permissions.add(Permission.objects.get(codename=codename))
    return type(user).objects.get(pk=user.pk)  # fresh permission cache


async def test_approvals_ws_refuses_anonymous_and_users_without_permission(user):
    """ws/approvals/: anonymous → 4401; a user with neither permission → 4403."""
    anonymous = await open_socket("/ws/approvals/", ANONYMOUS)
    await expect_close(anonymous, 4401)
    headers = await sync_to_async(session_headers)(user)
    plain = await open_socket("/ws/approvals/", headers)
    await expect_close(plain, 4403)


async def test_approvals_ws_snapshot_then_live_changes(
    user, other_user, executor, settings
):
    """A decider gets the pending requests on connect, then each change as a notification."""
    settings.COUNTERSIGN = NO_POLL
    decider = await sync_to_async(grant)(other_user, "decide_approvalrequest")
    headers = await sync_to_async(session_headers)(decider)
    socket = await open_socket("/ws/approvals/", headers)
    (empty,) = await receive_until(socket, lambda m: len(m) == 1, what="the snapshot")
    assert empty == {"kind": "snapshot", "approvals": []}

    thread = await sync_to_async(thread_create)(owner=user, title="refund")
    await sync_to_async(message_post)(
        thread=thread, content="refund order A-1001 25.00"
    )
    (change,) = await receive_until(
        socket, lambda m: len(m) == 1, what="the approval request"
    )
    await socket.disconnect()

    refund = await ToolCall.objects.aget(thread=thread, name="refund_order")
    assert change["kind"] == "notification"
    assert (change["toolCallId"], change["state"]) == (
        refund.tool_call_id,
        "awaiting_approval",
    )
    assert change["approval"]["threadId"] == thread.thread_id
    assert change["approval"]["status"] == "pending"

    # A viewer connecting now finds the request in the snapshot.
    viewer = await sync_to_async(grant)(user, "view_approvalrequest")
    headers = await sync_to_async(session_headers)(viewer)
    again = await open_socket("/ws/approvals/", headers)
    (snapshot,) = await receive_until(
        again, lambda m: len(m) == 1, what="the second snapshot"
    )
    await again.disconnect()

    assert snapshot["kind"] == "snapshot"
    assert [a["toolCallId"] for a in snapshot["approvals"]] == [refund.tool_call_id]
    assert snapshot["approvals"][0] == change["approval"]
