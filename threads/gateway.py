"""An MCP gateway's calls as tool calls of a thread (docs/mcp.md "Countersign as an MCP gateway").

A call an MCP client sends to ``/mcp/<gateway>/`` is recorded like a model's call:
one run per call, through the same recorder and projection (``RUN_STARTED``,
``TOOL_CALL_START``/``ARGS``/``END``, ``RUN_FINISHED``), in the thread of the
client's MCP session, owned by the token's user. The run then awaits tools and
the approval workflow dispatches its call as any other. Implements DC-01, FT-06.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Final

from django.db import transaction

from agentcore.arguments import ValidatedArguments
from agentcore.events import (
    RunFinishedEvent,
    RunStartedEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)
from agentcore.tools import Tool
from core.types import User
from threads.locks import thread_lock
from threads.models import Thread, ToolCall
from threads.recording import record_events
from threads.services import run_create


@dataclass(frozen=True, slots=True)
class GatewayCall:
    """What :func:`gateway_call_record` did: the call, and whether it was recorded now.

    ``created`` is ``False`` when a call of that ``toolCallId`` was already in the
    thread (a client's retry): nothing was recorded and ``call`` is the kept one.
    """

    call: ToolCall
    created: bool


def gateway_thread_id(*, gateway: str, owner_pk: int, session: str) -> str:
    """Return the ``threadId`` of MCP session ``session`` of user ``owner_pk`` on ``gateway``.

    ``mcp-<gateway>-<32 hex digits>``: a hash, so a session id never appears in a
    thread id and two users' sessions never share a thread.
    """
    digest = hashlib.sha256(f"{gateway}\0{owner_pk}\0{session}".encode()).hexdigest()
    return f"mcp-{gateway}-{digest[:32]}"


#: ``threadId`` -> pk of the session threads this process used, so a session's
#: next call locks its thread without looking it up first (bounded: the oldest
#: is forgotten first).
_SESSION_THREADS: dict[str, int] = {}
_MAX_SESSION_THREADS: Final = 10_000


def gateway_thread_pk(
    *, gateway: str, owner: User, session: str, title: str
) -> tuple[int, str]:
    """Return ``(pk, threadId)`` of the thread of MCP session ``session`` of ``owner`` on ``gateway``.

    Creates the thread on the session's first call; safe under concurrent first
    calls (the unique ``thread_id`` decides). ``title`` is used only when the
    thread is created. Remembered per process: :func:`gateway_call_record` locks
    it by pk and says when it is gone (:func:`gateway_thread_forget`).
    """
    thread_id = gateway_thread_id(gateway=gateway, owner_pk=owner.pk, session=session)
    pk = _SESSION_THREADS.get(thread_id)
    if pk is not None:
        return pk, thread_id
    thread, _ = Thread.objects.get_or_create(
        thread_id=thread_id,
        defaults={"owner": owner, "agent": gateway, "title": title[:300]},
    )
    _SESSION_THREADS[thread_id] = thread.pk
    if len(_SESSION_THREADS) > _MAX_SESSION_THREADS:
        _SESSION_THREADS.pop(next(iter(_SESSION_THREADS)))
    return thread.pk, thread_id


def gateway_thread_forget(*, thread_pk: int) -> None:
    """Forget thread ``thread_pk`` (deleted): the session's next call looks it up again."""
    for key in [k for k, v in _SESSION_THREADS.items() if v == thread_pk]:
        _SESSION_THREADS.pop(key, None)


def gateway_call_record(
    *,
    thread_pk: int,
    thread_id: str,
    tool_call_id: str,
    tool: Tool,
    arguments: ValidatedArguments,
    tool_definition: dict[str, Any],
    metadata: dict[str, Any],
) -> GatewayCall:
    """Record an MCP client's call of ``tool`` as a run of thread ``thread_pk`` awaiting it.

    ``arguments`` were validated against ``tool`` by the caller; their canonical JSON
    is the call's argument text. ``tool_definition`` is the tool as advertised (AG-UI
    Tool JSON), kept as the run's input so the approval covers that schema.
    ``metadata`` goes on the call (shown to operators: the MCP request, the client).
    A ``tool_call_id`` the thread already holds records nothing and returns the kept
    call (``created=False``). Must run inside a transaction; takes the thread's lock.
    Raises ``Thread.DoesNotExist`` when thread ``thread_pk`` is gone or is no
    longer the thread ``thread_id`` it was remembered as. Implements DC-01, DC-04.
    """
    # Locked before the block: DoesNotExist leaving an atomic block without a
    # savepoint would doom the caller's transaction, and the caller retries in it.
    locked = thread_lock(thread_pk=thread_pk)
    if locked.thread_id != thread_id:
        raise Thread.DoesNotExist(f"thread {thread_pk!r} is not {thread_id!r}")
    with transaction.atomic(savepoint=False):
        kept = ToolCall.objects.filter(thread=locked, tool_call_id=tool_call_id).first()
        if kept is not None:
            return GatewayCall(call=kept, created=False)
        # A run reported rather than run, as an external agent's declared call is.
        run = run_create(thread=locked, recorded={"tools": [tool_definition]})
        record_events(
            run=run,
            events=[
                RunStartedEvent(thread_id=locked.thread_id, run_id=run.run_id),
                ToolCallStartEvent(tool_call_id=tool_call_id, tool_call_name=tool.name),
                ToolCallArgsEvent(
                    tool_call_id=tool_call_id, delta=arguments.canonical_json
                ),
                ToolCallEndEvent(tool_call_id=tool_call_id),
                RunFinishedEvent(thread_id=locked.thread_id, run_id=run.run_id),
            ],
        )
        call = ToolCall.objects.get(thread=locked, tool_call_id=tool_call_id)
        if metadata:
            call.metadata = {**(call.metadata or {}), **metadata}
            call.save(update_fields=["metadata"])
        return GatewayCall(call=call, created=True)
