"""REST API for the approval queue: list, inspect, approve, reject, respond, resolve.

Deciding goes through :func:`orchestration.pipeline.approval_decide`, the same step
(and the same ``approvals.decide_approvalrequest`` permission) as the admin
actions (STYLE.md 4). A request the user may not see answers 404; one they may
see but not decide answers 403. Implements SEC-02, DC-03, DC-05.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from typing import Any

from django.http import Http404, HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from approvals.exceptions import ApprovalAlreadyDecided, InvalidEditedArguments
from approvals.models import (
    RESPOND_MAX_CHARS,
    ApprovalGrant,
    ApprovalRequest,
    ToolExecution,
)
from approvals.selectors import approval_get, approval_list, grant_get, grant_list
from approvals.services import Decision, approval_undo
from approvals.services.claims import approval_claim, approval_release
from approvals.services.grants import grant_revoke
from approvals.services.snooze import (
    SNOOZE_MAX_SECONDS,
    SNOOZE_MIN_SECONDS,
    approval_snooze,
    approval_unsnooze,
)
from core.conf import countersign_settings
from core.types import logged_in
from orchestration.pipeline import approval_decide, execution_resolve
from threads.answers import compact_json
from web.api.threads import (
    OFFSET_PAGING,
    errors,
    limit_parameter,
    offset_page,
    offset_parameter,
)
from web.serializers.approvals import ApprovalOutputSerializer, GrantOutputSerializer
from web.serializers.threads import QueryFilterSerializer, StrictSerializer, results_of

#: Longest reason accepted, in characters.
MAX_REASON_CHARS = 2000
#: Largest ``older_than`` accepted: ten years, in seconds.
MAX_AGE_SECONDS = 10 * 365 * 24 * 3600


@extend_schema_field({"type": "object", "additionalProperties": {}, "deprecated": True})
class DeprecatedDictField(serializers.DictField):
    """A JSON object field marked ``deprecated`` in the OpenAPI schema."""


def visible_approval(
    request: Request, pk: int, *, prefetch: bool = True
) -> ApprovalRequest:
    """Return approval ``pk`` if the user may see it; raise 404 otherwise.

    ``prefetch=False`` for the views that decide it (:func:`approvals.selectors.approval_get`).
    """
    approval = approval_get(user=request.user, pk=pk, prefetch=prefetch)
    if approval is None:
        raise Http404(f"approval {pk!r} not found")
    return approval


def _edit_spelling(values: dict[str, Any]) -> str:
    """Return the key the client sent its edited arguments under (the current one wins)."""
    return "editedArguments" if "editedArguments" in values else "edited_arguments"


def _decide(
    request: Request,
    pk: int,
    *,
    serializer: type[serializers.Serializer],
    decision: Decision,
    arguments: Callable[[dict[str, Any]], dict[str, Any]],
) -> Response:
    """Decide approval ``pk`` from the request body; the body of every decision view.

    Loads the request (404 unless visible), validates the body with ``serializer``
    (400), calls :func:`orchestration.pipeline.approval_decide` with ``decision``
    and ``arguments(validated_data)``, and answers the decided request as
    :class:`ApprovalOutputSerializer`. Domain errors propagate to
    ``web.exception_handler`` (403, 409...); an :class:`InvalidEditedArguments`
    names the field the client spelled its edit with. Implements SEC-02, DC-03.
    """
    approval = visible_approval(request, pk, prefetch=False)
    data = serializer(data=request.data)
    data.is_valid(raise_exception=True)
    try:
        decided = approval_decide(
            approval=approval,
            decided_by=logged_in(request.user),
            decision=decision,
            **arguments(data.validated_data),
        )
    except InvalidEditedArguments as error:
        if decision == "approve":
            # Name the field as the client spelled it.
            error.field = _edit_spelling(data.validated_data)  # type: ignore[attr-defined]
        raise
    return Response(
        ApprovalOutputSerializer(decided, context={"request": request}).data
    )


def _approval_step(
    request: Request,
    pk: int,
    *,
    step: Callable[..., ApprovalRequest],
) -> Response:
    """Apply ``step(approval=..., user=...)`` to approval ``pk`` and answer the result.

    The body of the views that take no input (claim, release, undo): 404 unless
    the request is visible; the step's domain errors propagate to
    ``web.exception_handler``; the answer is :class:`ApprovalOutputSerializer`.
    """
    changed = step(approval=visible_approval(request, pk), user=logged_in(request.user))
    return Response(
        ApprovalOutputSerializer(changed, context={"request": request}).data
    )


class GrantInputSerializer(StrictSerializer):
    """A scoped grant made while approving: future calls within it need no one."""

    scope = serializers.ChoiceField(choices=ApprovalGrant.Scope.choices)
    exact = serializers.DictField(
        required=False,
        help_text='Arguments that must equal these values: {"order_id": "A-1"}.',
    )
    ranges = serializers.DictField(
        child=serializers.DictField(child=serializers.FloatField()),
        required=False,
        help_text='Numeric bounds (min, max, gt, lt): {"amount": {"max": 50}}.',
    )
    schema = serializers.DictField(
        required=False,
        help_text="A JSON Schema 2020-12 fragment the arguments must satisfy.",
    )
    expiresAt = serializers.DateTimeField(required=False)
    durationSeconds = serializers.FloatField(required=False, min_value=1)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "expiresAt" in attrs:
            attrs["expiresAt"] = attrs["expiresAt"].isoformat()
        return attrs


class ApprovalListApi(APIView):
    """``GET /api/approvals/``: pending first, then newest; filter by tool, thread, status, age."""

    class FilterSerializer(QueryFilterSerializer):
        paging = OFFSET_PAGING
        tool = serializers.CharField(required=False, max_length=200)
        thread = serializers.CharField(
            required=False, max_length=200, help_text="threadId"
        )
        status = serializers.ChoiceField(
            choices=ApprovalRequest.Status.choices, required=False
        )
        older_than = serializers.FloatField(
            required=False,
            min_value=0,
            max_value=MAX_AGE_SECONDS,
            help_text="Only requests made at least this many seconds ago.",
        )
        assigned = serializers.ChoiceField(
            choices=["me"],
            required=False,
            help_text="`me`: only pending requests routed to one of your groups "
            "(or to no group) or claimed by you, not claimed by someone else and "
            "not snoozed by you.",
        )

    OutputSerializer = ApprovalOutputSerializer

    @extend_schema(
        operation_id="approvals_list",
        parameters=[
            FilterSerializer,
            limit_parameter(),
            offset_parameter(),
        ],
        responses={
            200: results_of(
                "PaginatedApprovalList", ApprovalOutputSerializer, paginated="offset"
            ),
            **errors(400),
        },
    )
    def get(self, request: Request) -> Response:
        values = self.FilterSerializer.validated_query(request)
        approvals = approval_list(
            user=request.user,
            tool=values.get("tool"),
            thread_id=values.get("thread"),
            status=values.get("status"),
            older_than=values.get("older_than"),
            assigned_to_me=values.get("assigned") == "me",
        )
        return offset_page(
            approvals,
            request=request,
            view=self,
            serializer=self.OutputSerializer,
            context={"request": request},
        )


class ApprovalDetailApi(APIView):
    """``GET /api/approvals/<id>/``."""

    OutputSerializer = ApprovalOutputSerializer

    @extend_schema(
        operation_id="approvals_retrieve",
        responses={200: OutputSerializer, **errors(404)},
    )
    def get(self, request: Request, pk: int) -> Response:
        return Response(
            self.OutputSerializer(
                visible_approval(request, pk), context={"request": request}
            ).data
        )


class ApprovalApproveApi(APIView):
    """``POST /api/approvals/<id>/approve/``: approve, optionally with edited arguments.

    Edited arguments are validated against the tool's schema again (SEC-02); the
    call then runs with exactly the approved arguments.
    """

    class InputSerializer(StrictSerializer):
        editedArguments = serializers.DictField(
            required=False,
            help_text="Arguments to run instead of the proposed ones (validated "
            "against the tool's schema).",
        )
        edited_arguments = DeprecatedDictField(
            required=False,
            help_text="Deprecated spelling of `editedArguments`; still accepted. "
            "When both are sent, `editedArguments` is used.",
        )
        reason = serializers.CharField(
            required=False, allow_blank=True, max_length=MAX_REASON_CHARS, default=""
        )
        response = serializers.JSONField(
            required=False,
            help_text="For an interrupt or input request: the answer, validated "
            "against the request's `responseSchema` (IR-18).",
        )
        undo = serializers.BooleanField(
            required=False,
            default=False,
            help_text="Defer the execution by the server's DECISION_UNDO_SECONDS so "
            "that `POST .../undo/` can take the approval back until `undoUntil` "
            "(the operator UI sends true); false executes at once.",
        )
        grant = GrantInputSerializer(
            required=False,
            help_text="Also allow future calls of this tool within a constraint "
            '("always allow"); made with this approval.',
        )

    OutputSerializer = ApprovalOutputSerializer

    @extend_schema(
        operation_id="approvals_approve",
        request=InputSerializer,
        responses={200: OutputSerializer, **errors(400, 403, 404, 409)},
        description="403 `permission_denied` without the decide permission; 403 "
        "`not_authorized` when you may not approve it (the tool's own permission, "
        "its approver groups, four-eyes; the request stays pending; `GET` it for "
        "`authorization.reason` and `authorization.whoCan`); 409 `claimed` while "
        "another approver holds a claim.",
    )
    def post(self, request: Request, pk: int) -> Response:
        return _decide(
            request,
            pk,
            serializer=self.InputSerializer,
            decision="approve",
            arguments=lambda values: {
                "reason": values["reason"],
                "edited_arguments": values.get(_edit_spelling(values)),
                "response": values.get("response"),
                "undo_seconds": float(countersign_settings.DECISION_UNDO_SECONDS)
                if values["undo"]
                else 0.0,
                "grant": values.get("grant"),
            },
        )


class ApprovalRejectApi(APIView):
    """``POST /api/approvals/<id>/reject/``: reject with a reason the agent is told."""

    class InputSerializer(StrictSerializer):
        reason = serializers.CharField(max_length=MAX_REASON_CHARS)

    OutputSerializer = ApprovalOutputSerializer

    @extend_schema(
        operation_id="approvals_reject",
        request=InputSerializer,
        responses={200: OutputSerializer, **errors(400, 403, 404, 409)},
    )
    def post(self, request: Request, pk: int) -> Response:
        return _decide(
            request,
            pk,
            serializer=self.InputSerializer,
            decision="reject",
            arguments=lambda values: {"reason": values["reason"]},
        )


class ApprovalRespondApi(APIView):
    """``POST /api/approvals/<id>/respond/``: answer a held call with text instead of running it.

    The agent gets ``text`` as the call's result (one tool message
    ``{"status": "responded", "response": <text>, "by": <you>, "executed":
    false}``), the tool never runs and the run continues. Who may respond is who
    may reject; one response ends the request even when it needs N approvals.
    """

    class InputSerializer(StrictSerializer):
        text = serializers.CharField(
            max_length=RESPOND_MAX_CHARS,
            trim_whitespace=False,
            help_text="What the agent is told instead of the tool's result; not "
            f"blank, at most {RESPOND_MAX_CHARS} characters, kept as written.",
        )

    OutputSerializer = ApprovalOutputSerializer

    @extend_schema(
        operation_id="approvals_respond",
        request=InputSerializer,
        responses={200: OutputSerializer, **errors(400, 403, 404, 409)},
        description="400 `validation_error` for a missing, non-string, empty or "
        "over-long `text`, `invalid_text` for text that is only whitespace, "
        "`respond_not_supported` for an interrupt or input request (approve it "
        "with a `response`); 403 as for a rejection (the decide permission, "
        "approver groups, four-eyes); 409 `already_decided` when the request was "
        "decided or answered otherwise (the same text again by the same approver "
        "returns the request unchanged), `expired`, `claimed`.",
    )
    def post(self, request: Request, pk: int) -> Response:
        return _decide(
            request,
            pk,
            serializer=self.InputSerializer,
            decision="respond",
            arguments=lambda values: {"response": values["text"]},
        )


class ApprovalSnoozeApi(APIView):
    """``POST``/``DELETE /api/approvals/<id>/snooze/``: snooze a pending request for yourself, or bring it back.

    A snooze takes the request out of your own "I can decide" view (and
    ``?assigned=me``) until ``until``; it stays pending for everyone else, and
    expiry still applies. Snoozing again replaces the time.
    """

    class InputSerializer(StrictSerializer):
        seconds = serializers.FloatField(
            min_value=SNOOZE_MIN_SECONDS,
            max_value=SNOOZE_MAX_SECONDS,
            help_text="How long, in seconds: the queue offers 3600 (1 h), 14400 "
            "(4 h) and 86400 (24 h).",
        )

    class OutputSerializer(serializers.Serializer):
        approvalId = serializers.IntegerField(source="approval_id")
        until = serializers.DateTimeField()

    @extend_schema(
        operation_id="approvals_snooze",
        request=InputSerializer,
        responses={200: OutputSerializer, **errors(400, 404, 409)},
        description="400 for a missing or out-of-range `seconds`; 409 "
        "`already_decided` when the request is no longer pending.",
    )
    def post(self, request: Request, pk: int) -> Response:
        approval = visible_approval(request, pk, prefetch=False)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        snooze = approval_snooze(
            approval=approval,
            user=logged_in(request.user),
            seconds=data.validated_data["seconds"],
        )
        return Response(self.OutputSerializer(snooze).data)

    @extend_schema(
        operation_id="approvals_unsnooze",
        request=None,
        responses={204: None, **errors(404)},
    )
    def delete(self, request: Request, pk: int) -> Response:
        approval = visible_approval(request, pk, prefetch=False)
        approval_unsnooze(approval=approval, user=logged_in(request.user))
        return Response(status=204)


class ApprovalUndoApi(APIView):
    """``POST /api/approvals/<id>/undo/``: take back an approval before it executes.

    Only while ``undoUntil`` is in the future (the approval was made with
    ``undo: true``) and no worker has claimed the execution; the request is
    pending again. Under N of M it withdraws the deciding (N-th) approval only:
    the earlier approvals still count. 409 ``undo_too_late`` otherwise.
    """

    OutputSerializer = ApprovalOutputSerializer

    @extend_schema(
        operation_id="approvals_undo",
        request=None,
        responses={200: OutputSerializer, **errors(404, 409)},
    )
    def post(self, request: Request, pk: int) -> Response:
        return _approval_step(request, pk, step=approval_undo)


#: The columns of the decisions export, in order.
DECISION_CSV_COLUMNS = (
    "id",
    "tool",
    "toolCallId",
    "threadId",
    "threadTitle",
    "agent",
    "requester",
    "status",
    "decidedBy",
    "decidedAt",
    "reason",
    "edited",
    "proposedArguments",
    "approvedArguments",
    "executionState",
    "executionError",
    "response",
)


def _approved_arguments_cell(approval: ApprovalRequest) -> str:
    """Return the approved arguments as compact JSON, or ``""`` when none were approved.

    Only an approved request bound to a call has approved arguments: a rejected,
    expired or cancelled one approved nothing (an edit voted on under N of M was
    never approved), and an input request answers with a response, not arguments.
    """
    if approval.status != ApprovalRequest.Status.APPROVED:
        return ""
    if (
        approval.tool_call_id is None
        and approval.kind != ApprovalRequest.Kind.TOOL_CALL
    ):
        return ""
    return compact_json(approval.approved_arguments)


class ApprovalDecisionsCsvApi(APIView):
    """``GET /api/approvals/decisions.csv``: every decided request you may see, as CSV.

    One row per request (newest decision first) with ``DECISION_CSV_COLUMNS``;
    arguments as compact JSON; ``approvedArguments`` is empty unless the request
    was approved (``edited`` says whether an approver's edit exists, approved or
    not). Filters ``tool``, ``thread`` (threadId),
    ``status``. Implements DC-05.
    """

    class FilterSerializer(QueryFilterSerializer):
        tool = serializers.CharField(required=False, max_length=200)
        thread = serializers.CharField(required=False, max_length=200)
        status = serializers.ChoiceField(
            choices=[c for c in ApprovalRequest.Status.choices if c[0] != "pending"],
            required=False,
        )

    @extend_schema(
        operation_id="approvals_decisions_csv",
        parameters=[FilterSerializer],
        responses={
            (200, "text/csv"): OpenApiResponse(
                response=OpenApiTypes.STR,
                description="CSV with a header row: " + ", ".join(DECISION_CSV_COLUMNS),
            ),
            **errors(400),
        },
    )
    def get(self, request: Request) -> HttpResponse:
        values = self.FilterSerializer.validated_query(request)
        decided = (
            approval_list(
                user=request.user,
                tool=values.get("tool"),
                thread_id=values.get("thread"),
                status=values.get("status"),
            )
            .exclude(status=ApprovalRequest.Status.PENDING)
            .select_related("requested_by", "thread__owner")
            .order_by("-decided_at", "-id")
        )
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(DECISION_CSV_COLUMNS)
        outcomes = {
            call_pk: (state, error)
            for call_pk, state, error in ToolExecution.objects.filter(
                tool_call__in=[a.tool_call_id for a in decided if a.tool_call_id]
            ).values_list("tool_call_id", "state", "error")
        }
        for a in decided:
            requester = a.requested_by or a.thread.owner
            writer.writerow(
                [
                    a.pk,
                    a.tool_name,
                    getattr(a.tool_call, "tool_call_id", ""),
                    a.thread.thread_id,
                    a.thread.title,
                    a.run.agent,
                    getattr(requester, "username", ""),
                    a.status,
                    getattr(a.decided_by, "username", ""),
                    a.decided_at.isoformat() if a.decided_at else "",
                    a.reason,
                    "yes" if a.edited else "no",
                    compact_json(a.proposed_arguments),
                    _approved_arguments_cell(a),
                    *outcomes.get(a.tool_call_id or 0, ("", "")),
                    _csv_response(a),
                ]
            )
        response = HttpResponse(out.getvalue(), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = 'attachment; filename="decisions.csv"'
        return response


def _csv_response(approval: ApprovalRequest) -> str:
    """Return the ``response`` cell: an approver's text as written, other answers as JSON."""
    if approval.response is None:
        return ""
    if isinstance(approval.response, str):
        return approval.response
    return compact_json(approval.response)


class ApprovalResolveApi(APIView):
    """``POST /api/approvals/<id>/resolve/``: answer a call whose outcome is unknown.

    For an execution left ``outcome_unknown`` (a worker died mid-call on a
    non-idempotent tool): the operator says whether it happened and what the
    agent should be told.
    """

    class InputSerializer(StrictSerializer):
        succeeded = serializers.BooleanField(
            help_text="Whether the side effect happened."
        )
        content = serializers.CharField(
            max_length=10_000, help_text="The tool message the agent receives."
        )
        reason = serializers.CharField(max_length=MAX_REASON_CHARS)

    OutputSerializer = ApprovalOutputSerializer

    @extend_schema(
        operation_id="approvals_resolve",
        request=InputSerializer,
        responses={200: OutputSerializer, **errors(400, 404, 409)},
    )
    def post(self, request: Request, pk: int) -> Response:
        approval = visible_approval(request, pk)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        call = approval.call
        if call is None:
            raise ApprovalAlreadyDecided(
                f"approval {approval.pk!r} is an interrupt bound to no tool call; "
                "only a call whose execution outcome is unknown can be resolved"
            )
        execution_resolve(
            tool_call=call,
            resolved_by=logged_in(request.user),
            **data.validated_data,
        )
        return Response(
            self.OutputSerializer(approval, context={"request": request}).data
        )


class ApprovalClaimApi(APIView):
    """``POST /api/approvals/<id>/claim/``: take the request so no other approver works on it.

    Other approvers' decisions are refused (409) while the claim holds; it
    lapses after ``APPROVAL_CLAIM_SECONDS``. Claiming again renews it.
    """

    OutputSerializer = ApprovalOutputSerializer

    @extend_schema(
        operation_id="approvals_claim",
        request=None,
        responses={200: OutputSerializer, **errors(403, 404, 409)},
    )
    def post(self, request: Request, pk: int) -> Response:
        return _approval_step(request, pk, step=approval_claim)


class ApprovalReleaseApi(APIView):
    """``POST /api/approvals/<id>/release/``: give up your claim (staff may release anyone's)."""

    OutputSerializer = ApprovalOutputSerializer

    @extend_schema(
        operation_id="approvals_release",
        request=None,
        responses={200: OutputSerializer, **errors(404, 409)},
    )
    def post(self, request: Request, pk: int) -> Response:
        return _approval_step(request, pk, step=approval_release)


def visible_grant(request: Request, pk: int) -> ApprovalGrant:
    """Return grant ``pk`` if the user may see it; raise 404 otherwise."""
    grant = grant_get(user=request.user, pk=pk)
    if grant is None:
        raise Http404(f"grant {pk!r} not found")
    return grant


class GrantListApi(APIView):
    """``GET /api/grants/``: scoped grants ("always allow"), newest first."""

    class FilterSerializer(QueryFilterSerializer):
        paging = OFFSET_PAGING
        tool = serializers.CharField(required=False, max_length=200)
        active = serializers.BooleanField(
            required=False,
            allow_null=True,
            default=None,
            help_text="true: live grants only; false: revoked or expired ones.",
        )

    @extend_schema(
        operation_id="grants_list",
        parameters=[FilterSerializer, limit_parameter(), offset_parameter()],
        responses={
            200: results_of(
                "PaginatedGrantList", GrantOutputSerializer, paginated="offset"
            ),
            **errors(400),
        },
    )
    def get(self, request: Request) -> Response:
        values = self.FilterSerializer.validated_query(request)
        grants = grant_list(
            user=request.user, tool=values.get("tool"), active=values.get("active")
        )
        return offset_page(
            grants, request=request, view=self, serializer=GrantOutputSerializer
        )


class GrantDetailApi(APIView):
    """``GET /api/grants/<id>/``."""

    @extend_schema(
        operation_id="grants_retrieve",
        responses={200: GrantOutputSerializer, **errors(404)},
    )
    def get(self, request: Request, pk: int) -> Response:
        return Response(GrantOutputSerializer(visible_grant(request, pk)).data)


class GrantRevokeApi(APIView):
    """``POST /api/grants/<id>/revoke/``: revoke a grant; calls queued under it are refused at execution."""

    class InputSerializer(StrictSerializer):
        reason = serializers.CharField(
            required=False, allow_blank=True, max_length=MAX_REASON_CHARS, default=""
        )

    @extend_schema(
        operation_id="grants_revoke",
        request=InputSerializer,
        responses={200: GrantOutputSerializer, **errors(400, 403, 404, 409)},
    )
    def post(self, request: Request, pk: int) -> Response:
        grant = visible_grant(request, pk)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        revoked = grant_revoke(
            grant=grant,
            revoked_by=logged_in(request.user),
            reason=data.validated_data["reason"],
        )
        return Response(GrantOutputSerializer(revoked).data)
