"""Threads, messages, runs, tool calls and the per-thread event log.

Every invariant in DESIGN.md that concerns these rows is a database constraint:
``toolCallId`` and ``messageId`` unique per thread, at most one tool message per
``toolCallId`` per thread, ``runId`` never reused on a thread, ``(thread, seq)``
unique, and at most one continuation run per run. Implements DC-01.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import models
from django.db.models import Exists, OuterRef, Q

if TYPE_CHECKING:
    from core.types import JSONValue


#: Who may read every thread, not only their own (:func:`threads.selectors.thread_visible_to`).
VIEW_ANY_THREAD_PERMISSION = "threads.view_any_thread"


def new_public_id() -> str:
    """Return a new opaque public id (a UUID4 string)."""
    return str(uuid.uuid4())


class Thread(models.Model):
    """A conversation between a user and an agent.

    ``thread_id`` is its global id, minted by Countersign (the REST API's, the
    operator UI's); ``client_thread_id`` is AG-UI's ``threadId`` as its owner's
    client sent it, unique per owner only, so two users' ``"t-1"`` are two threads
    and a client's id never collides with another user's or with a minted id. A
    thread not started by an AG-UI client has its global id as its client id.
    """

    thread_id = models.CharField(max_length=200, unique=True, default=new_public_id)
    client_thread_id = models.CharField(max_length=200, blank=True, default="")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.PROTECT,
        related_name="agent_threads",
        null=True,
        blank=True,
    )
    title = models.CharField(max_length=300, blank=True, default="")
    agent = models.CharField(max_length=100, default="demo")
    state = models.JSONField(default=dict, blank=True)
    #: The next event sequence number to allocate; read and bumped under a row lock.
    next_seq = models.PositiveBigIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    archived_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-updated_at"]
        #: Reading every user's threads (their messages, runs, events): an
        #: auditor's or a lead's right, never implied by ``is_staff``.
        permissions = [("view_any_thread", "Can read every user's threads")]
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "client_thread_id"],
                name="uniq_client_thread_id_per_owner",
            ),
        ]

    def __str__(self) -> str:
        return self.title or self.thread_id

    def save(self, *args: Any, **kwargs: Any) -> None:
        """Save; a thread created without a client id takes its global id as one."""
        if not self.client_thread_id:
            self.client_thread_id = self.thread_id
            update_fields = kwargs.get("update_fields")
            if update_fields is not None:
                kwargs["update_fields"] = {*update_fields, "client_thread_id"}
        super().save(*args, **kwargs)

    @property
    def agui_id(self) -> str:
        """The ``threadId`` its owner's AG-UI client knows it by (the wire's ``threadId``)."""
        return self.client_thread_id or self.thread_id

    def replace_state(self, state: JSONValue) -> None:
        """Replace the thread's AG-UI shared ``state`` (in memory and in the database).

        ``Thread.state`` is the agent's shared state (STATE_SNAPSHOT, STATE_DELTA),
        not a status; this is the one place it is written.
        """
        self.state = state
        Thread.objects.filter(pk=self.pk).update(state=state)


class Run(models.Model):
    """One AG-UI run on a thread; ``run_id`` is AG-UI's ``runId``."""

    class Status(models.TextChoices):
        QUEUED = "queued", "queued"
        RUNNING = "running", "running"
        AWAITING_TOOLS = "awaiting_tools", "waiting for tool results"
        FINISHED = "finished", "finished"
        ERROR = "error", "error"
        CANCELLED = "cancelled", "cancelled"

    class Outcome(models.TextChoices):
        SUCCESS = "success", "success"
        INTERRUPT = "interrupt", "interrupt"
        CANCELLED = "cancelled", "cancelled"

    class WireState(models.TextChoices):
        """How a run appears on the AG-UI wire (docs/agui.md "one run per request")."""

        #: Not managed: its own boundary events are its wire, as recorded.
        UNMANAGED = "", "not managed"
        #: A client-visible run whose RUN_STARTED Countersign wrote and whose
        #: RUN_FINISHED/RUN_ERROR is not written yet.
        OPEN = "open", "open"
        #: A client-visible run whose terminal event is written.
        CLOSED = "closed", "closed"
        #: An internal continuation streamed inside ``outer``'s wire run, whose own
        #: RUN_STARTED/RUN_FINISHED never reach a client.
        SEGMENT = "segment", "segment"

    ACTIVE_STATUSES = (Status.QUEUED, Status.RUNNING)

    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="runs")
    run_id = models.CharField(max_length=200, default=new_public_id)
    parent_run = models.ForeignKey(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    #: The run whose pending calls this run continues; unique, so a run gets at
    #: most one continuation.
    continues = models.OneToOneField(
        "self",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="continuation",
    )
    #: The run whose dead worker this run repeats (a retried turn, one retry per
    #: lost run), and which attempt of that turn it is (1: the first).
    retry_of = models.OneToOneField(
        "self",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="retry",
    )
    attempt = models.PositiveSmallIntegerField(default=1)
    #: How this run appears on the AG-UI wire (:class:`WireState`); moved only by
    #: :func:`threads.transitions.run_wire_transition`.
    wire_state = models.CharField(
        max_length=10,
        choices=WireState.choices,
        blank=True,
        default=WireState.UNMANAGED,
    )
    #: For a ``segment``: the client-visible run it continues on the wire.
    outer = models.ForeignKey(
        "self", on_delete=models.CASCADE, null=True, blank=True, related_name="segments"
    )
    agent = models.CharField(max_length=100, default="demo")
    status = models.CharField(
        max_length=20, choices=Status.choices, default=Status.QUEUED
    )
    outcome = models.CharField(
        max_length=20, choices=Outcome.choices, blank=True, default=""
    )
    pending_tool_call_ids = models.JSONField(default=list, blank=True)
    #: The AG-UI ``Interrupt`` objects (camelCase JSON) a remote agent ended this
    #: run with (``RUN_FINISHED.outcome.type == "interrupt"``), IR-18.
    interrupts = models.JSONField(default=list, blank=True)
    #: One AG-UI ``ResumeEntry`` per decided interrupt, sent once to the agent in
    #: the input of this run's continuation (IR-18).
    resume = models.JSONField(default=list, blank=True)
    input = models.JSONField(default=dict, blank=True)
    usage = models.JSONField(null=True, blank=True)
    error_code = models.CharField(max_length=100, blank=True, default="")
    error_message = models.TextField(blank=True, default="")
    cancel_requested = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["thread", "run_id"], name="uniq_run_id_per_thread"
            ),
        ]

    def __str__(self) -> str:
        return self.run_id

    @property
    def open_interrupt_ids(self) -> list[str]:
        """The ids of this run's interrupts that have no resume entry yet (IR-18)."""
        resumed = {entry.get("interruptId") for entry in self.resume or []}
        return [
            str(i.get("id"))
            for i in self.interrupts or []
            if i.get("id") not in resumed
        ]

    @property
    def managed(self) -> bool:
        """Whether Countersign writes this run's wire boundaries (see ``wire_state``)."""
        return bool(self.wire_state)

    @property
    def wire_run(self) -> Run:
        """The client-visible run whose stream carries this run's events."""
        return self.outer if self.outer_id is not None and self.outer else self


class Message(models.Model):
    """One AG-UI message; ``message_id`` is AG-UI's message ``id``."""

    class Role(models.TextChoices):
        USER = "user", "user"
        ASSISTANT = "assistant", "assistant"
        SYSTEM = "system", "system"
        DEVELOPER = "developer", "developer"
        TOOL = "tool", "tool"

    thread = models.ForeignKey(
        Thread, on_delete=models.CASCADE, related_name="messages"
    )
    message_id = models.CharField(max_length=200, default=new_public_id)
    role = models.CharField(max_length=20, choices=Role.choices)
    #: A string, or an ordered list of AG-UI content parts (TC-10).
    content = models.JSONField(default=str, blank=True)
    name = models.CharField(max_length=200, blank=True, default="")
    # NULL (not "") for messages that answer no call: the per-thread unique
    # constraint on (thread, tool_call_id) must ignore them.
    tool_call_id = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001
    error = models.TextField(null=True, blank=True)  # noqa: DJ001 - NULL: no error
    run = models.ForeignKey(
        Run, on_delete=models.SET_NULL, null=True, blank=True, related_name="messages"
    )
    position = models.PositiveBigIntegerField(default=0)
    metadata = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["position", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["thread", "message_id"], name="uniq_message_id_per_thread"
            ),
            models.UniqueConstraint(
                fields=["thread", "tool_call_id"],
                condition=Q(role="tool"),
                name="uniq_tool_message_per_call",
            ),
            models.CheckConstraint(
                condition=~Q(role="tool") | Q(tool_call_id__isnull=False),
                name="tool_message_has_tool_call_id",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.role} {self.message_id}"


#: The roles a thread stores messages of (AG-UI's others, such as activity and
#: reasoning, are not stored); a set, read once per input message (B9).
STORED_ROLES: frozenset[str] = frozenset(Message.Role.values)


class ToolCallQuerySet(models.QuerySet["ToolCall"]):
    """Queries on tool calls; :meth:`answered` is the one "is this call answered?" test."""

    def answered(self) -> ToolCallQuerySet:
        """Calls that have their one tool message (DC-04, FT-06)."""
        return self.filter(Exists(_answer_of_outer_call()))

    def unanswered(self) -> ToolCallQuerySet:
        """Calls that have no tool message yet."""
        return self.filter(~Exists(_answer_of_outer_call()))


def _answer_of_outer_call() -> models.QuerySet[Message]:
    return Message.objects.filter(
        thread_id=OuterRef("thread_id"),
        role=Message.Role.TOOL,
        tool_call_id=OuterRef("tool_call_id"),
    )


class ToolCall(models.Model):
    """One tool call; ``tool_call_id`` is AG-UI's ``toolCallId``.

    ``arguments_text`` is the argument text exactly as streamed (TC-03);
    ``arguments`` is its JSON parse, or ``None`` when it does not parse.
    """

    class State(models.TextChoices):
        STREAMING = "streaming", "streaming"
        COMPLETE = "complete", "complete"
        PENDING = "pending", "pending"
        AWAITING_APPROVAL = "awaiting_approval", "pending approval"
        APPROVED = "approved", "approved"
        EXECUTING = "executing", "running"
        SUCCEEDED = "succeeded", "done"
        FAILED = "failed", "failed"
        DECLINED = "declined", "declined"
        EXPIRED = "expired", "expired"
        CANCELLED = "cancelled", "cancelled"
        OUTCOME_UNKNOWN = "outcome_unknown", "outcome unknown"

    thread = models.ForeignKey(
        Thread, on_delete=models.CASCADE, related_name="tool_calls"
    )
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="tool_calls")
    tool_call_id = models.CharField(max_length=200)
    parent_message_id = models.CharField(max_length=200, blank=True, default="")
    name = models.CharField(max_length=200)
    arguments_text = models.TextField(blank=True, default="")
    arguments = models.JSONField(null=True, blank=True)
    state = models.CharField(
        max_length=30, choices=State.choices, default=State.STREAMING
    )
    position = models.PositiveIntegerField(default=0)
    metadata = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = ToolCallQuerySet.as_manager()

    class Meta:
        ordering = ["run_id", "position", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["thread", "tool_call_id"], name="uniq_tool_call_per_thread"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} {self.tool_call_id}"


class Event(models.Model):
    """One AG-UI event in a thread's log; ``seq`` is gapless per thread, from 1."""

    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="events")
    run = models.ForeignKey(
        Run, on_delete=models.CASCADE, null=True, blank=True, related_name="events"
    )
    seq = models.PositiveBigIntegerField()
    type = models.CharField(max_length=40)
    payload = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["thread_id", "seq"]
        constraints = [
            models.UniqueConstraint(
                fields=["thread", "seq"], name="uniq_event_seq_per_thread"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.seq} {self.type}"

    def as_wire(self) -> dict[str, Any]:
        """Return the event as sent to browsers: the AG-UI payload plus ``seq``."""
        return {"seq": self.seq, **self.payload}


class IdempotencyKey(models.Model):
    """A client's ``Idempotency-Key`` and the response it produced, per user.

    A retry with the same key and the same request gets the stored response and
    starts nothing; the same key with a different request is refused. Unique per
    (user, key).
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    key = models.CharField(max_length=255)
    #: SHA-256 of the operation and the canonical request body.
    request_hash = models.CharField(max_length=64)
    response_status = models.PositiveSmallIntegerField()
    response_body = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["user", "key"], name="uniq_idempotency_key_per_user"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user_id}:{self.key}"
