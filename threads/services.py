"""Writes for threads: create and archive threads, post messages, create, fail and cancel runs.

:func:`run_create` is the one way a run comes into being: a posted message
(:func:`message_post`), an AG-UI request (:func:`run_start_from_agui`) and a
continuation (:func:`continuation_maybe_start`) all go through it, and so do the
runs no agent here executes, recorded with ``recorded=``: an MCP gateway's call
(:mod:`threads.gateway`) and an external agent's (:mod:`threads.external`). Executing a run
needs the approval workflow too, so it lives above both apps, in
:mod:`orchestration.runs`. Recording events is :mod:`threads.recording`;
answering calls :mod:`threads.answers`. Implements DC-01, FT-06.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from django.db import transaction
from django.utils import timezone

from agentcore.events import (
    RunAgentInput,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunStartedEvent,
    message_from_dict,
)
from agentcore.interrupts import companion_call_for
from core.types import User
from threads.agent_config import (
    agent_application_tools,
    agent_is_external,
    agent_is_gateway,
    agent_settings,
)
from threads.answers import (
    interrupt_companions_answer,
    run_answer_dangling_calls,
    run_awaits_answers,
    run_finish_if_answered,
)
from threads.exceptions import (
    RecordedThread,
    RunConflict,
    RunNotCancellable,
    ThreadArchived,
    ThreadsError,
)
from threads.execution import enqueue, enqueue_later
from threads.ids import input_call_ids_unique
from threads.ids import new_message_id as mint_message_id
from threads.locks import run_lock, thread_lock, thread_lock_by_agui_id
from threads.models import STORED_ROLES, Message, Run, Thread, ToolCall, new_public_id
from threads.projection import messages_create_from_agui
from threads.recording import (
    RunRecorder,
    record_terminal_error,
    recorder_resume,
)
from threads.selectors import (
    thread_messages_agui,
    thread_unanswered_calls,
    thread_write_check,
)
from threads.transitions import run_transition
from threads.wire import (
    wire_results_report,
    wire_run_close_cancelled,
    wire_run_close_if_waiting,
    wire_run_open,
)


def _run_enqueue(*, run_pk: int) -> None:
    """Hand run ``run_pk`` to a worker after commit (``threads.tasks.run_agent``)."""
    # Imported here: a task module imports Celery, which a web process imports
    # only once it sends work (bench B6).
    from threads.tasks import run_agent

    enqueue(run_agent, run_pk=run_pk)


def _run_enqueue_later(*, run_pk: int, countdown: float) -> None:
    """Hand run ``run_pk`` to a worker ``countdown`` seconds after commit."""
    from threads.tasks import run_agent

    # A message lost on the way (broker down) leaves the run queued: the
    # janitor enqueues it again after QUEUED_STALE_SECONDS.
    transaction.on_commit(
        partial(enqueue_later, run_agent, countdown=countdown, run_pk=run_pk),
        robust=True,
    )


def thread_create(
    *, owner: User, title: str = "", agent: str = "demo", thread_id: str | None = None
) -> Thread:
    """Create a thread for ``owner`` talking to ``agent``.

    Raises :class:`threads.exceptions.UnknownAgent` when ``agent`` is not configured.
    """
    agent_settings(agent)
    fields: dict[str, Any] = {"owner": owner, "title": title[:300], "agent": agent}
    if thread_id:
        fields["thread_id"] = thread_id
    return Thread.objects.create(**fields)


def agent_check_runs_here(*, agent: str, thread_id: str | None = None) -> None:
    """Raise :class:`RecordedThread` when ``agent`` runs elsewhere, so no run may start for it.

    An MCP gateway's threads (provider ``mcp_gateway``) record its clients' calls,
    and an external agent's (provider ``external``) the calls it declares through
    the approval API: a message or an AG-UI run there would start a run no agent
    can execute. ``thread_id`` names the thread in the message, when there is one.
    Checked before anything is written.
    """
    where = f"thread {thread_id!r}" if thread_id else f"agent {agent!r}"
    if agent_is_gateway(agent):
        raise RecordedThread(
            f"{where} records the calls MCP clients send to gateway {agent!r}; no "
            "agent runs there, so it takes no message and no run: call the tools "
            f"through an MCP session at /mcp/{agent}/ instead"
        )
    if agent_is_external(agent):
        raise RecordedThread(
            f"{where} records the calls external agent {agent!r} declares through "
            "the approval API; that agent runs elsewhere, so it takes no message "
            "and no run here: send the message to the agent itself, which declares "
            "its calls with POST /api/external/tool-calls/"
        )


def thread_check_can_start_run(
    *,
    thread: Thread,
    resumed_call_ids: frozenset[str] = frozenset(),
    resumed_interrupt_ids: frozenset[str] = frozenset(),
) -> None:
    """Raise :class:`RunConflict` unless a new run may start on ``thread`` now.

    One run per thread at a time: refused while a run is queued or running, or
    while calls of the last run are still unanswered (FT-06: a continuing thread
    answers every pending call first). Raises :class:`ThreadArchived` for an
    archived thread and :class:`RecordedThread` for a thread of an agent that runs
    elsewhere (:func:`agent_check_runs_here`).
    """
    agent_check_runs_here(agent=thread.agent, thread_id=thread.thread_id)
    if thread.archived_at is not None:
        raise ThreadArchived(
            f"thread {thread.thread_id!r} was archived at {thread.archived_at.isoformat()}; "
            "start a new thread to continue the conversation"
        )
    active = thread.runs.filter(status__in=Run.ACTIVE_STATUSES).first()
    if active is not None:
        raise RunConflict(
            f"run {active.run_id!r} is still {active.status} on this thread; wait for it to "
            "finish or cancel it (POST /api/runs/<id>/cancel/) before posting a message"
        )
    interrupted = (
        thread.runs.filter(status=Run.Status.AWAITING_TOOLS)
        .exclude(interrupts=[])
        .first()
    )
    if interrupted is not None and not set(interrupted.open_interrupt_ids) <= set(
        resumed_interrupt_ids
    ):
        ids = interrupted.open_interrupt_ids
        raise RunConflict(
            f"interrupts {ids!r} of run {interrupted.run_id!r} are waiting for an "
            "operator's decision in the approval queue, or "
            + _cancel_pending_hint(thread)
        )
    pending = [
        c
        for c in thread_unanswered_calls(thread=thread)
        if c.tool_call_id not in resumed_call_ids
        # A companion is answered with the interrupt of the call it stands beside.
        and not companion_call_for(
            name=c.name, arguments=c.arguments_text, held_ids=resumed_call_ids
        )
    ]
    if pending:
        ids = [c.tool_call_id for c in pending]
        raise RunConflict(
            f"tool calls {ids!r} are waiting for an answer; an operator approves or rejects "
            "them in the approval queue, or " + _cancel_pending_hint(thread)
        )


def _cancel_pending_hint(thread: Thread) -> str:
    """Return how a client cancels ``thread``'s waiting calls, for a conflict's message."""
    return (
        f"cancel them with POST /api/threads/{thread.thread_id}/cancel-pending/ "
        "(a reason is required)"
    )


def thread_archive(*, thread: Thread) -> Thread:
    """Archive ``thread`` (idempotent: the first archive time is kept); return it.

    An archived thread keeps its history but accepts no new messages
    (:class:`threads.exceptions.ThreadArchived`, HTTP 409).
    """
    with transaction.atomic():
        locked = thread_lock(thread_pk=thread.pk)
        if locked.archived_at is None:
            locked.archived_at = timezone.now()
            locked.save(update_fields=["archived_at", "updated_at"])
    return locked


def new_message_id() -> str:
    """Return a new thread-unique message id, in Countersign's namespace (threads.ids)."""
    return mint_message_id()


def message_post(
    *,
    thread: Thread,
    content: str | list[dict[str, Any]],
    message_id: str | None = None,
    run_id: str | None = None,
) -> tuple[Message, Run]:
    """Record a user message and start a run for it; return both.

    The run is enqueued after the transaction commits. Raises
    :class:`threads.exceptions.RunConflict` (HTTP 409) while a run is active or calls
    are pending. Implements DC-01, FT-06.
    """
    with transaction.atomic():
        locked = thread_lock(thread_pk=thread.pk)
        thread_check_can_start_run(thread=locked)
        message = Message.objects.create(
            thread=locked,
            message_id=message_id or new_message_id(),
            role=Message.Role.USER,
            content=content,
            position=locked.next_seq,
        )
        run_id = run_id or new_public_id()
        # RUN_STARTED.input carries what the client sent: its one message.
        sent = RunAgentInput(
            thread_id=locked.thread_id,
            run_id=run_id,
            messages=[
                message_from_dict(
                    {"id": message.message_id, "role": "user", "content": content}
                )
            ],
            state=locked.state,
            tools=[],
            context=[],
            forwarded_props={},
        ).model_dump(mode="json", by_alias=True, exclude_none=True)
        run = run_create(thread=locked, run_id=run_id, wire_input=sent)
    return message, run


def run_create(
    *,
    thread: Thread,
    continues: Run | None = None,
    run_id: str | None = None,
    agent: str | None = None,
    client_input: dict[str, Any] | None = None,
    outer: Run | None = None,
    wire_input: dict[str, Any] | None = None,
    managed: bool = True,
    retry_of: Run | None = None,
    countdown: float = 0.0,
    recorded: dict[str, Any] | None = None,
) -> Run:
    """Create a queued run on ``thread`` and enqueue its execution after commit.

    The one way a run is created. ``continues`` names the run whose pending calls
    this run follows up (the database allows one continuation per run); ``run_id``
    is the client's ``runId`` (else a new one); ``agent`` defaults to the
    thread's; ``client_input`` is what an AG-UI client brought besides history
    (tools, context, forwarded props, state), merged by :func:`run_input_build`.
    On the wire (:mod:`threads.wire`) the run is a segment of the open wire run
    ``outer``, or, without ``outer``, a client-visible run of its own whose
    ``RUN_STARTED`` (echoing ``wire_input``, what the client sent) is written now;
    ``managed=False`` keeps the unmanaged shape of the run it continues.
    ``retry_of`` names the lost run whose turn this one repeats (its attempt is
    the next); ``countdown`` delays its execution by that many seconds.
    ``recorded`` (the run's input) makes a run that is reported rather than run:
    an external agent's declared call (:mod:`threads.external`) or an MCP
    gateway's call (:mod:`threads.gateway`), created ``running`` and unmanaged,
    whose events the caller records; it is never enqueued. Must be called inside a transaction holding the thread's row lock
    (:func:`threads.locks.thread_lock`), with ``continues`` read in it.
    """
    latest = thread.runs.order_by("-created_at", "-id").first()
    fields: dict[str, Any] = {}
    if recorded is not None:
        return Run.objects.create(
            thread=thread,
            agent=agent or thread.agent,
            parent_run=latest,
            status=Run.Status.RUNNING,
            wire_state=Run.WireState.UNMANAGED,
            input=recorded,
            started_at=timezone.now(),
        )
    if run_id:
        fields["run_id"] = run_id
    if client_input is not None:
        fields["input"] = {"client": client_input}
    if retry_of is not None:
        fields["retry_of"] = retry_of
        fields["attempt"] = retry_of.attempt + 1
    wire_state = Run.WireState.UNMANAGED
    if outer is not None:
        fields["outer"] = outer
        wire_state = Run.WireState.SEGMENT
    elif managed:
        # Created open: wire_run_open has no wire_state of its own to write (B2).
        wire_state = Run.WireState.OPEN
    run = Run.objects.create(
        thread=thread,
        agent=agent or thread.agent,
        parent_run=latest,
        continues=continues,
        status=Run.Status.QUEUED,
        wire_state=wire_state,
        **fields,
    )
    if managed and outer is None:
        wire_run_open(run=run, run_input=wire_input)
    # ``continues`` was read (and locked) in this transaction: one that is no
    # longer awaiting tools here is not in the database either (B2: no re-read).
    if (
        continues is None
        or continues.status != Run.Status.AWAITING_TOOLS
        or not run_awaits_answers(run_pk=continues.pk)
    ):
        # A resume's continuation waits for its calls' answers: the answer that
        # completes them enqueues it (continuation_maybe_start), once; a second
        # delivery of a running run would be taken for a dead worker's.
        if countdown > 0:
            _run_enqueue_later(run_pk=run.pk, countdown=countdown)
        else:
            _run_enqueue(run_pk=run.pk)
    return run


def run_retry_create(*, run: Run, countdown: float) -> Run | None:
    """Start the turn of lost ``run`` again in a new run; return it, or ``None``.

    ``run`` ended with ``RUN_ERROR`` ``worker_lost`` (its worker died). The new
    run is a client-visible run of its own (its ``RUN_STARTED`` written now)
    with the lost run's agent and client tools, ``retry_of`` the lost run and
    the next ``attempt``; its execution starts ``countdown`` seconds after
    commit. The thread's history is what it is: what the lost run recorded
    stays, its calls answered as interrupted, and calls the new run proposes
    are new calls that go through policy like any other (model turns are
    at-least-once, tools exactly-once). Returns ``None``, creating nothing,
    when ``run`` did not end ``worker_lost``, was retried already (one retry per
    lost run, a database constraint), or is no longer the thread's latest run
    (someone posted since). Implements FT-06, ER-01.
    """
    with transaction.atomic():
        locked = run_lock(run_pk=run.pk, thread_pk=run.thread_id)
        if (
            locked.status != Run.Status.ERROR
            or locked.error_code != "worker_lost"
            or Run.objects.filter(retry_of=locked).exists()
            or locked.thread.runs.filter(pk__gt=locked.pk).exists()
        ):
            return None
        lost_input = locked.input or {}
        return run_create(
            thread=locked.thread,
            agent=locked.agent,
            client_input={
                key: lost_input[key]
                for key in ("tools", "context", "forwardedProps")
                if key in lost_input
            },
            managed=locked.managed,
            retry_of=locked,
            countdown=countdown,
        )


#: The longest title :func:`thread_title_from` makes, in characters.
DERIVED_TITLE_LENGTH = 80


def thread_title_from(messages: Sequence[Any]) -> str:
    """Return a title for a new thread from its first user message's text, or ``""``.

    ``messages`` are AG-UI messages (models or dicts); the text of the first user
    message (a string, or its text parts joined by spaces) has its white space
    folded and is cut to :data:`DERIVED_TITLE_LENGTH` characters, ending in "…"
    when cut. A thread created over AG-UI has no other title, and every such
    thread would otherwise read "Untitled thread" in the operator's list.
    """
    for message in messages:
        data = message if isinstance(message, dict) else message.model_dump()
        if data.get("role") != "user":
            continue
        content = data.get("content")
        if isinstance(content, list):
            content = " ".join(
                str(part.get("text", ""))
                for part in content
                if isinstance(part, dict) and part.get("type") == "text"
            )
        text = " ".join(str(content or "").split())
        if len(text) > DERIVED_TITLE_LENGTH:
            text = text[: DERIVED_TITLE_LENGTH - 1].rstrip() + "…"
        return text
    return ""


def run_start_from_agui(
    *,
    user: User,
    agent: str,
    run_input: RunAgentInput,
    resumed_call_ids: frozenset[str] = frozenset(),
    resumed_interrupt_ids: frozenset[str] = frozenset(),
) -> tuple[Thread, Run, int]:
    """Merge an AG-UI ``run_input`` into its thread and create the run.

    Returns the thread, the run and the ``seq`` after which the run's events
    follow. ``run_input.thread_id`` is looked up in ``user``'s own client ids
    (:func:`threads.selectors.thread_by_agui_id`); a new one creates ``user``'s
    thread with that client id and a minted global id, whoever else uses the same
    id. Client tool messages answer their calls (FT-06); a run whose pending calls
    the client answered is finished and continued by this run. Raises
    :class:`threads.exceptions.ThreadNotOwned` for a thread ``user`` may read but
    not write, :class:`RunConflict` for a reused ``runId`` or a
    thread that cannot take a run, :class:`threads.exceptions.UnknownAgent`, and
    ``IntegrityError`` when the input conflicts with stored history.
    ``resumed_call_ids`` are calls the same transaction decides from the input's
    ``resume`` (:mod:`approvals.services.resume`): this run is then their run's
    continuation, started once they are answered (IR-07, IR-15).
    Raises :class:`RecordedThread` when ``agent`` or the thread's agent runs
    elsewhere (an MCP gateway, an external agent), before anything is written.
    Implements FT-01, FT-06, SEC-02.
    """
    agent_settings(agent)
    agent_check_runs_here(agent=agent)
    with transaction.atomic():
        thread = thread_lock_by_agui_id(user=user, agui_id=run_input.thread_id)
        fresh = thread is None
        if thread is None:
            created = Thread.objects.create(
                client_thread_id=run_input.thread_id,
                owner=user,
                agent=agent,
                title=thread_title_from(run_input.messages),
            )
            thread = thread_lock(thread_pk=created.pk)
        else:
            thread_write_check(user=user, thread=thread)
            agent_check_runs_here(agent=thread.agent, thread_id=thread.thread_id)
        if thread.runs.filter(run_id=run_input.run_id).exists():
            raise RunConflict(
                f"runId {run_input.run_id!r} was already used on this thread; "
                "send a new runId for every run"
            )
        # What the client brings to this run besides history: its own frontend tools
        # (FT-01), context, forwarded props and state; merged by run_input_build.
        client = run_input.model_dump(
            mode="json",
            by_alias=True,
            exclude_none=True,
            include={"tools", "context", "forwarded_props", "state"},
        )
        # RUN_STARTED.input echoes exactly what the client sent (threads.wire).
        wire_input = run_input.model_dump(mode="json", by_alias=True, exclude_none=True)
        run: Run | None = None
        if fresh:
            # An imported conversation's tool calls need a run to own their rows
            # (ToolCall.run), so a new thread's run exists before its history.
            run = run_create(
                thread=thread,
                run_id=run_input.run_id,
                agent=agent,
                client_input=client,
                wire_input=wire_input,
            )
        known = set(thread.messages.values_list("message_id", flat=True))
        new: list[dict[str, Any]] = []
        # A reused tool-call id gets a thread-unique one; the wire echo keeps the
        # client's (threads.ids.input_call_ids_unique).
        # The echo's messages are the input's, dumped once (B9).
        # A thread created just now stores nothing to collide with: no lookup of
        # its (10,000, say) input ids (B9).
        for data in input_call_ids_unique(
            thread=None if fresh else thread, messages=wire_input["messages"]
        ):
            if data.get("id") in known or data.get("role") not in STORED_ROLES:
                continue
            new.append(data)
            known.add(data["id"])
        messages_create_from_agui(
            thread=thread,
            messages=new,
            position=thread.next_seq,
            tool_answer_check=lambda data: _check_client_tool_answer(
                thread=thread, data=data
            ),
        )
        if run is None:
            run = _run_create_after_history(
                thread=thread,
                run_id=run_input.run_id,
                agent=agent,
                client=client,
                wire_input=wire_input,
                resumed_call_ids=resumed_call_ids,
                resumed_interrupt_ids=resumed_interrupt_ids,
            )
        start = thread.next_seq - 1
    return thread, run, start


def _run_create_after_history(
    *,
    thread: Thread,
    run_id: str,
    agent: str,
    client: dict[str, Any],
    wire_input: dict[str, Any],
    resumed_call_ids: frozenset[str] = frozenset(),
    resumed_interrupt_ids: frozenset[str] = frozenset(),
) -> Run:
    """Create the run of a thread that has history: checked, continuing its last run."""
    thread_check_can_start_run(
        thread=thread,
        resumed_call_ids=resumed_call_ids,
        resumed_interrupt_ids=resumed_interrupt_ids,
    )
    latest = thread.runs.order_by("-created_at", "-id").first()
    continues = None
    if latest is not None and latest.status == Run.Status.AWAITING_TOOLS:
        # The client answered the calls its last run left pending (FT-06), or is
        # resuming the ones held for a person: this run is that run's
        # continuation. Calls being resumed are answered after this returns; the
        # run starts once they are (orchestration.runs defers its claim).
        if not (resumed_call_ids or resumed_interrupt_ids):
            run_transition(run=latest, to=Run.Status.FINISHED)
        if not Run.objects.filter(continues=latest).exists():
            continues = latest
    return run_create(
        thread=thread,
        continues=continues,
        run_id=run_id,
        agent=agent,
        client_input=client,
        wire_input=wire_input,
    )


def _check_client_tool_answer(*, thread: Thread, data: dict[str, Any]) -> None:
    """Refuse a client's tool message for a call that an operator must decide (SEC-02)."""
    call = ToolCall.objects.filter(
        thread=thread, tool_call_id=data.get("toolCallId")
    ).first()
    if call is None:
        raise ThreadsError(
            f"tool message {data.get('id')!r} answers toolCallId {data.get('toolCallId')!r}, "
            "which this thread never made"
        )
    if call.state in (
        ToolCall.State.AWAITING_APPROVAL,
        ToolCall.State.APPROVED,
        ToolCall.State.EXECUTING,
    ):
        raise RunConflict(
            f"tool call {call.tool_call_id!r} is {call.get_state_display()} in the approval "
            "queue; Countersign answers it once an operator decides"
        )


def continuation_maybe_start(*, run: Run) -> Run | None:
    """Settle ``run`` after an answer: continue it once every pending call is answered.

    Returns the new run, or ``None``. Results Countersign wrote are reported in the
    open wire run first (:func:`threads.wire.wire_results_report`). Once every
    call is answered the one continuation starts (the one-to-one ``Run.continues``
    makes a second one impossible): a segment of the wire run still open, else a
    client-visible run of its own (none for an MCP gateway's run, whose client
    reads the answer itself); a continuation a resume already created
    (:func:`threads.services.run_start_from_agui`) is enqueued again instead. While
    calls wait for a human or the client, the wire run ends
    (:func:`threads.wire.wire_run_close_if_waiting`). Its ``RunAgentInput.messages``
    carry one tool message per call (FT-06). Called in one place, the pipeline's
    last step (:func:`orchestration.pipeline.run_continue`), inside the
    transaction that wrote the answer. Implements FT-06, DC-04, IR-01.
    """
    # No savepoint of its own inside a caller's transaction (B2): no caller
    # catches its errors to go on with that transaction.
    with transaction.atomic(savepoint=False):
        locked = run_lock(run_pk=run.pk, thread_pk=run.thread_id)
        wire_results_report(thread=locked.thread)
        if locked.status != Run.Status.AWAITING_TOOLS:
            return None
        if agent_is_external(locked.agent):
            # Nothing to continue: the external agent runs elsewhere and learns
            # the answer from the approval API; its run ends once answered.
            run_finish_if_answered(run=locked)
            return None
        reserved = Run.objects.filter(continues=locked).first()
        if reserved is not None:
            if run_finish_if_answered(run=locked):
                if reserved.status == Run.Status.QUEUED:
                    _run_enqueue(run_pk=reserved.pk)
            elif reserved.status == Run.Status.QUEUED and reserved.managed:
                # A resumed call whose outcome became unknown ends the client's run.
                wire_run_close_if_waiting(run=locked, wire=reserved)
            return None
        if locked.cancel_requested:
            # The client cancelled its run while Countersign answered these calls
            # (approvals.services.cancellation.client_run_cancel): no continuation.
            run_finish_if_answered(run=locked)
            wire_run_close_cancelled(run=locked)
            return None
        if not run_finish_if_answered(run=locked):
            wire_run_close_if_waiting(run=locked)
            return None
        if agent_is_gateway(locked.agent):
            # An MCP gateway's caller is the MCP client, which reads the answer
            # from its tools/call response: no model to continue.
            return None
        wire = locked.wire_run if locked.managed else None
        if wire is not None and wire.wire_state == Run.WireState.OPEN:
            return run_create(thread=locked.thread, continues=locked, outer=wire)
        return run_create(
            thread=locked.thread, continues=locked, managed=locked.managed
        )


def run_input_build(*, run: Run) -> dict[str, Any]:
    """Build the AG-UI ``RunAgentInput`` (camelCase JSON) for ``run`` from its thread.

    ``messages`` is the stored history; ``tools`` the agent's application tools
    plus an AG-UI client's own tools (FT-01); ``context``, ``forwardedProps`` and
    ``state`` come from the client's input when it sent them (``Run.input["client"]``),
    else the thread's state.
    """
    thread = run.thread
    client = (run.input or {}).get("client", {})
    tools = [
        t.agui_tool().model_dump(mode="json", by_alias=True, exclude_none=True)
        for t in agent_application_tools(run.agent)
    ]
    # An AG-UI client's own frontend tools are advertised too (FT-01); a name the
    # agent already defines keeps the agent's definition.
    known = {t["name"] for t in tools}
    tools += [t for t in client.get("tools", []) if t.get("name") not in known]
    state = client.get("state")
    if state not in (None, {}) and state != thread.state:
        thread.replace_state(state)
    data: dict[str, Any] = {
        "threadId": thread.thread_id,
        "runId": run.run_id,
        "protocolVersion": "1.0",
        "state": thread.state,
        # The agent's own names for messages it renamed (threads.snapshots).
        "messages": thread_messages_agui(thread=thread, remote_ids=True),
        "tools": tools,
        "context": client.get("context", []),
        "forwardedProps": client.get("forwardedProps", {}),
    }
    if run.parent_run is not None:
        data["parentRunId"] = run.parent_run.run_id
    # The decisions on the interrupts the agent ended the previous run with go back
    # to it in this run's input (its continuation, or the next run after the
    # interrupts were cancelled): a run has one next run, so they go once (IR-18).
    previous = (
        Run.objects.filter(thread=thread, pk__lt=run.pk)
        .order_by("-created_at", "-id")
        .first()
    )
    if previous is not None and previous.interrupts:
        data["resume"] = list(previous.resume)
    return data


def run_resume_record(*, run: Run, entry: dict[str, Any]) -> bool:
    """Record the AG-UI ``ResumeEntry`` ``entry`` for one of ``run``'s interrupts.

    ``entry`` is ``{"interruptId", "status": "resolved"|"cancelled", "payload"?}``.
    Returns ``False`` (nothing written) when that interrupt already has its entry,
    so a decision is never sent twice. Raises :class:`ValueError` for an
    ``interruptId`` the run's agent did not send (IR-18: never an entry for an
    interrupt it did not send). Must run inside ``transaction.atomic()``; takes
    the run lock. Implements IR-18.
    """
    locked = run_lock(run_pk=run.pk, thread_pk=run.thread_id)
    interrupt_id = entry["interruptId"]
    if interrupt_id not in {i.get("id") for i in locked.interrupts or []}:
        raise ValueError(
            f"run {locked.run_id!r} has no interrupt {interrupt_id!r}; "
            "only the agent's own interrupts are answered"
        )
    if any(e.get("interruptId") == interrupt_id for e in locked.resume or []):
        return False
    locked.resume = [*(locked.resume or []), entry]
    locked.save(update_fields=["resume"])
    run.resume = locked.resume
    interrupt_companions_answer(run=locked, entry=entry)
    return True


def run_fail(*, run: Run, code: str, message: str) -> Run:
    """End ``run`` with a ``RUN_ERROR`` (code, message) unless it already ended.

    Its calls left without an answer are answered as interrupted (BC20).
    """
    recorder = recorder_resume(run=run)
    record_terminal_error(recorder, code=code, message=message)
    run.refresh_from_db()
    run_answer_dangling_calls(run=run)
    return run


def run_cancel(*, run: Run) -> Run:
    """Request cancellation of ``run``; the worker stops at the next event boundary.

    A queued run that no worker picked up yet is finished as cancelled at once.
    Raises :class:`threads.exceptions.RunNotCancellable` when the run already ended.
    """
    with transaction.atomic():
        locked = run_lock(run_pk=run.pk, thread_pk=run.thread_id)
        if locked.status not in Run.ACTIVE_STATUSES:
            raise RunNotCancellable(
                f"run {locked.run_id!r} already ended ({locked.status}); nothing to cancel"
            )
        locked.cancel_requested = True
        locked.save(update_fields=["cancel_requested"])
        queued = locked.status == Run.Status.QUEUED
    if queued:
        with transaction.atomic():
            again = run_lock(run_pk=run.pk, thread_pk=run.thread_id)
            if again.status == Run.Status.QUEUED:
                run_transition(run=again, to=Run.Status.RUNNING)
                recorder = RunRecorder(again)
                recorder.record(
                    [
                        RunStartedEvent(
                            thread_id=again.thread.thread_id, run_id=again.run_id
                        ),
                        RunFinishedEvent(
                            thread_id=again.thread.thread_id,
                            run_id=again.run_id,
                            outcome=RunFinishedCancelledOutcome(),
                        ),
                    ]
                )
    run.refresh_from_db()
    return run
