"""Client thread ids are per owner: two users' ``threadId: "t-1"`` are two threads.

Over a running server (``live``): each user's AG-UI stream carries the id they
sent; ``GET /agui/threads/<id>/events`` and ``ws/threads/<id>/`` find a user's
own thread by it; another user's id answers exactly as an unknown id does, so
nobody learns which ids others took. Implements SEC-06.
"""

from __future__ import annotations

import httpx
import pytest
from asgiref.sync import sync_to_async

from tests.agentcore.helpers import coalesced
from tests.helpers.agui import bearer, parse_stream, read_until
from tests.helpers.live import run_input, token_for
from threads.models import Message, Thread

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("close_thread_connections"),
]


def _weather(run_id: str, message_id: str, city: str) -> dict:
    return run_input(
        "t-1",
        run_id,
        [
            {
                "id": message_id,
                "role": "user",
                "content": f"What is the weather in {city}?",
            }
        ],
    )


async def test_two_users_same_thread_id_get_two_threads(user, other_user, live):
    """Each user's "t-1" is their own thread, streamed under "t-1", with its own history."""
    olivia = await sync_to_async(token_for)(user)
    mallory = await sync_to_async(token_for)(other_user)
    async with httpx.AsyncClient(base_url=live.url, timeout=30) as http:
        # Given olivia's thread "t-1"
        first = await http.post(
            "/agui/demo/", json=_weather("r-1", "u-1", "Oslo"), headers=bearer(olivia)
        )
        # When mallory sends the same threadId (and the same run and message ids)
        second = await http.post(
            "/agui/demo/", json=_weather("r-1", "u-1", "Paris"), headers=bearer(mallory)
        )
        # Then each follows their own thread by that id
        followed = {}
        for name, token in (("olivia", olivia), ("mallory", mallory)):
            async with http.stream(
                "GET", "/agui/threads/t-1/events?after=0", headers=bearer(token)
            ) as follow:
                assert follow.status_code == 200
                raw = await read_until(
                    follow,
                    lambda events: any(e["type"] == "RUN_FINISHED" for e in events),
                    timeout=30,
                    what=f"{name}'s RUN_FINISHED",
                    server=live,
                )
            followed[name] = coalesced(parse_stream(raw)[0])

    assert (first.status_code, second.status_code) == (200, 200), second.text
    for response in (first, second):
        events = coalesced(parse_stream(response.content)[0])
        assert events[0]["type"] == "RUN_STARTED"
        assert events[0]["threadId"] == "t-1"
        assert events[-1]["type"] == "RUN_FINISHED"
        assert events[-1]["threadId"] == "t-1"
    threads = await sync_to_async(list)(
        Thread.objects.filter(client_thread_id="t-1").order_by("pk")
    )
    assert [t.owner_id for t in threads] == [user.pk, other_user.pk]
    assert threads[0].thread_id != threads[1].thread_id
    contents = [
        await sync_to_async(list)(
            Message.objects.filter(thread=t, role="user").values_list(
                "content", flat=True
            )
        )
        for t in threads
    ]
    assert contents == [
        ["What is the weather in Oslo?"],
        ["What is the weather in Paris?"],
    ]
    asked = {
        name: events[0]["input"]["messages"][0]["content"]
        for name, events in followed.items()
    }
    assert asked == {
        "olivia": "What is the weather in Oslo?",
        "mallory": "What is the weather in Paris?",
    }
    assert {e["threadId"] for e in followed["mallory"] if "threadId" in e} == {"t-1"}
