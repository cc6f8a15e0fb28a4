"""Reads for threads: status, history as AG-UI messages, the event log.

Implements FT-05 (pending derived from rows, never read from absence) and DC-01.
"""

from __future__ import annotations

from typing import Any, Literal

from django.db.models import QuerySet

from threads.models import Event, Message, Run, Thread, ToolCall

ThreadStatus = Literal["running", "waiting_for_approval", "waiting_for_tools", "idle", "failed"]


def thread_visible_to(*, user: Any) -> QuerySet[Thread]:
    """Return the threads ``user`` may see: their own, or every thread for staff."""
    threads = Thread.objects.all()
    if getattr(user, "is_staff", False):
        return threads
    if not getattr(user, "is_authenticated", False):
        return threads.none()
    return threads.filter(owner=user)


def thread_latest_run(*, thread: Thread) -> Run | None:
    """Return the thread's most recent run, or ``None``."""
    return thread.runs.order_by("-created_at", "-id").first()


def thread_unanswered_calls(*, thread: Thread) -> list[ToolCall]:
    """Return the thread's completed calls with no tool message, oldest first (FT-05)."""
    answered = Message.objects.filter(thread=thread, role=Message.Role.TOOL).values(
        "tool_call_id"
    )
    return list(
        ToolCall.objects.filter(thread=thread)
        .exclude(tool_call_id__in=answered)
        .exclude(state__in=[ToolCall.State.STREAMING, ToolCall.State.CANCELLED])
        .order_by("run__created_at", "run_id", "position", "id")
    )


def thread_status(*, thread: Thread) -> ThreadStatus:
    """Derive the thread's status from its runs and calls.

    ``running`` while a run is queued or running; ``waiting_for_approval`` when a
    pending call awaits an operator; ``waiting_for_tools`` when calls are pending
    execution; ``failed`` when the last run ended in error; else ``idle``.
    """
    run = thread_latest_run(thread=thread)
    if run is None:
        return "idle"
    if run.status in Run.ACTIVE_STATUSES:
        return "running"
    if run.status == Run.Status.AWAITING_TOOLS:
        states = set(
            ToolCall.objects.filter(
                thread=thread, tool_call_id__in=run.pending_tool_call_ids
            ).values_list("state", flat=True)
        )
        if ToolCall.State.AWAITING_APPROVAL in states:
            return "waiting_for_approval"
        if thread_unanswered_calls(thread=thread):
            return "waiting_for_tools"
        return "idle"
    if run.status == Run.Status.ERROR:
        return "failed"
    return "idle"


def thread_messages_agui(*, thread: Thread) -> list[dict[str, Any]]:
    """Return the thread's history as AG-UI message objects (camelCase), in order.

    Assistant messages carry their ``toolCalls`` (argument text verbatim, TC-03);
    tool messages carry ``toolCallId`` and ``error`` when set.
    """
    calls_by_parent: dict[str, list[ToolCall]] = {}
    for call in ToolCall.objects.filter(thread=thread).order_by("position", "id"):
        calls_by_parent.setdefault(call.parent_message_id, []).append(call)
    result: list[dict[str, Any]] = []
    for row in Message.objects.filter(thread=thread).order_by("position", "id"):
        data: dict[str, Any] = {"id": row.message_id, "role": row.role}
        if row.role == Message.Role.ASSISTANT:
            if row.content:
                data["content"] = row.content
            calls = calls_by_parent.get(row.message_id, [])
            if calls:
                data["toolCalls"] = [
                    {
                        "id": c.tool_call_id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments_text},
                    }
                    for c in calls
                ]
            if "content" not in data and "toolCalls" not in data:
                data["content"] = ""
        elif row.role == Message.Role.TOOL:
            data["content"] = row.content
            data["toolCallId"] = row.tool_call_id
            if row.error:
                data["error"] = row.error
        else:
            data["content"] = row.content
        if row.name and row.role in (Message.Role.USER, Message.Role.ASSISTANT):
            data["name"] = row.name
        result.append(data)
    return result


def thread_events_after(*, thread: Thread, after: int, limit: int | None = None) -> list[Event]:
    """Return the thread's log rows with ``seq > after``, in order (at most ``limit``)."""
    events = Event.objects.filter(thread=thread, seq__gt=after).order_by("seq")
    if limit is not None:
        events = events[:limit]
    return list(events)
