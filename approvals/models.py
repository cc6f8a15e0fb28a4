"""The approval queue, tool executions and the append-only audit trail.

Invariants backed by the database: one open approval request per tool call (an
earlier request a re-approval superseded keeps its decision and points to its
successor); one execution record per tool call (claimed before any side effect, BC32); audit
entries chained by hash and never updated. Implements DC-03, DC-04, SEC-02.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import models
from django.db.models import Case, F, IntegerField, Value, When

from agentcore.arguments import canonical_sha256
from threads.models import Message, Run, Thread, ToolCall

if TYPE_CHECKING:
    from core.types import JSONValue

#: The permission an operator needs to decide, resolve or cancel tool calls.
DECIDE_PERMISSION = "approvals.decide_approvalrequest"
#: Release a claim another operator holds (:func:`approvals.services.claims.approval_release`).
RELEASE_ANY_CLAIM_PERMISSION = "approvals.release_any_claim"
#: Cancel the pending calls of a thread one does not own
#: (:func:`approvals.services.cancellation.thread_pending_calls_cancel`).
CANCEL_ANY_PENDING_PERMISSION = "approvals.cancel_any_pending"
#: Decide a request whatever group it is routed to (:mod:`approvals.governance`).
DECIDE_ANY_GROUP_PERMISSION = "approvals.decide_any_group"
#: Longest text an approver may answer a held call with instead of running it,
#: in characters (:func:`approvals.services.decisions.respond_text_check`).
RESPOND_MAX_CHARS = 10_000


def pending_first() -> Case:
    """Return the queue's first sort key: 0 for a pending request, 1 for any other.

    One expression for the list's ordering (:func:`approvals.selectors.approval_list`)
    and for the index that serves it: PostgreSQL uses an expression index only
    for the same expression.
    """
    return Case(
        When(status="pending", then=Value(0)),
        default=Value(1),
        output_field=IntegerField(),
    )


class ApprovalRequest(models.Model):
    """An operator's decision on one pending tool call, interrupt or input request.

    ``kind`` says where the request came from: ``tool_call`` (Countersign's policy
    held an application call), ``interrupt`` (a remote agent ended its run with an
    AG-UI interrupt, IR-18: ``tool_call`` is set when the interrupt names a call),
    ``input`` (an MCP server asked for more input mid-call). Requests other than
    ``tool_call`` carry the ``message`` to show and the ``response_schema`` (JSON
    Schema) the operator's ``response`` must satisfy.
    """

    class Kind(models.TextChoices):
        TOOL_CALL = "tool_call", "tool call"
        INTERRUPT = "interrupt", "interrupt"
        INPUT = "input", "input"

    class Status(models.TextChoices):
        PENDING = "pending", "pending"
        APPROVED = "approved", "approved"
        REJECTED = "rejected", "rejected"
        #: An approver answered the call with text instead of running it.
        RESPONDED = "responded", "answered instead"
        EXPIRED = "expired", "expired"
        CANCELLED = "cancelled", "cancelled"

    class Reapproval(models.TextChoices):
        NONE = "", "first request"
        ARGUMENTS_CHANGED = "arguments_changed", "arguments changed since approval"
        SCHEMA_CHANGED = "schema_changed", "schema changed since approval"

    #: The call this request decides; released (null) once a re-approval supersedes
    #: the request, so the call's one open request is always ``call.approval``.
    tool_call = models.OneToOneField(
        ToolCall,
        on_delete=models.CASCADE,
        related_name="approval",
        null=True,
        blank=True,
    )
    kind = models.CharField(max_length=20, choices=Kind.choices, default=Kind.TOOL_CALL)
    #: The AG-UI ``Interrupt.id`` this request answers (kind ``interrupt``).
    interrupt_id = models.CharField(max_length=200, blank=True, default="")
    #: What the agent or server asks, shown to the operator (kinds other than tool_call).
    message = models.TextField(blank=True, default="")
    #: The JSON Schema the operator's ``response`` must satisfy, or null.
    response_schema = models.JSONField(null=True, blank=True)
    #: The operator's answer, validated against ``response_schema`` before use; for
    #: a ``responded`` tool-call request, the text the agent got instead of a result.
    response = models.JSONField(null=True, blank=True)
    thread = models.ForeignKey(
        Thread, on_delete=models.CASCADE, related_name="approvals"
    )
    #: The request that replaced this (decided) one when the call changed after
    #: approval; the reverse accessor ``supersedes`` gives the earlier request.
    superseded_by = models.OneToOneField(
        "self",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="supersedes",
    )
    #: Why this request was made again after an approval (blank for a first request).
    reapproval = models.CharField(
        max_length=20, choices=Reapproval.choices, blank=True, default=""
    )
    #: How many approvals of this call came before this request (0 for the first).
    reapproval_count = models.PositiveSmallIntegerField(default=0)
    #: SHA-256 of the tool's input schema this request was made against; blank
    #: when it is the one the run advertised (``RunAgentInput.tools``).
    schema_hash = models.CharField(max_length=64, blank=True, default="")
    #: For a schema re-approval: the hash of the schema the earlier approval covered.
    previous_schema_hash = models.CharField(max_length=64, blank=True, default="")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="approvals")
    tool_name = models.CharField(max_length=200)
    is_destructive = models.BooleanField(default=False)
    status = models.CharField(
        max_length=20, choices=Status.choices, default=Status.PENDING
    )
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    requested_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    reason = models.TextField(blank=True, default="")
    #: The params of the arguments the model proposed, as validated when the call
    #: was dispatched (``agentcore.arguments.ValidatedArguments``); never overwritten.
    proposed_arguments = models.JSONField()
    #: The params of an approver's edit, validated when it was voted, or null.
    edited_arguments = models.JSONField(null=True, blank=True)
    schema_valid = models.BooleanField(default=True)
    schema_errors = models.TextField(blank=True, default="")
    #: When ``approval_expiring`` was sent for this request (once), or null.
    expiry_announced_at = models.DateTimeField(null=True, blank=True)
    # -- governance: routing, N of M, escalation, claims -------------------------
    #: The Django groups whose members may decide now (empty: anyone holding the
    #: decide permission); replaced by each escalation step.
    approver_groups = models.ManyToManyField("auth.Group", blank=True, related_name="+")
    #: Distinct approvals needed before the call runs (N of M; 1 = one approver).
    approvals_required = models.PositiveSmallIntegerField(default=1)
    #: Distinct rejections that reject the request (1: one rejection rejects).
    rejections_required = models.PositiveSmallIntegerField(default=1)
    requester_may_approve = models.BooleanField(default=False)
    #: The policy's escalation steps: ``[{"groups": [...], "after_seconds": n}]``.
    escalation = models.JSONField(default=list, blank=True)
    #: How many escalation steps were taken (0 = still with the first groups).
    escalation_step = models.PositiveSmallIntegerField(default=0)
    #: When the current step ends and the request moves on (null: no further step).
    step_deadline = models.DateTimeField(null=True, blank=True)
    risk_level = models.CharField(max_length=20, blank=True, default="")
    risk_reason = models.TextField(blank=True, default="")
    #: The W3C trace context (``traceparent``...) of the span that asked for this
    #: decision, so the decision and the execution link to it (core.tracing).
    trace_context = models.JSONField(default=dict, blank=True)
    #: Where the policy decision came from: tool, settings, admin, fail_closed.
    policy_source = models.CharField(max_length=20, blank=True, default="")
    claimed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    claimed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["requested_at", "id"]
        permissions = [
            ("decide_approvalrequest", "Can approve or reject tool calls"),
            ("release_any_claim", "Can release another operator's claim"),
            ("cancel_any_pending", "Can cancel pending calls on anyone's thread"),
            ("decide_any_group", "Can decide requests routed to any group"),
        ]
        indexes = [
            # GET /api/approvals/ (pending first, then newest): a page is read
            # from the index instead of sorting every visible request.
            models.Index(
                pending_first(),
                F("requested_at").desc(),
                F("id").desc(),
                name="approval_list_order",
            ),
            # The queue page's pending view, urgent first (and the expiry sweep,
            # on its first two columns) or oldest first; its decided view.
            models.Index(
                "status",
                "expires_at",
                F("is_destructive").desc(),
                "id",
                name="approval_queue_expires",
            ),
            models.Index(
                fields=["status", "requested_at", "id"], name="approval_queue_oldest"
            ),
            models.Index(
                F("decided_at").desc(), F("id").desc(), name="approval_queue_decided"
            ),
            models.Index(fields=["status", "step_deadline"]),
        ]
        constraints = [
            # One request per interrupt a run ended with (IR-18).
            models.UniqueConstraint(
                fields=["run", "interrupt_id"],
                condition=~models.Q(interrupt_id=""),
                name="uniq_approval_per_interrupt",
            )
        ]

    def __str__(self) -> str:
        return f"{self.tool_name} ({self.status})"

    @property
    def interrupt_id_or_none(self) -> str | None:
        """The remote agent's interrupt id, or ``None`` for a request that has none."""
        return self.interrupt_id or None

    @property
    def edited(self) -> bool:
        """Whether an operator changed the arguments before approving."""
        return self.edited_arguments is not None

    @property
    def approved_arguments(self) -> Any:
        """The arguments that were approved: the edited ones if any, else the proposed."""
        return self.edited_arguments if self.edited else self.proposed_arguments

    @property
    def approved_arguments_hash(self) -> str:
        """SHA-256 of the approved arguments for an approved tool-call request, else ``""``.

        Derived from the arguments the request holds, so it cannot disagree with
        them; the executor compares it with the execution's ``arguments_hash``,
        and the decision's audit entry keeps the value it had when decided.
        """
        if self.kind != self.Kind.TOOL_CALL or self.status != self.Status.APPROVED:
            return ""
        return canonical_sha256(self.approved_arguments)

    @property
    def arguments_mismatch(self) -> dict[str, Any] | None:
        """What the remote agent reported running, when it was not what was approved.

        ``{"approvalId", "approvedHash", "reportedHash", "reportedArguments"}`` as
        :func:`approvals.services.remote_outcomes.interrupt_arguments_check`
        recorded it on the call, else ``None`` (IR-18).
        """
        call = self.tool_call
        if call is None or self.kind != self.Kind.INTERRUPT:
            return None
        record = (call.metadata or {}).get("argumentsMismatch")
        return record if isinstance(record, dict) else None

    def call_execution(self) -> ToolExecution | None:
        """Return the execution record of the call this request decides, or ``None``.

        A list that loaded it with the call (``select_related("tool_call__execution")``,
        :func:`approvals.selectors.approval_list`) reads no row here; otherwise one
        query, never cached on the call: a decision made since is seen.
        """
        call = self.call
        if call is None:
            return None
        if self.tool_call_id == call.pk and _EXECUTION_REL.is_cached(call):
            cached = _EXECUTION_REL.get_cached_value(call)
            return cached if isinstance(cached, ToolExecution) else None
        return ToolExecution.objects.filter(tool_call=call).first()

    def call_result_content(self) -> JSONValue | None:
        """Return the content of the tool message answering the call, or ``None``.

        A list that annotated it (``call_result``, :func:`approvals.selectors.approval_list`)
        reads no row here; otherwise one query.
        """
        call = self.call
        if call is None:
            return None
        if self.tool_call_id == call.pk and hasattr(self, "call_result"):
            content: JSONValue | None = self.call_result
            return content
        result = Message.objects.filter(
            thread_id=self.thread_id,
            role=Message.Role.TOOL,
            tool_call_id=call.tool_call_id,
        ).first()
        return result.content if result is not None else None

    @property
    def call(self) -> ToolCall | None:
        """The call this request decides, following re-approvals for a superseded one."""
        request: ApprovalRequest | None = self
        while request is not None:
            if request.tool_call_id is not None:
                return request.tool_call
            request = request.superseded_by
        return None

    @property
    def previous(self) -> ApprovalRequest | None:
        """The earlier request this one superseded, or ``None`` for a first request."""
        return getattr(self, "supersedes", None)


class ApprovalSnooze(models.Model):
    """One approver's "not now" on a pending request: out of their own queue until ``until``.

    Personal: the request stays pending, in every other approver's queue and in
    this approver's "All pending" and "Snoozed" views; it expires as any other.
    One per (request, user), replaced by a new snooze; a snooze whose ``until``
    has passed is simply ignored (:func:`approvals.selectors.approval_queue`).
    """

    approval = models.ForeignKey(
        ApprovalRequest, on_delete=models.CASCADE, related_name="snoozes"
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    until = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["approval", "user"], name="uniq_snooze_per_approver"
            )
        ]
        indexes = [models.Index(fields=["user", "until"])]

    def __str__(self) -> str:
        return (
            f"approval {self.approval_id} snoozed by {self.user_id} until {self.until}"
        )


class ToolExecution(models.Model):
    """The execution record of one application tool call, claimed before the side effect.

    ``reserved`` is written and committed before the tool runs; ``succeeded`` or
    ``failed`` after it. A record found ``reserved`` by a later delivery means a
    worker died mid-execution: an idempotent tool is run again with the same
    idempotency key, any other becomes ``outcome_unknown`` for an operator.
    Implements DC-04, LP-07, BC32.
    """

    class State(models.TextChoices):
        QUEUED = "queued", "queued"
        RESERVED = "reserved", "running"
        SUCCEEDED = "succeeded", "succeeded"
        FAILED = "failed", "failed"
        OUTCOME_UNKNOWN = "outcome_unknown", "outcome unknown"
        RESOLVED = "resolved", "resolved by an operator"

    tool_call = models.OneToOneField(
        ToolCall, on_delete=models.CASCADE, related_name="execution"
    )
    state = models.CharField(max_length=20, choices=State.choices, default=State.QUEUED)
    #: ``approval`` (an operator approved), ``policy`` (the tool's policy is auto)
    #: or ``grant`` (a scoped grant allowed it, ``grant`` below).
    authorized_by = models.CharField(max_length=20)
    #: The scoped grant an ``authorized_by="grant"`` execution runs under; checked
    #: again at execution, so revoking it stops calls already queued.
    grant = models.ForeignKey(
        "ApprovalGrant",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="executions",
    )
    arguments = models.JSONField()
    arguments_hash = models.CharField(max_length=64)
    idempotency_key = models.CharField(max_length=300, unique=True)
    attempts = models.PositiveIntegerField(default=0)
    error = models.CharField(max_length=100, blank=True, default="")
    details = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    #: Not executed before this time: an approval decided in the operator UI can
    #: be undone until then (``approvals.services.decisions.approval_undo``); null
    #: for an immediate execution.
    not_before = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    #: Until when the reserving worker may still be running the tool; a delivery
    #: that finds the reservation before then waits instead of running it again.
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    #: Who holds the reservation of an external agent's call: the claimant its
    #: caller named (one replica); blank for a Countersign worker's.
    holder = models.CharField(max_length=200, blank=True, default="")
    #: SHA-256 of the outcome an external caller reported, so a retry of the same
    #: report is answered again and a different second one is refused.
    outcome_sha256 = models.CharField(max_length=64, blank=True, default="")

    def __str__(self) -> str:
        return f"{self.tool_call} {self.state}"


class AuditChainHead(models.Model):
    """A single row holding the chain's length and last hash; locked to append in order.

    ``mac`` is the HMAC of both under the key ``key_id``
    (``approvals.auditchain.head_digest``): deleting entries at the tail, or
    rewriting the head to hide it, is detected.
    """

    last_hash = models.CharField(max_length=64, default="0" * 64)
    length = models.BigIntegerField(default=0)
    key_id = models.CharField(max_length=64, blank=True, default="")
    mac = models.CharField(max_length=64, blank=True, default="")

    def __str__(self) -> str:
        return f"audit chain head {self.last_hash[:12]}"


class AuditEntry(models.Model):
    """An append-only audit record; ``hash`` covers the record and ``prev_hash``.

    ``hash`` is the HMAC-SHA256 under the key ``key_id`` (empty: a plain SHA-256,
    entries written before the chain was keyed); ``approvals.auditchain``.
    Changing or deleting any entry breaks the chain, which
    ``approvals.services.audit_verify`` detects.
    """

    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    actor_label = models.CharField(max_length=200, blank=True, default="")
    action = models.CharField(max_length=100)
    target_type = models.CharField(max_length=100)
    target_id = models.CharField(max_length=200)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField()
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64, unique=True)
    key_id = models.CharField(max_length=64, blank=True, default="")

    class Meta:
        ordering = ["id"]
        verbose_name_plural = "audit entries"

    def __str__(self) -> str:
        return f"{self.action} {self.target_type}:{self.target_id}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.pk is not None:
            raise ValueError(
                "audit entries are append-only; create a new entry instead"
            )
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> Any:
        raise ValueError("audit entries are append-only and cannot be deleted")

    def chain_fields(self) -> dict[str, Any]:
        """Return what the chain covers (``approvals.auditchain.CONTENT_FIELDS``)."""
        return {
            "id": self.pk,
            "actor": self.actor_label,
            "action": self.action,
            "target_type": self.target_type,
            "target_id": self.target_id,
            "before": self.before,
            "after": self.after,
            "created_at": self.created_at.isoformat(),
            "prev_hash": self.prev_hash,
            "hash": self.hash,
            "key_id": self.key_id,
        }


class JanitorSweep(models.Model):
    """One janitor sweep that recovered something (``orchestration.janitor.runs_reap``).

    ``counts`` maps each kind of recovery (``worker_lost``, ``dispatched``,
    ``runs_requeued``, ``executions_requeued``, ``leases_expired``) to how many
    items it handled; ``recovered`` lists them as ``{"kind", "run"|"toolCallId",
    "thread", "age_seconds"}``. Read-only in the admin ("Janitor sweeps"); kept
    ``JANITOR_SWEEP_RETENTION_SECONDS``. Sweeps that found nothing are not kept.
    """

    started_at = models.DateTimeField(db_index=True)
    duration_ms = models.PositiveIntegerField(default=0)
    total = models.PositiveIntegerField(default=0)
    counts = models.JSONField(default=dict)
    recovered = models.JSONField(default=list)

    class Meta:
        ordering = ["-started_at"]

    def __str__(self) -> str:
        return f"sweep {self.started_at:%Y-%m-%d %H:%M:%S}: {self.total} recovered"


class NotificationDelivery(models.Model):
    """One outbound notification of one event to one configured target, and how it went.

    Created after the event's transaction committed (``approvals.notifications``),
    one row per (request, event, target, group); a Celery task (or the embedded
    pool) sends it, retrying with backoff up to ``NOTIFY_MAX_ATTEMPTS``. ``status``
    moves only through :func:`approvals.transitions.delivery_transition`:
    ``queued`` → ``sending`` → ``delivered`` | ``retrying`` (→ ``sending``) |
    ``failed``. ``last_error`` says why the last attempt failed (no secrets). Read-only
    in the admin ("Notification deliveries"), so a broken target's failures show.
    """

    class Event(models.TextChoices):
        REQUESTED = "requested", "approval requested"
        EXPIRING = "expiring", "approval expiring"
        DECIDED = "decided", "approval decided"
        ESCALATED = "escalated", "approval escalated"
        #: A chat message rewritten after any change (chat targets only).
        UPDATED = "updated", "approval changed"
        EXECUTED = "executed", "approved call executed"
        FAILED = "failed", "approved call failed"
        EXPIRED = "expired", "approval expired"

    class Status(models.TextChoices):
        QUEUED = "queued", "queued"
        SENDING = "sending", "sending"
        RETRYING = "retrying", "waiting to retry"
        DELIVERED = "delivered", "delivered"
        FAILED = "failed", "failed"

    approval = models.ForeignKey(
        ApprovalRequest, on_delete=models.CASCADE, related_name="notifications"
    )
    event = models.CharField(max_length=20, choices=Event.choices)
    #: The target's ``name`` in ``COUNTERSIGN["NOTIFICATIONS"]``.
    target = models.CharField(max_length=100)
    #: ``email``, ``webhook`` or ``apprise``.
    kind = models.CharField(max_length=20)
    #: The group an ``escalated`` event names (blank for other events).
    group = models.CharField(max_length=150, blank=True, default="")
    status = models.CharField(
        max_length=20, choices=Status.choices, default=Status.QUEUED
    )
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "notification deliveries"
        constraints = [
            # An event is announced once per target; a chat message is rewritten
            # after every change, so "updated" rows repeat (one waits at a time).
            models.UniqueConstraint(
                fields=["approval", "event", "target", "group"],
                condition=~models.Q(event="updated"),
                name="uniq_notification_per_event_target",
            )
        ]
        indexes = [models.Index(fields=["status", "next_attempt_at"])]

    def __str__(self) -> str:
        return f"{self.event} -> {self.target} ({self.status})"


class ApprovalVote(models.Model):
    """One approver's approval or rejection of a request (four-eyes, N of M).

    ``arguments_hash`` is the SHA-256 of the validated arguments the approver
    approved (the request holds their params); an edit by a later approver
    resets (``reset_at``, ``reset_reason``) the approvals of the earlier arguments.
    One live vote per approver and request (database constraint). Implements SEC-02.
    """

    class Decision(models.TextChoices):
        APPROVE = "approve", "approve"
        REJECT = "reject", "reject"

    approval = models.ForeignKey(
        ApprovalRequest, on_delete=models.CASCADE, related_name="votes"
    )
    voter = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    decision = models.CharField(max_length=10, choices=Decision.choices)
    arguments_hash = models.CharField(max_length=64, blank=True, default="")
    reason = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    reset_at = models.DateTimeField(null=True, blank=True)
    reset_reason = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["approval", "voter"],
                condition=models.Q(reset_at__isnull=True),
                name="uniq_live_vote_per_approver",
            )
        ]

    def __str__(self) -> str:
        return f"{self.voter} {self.decision}s approval {self.approval_id}"


class ToolPolicy(models.Model):
    """A static policy for one tool, edited in the admin without code.

    Takes precedence over ``COUNTERSIGN_AGENTS[agent]["policies"]`` and the tool's
    own policy. ``agent`` blank applies to every agent; an agent-specific row wins
    over a blank one. ``groups`` and ``escalation`` use Django group names.
    """

    class Action(models.TextChoices):
        AUTO = "auto", "auto"
        REQUIRE_APPROVAL = "require_approval", "require approval"
        DENY = "deny", "deny"

    agent = models.CharField(max_length=200, blank=True, default="")
    tool_name = models.CharField(max_length=200)
    enabled = models.BooleanField(default=True)
    action = models.CharField(
        max_length=20, choices=Action.choices, default=Action.REQUIRE_APPROVAL
    )
    reason = models.TextField(
        blank=True, default="", help_text="For deny: what the model is told."
    )
    groups = models.ManyToManyField("auth.Group", blank=True, related_name="+")
    approvals_required = models.PositiveSmallIntegerField(default=1)
    rejections_required = models.PositiveSmallIntegerField(default=1)
    requester_may_approve = models.BooleanField(default=False)
    expiry_seconds = models.PositiveIntegerField(null=True, blank=True)
    escalation = models.JSONField(
        default=list,
        blank=True,
        help_text='[{"groups": ["leads"], "after_seconds": 3600}, ...]',
    )
    risk_level = models.CharField(max_length=20, blank=True, default="")
    risk_reason = models.TextField(blank=True, default="")

    class Meta:
        verbose_name_plural = "tool policies"
        constraints = [
            models.UniqueConstraint(
                fields=["agent", "tool_name"], name="uniq_tool_policy_per_agent"
            )
        ]

    def __str__(self) -> str:
        return f"{self.agent or '*'}:{self.tool_name} {self.action}"

    def declaration(self) -> dict[str, Any]:
        """Return this row as a policy declaration (see :mod:`agentcore.policy`)."""
        return {
            **self.declaration_without_groups(),
            "groups": sorted(g.name for g in self.groups.all()),
        }

    def declaration_without_groups(self) -> dict[str, Any]:
        """Return the row's declaration but ``groups`` (usable before the row is saved)."""
        declared: dict[str, Any] = {
            "action": self.action,
            "reason": self.reason,
            "approvals_required": self.approvals_required,
            "rejections_required": self.rejections_required,
            "requester_may_approve": self.requester_may_approve,
            "escalation": self.escalation or [],
            "risk_level": self.risk_level,
            "risk_reason": self.risk_reason,
        }
        if self.expiry_seconds:
            declared["expiry_seconds"] = self.expiry_seconds
        return declared


class ApprovalGrant(models.Model):
    """A scoped "always allow": future calls of one tool run without asking.

    Scope ``thread`` (this thread), ``user`` (the requesting user's threads) or
    ``agent`` (every thread of ``agent``); ``constraint`` is a JSON Schema the
    call's arguments must satisfy (exact values become ``const``, ranges
    ``minimum``/``maximum``); valid until ``expires_at`` unless revoked. Checked
    at policy time and again at execution. Implements SEC-02, LP-01.
    """

    class Scope(models.TextChoices):
        THREAD = "thread", "this thread"
        USER = "user", "this user"
        AGENT = "agent", "this agent"

    tool_name = models.CharField(max_length=200)
    agent = models.CharField(max_length=200)
    scope = models.CharField(max_length=10, choices=Scope.choices)
    thread = models.ForeignKey(
        Thread, on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="+",
    )
    #: The JSON Schema (2020-12) the arguments must satisfy.
    constraint = models.JSONField(default=dict)
    granted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    #: The request being approved when the grant was made.
    approval = models.ForeignKey(
        ApprovalRequest,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="grants",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    revoke_reason = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["tool_name", "agent", "revoked_at"])]

    def __str__(self) -> str:
        return f"grant {self.pk} {self.tool_name} ({self.scope})"


class ChatMessage(models.Model):
    """A chat message (Slack: channel and ``ts``) a chat target posted for a request.

    One per (request, target, channel), written once the post succeeded
    (:mod:`approvals.notifications.chat`): the request's channel, and an
    escalation group's own. Every later change of the request rewrites them, so
    people see its current state where they were told.
    """

    approval = models.ForeignKey(
        ApprovalRequest, on_delete=models.CASCADE, related_name="chat_messages"
    )
    #: The target's ``name`` in ``COUNTERSIGN["NOTIFICATIONS"]``.
    target = models.CharField(max_length=100)
    #: The chat surface: ``slack``.
    surface = models.CharField(max_length=20)
    channel = models.CharField(max_length=100)
    #: The surface's id of the message (Slack's ``ts``).
    message_id = models.CharField(max_length=100)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["approval", "target", "channel"],
                name="uniq_chat_message_per_channel",
            )
        ]

    def __str__(self) -> str:
        return f"{self.surface} {self.channel}/{self.message_id}"


class ChatUserLink(models.Model):
    """A chat user (Slack workspace and user id) linked by that person to their account.

    Made once, by the person, through a signed link a chat surface gives an
    unmapped user (``web.chat``); a user whose chat email is verified and equals
    one account's email needs none.
    """

    surface = models.CharField(max_length=20)
    #: The workspace (Slack's team id).
    workspace = models.CharField(max_length=100)
    #: The user's id in that workspace (Slack's ``U…`` id).
    external_id = models.CharField(max_length=100)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["surface", "workspace", "external_id"],
                name="uniq_chat_user_link",
            )
        ]

    def __str__(self) -> str:
        return f"{self.surface} {self.workspace}/{self.external_id} -> {self.user_id}"


class ChatRequestSeen(models.Model):
    """A signed chat request already taken, so a replay of it is refused.

    Kept for the signature's validity window (five minutes of clock skew, Slack's
    rule) and pruned as new requests arrive.
    """

    signature = models.CharField(max_length=200, unique=True)
    seen_at = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return f"{self.signature[:12]}… at {self.seen_at}"


#: ``ToolCall.execution``, the reverse side of :attr:`ToolExecution.tool_call`, whose
#: cache ``select_related("tool_call__execution")`` fills (a missing record as ``None``).
_EXECUTION_REL = ToolExecution._meta.get_field("tool_call").remote_field
