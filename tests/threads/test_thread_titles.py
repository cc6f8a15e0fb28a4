"""A thread created over AG-UI is titled from its first user message (not "Untitled thread")."""

from __future__ import annotations

import pytest

from agentcore.content import image_part, url_source
from agentcore.events import RunAgentInput
from threads.services import (
    DERIVED_TITLE_LENGTH,
    run_start_from_agui,
    thread_title_from,
)


def _input(thread_id: str, messages: list[dict]) -> RunAgentInput:
    return RunAgentInput.model_validate(
        {
            "threadId": thread_id,
            "runId": f"r-{thread_id}",
            "state": {},
            "tools": [],
            "context": [],
            "forwardedProps": {},
            "messages": messages,
        }
    )


@pytest.mark.parametrize("executor", ["embedded"], indirect=True)
def test_a_thread_made_over_agui_is_titled_by_its_first_user_message(user, executor):
    run_input = _input(
        "t-titled",
        [
            {"id": "s1", "role": "system", "content": "Be brief."},
            {
                "id": "u1",
                "role": "user",
                "content": "  Refund order\nA-1001   please  ",
            },
        ],
    )
    thread, _, _ = run_start_from_agui(user=user, agent="demo", run_input=run_input)
    executor.settle(thread)

    thread.refresh_from_db()
    assert thread.title == "Refund order A-1001 please"


def test_derived_titles_fold_white_space_join_text_parts_and_cut_long_text():
    long = "word " * 40
    parts = [
        {"type": "text", "text": "Look at"},
        image_part(url_source("https://x.test/a.png", mime_type="image/png")),
        {"type": "text", "text": "this\tpicture"},
    ]

    assert thread_title_from(
        _input("a", [{"id": "u", "role": "user", "content": parts}]).messages
    ) == ("Look at this picture")
    cut = thread_title_from([{"role": "user", "content": long}])
    assert len(cut) == DERIVED_TITLE_LENGTH
    assert cut == "word " * 15 + "word…"
    assert thread_title_from([{"role": "assistant", "content": "hi"}]) == ""
    assert thread_title_from([]) == ""
