"""External agents: agents that run elsewhere and declare their calls to Countersign.

An agent configured with ``"provider": "external"`` (``COUNTERSIGN_AGENTS``) is
never run by Countersign. Its caller declares each tool call it intends to make
through the approval API (``web.api.external``); the call is recorded here as a
run of that agent's thread — the same events (``RUN_STARTED``, the call,
``RUN_FINISHED``), the same log, projection and operator view as a call any
other agent proposes — and then dispatched by the same policy step as every call
(``orchestration.external``). The declared tool (its name, description and input
schema) is kept in the run's input, where :func:`threads.agent_config.run_toolset`
finds it (:func:`threads.agent_config.external_tools`), so approvals, edits and executions resolve it as they resolve any tool.
Implements DC-01, RT-03.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction

from core.types import User
from threads.exceptions import ThreadNotOwned
from threads.locks import thread_lock
from threads.models import Thread, ToolCall
from threads.recording import RunRecorder
from threads.services import run_create


@dataclass(frozen=True)
class DeclaredCall:
    """A call an external agent declared: what :func:`external_call_record` records.

    ``tool`` is the AG-UI ``Tool`` JSON (with ``parameters``, the input schema);
    ``arguments`` the JSON object the caller intends to call it with; ``summary``
    a sentence for the approver; ``annotations`` the caller's risk hints, shown,
    never lowering the policy; ``conversation_id`` the caller's conversation (the
    thread), or ``""`` for a thread of its own.
    """

    agent: str
    tool: dict[str, Any]
    arguments: dict[str, Any]
    tool_call_id: str
    summary: str = ""
    annotations: Mapping[str, Any] | None = None
    conversation_id: str = ""
    metadata: Mapping[str, Any] | None = None


def external_thread_for(
    *, owner: User, agent: str, conversation_id: str, title: str
) -> Thread:
    """Return the thread of ``owner``'s conversation ``conversation_id`` with ``agent``.

    Conversation ids are the owner's own, like AG-UI thread ids: looked up
    among ``owner``'s client thread ids (``Thread.client_thread_id``), a new one
    creating ``owner``'s thread with that client id and a minted global id,
    whoever else uses the same id (nobody learns which ids others took). Without
    one, a thread of its own. Raises :class:`ThreadNotOwned` when the owner's
    conversation is a thread of another agent. Call inside a transaction.
    Implements SEC-06.
    """
    if not conversation_id:
        return Thread.objects.create(owner=owner, agent=agent, title=title[:300])
    thread = Thread.objects.filter(
        owner=owner, client_thread_id=conversation_id
    ).first()
    if thread is None:
        try:
            # A savepoint: a concurrent first declaration in the same conversation
            # wins the unique (owner, client id) and this one joins its thread.
            with transaction.atomic():
                return Thread.objects.create(
                    owner=owner,
                    agent=agent,
                    title=title[:300],
                    client_thread_id=conversation_id,
                )
        except IntegrityError:
            thread = Thread.objects.get(owner=owner, client_thread_id=conversation_id)
    if thread.agent != agent:
        raise ThreadNotOwned(
            f"conversationId {conversation_id!r} is your conversation with agent "
            f"{thread.agent!r}; use another id for agent {agent!r}"
        )
    return thread


def external_call_record(*, owner: User, declared: DeclaredCall) -> ToolCall:
    """Record ``declared`` as a run of its agent's thread that ends with the call pending.

    The run's events go through the one event path (:class:`RunRecorder`): a
    ``RUN_STARTED``, the summary as the assistant's text, the call
    (``TOOL_CALL_START``/``ARGS``/``END``), and ``RUN_FINISHED``; the projection
    leaves the call ``pending`` and the run ``awaiting_tools``, ready for the
    policy (``approvals.services.pending_calls_route``). The run keeps the declared
    tool in its input (``tools``) and the caller's context (``external``). Returns
    the call. Raises :class:`ThreadNotOwned` (see :func:`external_thread_for`).
    Implements DC-01, FT-06.
    """
    from agentcore.arguments import canonical_json

    title = declared.summary or declared.tool.get("name", "")
    with transaction.atomic():
        thread = external_thread_for(
            owner=owner,
            agent=declared.agent,
            conversation_id=declared.conversation_id,
            title=str(title),
        )
        thread = thread_lock(thread_pk=thread.pk)
        run = run_create(
            thread=thread,
            agent=declared.agent,
            recorded={
                "tools": [declared.tool],
                "external": {
                    "summary": declared.summary,
                    "annotations": dict(declared.annotations or {}),
                    "conversationId": declared.conversation_id,
                    "metadata": dict(declared.metadata or {}),
                },
            },
        )
        call_id = declared.tool_call_id
        events: list[dict[str, Any]] = [
            {"type": "RUN_STARTED", "threadId": thread.thread_id, "runId": run.run_id}
        ]
        parent = f"{call_id}-message"
        if declared.summary:
            events += [
                {
                    "type": "TEXT_MESSAGE_START",
                    "messageId": parent,
                    "role": "assistant",
                },
                {
                    "type": "TEXT_MESSAGE_CONTENT",
                    "messageId": parent,
                    "delta": declared.summary,
                },
                {"type": "TEXT_MESSAGE_END", "messageId": parent},
            ]
        start: dict[str, Any] = {
            "type": "TOOL_CALL_START",
            "toolCallId": call_id,
            "toolCallName": declared.tool["name"],
        }
        if declared.summary:
            start["parentMessageId"] = parent
        events += [
            start,
            {
                "type": "TOOL_CALL_ARGS",
                "toolCallId": call_id,
                "delta": canonical_json(declared.arguments),
            },
            {"type": "TOOL_CALL_END", "toolCallId": call_id},
            {"type": "RUN_FINISHED", "threadId": thread.thread_id, "runId": run.run_id},
        ]
        recorder = RunRecorder(run, coalesce_ms=0, coalesce_bytes=0)
        recorder.record(events)
        recorder.flush()
        return ToolCall.objects.select_related("run", "thread").get(
            thread=thread, tool_call_id=call_id
        )
