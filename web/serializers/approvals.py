"""Serializers of the approvals REST API; the output mirrors ``approval_snapshot``.

Implements SEC-02 (the proposed and the edited arguments are shown apart, and the
status is exactly what was decided) and DC-05.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from approvals.authorization import approval_authorization
from approvals.facts import approval_facts
from approvals.interrupt_ids import interrupt_id
from approvals.labels import approval_label
from approvals.models import ApprovalGrant, ApprovalRequest, ToolExecution
from approvals.selectors import RISK_LEVELS, approval_risk, approval_undo_until
from approvals.services.votes import approvals_progress


class ExecutionOutputSerializer(serializers.Serializer):
    """The execution record of an approved call."""

    state = serializers.ChoiceField(choices=ToolExecution.State.choices)
    authorizedBy = serializers.CharField(source="authorized_by")
    attempts = serializers.IntegerField()
    error = serializers.CharField(allow_blank=True)


class WhoCanSerializer(serializers.Serializer):
    """Who holds every permission authorizing a request needs."""

    users = serializers.ListField(child=serializers.CharField())
    groups = serializers.ListField(child=serializers.CharField())


class AuthorizationOutputSerializer(serializers.Serializer):
    """Whether the requesting user may authorize the request; if not, why and who can."""

    canAuthorize = serializers.BooleanField()
    canReject = serializers.BooleanField()
    requiredPermissions = serializers.ListField(
        child=serializers.CharField(),
        help_text="The decide permission and the tool's own permission, if any.",
    )
    missingPermissions = serializers.ListField(child=serializers.CharField())
    refusals = serializers.ListField(
        child=serializers.CharField(),
        help_text="Governance rules keeping the user out: not in the approver "
        "groups, the requester (four-eyes).",
    )
    claimedBy = serializers.CharField(
        allow_null=True, help_text="Who else holds a live claim, if anyone."
    )
    reason = serializers.CharField(
        allow_blank=True,
        help_text="Why the user may not authorize it (empty if they may).",
    )
    whoCan = WhoCanSerializer(
        help_text="Active users and groups holding them all who pass the "
        "governance rules."
    )


class RiskOutputSerializer(serializers.Serializer):
    """The request's risk level and why (destructive tool, policy threshold)."""

    level = serializers.ChoiceField(
        choices=list(RISK_LEVELS),
        help_text="The higher of the computed level and the policy's declared one.",
    )
    reasons = serializers.ListField(child=serializers.CharField())


def _request_user(serializer: serializers.Serializer) -> Any:
    request = serializer.context.get("request")
    return getattr(request, "user", None)


class ApprovalsProgressSerializer(serializers.Serializer):
    """N of M: how many distinct approvals the call needs, which are given, which an edit reset."""

    # The key is "required"; DRF pops declared fields off the class (see "label").
    required = serializers.IntegerField()  # type: ignore[assignment]
    given = serializers.IntegerField()
    by = serializers.ListField(child=serializers.CharField())
    rejections = serializers.ListField(child=serializers.DictField())
    rejectionsRequired = serializers.IntegerField()
    reset = serializers.ListField(
        child=serializers.DictField(),
        help_text="Approvals an edit by a later approver reset: {by, reason, at}.",
    )


class ApprovalOutputSerializer(serializers.Serializer):
    """An approval request: what was proposed, what was decided, by whom and why.

    ``canAuthorize`` / ``authorization`` are for the user making the request
    (the serializer's ``request`` context); ``undoUntil`` is set while an
    approval's execution waits in its undo window.
    """

    id = serializers.IntegerField()
    toolCallId = serializers.CharField(
        source="call.tool_call_id", allow_null=True, default=None
    )
    kind = serializers.ChoiceField(choices=ApprovalRequest.Kind.choices)
    interruptId = serializers.SerializerMethodField(
        help_text="The AG-UI interrupt id an AG-UI client sees for this request "
        "(`cs-approval-<id>`) and answers in `RunAgentInput.resume[].interruptId`.",
    )
    remoteInterruptId = serializers.CharField(
        source="interrupt_id_or_none",
        allow_null=True,
        help_text="The remote agent's own interrupt id (kind 'interrupt'); it never "
        "reaches AG-UI clients, and the agent gets its decision under it.",
    )
    message = serializers.CharField(
        allow_blank=True, help_text="What the agent or server asks (not tool_call)."
    )
    responseSchema = serializers.JSONField(
        source="response_schema",
        allow_null=True,
        help_text="JSON Schema of the answer to send as `response` on approve.",
    )
    response = serializers.JSONField(allow_null=True)
    argumentsMismatch = serializers.JSONField(
        source="arguments_mismatch",
        allow_null=True,
        help_text="Set when the remote agent reported running its approved call "
        "with other arguments: {approvalId, approvedHash, reportedHash, "
        "reportedArguments}.",
    )
    threadId = serializers.CharField(source="thread.thread_id")
    runId = serializers.CharField(
        source="run.wire_run.run_id",
        help_text="The client-visible run the request belongs to (the runId its "
        "AG-UI client saw).",
    )
    tool = serializers.CharField(source="tool_name")
    # The response key is "label"; DRF's metaclass pops declared fields off the
    # class, so Field.label (set per instance) is not shadowed at run time.
    label = serializers.SerializerMethodField()  # type: ignore[assignment]
    status = serializers.ChoiceField(choices=ApprovalRequest.Status.choices)
    isDestructive = serializers.BooleanField(source="is_destructive")
    proposedArguments = serializers.DictField(source="proposed_arguments")
    editedArguments = serializers.DictField(source="edited_arguments", allow_null=True)
    schemaValid = serializers.BooleanField(source="schema_valid")
    schemaErrors = serializers.CharField(source="schema_errors", allow_blank=True)
    requestedAt = serializers.DateTimeField(source="requested_at")
    expiresAt = serializers.DateTimeField(source="expires_at")
    decidedBy = serializers.CharField(
        source="decided_by.username", allow_null=True, default=None
    )
    decidedAt = serializers.DateTimeField(source="decided_at", allow_null=True)
    reason = serializers.CharField(allow_blank=True)
    reapproval = serializers.ChoiceField(
        choices=ApprovalRequest.Reapproval.choices,
        allow_blank=True,
        help_text="Why the call was sent back to an operator after an approval: "
        "`arguments_changed`, `schema_changed`, or empty for a first request.",
    )
    supersedes = serializers.IntegerField(
        source="previous.pk",
        allow_null=True,
        default=None,
        help_text="The id of the earlier, approved request this one replaces.",
    )
    supersededBy = serializers.IntegerField(
        source="superseded_by_id",
        allow_null=True,
        help_text="The id of the request that replaced this one after a change.",
    )
    previousArguments = serializers.SerializerMethodField()
    schemaHash = serializers.CharField(
        source="schema_hash",
        allow_blank=True,
        help_text="SHA-256 of the input schema a re-approval was made against.",
    )
    previousSchemaHash = serializers.CharField(
        source="previous_schema_hash",
        allow_blank=True,
        help_text="SHA-256 of the input schema the earlier approval covered.",
    )
    execution = serializers.SerializerMethodField()
    approvals = serializers.SerializerMethodField()
    approverGroups = serializers.SerializerMethodField()
    requesterMayApprove = serializers.BooleanField(source="requester_may_approve")
    escalation = serializers.ListField(
        child=serializers.DictField(),
        help_text="The policy's escalation steps: {groups, after_seconds}.",
    )
    escalationStep = serializers.IntegerField(source="escalation_step")
    stepDeadline = serializers.DateTimeField(source="step_deadline", allow_null=True)
    policySource = serializers.CharField(
        source="policy_source",
        allow_blank=True,
        help_text="Where the policy came from: tool, settings, admin, fail_closed.",
    )
    claimedBy = serializers.CharField(
        source="claimed_by.username", allow_null=True, default=None
    )
    claimedAt = serializers.DateTimeField(source="claimed_at", allow_null=True)

    canAuthorize = serializers.SerializerMethodField(
        help_text="Whether you may approve it: the decide permission and the tool's "
        "own permission, its approver groups, four-eyes and claims (SEC-02, DC-03)."
    )
    authorization = serializers.SerializerMethodField()
    risk = serializers.SerializerMethodField()
    undoUntil = serializers.SerializerMethodField(
        help_text="Until when `POST .../undo/` can return an approval to pending "
        "(its execution waits until then); null otherwise."
    )
    facts = serializers.SerializerMethodField(
        help_text="What every surface shows, computed once (approvals.facts): "
        "phase, standing, headline, votes {given, required, remaining, voters, "
        "waitingGroups, rejections, text}, arguments {proposed, approved, edited, "
        "editedBy, diff}, decidedBy, decidedAt, undoUntil, execution, and viewer "
        "{canApprove, canReject, hasVoted, whyNot, whoCan} for you."
    )

    def _authorization(self, approval: ApprovalRequest) -> dict[str, Any]:
        cache: dict[int, dict[str, Any]] = self.context.get("_authorization") or {}
        self.context["_authorization"] = cache  # type: ignore[index]
        if approval.pk not in cache:
            cache[approval.pk] = approval_authorization(
                approval, _request_user(self)
            ).as_json()
        return cache[approval.pk]

    @extend_schema_field(serializers.BooleanField())
    def get_canAuthorize(self, approval: ApprovalRequest) -> bool:
        return bool(self._authorization(approval)["canAuthorize"])

    @extend_schema_field(AuthorizationOutputSerializer)
    def get_authorization(self, approval: ApprovalRequest) -> dict[str, Any]:
        return self._authorization(approval)

    @extend_schema_field(RiskOutputSerializer)
    def get_risk(self, approval: ApprovalRequest) -> dict[str, Any]:
        return approval_risk(approval)

    @extend_schema_field(serializers.DateTimeField(allow_null=True))
    def get_undoUntil(self, approval: ApprovalRequest) -> str | None:
        return approval_undo_until(approval)

    @extend_schema_field(serializers.DictField())
    def get_facts(self, approval: ApprovalRequest) -> dict[str, Any]:
        return approval_facts(approval, _request_user(self))

    @extend_schema_field(serializers.CharField())
    def get_interruptId(self, approval: ApprovalRequest) -> str:
        """Return ``cs-approval-<id>``, the one spelling of this request (IR-02)."""
        return interrupt_id(approval)

    @extend_schema_field(ApprovalsProgressSerializer)
    def get_approvals(self, approval: ApprovalRequest) -> dict[str, Any]:
        return approvals_progress(approval)

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_approverGroups(self, approval: ApprovalRequest) -> list[str]:
        return sorted(g.name for g in approval.approver_groups.all())

    def get_label(self, approval: ApprovalRequest) -> str:
        """Return the tool's label for the call (for MCP tools: server, tool, claims)."""
        return approval_label(approval)

    @extend_schema_field(
        serializers.DictField(
            allow_null=True,
            help_text="The arguments the earlier request approved, for comparison.",
        )
    )
    def get_previousArguments(self, approval: ApprovalRequest) -> Any:
        previous = approval.previous
        return previous.approved_arguments if previous is not None else None

    @extend_schema_field(ExecutionOutputSerializer(allow_null=True))
    def get_execution(self, approval: ApprovalRequest) -> dict[str, Any] | None:
        execution = approval.call_execution()
        return (
            ExecutionOutputSerializer(execution).data if execution is not None else None
        )


class GrantOutputSerializer(serializers.Serializer):
    """A scoped grant ("always allow") and whether it is still live."""

    id = serializers.IntegerField()
    tool = serializers.CharField(source="tool_name")
    agent = serializers.CharField()
    scope = serializers.ChoiceField(choices=ApprovalGrant.Scope.choices)
    threadId = serializers.CharField(
        source="thread.thread_id", allow_null=True, default=None
    )
    user = serializers.CharField(source="user.username", allow_null=True, default=None)
    constraint = serializers.DictField(
        help_text="JSON Schema the arguments must satisfy."
    )
    grantedBy = serializers.CharField(source="granted_by.username")
    approvalId = serializers.IntegerField(source="approval_id", allow_null=True)
    createdAt = serializers.DateTimeField(source="created_at")
    expiresAt = serializers.DateTimeField(source="expires_at")
    revokedAt = serializers.DateTimeField(source="revoked_at", allow_null=True)
    revokedBy = serializers.CharField(
        source="revoked_by.username", allow_null=True, default=None
    )
    revokeReason = serializers.CharField(source="revoke_reason", allow_blank=True)
