"""One encoding per channel message for all of a process's sockets (B1).

Every socket of a thread's group gets its own copy of each channel message, so
the consumers share the frames they encode through ``web.consumers.frame_cache``,
keyed by the id ``threads.realtime`` puts on every message. Which frames a socket
sends stays its own business (``seq`` filtering, ``preview=0``); the sockets here
are the real ASGI application in one process (tests.threads.test_ws_consumer).
Implements DC-02.
"""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async

from tests.helpers.ws import (
    HOLD,
    NO_POLL,
    assert_silent,
    open_socket,
    raw_frames,
    session_headers,
    text_run,
)
from threads.models import Event, Run, Thread
from threads.realtime import MESSAGE_ID_KEY, message_id
from threads.recording import RunRecorder
from web.consumers import FrameCache, frame_cache


@pytest.mark.django_db(transaction=True)
async def test_b1_sockets_of_one_process_send_one_encoding_of_each_frame(
    user, settings
):
    """Two preview sockets send the very same text objects, encoded once each.

    A plain socket sends the row frames among them, the same objects too, and
    gets no previews; a socket that joined after some rows sends only the rows
    after its ``after``, still the shared text.
    """
    settings.COUNTERSIGN = NO_POLL
    thread = await sync_to_async(Thread.objects.create)(thread_id="sf", owner=user)
    run = await sync_to_async(Run.objects.create)(
        thread=thread, run_id="r-sf", status=Run.Status.RUNNING
    )
    headers = await sync_to_async(session_headers)(user)
    first_socket = await open_socket("/ws/threads/sf/?after=0&preview=1", headers)
    second_socket = await open_socket("/ws/threads/sf/?after=0&preview=1", headers)
    plain_socket = await open_socket("/ws/threads/sf/?after=0&preview=0", headers)
    first, rest = text_run("sf", "r-sf")
    recorder = await sync_to_async(RunRecorder)(run, **HOLD)
    encodings_before = frame_cache.encodings

    await sync_to_async(recorder.record)(first)
    await sync_to_async(recorder.flush)()
    # 4 previews, 3 rows, a confirmation
    first_frames = await raw_frames(first_socket, 8)
    second_frames = await raw_frames(second_socket, 8)
    plain_frames = await raw_frames(plain_socket, 3)
    late_socket = await open_socket("/ws/threads/sf/?after=3&preview=1", headers)
    await sync_to_async(recorder.record)(rest)
    # 2 previews, 2 rows, a confirmation
    first_frames += await raw_frames(first_socket, 5)
    second_frames += await raw_frames(second_socket, 5)
    plain_frames += await raw_frames(plain_socket, 2)
    late_frames = await raw_frames(late_socket, 5)
    for socket in (first_socket, second_socket, plain_socket, late_socket):
        await assert_silent(socket)
        await socket.disconnect()

    log = await sync_to_async(list)(Event.objects.filter(thread=thread).order_by("seq"))
    wire = [e.as_wire() for e in log]
    assert [json.loads(f) for f in plain_frames] == wire
    assert [json.loads(f).get("kind") for f in first_frames] == [
        *["preview"] * 4,
        None,
        None,
        None,
        "confirmed",
        "preview",
        "preview",
        None,
        None,
        "confirmed",
    ]
    assert first_frames == second_frames
    # the same objects, not equal copies: each frame was encoded once
    assert all(a is b for a, b in zip(first_frames, second_frames, strict=True))
    rows = [f for f in first_frames if "kind" not in json.loads(f)]
    assert all(a is b for a, b in zip(rows, plain_frames, strict=True))
    assert late_frames == first_frames[8:]
    assert all(a is b for a, b in zip(late_frames, first_frames[8:], strict=True))
    assert frame_cache.encodings - encodings_before == len(first_frames)


def test_frame_cache_encodes_a_part_of_a_message_once_and_forgets_the_oldest():
    """Per (id, part) one encoding; a message without an id is encoded every time."""
    cache = FrameCache(size=2)
    built: list[str] = []

    def build(value: str) -> dict[str, str]:
        built.append(value)
        return {"v": value}

    first = {MESSAGE_ID_KEY: message_id(), "type": "thread.preview"}
    copy_of_first = dict(first)  # what another socket's layer receive returns
    second = {MESSAGE_ID_KEY: message_id()}
    third = {MESSAGE_ID_KEY: message_id()}

    a = cache.text(first, "preview", lambda: build("a"))
    b = cache.text(copy_of_first, "preview", lambda: build("b"))
    c = cache.text(first, "row:0", lambda: build("c"))
    cache.text(second, "preview", lambda: build("d"))
    cache.text(third, "preview", lambda: build("e"))  # forgets ``first``
    again = cache.text(first, "preview", lambda: build("f"))
    bare = [cache.text({}, "preview", lambda: build("g")) for _ in range(2)]

    assert (a, b, c, again) == ('{"v": "a"}', '{"v": "a"}', '{"v": "c"}', '{"v": "f"}')
    assert a is b
    assert built == ["a", "c", "d", "e", "f", "g", "g"]
    assert bare == ['{"v": "g"}', '{"v": "g"}']
    assert cache.encodings == 7
    assert len(cache.frames) == 2


def test_message_ids_are_distinct_and_carry_the_process_token():
    """``message_id`` never repeats within a process; its prefix names the process."""
    ids = [message_id() for _ in range(1000)]

    assert len(set(ids)) == 1000
    assert len({i.split(".")[0] for i in ids}) == 1
