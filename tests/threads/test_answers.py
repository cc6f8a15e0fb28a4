"""One tool message per call, and a run finished once every pending call is answered."""

from __future__ import annotations

import pytest
from django.db import transaction

from threads.answers import (
    APPLICATION_SOURCE,
    refusal_content,
    run_answers_complete,
    run_finish_if_answered,
    tool_message_write,
)
from threads.models import Message, Run, Thread, ToolCall

pytestmark = pytest.mark.django_db


def _awaiting(user) -> tuple[Run, list[ToolCall]]:
    thread = Thread.objects.create(owner=user, thread_id="t-answers")
    run = Run.objects.create(
        thread=thread,
        run_id="r-1",
        status=Run.Status.AWAITING_TOOLS,
        pending_tool_call_ids=["c-1", "c-2"],
    )
    calls = [
        ToolCall.objects.create(
            thread=thread,
            run=run,
            tool_call_id=call_id,
            name="refund_order",
            state=ToolCall.State.PENDING,
            position=index,
        )
        for index, call_id in enumerate(["c-1", "c-2"])
    ]
    return run, calls


def test_a_call_is_answered_once(user) -> None:
    # given a pending call
    _, (call, _) = _awaiting(user)
    # when it is answered twice
    with transaction.atomic():
        first = tool_message_write(
            call=call,
            content=refusal_content(status="denied", reason="no"),
            error="policy_denied",
            state=ToolCall.State.DECLINED,
        )
        second = tool_message_write(
            call=call, content="again", error=None, state=ToolCall.State.SUCCEEDED
        )
    # then one tool message exists and the call kept the first answer's state
    assert first is not None
    assert second is None
    messages = Message.objects.filter(role="tool", tool_call_id="c-1")
    assert [(m.content, m.error, m.metadata) for m in messages] == [
        (
            '{"status":"denied","reason":"no","executed":false}',
            "policy_denied",
            {"source": APPLICATION_SOURCE},
        )
    ]
    assert ToolCall.objects.get(pk=call.pk).state == "declined"
    assert list(ToolCall.objects.answered().values_list("tool_call_id", flat=True)) == [
        "c-1"
    ]
    assert list(
        ToolCall.objects.unanswered().values_list("tool_call_id", flat=True)
    ) == ["c-2"]


def test_run_finishes_only_when_every_pending_call_is_answered(user) -> None:
    run, (first, second) = _awaiting(user)
    with transaction.atomic():
        tool_message_write(
            call=first, content="ok", error=None, state=ToolCall.State.SUCCEEDED
        )
        assert run_answers_complete(run=run) is False
        assert run_finish_if_answered(run=run) is False
        tool_message_write(
            call=second, content="ok", error=None, state=ToolCall.State.SUCCEEDED
        )
        assert run_answers_complete(run=run) is True
        assert run_finish_if_answered(run=run) is True
    assert Run.objects.get(pk=run.pk).status == "finished"
    # A finished run is not finished again.
    assert run_finish_if_answered(run=run) is False
