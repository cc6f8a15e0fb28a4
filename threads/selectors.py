"""Reads for threads: status, history as AG-UI messages, the event log.

Implements FT-05 (pending derived from rows, never read from absence) and DC-01.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.db.models import (
    Case,
    CharField,
    Exists,
    JSONField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)

from agentcore.arguments import ParsedArguments, parse_arguments
from agentcore.tools import Tool
from core.types import AnyUser
from threads.agent_config import agent_settings, agent_toolset, run_toolset
from threads.exceptions import ThreadNotOwned, UnknownAgent
from threads.models import (
    VIEW_ANY_THREAD_PERMISSION,
    Event,
    Message,
    Run,
    Thread,
    ToolCall,
)
from threads.snapshots import REMOTE_ID

ThreadStatus = Literal[
    "running", "waiting_for_approval", "waiting_for_tools", "idle", "failed"
]


def thread_visible_to(*, user: AnyUser) -> QuerySet[Thread]:
    """Return the threads ``user`` may see.

    Their own; every thread for holders of ``threads.view_any_thread``
    (:data:`threads.models.VIEW_ANY_THREAD_PERMISSION`; ``is_staff`` alone grants
    nothing here); and, for operators holding ``approvals.decide_approvalrequest``,
    every thread with an approval request, so an approver can read the
    conversation behind a call before deciding it. Implements SEC-06.
    """
    threads = Thread.objects.all()
    if isinstance(user, AnonymousUser) or not getattr(user, "is_active", False):
        return threads.none()
    if user.has_perm(VIEW_ANY_THREAD_PERMISSION):
        return threads
    if user.has_perm("approvals.decide_approvalrequest"):
        # Through the reverse relation the approvals app declares: threads never
        # import approvals (docs/architecture.md, layers).
        with_requests = Thread.objects.filter(approvals__isnull=False).values("pk")
        return threads.filter(Q(owner=user) | Q(pk__in=with_requests))
    return threads.filter(owner=user)


def thread_by_agui_id(*, user: AnyUser, agui_id: str) -> Thread | None:
    """Return the thread AG-UI ``threadId`` ``agui_id`` names for ``user``, or ``None``.

    Client thread ids are per owner: ``user``'s own thread whose client id is
    ``agui_id`` comes first; then a thread ``user`` may see whose global id
    (the REST API's) is ``agui_id`` — the operator UI and readers of every
    thread address threads that way. Another user's thread ``user`` may not see
    is ``None``, as an unknown id is: nobody learns which ids others took.
    Every AG-UI path (POST, its SSE and WebSocket streams, resume) looks
    threads up here. Implements SEC-06.
    """
    if isinstance(user, AnonymousUser) or not getattr(user, "is_active", False):
        return None
    own = Thread.objects.filter(owner=user, client_thread_id=agui_id).first()
    if own is not None:
        return own
    return thread_visible_to(user=user).filter(thread_id=agui_id).first()


def thread_named(*, user: AnyUser, thread_id: str, via: str = "thread") -> Q:
    """Return the filter for rows whose thread (relation ``via``) ``thread_id`` names.

    A list's ``thread`` filter (REST: approvals, tool calls) takes a thread's
    global id or one of ``user``'s own client ids (:func:`thread_by_agui_id`);
    visibility is the list's own.
    """
    named = Q(**{f"{via}__thread_id": thread_id})
    if getattr(user, "pk", None) is None:
        return named
    return named | Q(
        **{f"{via}__owner": user.pk, f"{via}__client_thread_id": thread_id}
    )


def thread_write_check(*, user: AnyUser, thread: Thread) -> None:
    """Refuse ``user`` writing to ``thread`` unless they own it.

    Approvers and readers of every thread may read threads that are not theirs (:func:`thread_visible_to`),
    but only the owner posts messages, runs agents on it or archives it: a message
    starts a run on the owner's behalf and makes the owner the requester of its calls,
    so anyone else writing could request a call and then approve it themselves
    (four-eyes, SEC-02). Raises :class:`threads.exceptions.ThreadNotOwned` (403).
    """
    if thread.owner_id != getattr(user, "pk", None):
        raise ThreadNotOwned(
            f"thread {thread.thread_id!r} belongs to another user: only its owner can "
            "post messages, run agents on it or archive it; start a thread of your own"
        )


def thread_latest_run(*, thread: Thread) -> Run | None:
    """Return the thread's most recent run, or ``None``."""
    return thread.runs.order_by("-created_at", "-id").first()


def thread_unanswered_calls(*, thread: Thread) -> list[ToolCall]:
    """Return the thread's completed calls with no tool message, oldest first (FT-05).

    A remote agent's interrupt-bound call an operator declined or let expire waits
    for that agent's own answer, not for anyone here (IR-18), so it is left out.
    """
    return list(
        ToolCall.objects.filter(thread=thread)
        .unanswered()
        .exclude(
            state__in=[
                ToolCall.State.STREAMING,
                ToolCall.State.CANCELLED,
                ToolCall.State.DECLINED,
                ToolCall.State.EXPIRED,
            ]
        )
        .order_by("run__created_at", "run_id", "position", "id")
    )


def thread_status(*, thread: Thread) -> ThreadStatus:
    """Derive the thread's status from its runs and calls.

    ``running`` while a run is queued or running or a client's run is still
    streaming (:class:`ClientRun`); ``waiting_for_approval`` when a
    pending call or a remote agent's interrupt (IR-18) awaits an operator; ``waiting_for_tools`` when calls are pending
    execution; ``failed`` when the last run ended in error; else ``idle``.
    """
    run = thread_latest_run(thread=thread)
    if run is None:
        return "idle"
    if (
        run.status in Run.ACTIVE_STATUSES
        # A client's run is running while its stream is open, whatever its
        # segments do inside: the story the client saw.
        or Run.objects.filter(thread=thread, wire_state=Run.WireState.OPEN).exists()
    ):
        return "running"
    if run.status == Run.Status.AWAITING_TOOLS:
        states = set(
            ToolCall.objects.filter(
                thread=thread, tool_call_id__in=run.pending_tool_call_ids
            ).values_list("state", flat=True)
        )
        resumed = {entry.get("interruptId") for entry in run.resume or []}
        open_interrupts = any(i.get("id") not in resumed for i in run.interrupts or [])
        if ToolCall.State.AWAITING_APPROVAL in states or open_interrupts:
            return "waiting_for_approval"
        if thread_unanswered_calls(thread=thread):
            return "waiting_for_tools"
        return "idle"
    if run.status == Run.Status.ERROR:
        return "failed"
    return "idle"


def thread_messages_agui(
    *, thread: Thread, remote_ids: bool = False
) -> list[dict[str, Any]]:
    """Return the thread's history as AG-UI message objects (camelCase), in order.

    Assistant messages carry their ``toolCalls`` (argument text verbatim, TC-03);
    tool messages carry ``toolCallId`` and ``error`` when set. ``remote_ids``: a
    message a remote agent names by an id of its own (``metadata["remoteId"]``,
    recorded by :func:`threads.snapshots.message_remote_ids_record`) carries that
    id, for the agent's own input.
    """
    calls_by_parent: dict[str, list[ToolCall]] = {}
    for call in ToolCall.objects.filter(thread=thread).order_by("position", "id"):
        calls_by_parent.setdefault(call.parent_message_id, []).append(call)
    result: list[dict[str, Any]] = []
    for row in Message.objects.filter(thread=thread).order_by("position", "id"):
        data: dict[str, Any] = {"id": row.message_id, "role": row.role}
        remote_id = (row.metadata or {}).get(REMOTE_ID) if remote_ids else None
        if isinstance(remote_id, str):
            data["id"] = remote_id
        if row.role == Message.Role.ASSISTANT:
            if row.content:
                data["content"] = row.content
            calls = calls_by_parent.get(row.message_id, [])
            if calls:
                data["toolCalls"] = [_agui_tool_call(c) for c in calls]
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


def _agui_tool_call(call: ToolCall) -> dict[str, Any]:
    """Return ``call`` as an AG-UI ``ToolCall`` (argument text verbatim, TC-03).

    Provider metadata recorded on TOOL_CALL_START (a Gemini thought signature,
    BC25) travels with the call; the application's own flags stay out.
    """
    data: dict[str, Any] = {
        "id": call.tool_call_id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments_text},
    }
    metadata = {
        k: v for k, v in (call.metadata or {}).items() if k not in ("truncated",)
    }
    if metadata:
        data["metadata"] = metadata
    return data


def thread_events_after(
    *, thread: Thread, after: int, limit: int | None = None
) -> list[Event]:
    """Return the thread's log rows with ``seq > after``, in order (at most ``limit``)."""
    events = Event.objects.filter(thread=thread, seq__gt=after).order_by("seq")
    if limit is not None:
        events = events[:limit]
    return list(events)


def thread_list(
    *,
    user: AnyUser,
    status: ThreadStatus | None = None,
    owner: str | None = None,
    archived: bool = False,
) -> QuerySet[Thread]:
    """Return the threads ``user`` may see, annotated with their derived status.

    Each row carries ``status_value`` (the same value :func:`thread_status`
    derives, computed in SQL) and ``latest_pending_tool_call_ids``. ``status``
    filters on it; ``owner`` (a username) narrows staff's view; archived threads
    are left out unless ``archived``. Newest first.
    """
    latest = Run.objects.filter(thread=OuterRef("pk")).order_by("-created_at", "-id")
    unanswered = (
        ToolCall.objects.filter(thread=OuterRef("pk"))
        .exclude(state__in=[ToolCall.State.STREAMING, ToolCall.State.CANCELLED])
        .unanswered()
    )
    threads = (
        thread_visible_to(user=user)
        .select_related("owner")
        .annotate(
            latest_run_pk=Subquery(latest.values("pk")[:1]),
            latest_run_status=Subquery(latest.values("status")[:1]),
            latest_pending_tool_call_ids=Subquery(
                latest.values("pending_tool_call_ids")[:1], output_field=JSONField()
            ),
        )
        .annotate(
            awaits_approval=Exists(
                ToolCall.objects.filter(
                    run_id=OuterRef("latest_run_pk"),
                    state=ToolCall.State.AWAITING_APPROVAL,
                )
            ),
            has_unanswered=Exists(unanswered),
            wire_open=Exists(
                Run.objects.filter(thread=OuterRef("pk"), wire_state=Run.WireState.OPEN)
            ),
        )
        .annotate(
            status_value=Case(
                When(latest_run_status__isnull=True, then=Value("idle")),
                When(
                    Q(latest_run_status__in=Run.ACTIVE_STATUSES) | Q(wire_open=True),
                    then=Value("running"),
                ),
                When(
                    Q(
                        latest_run_status=Run.Status.AWAITING_TOOLS,
                        awaits_approval=True,
                    ),
                    then=Value("waiting_for_approval"),
                ),
                When(
                    Q(latest_run_status=Run.Status.AWAITING_TOOLS, has_unanswered=True),
                    then=Value("waiting_for_tools"),
                ),
                When(latest_run_status=Run.Status.ERROR, then=Value("failed")),
                default=Value("idle"),
                output_field=CharField(),
            )
        )
    )
    if not archived:
        threads = threads.filter(archived_at__isnull=True)
    if owner is not None:
        threads = threads.filter(owner__username=owner)
    if status is not None:
        threads = threads.filter(status_value=status)
    return threads.order_by("-id")


_WIRE_TERMINALS = ("RUN_FINISHED", "RUN_ERROR")


@dataclass(frozen=True)
class ClientRun:
    """One client-visible run as its AG-UI client saw it (docs/agui.md "one run per request").

    ``run`` is the run whose ``runId`` the client sent (or Countersign chose);
    ``segments`` are the agent's own runs streamed inside it, in order, the first
    being ``run`` itself (empty for an unmanaged run, whose row is its wire);
    ``terminal`` is the payload of the wire's ``RUN_FINISHED``/``RUN_ERROR`` (``None``
    while the run is still streaming) and ``terminal_at`` when it was written.
    Every status, outcome and list below is read off what the client was sent, so
    the REST API and the operator UI tell the same story as the stream: one run per
    request, in every view.
    """

    run: Run
    segments: list[Run] = field(default_factory=list)
    terminal: dict[str, Any] | None = None
    terminal_at: datetime | None = None

    @property
    def streaming(self) -> bool:
        """Whether the client's stream of this run is still open."""
        return self.run.wire_state == Run.WireState.OPEN

    @property
    def status(self) -> str:
        """``Run.Status`` of the run as the client sees it.

        ``queued`` until any part of it starts, then ``running`` while its stream is
        open (whatever its segments do inside: waiting for Countersign's own calls
        is still running); ``error`` after a ``RUN_ERROR``, ``cancelled`` after a
        cancelled outcome (calls already executing may still finish); otherwise the last
        segment's status (``awaiting_tools`` while what it handed over is
        unanswered, ``finished`` once answered, ``cancelled``).
        """
        if not self.segments:
            return self.run.status
        if self.streaming:
            if all(s.status == Run.Status.QUEUED for s in self.segments):
                return Run.Status.QUEUED
            return Run.Status.RUNNING
        if self.terminal is not None and self.terminal.get("type") == "RUN_ERROR":
            return Run.Status.ERROR
        if self.outcome == Run.Outcome.CANCELLED:
            return Run.Status.CANCELLED
        return self.segments[-1].status

    @property
    def outcome(self) -> str | None:
        """The ``RUN_FINISHED.outcome.type`` the client got, or ``None``."""
        if not self.segments:
            return self.run.outcome or None
        if self.terminal is None or self.terminal.get("type") != "RUN_FINISHED":
            return None
        return str((self.terminal.get("outcome") or {}).get("type") or "success")

    @property
    def pending_tool_call_ids(self) -> list[str]:
        """The calls the client was told to answer (``outcome.pendingToolCallIds``)."""
        if not self.segments:
            return list(self.run.pending_tool_call_ids)
        outcome = (self.terminal or {}).get("outcome") or {}
        return list(outcome.get("pendingToolCallIds") or [])

    @property
    def interrupt_ids(self) -> list[str]:
        """The ids of the interrupts the run ended with (``cs-approval-<id>``, IR-02)."""
        if not self.segments:
            return [str(i.get("id")) for i in self.run.interrupts or []]
        outcome = (self.terminal or {}).get("outcome") or {}
        return [str(i.get("id")) for i in outcome.get("interrupts") or []]

    @property
    def error(self) -> dict[str, str] | None:
        """``{"code", "message"}`` of the ``RUN_ERROR`` the client got, or ``None``."""
        if not self.segments:
            if not self.run.error_code and not self.run.error_message:
                return None
            return {"code": self.run.error_code, "message": self.run.error_message}
        if self.terminal is None or self.terminal.get("type") != "RUN_ERROR":
            return None
        return {
            "code": str(self.terminal.get("code") or ""),
            "message": str(self.terminal.get("message") or ""),
        }

    @property
    def cancel_requested(self) -> bool:
        """Whether cancellation of the run (any segment of it) was requested."""
        return any(s.cancel_requested for s in self.segments or [self.run])

    @property
    def continues(self) -> str | None:
        """The client-visible ``runId`` whose pending calls this run continues."""
        previous = self.run.continues
        return previous.wire_run.run_id if previous is not None else None

    @property
    def finished_at(self) -> datetime | None:
        """When the client's run ended (its terminal event was written)."""
        if not self.segments:
            return self.run.finished_at
        return self.terminal_at


def _client_runs(runs: list[Run]) -> list[ClientRun]:
    """Return one :class:`ClientRun` per client-visible run among ``runs`` (a thread's)."""
    by_outer: dict[int, list[Run]] = defaultdict(list)
    for run in runs:
        if run.wire_state == Run.WireState.SEGMENT and run.outer_id is not None:
            by_outer[run.outer_id].append(run)
    visible = [r for r in runs if r.wire_state != Run.WireState.SEGMENT]
    pks = [r.pk for r in runs]
    last: dict[int, Event] = {}
    for event in Event.objects.filter(
        run_id__in=pks, type__in=_WIRE_TERMINALS
    ).order_by("seq"):
        last[event.run_id] = event  # type: ignore[index]
    result = []
    for run in visible:
        if not run.managed:
            result.append(ClientRun(run=run))
            continue
        segments = [run, *sorted(by_outer[run.pk], key=lambda s: (s.created_at, s.pk))]
        ends = [last[s.pk] for s in segments if s.pk in last]
        terminal = max(ends, key=lambda e: e.seq) if ends else None
        result.append(
            ClientRun(
                run=run,
                segments=segments,
                terminal=terminal.payload if terminal is not None else None,
                terminal_at=terminal.created_at if terminal is not None else None,
            )
        )
    return result


def client_run(*, run: Run) -> ClientRun:
    """Return the client-visible run ``run`` belongs to (itself, or the wire run of a segment)."""
    wire = run.wire_run
    runs = list(
        Run.objects.filter(Q(pk=wire.pk) | Q(outer_id=wire.pk)).select_related(
            "thread", "continues"
        )
    )
    return _client_runs(runs)[0]


def thread_client_runs(*, thread: Thread) -> list[ClientRun]:
    """Return ``thread``'s client-visible runs, oldest first, each with its segments.

    One entry per POST (or posted message, or run Countersign started itself), as
    ``GET /agui/threads/<id>/events`` replays them; a segment is never an entry of
    its own: one run per request, as the client saw it.
    """
    runs = list(
        Run.objects.filter(thread=thread)
        .select_related("thread", "continues", "continues__outer")
        .order_by("created_at", "id")
    )
    return _client_runs(runs)


def run_visible_to(*, user: AnyUser) -> QuerySet[Run]:
    """Return the runs of the threads ``user`` may see."""
    return Run.objects.filter(thread__in=thread_visible_to(user=user))


def run_get(*, user: AnyUser, run_id: str) -> Run | None:
    """Return the run ``run_id`` on a thread ``user`` may see, or ``None``.

    Run ids are unique per thread; should two visible threads share one (a
    replayed log), the newest run wins.
    """
    return (
        run_visible_to(user=user)
        .select_related("thread", "continues")
        .filter(run_id=run_id)
        .order_by("-created_at", "-id")
        .first()
    )


def tool_call_list(
    *,
    user: AnyUser,
    thread_id: str | None = None,
    state: str | None = None,
    name: str | None = None,
) -> QuerySet[ToolCall]:
    """Return the tool calls on threads ``user`` may see, newest first, filtered."""
    calls = ToolCall.objects.filter(
        thread__in=thread_visible_to(user=user)
    ).select_related("thread", "run", "run__outer", "approval", "approval__decided_by")
    if thread_id is not None:
        calls = calls.filter(thread_named(user=user, thread_id=thread_id))
    if state is not None:
        calls = calls.filter(state=state)
    if name is not None:
        calls = calls.filter(name=name)
    return calls.order_by("-created_at", "-id")


def tool_call_get(
    *, user: AnyUser, tool_call_id: str, thread_id: str | None = None
) -> ToolCall | None:
    """Return the call ``tool_call_id`` on a thread ``user`` may see, or ``None``.

    Tool call ids are unique per thread; ``thread_id`` picks the thread when two
    visible threads share an id, else the newest call wins.
    """
    return (
        tool_call_list(user=user, thread_id=thread_id)
        .filter(tool_call_id=tool_call_id)
        .first()
    )


def tool_call_result(*, call: ToolCall) -> Message | None:
    """Return the one tool message answering ``call``, or ``None`` (DC-04)."""
    return Message.objects.filter(
        thread_id=call.thread_id, role=Message.Role.TOOL, tool_call_id=call.tool_call_id
    ).first()


def tool_call_arguments(*, call: ToolCall, tool: Tool) -> ParsedArguments:
    """Parse and validate ``call``'s streamed argument text against ``tool``'s schema.

    The one parse between the provider and execution: its ``value``
    (:class:`agentcore.arguments.ValidatedArguments`) is what the policy, the
    approval request and the execution record use, referred to by its hash
    afterwards; ``ToolCall.arguments`` is only the raw JSON for display. A call
    cut off by the token limit (``metadata.truncated``) is refused. Implements
    RT-05, RT-06, SEC-01.
    """
    truncated = bool((call.metadata or {}).get("truncated"))
    return parse_arguments(call.arguments_text, tool=tool, truncated=truncated)


def tool_call_validation(*, call: ToolCall) -> dict[str, Any]:
    """Return the verdict of the agent's argument ladder on ``call``'s argument text.

    ``{"verdict": "ok" | "repair" | "error" | "unknown_tool" | "streaming",
    "repair": <rung names> | None, "error": <sentence> | None, "params": <dict> | None}``;
    the same parse the approval workflow applies (RT-05, RT-06, SEC-01).
    """

    verdict: dict[str, Any] = {
        "verdict": "error",
        "repair": None,
        "error": None,
        "params": None,
    }
    if call.state == ToolCall.State.STREAMING:
        return {**verdict, "verdict": "streaming"}
    try:
        tool = run_toolset(call.run).resolve(call.name)
    except UnknownAgent:
        tool = None
    if tool is None:
        return {
            **verdict,
            "verdict": "unknown_tool",
            "error": f"tool {call.name!r} is not configured for agent {call.run.agent!r}",
        }
    parsed = tool_call_arguments(call=call, tool=tool)
    if not parsed.ok:
        return {**verdict, "error": parsed.error}
    return {
        "verdict": "repair" if parsed.repair else "ok",
        "repair": parsed.repair,
        "error": None,
        "params": parsed.params,
    }


def agent_list() -> list[dict[str, Any]]:
    """Return the configured agents: name, provider, model and tool names (no secrets)."""

    agents = []
    for name in sorted(getattr(settings, "COUNTERSIGN_AGENTS", {})):
        config = agent_settings(name)
        agents.append(
            {
                "name": name,
                "provider": config.get("provider", "scripted"),
                "model": config.get("model", ""),
                "tools": [t.name for t in agent_toolset(name)],
            }
        )
    return agents


def tool_list(*, agent: str | None = None) -> list[dict[str, Any]]:
    """Return the tools of ``agent`` (every agent when ``None``), in offer order.

    A callable policy is shown as ``"conditional"``. Raises
    :class:`threads.exceptions.UnknownAgent` for an unknown agent. Implements RT-01.
    """

    if agent is not None:
        agent_settings(agent)
        names = [agent]
    else:
        names = sorted(getattr(settings, "COUNTERSIGN_AGENTS", {}))
    tools = []
    for name in names:
        for tool in agent_toolset(name):
            tools.append(
                {
                    "agent": name,
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                    "runsOn": tool.runs_on,
                    "policy": "conditional" if callable(tool.policy) else tool.policy,
                    "isDestructive": tool.is_destructive,
                    "isReadOnly": tool.is_read_only,
                    "idempotent": tool.idempotent,
                    "timeout": tool.timeout,
                    "permission": tool.permission,
                }
            )
    return tools


#: What a run whose worker died had done (``worker_lost``'s phase): nothing from
#: its agent recorded yet, or part of the agent's output.
LostPhase = Literal["before_output", "streaming"]


def run_lost_phase(*, run: Run) -> LostPhase:
    """Return how far ``run`` got before its worker died: :data:`LostPhase`.

    ``before_output``: the run was claimed, but the log holds none of its
    agent's events (only what Countersign wrote for it: a client-visible run's
    ``RUN_STARTED`` and the results it reports); ``streaming``: some of the
    agent's output was recorded. Implements ER-01.
    """
    agent_output = run.events.exclude(type__in=("RUN_STARTED", "TOOL_CALL_RESULT"))
    return "streaming" if agent_output.exists() else "before_output"


def run_reported_arguments(
    *, run: Run, tool_call_ids: set[str]
) -> dict[str, list[Any]]:
    """Return the arguments ``run``'s remote agent reported for each of ``tool_call_ids``.

    ``{toolCallId: [arguments, ...]}``: what the run's ``MESSAGES_SNAPSHOT``
    events show for each call (``toolCalls[].function.arguments`` parsed as JSON),
    then the call's own ``arguments`` when ``run`` streamed it again (TC-06).
    Arguments that are not JSON are reported as their text. A call the run
    reports nothing of is absent. Implements IR-18 (what a remote ran).
    """
    reported: dict[str, list[Any]] = defaultdict(list)
    for payload in Event.objects.filter(run=run, type="MESSAGES_SNAPSHOT").values_list(
        "payload", flat=True
    ):
        for message in payload.get("messages") or []:
            for call in (message or {}).get("toolCalls") or []:
                call_id = (call or {}).get("id")
                if call_id not in tool_call_ids:
                    continue
                text = ((call or {}).get("function") or {}).get("arguments")
                if not isinstance(text, str):
                    reported[call_id].append(text)
                    continue
                try:
                    reported[call_id].append(json.loads(text))
                except ValueError:
                    reported[call_id].append(text)
    restreamed = Event.objects.filter(
        run=run, type="TOOL_CALL_ARGS", payload__toolCallId__in=list(tool_call_ids)
    ).values_list("payload__toolCallId", flat=True)
    for call in ToolCall.objects.filter(
        thread_id=run.thread_id, tool_call_id__in=set(restreamed)
    ):
        reported[call.tool_call_id].append(
            call.arguments if call.arguments is not None else call.arguments_text
        )
    return dict(reported)
