"""Run, Run wire and ToolCall statuses move only along their tables (STYLE.md 8)."""

from __future__ import annotations

import pytest

from threads.exceptions import IllegalTransition
from threads.models import Run, Thread, ToolCall
from threads.transitions import (
    RUN_TRANSITIONS,
    RUN_WIRE_TRANSITIONS,
    TOOL_CALL_TRANSITIONS,
    run_transition,
    run_wire_transition,
    tool_call_transition,
)

pytestmark = pytest.mark.django_db


def _run(user, status: str = Run.Status.QUEUED) -> Run:
    thread = Thread.objects.create(owner=user, thread_id="t-transitions")
    return Run.objects.create(thread=thread, run_id="r-1", status=status)


def test_every_status_has_a_row_in_its_table() -> None:
    """Each table lists every status of its model, terminal ones with no way out."""
    assert set(RUN_TRANSITIONS) == set(Run.Status.values)
    assert set(TOOL_CALL_TRANSITIONS) == set(ToolCall.State.values)
    assert set(RUN_WIRE_TRANSITIONS) == set(Run.WireState.values)
    assert RUN_TRANSITIONS[Run.Status.FINISHED] == frozenset()
    assert TOOL_CALL_TRANSITIONS[ToolCall.State.SUCCEEDED] == frozenset()


def test_run_transition_saves_an_allowed_move(user) -> None:
    # given a queued run
    run = _run(user)
    # when it is claimed
    changed = run_transition(run=run, to=Run.Status.RUNNING)
    # then the move is saved
    assert changed is True
    assert Run.objects.get(pk=run.pk).status == "running"


def test_run_transition_refuses_an_illegal_move_naming_both_states(user) -> None:
    run = _run(user, status=Run.Status.FINISHED)
    with pytest.raises(IllegalTransition) as caught:
        run_transition(run=run, to=Run.Status.RUNNING)
    assert "'finished'" in str(caught.value)
    assert "'running'" in str(caught.value)
    assert caught.value.code == "illegal_transition"
    assert Run.objects.get(pk=run.pk).status == "finished"


def test_staying_put_is_a_no_op(user) -> None:
    run = _run(user, status=Run.Status.RUNNING)
    assert run_transition(run=run, to=Run.Status.RUNNING) is False


def test_tool_call_transition_refuses_answering_a_declined_call(user) -> None:
    run = _run(user, status=Run.Status.AWAITING_TOOLS)
    call = ToolCall.objects.create(
        thread=run.thread,
        run=run,
        tool_call_id="c-1",
        name="refund_order",
        state=ToolCall.State.DECLINED,
    )
    with pytest.raises(IllegalTransition, match="'declined' to 'succeeded'"):
        tool_call_transition(call=call, to=ToolCall.State.SUCCEEDED)
    assert ToolCall.objects.get(pk=call.pk).state == "declined"


def test_tool_call_transition_unsaved_leaves_the_row(user) -> None:
    """``save=False`` moves the instance only; the caller writes it back."""
    run = _run(user, status=Run.Status.RUNNING)
    call = ToolCall.objects.create(
        thread=run.thread, run=run, tool_call_id="c-2", name="get_weather"
    )
    assert tool_call_transition(call=call, to=ToolCall.State.COMPLETE, save=False)
    assert call.state == "complete"
    assert ToolCall.objects.get(pk=call.pk).state == "streaming"


def test_run_wire_transition_opens_and_closes_a_wire_run(user) -> None:
    # given an unmanaged run
    run = _run(user)
    # when it becomes a client-visible run, and its terminal event is written
    opened = run_wire_transition(run=run, to=Run.WireState.OPEN)
    closed = run_wire_transition(run=run, to=Run.WireState.CLOSED)
    # then both moves are saved
    assert (opened, closed) == (True, True)
    assert Run.objects.get(pk=run.pk).wire_state == "closed"


@pytest.mark.parametrize(
    ("start", "to"),
    [
        (Run.WireState.CLOSED, Run.WireState.OPEN),
        (Run.WireState.SEGMENT, Run.WireState.OPEN),
        (Run.WireState.SEGMENT, Run.WireState.CLOSED),
        (Run.WireState.OPEN, Run.WireState.UNMANAGED),
    ],
)
def test_run_wire_transition_refuses_reopening_and_promoting_a_segment(
    user, start: str, to: str
) -> None:
    """A closed wire run never reopens; a segment never becomes a wire run of its own."""
    run = _run(user)
    Run.objects.filter(pk=run.pk).update(wire_state=start)
    run.refresh_from_db()
    with pytest.raises(IllegalTransition):
        run_wire_transition(run=run, to=to)
    assert Run.objects.get(pk=run.pk).wire_state == start
