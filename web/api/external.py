"""The approval API for agents that live elsewhere (docs/integrations.md).

An external agent (``"provider": "external"`` in ``COUNTERSIGN_AGENTS``) declares
each tool call it intends to make, waits for the decision (``?wait=`` long-poll,
an SSE stream, or both), claims the approved call before running it, and reports
the outcome once. Each view is a shell (STYLE.md 3): it parses, calls one step of
:mod:`orchestration.external` or one selector, and serializes
(:func:`approvals.selectors.external_call_status`). The waiting views are async
(a long-poll must not hold the server's one thread for sync views) and answer
through the same DRF views once the state is decided or the wait is over.
Implements DC-05, SEC-01, SEC-02, LP-05, BC32.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from asgiref.sync import sync_to_async
from django.http import (
    Http404,
    HttpRequest,
    HttpResponseBase,
    StreamingHttpResponse,
)
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from approvals.selectors import (
    EXTERNAL_DECIDED_STATUSES,
    EXTERNAL_FINAL_STATUSES,
    external_call_get,
    external_call_status,
)
from core.types import logged_in
from orchestration.external import (
    MAX_RESULT_BYTES,
    external_call_claim,
    external_call_declare,
    external_outcome_report,
)
from threads.models import ToolCall
from web.agui import _authenticate, error_response
from web.api.threads import errors
from web.serializers.threads import StrictSerializer
from web.sse import KEEPALIVE, json_sse_frame, state_follow

#: Longest long-poll, in seconds (``?wait=``).
MAX_WAIT_SECONDS = 60.0
#: Longest claim lease, in seconds; a caller renews a longer run's claim.
MAX_LEASE_SECONDS = 3600.0
#: Longest summary or reason text, in characters.
MAX_TEXT_CHARS = 4000


class ExternalCallOutputSerializer(serializers.Serializer[dict[str, Any]]):
    """A declared call's state (:func:`approvals.selectors.external_call_status`)."""

    toolCallId = serializers.CharField()
    threadId = serializers.CharField()
    runId = serializers.CharField()
    agent = serializers.CharField()
    tool = serializers.CharField()
    status = serializers.ChoiceField(
        choices=sorted(EXTERNAL_DECIDED_STATUSES | {"pending"}),
        help_text="pending: waiting for a person; approved: claim it, then run it; "
        "claimed; succeeded/failed: the outcome was reported; rejected; responded "
        "(an approver answered it with text: do not run it, use decision.response "
        "as its result); denied (by policy); refused (may not run); expired; "
        "cancelled; outcome_unknown (a claim lapsed without an outcome: an "
        "operator resolves it).",
    )
    approvalId = serializers.IntegerField(allow_null=True)
    expiresAt = serializers.DateTimeField(allow_null=True)
    decision = serializers.JSONField(
        allow_null=True,
        help_text="null until decided, then {approved, arguments (the ones to "
        "run, an approver's edit included), argumentsHash, edited, authorizedBy, "
        "reason, response (an approver's text when status is responded, else "
        "null), decidedBy, decidedAt}",
    )
    claim = serializers.JSONField(
        allow_null=True, help_text="{holder, leaseExpiresAt, notBefore}"
    )
    outcome = serializers.JSONField(
        allow_null=True, help_text="{content, error}: the call's tool message"
    )


def _owned_call(request: Request, tool_call_id: str) -> ToolCall:
    """Return the declared call for the token that declared it: 404 if unseen, 403 if another's."""
    call = external_call_get(user=request.user, tool_call_id=tool_call_id)
    if call is None:
        raise Http404(f"tool call {tool_call_id!r} not found")
    if call.thread.owner_id != request.user.pk:
        raise PermissionDenied(
            f"tool call {tool_call_id!r} was declared with another token; only "
            "that token may claim it or report its outcome"
        )
    return call


class ExternalCallDeclareApi(APIView):
    """``POST /api/external/tool-calls/``: declare a call, get the decision or a pending request."""

    class InputSerializer(StrictSerializer):
        agent = serializers.CharField(
            max_length=100, help_text='An agent with "provider": "external".'
        )
        tool = serializers.CharField(max_length=64, help_text="The tool's name.")
        arguments = serializers.JSONField(
            help_text="The JSON object the agent intends to call the tool with."
        )
        inputSchema = serializers.JSONField(
            required=False,
            help_text="The tool's JSON Schema (root type object); the arguments "
            "and an approver's edits are validated against it.",
        )
        description = serializers.CharField(
            required=False, max_length=MAX_TEXT_CHARS, allow_blank=True
        )
        summary = serializers.CharField(
            required=False,
            max_length=MAX_TEXT_CHARS,
            allow_blank=True,
            help_text="A sentence for the approver: what the call will do and why.",
        )
        annotations = serializers.DictField(
            required=False,
            help_text="Risk hints (MCP's readOnlyHint, destructiveHint...); shown "
            "to approvers, never lowering the configured policy.",
        )
        conversationId = serializers.CharField(
            required=False,
            max_length=200,
            allow_blank=True,
            help_text="The caller's conversation: its calls share one thread.",
        )
        idempotencyKey = serializers.CharField(
            required=False,
            max_length=255,
            help_text="Declaring again with the same key and body returns the same "
            "call; another body is refused.",
        )
        expiresAt = serializers.DateTimeField(
            required=False,
            help_text="Stop waiting for a person at this time (never later than "
            "the policy's expiry).",
        )
        metadata = serializers.DictField(required=False)

        def validate_conversationId(self, value: str) -> str:
            if (
                value
                and not value.replace("-", "")
                .replace("_", "")
                .replace(".", "")
                .replace(":", "")
                .isalnum()
            ):
                raise serializers.ValidationError(
                    "use letters, digits and - _ . : only (it appears in URLs)"
                )
            return value

        def validate_expiresAt(self, value: Any) -> Any:
            if value <= timezone.now():
                raise serializers.ValidationError(
                    "is in the past; send a time in the future, or leave it out"
                )
            return value

    OutputSerializer = ExternalCallOutputSerializer

    @extend_schema(
        operation_id="external_tool_calls_create",
        request=InputSerializer,
        responses={
            201: OutputSerializer,
            200: OpenApiResponse(
                OutputSerializer, description="The same idempotencyKey and body again."
            ),
            **errors(400, 401, 403),
        },
    )
    def post(self, request: Request) -> Response:
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        tool: dict[str, Any] = {"name": v["tool"]}
        if v.get("description"):
            tool["description"] = v["description"]
        if "inputSchema" in v:
            tool["parameters"] = v["inputSchema"]
        if v.get("annotations"):
            tool["annotations"] = v["annotations"]
        declared = external_call_declare(
            user=logged_in(request.user),
            agent=v["agent"],
            tool=tool,
            arguments=v["arguments"],
            summary=v.get("summary", ""),
            annotations=v.get("annotations"),
            conversation_id=v.get("conversationId", ""),
            idempotency_key=v.get("idempotencyKey", ""),
            expires_at=v.get("expiresAt"),
            metadata=v.get("metadata"),
        )
        return Response(
            self.OutputSerializer(external_call_status(declared.call)).data,
            status=status.HTTP_201_CREATED if declared.created else status.HTTP_200_OK,
        )


class ExternalCallDetailApi(APIView):
    """``GET /api/external/tool-calls/<toolCallId>/?wait=<s>``: the call's state, long-polled."""

    OutputSerializer = ExternalCallOutputSerializer

    @extend_schema(
        operation_id="external_tool_calls_retrieve",
        parameters=[
            OpenApiParameter(
                "wait",
                OpenApiTypes.NUMBER,
                description="Seconds (at most 60) to wait for a decision or an "
                "outcome before answering; 0 (the default) answers at once.",
            )
        ],
        responses={200: OutputSerializer, **errors(400, 401, 403, 404)},
    )
    def get(self, request: Request, tool_call_id: str) -> Response:
        call = external_call_get(user=request.user, tool_call_id=tool_call_id)
        if call is None:
            raise Http404(f"tool call {tool_call_id!r} not found")
        return Response(self.OutputSerializer(external_call_status(call)).data)


class ExternalCallClaimApi(APIView):
    """``POST /api/external/tool-calls/<toolCallId>/claim/``: claim (or renew) before running."""

    class InputSerializer(StrictSerializer):
        holder = serializers.CharField(
            max_length=200,
            help_text="Who runs the call (one replica: its host and process, say).",
        )
        leaseSeconds = serializers.FloatField(
            required=False,
            min_value=1,
            max_value=MAX_LEASE_SECONDS,
            default=60.0,
            help_text="How long the claim holds without a renewal or an outcome.",
        )

    OutputSerializer = ExternalCallOutputSerializer

    @extend_schema(
        operation_id="external_tool_calls_claim",
        request=InputSerializer,
        responses={200: OutputSerializer, **errors(400, 401, 403, 404, 409)},
    )
    def post(self, request: Request, tool_call_id: str) -> Response:
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        call = _owned_call(request, tool_call_id)
        state = external_call_claim(
            call=call,
            holder=data.validated_data["holder"],
            lease_seconds=data.validated_data["leaseSeconds"],
        )
        return Response(self.OutputSerializer(state).data)


class ExternalCallOutcomeApi(APIView):
    """``POST /api/external/tool-calls/<toolCallId>/outcome/``: report what the call did, once."""

    class InputSerializer(StrictSerializer):
        holder = serializers.CharField(max_length=200)
        result = serializers.JSONField(
            required=False,
            allow_null=True,
            help_text=f"What the tool returned (at most {MAX_RESULT_BYTES} bytes of "
            "JSON); a string becomes the tool message as it is.",
        )
        error = serializers.CharField(
            required=False,
            max_length=100,
            allow_null=True,
            help_text="A short failure code when the call failed; omit on success.",
        )

    OutputSerializer = ExternalCallOutputSerializer

    @extend_schema(
        operation_id="external_tool_calls_outcome",
        request=InputSerializer,
        responses={200: OutputSerializer, **errors(400, 401, 403, 404, 409)},
    )
    def post(self, request: Request, tool_call_id: str) -> Response:
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        call = _owned_call(request, tool_call_id)
        external_outcome_report(
            call=call,
            holder=data.validated_data["holder"],
            result=data.validated_data.get("result"),
            error=data.validated_data.get("error") or None,
        )
        return Response(self.OutputSerializer(external_call_status(call)).data)


class ExternalCallEventsApi(APIView):
    """``GET /api/external/tool-calls/<toolCallId>/events/``: the call's state as SSE.

    Documents :func:`external_call_events`, which serves it.
    """

    @extend_schema(
        operation_id="external_tool_calls_events",
        description="Server-Sent Events: `event: state`, `id: <n>`, `data:` the "
        "call's state JSON (as the retrieve operation answers), now and at each "
        "change; the stream ends after a final state.",
        responses={
            (200, "text/event-stream"): OpenApiResponse(
                OpenApiTypes.STR, description="The call's states, as SSE frames."
            ),
            **errors(401, 403, 404),
        },
    )
    def get(self, request: Request, tool_call_id: str) -> Response:
        raise NotImplementedError("served by external_call_events")  # pragma: no cover


# -- waiting -------------------------------------------------------------------------

_detail_view = csrf_exempt(ExternalCallDetailApi.as_view())


def _wait_seconds(request: HttpRequest) -> float | str:
    """Return ``?wait=`` in seconds (0 when absent), or the sentence refusing it."""
    raw = request.GET.get("wait", "")
    if raw == "":
        return 0.0
    try:
        wait = float(raw)
    except ValueError:
        return f"wait must be a number of seconds, got {raw!r}"
    if not 0 <= wait <= MAX_WAIT_SECONDS:
        return f"wait must be between 0 and {MAX_WAIT_SECONDS:g} seconds, got {raw!r}"
    return wait


async def _visible(request: HttpRequest, tool_call_id: str) -> ToolCall | str:
    """Return the call the request's user may see, or the failure sentence (401)."""
    user, failure = await sync_to_async(_authenticate)(request)
    if failure is not None:
        return failure
    call = await sync_to_async(external_call_get)(user=user, tool_call_id=tool_call_id)
    return call if call is not None else ""


async def external_call_detail(
    request: HttpRequest, tool_call_id: str
) -> HttpResponseBase:
    """Serve ``GET /api/external/tool-calls/<id>/``, holding it up to ``?wait=`` seconds.

    Waits until the call is decided (or final), then answers with
    :class:`ExternalCallDetailApi`; a bad ``wait`` answers 400 naming it.
    """
    wait = _wait_seconds(request)
    if isinstance(wait, str):
        return error_response(400, "validation_error", wait, fields={"wait": [wait]})
    if wait > 0:
        found = await _visible(request, tool_call_id)
        if isinstance(found, ToolCall):
            call = found
            read = sync_to_async(lambda: external_call_status(call))
            async for _ in state_follow(
                thread_pk=call.thread_id,
                read=read,
                done=lambda s: s["status"] in EXTERNAL_DECIDED_STATUSES,
                timeout=wait,
            ):
                pass
    return await sync_to_async(_detail_view)(request, tool_call_id=tool_call_id)


async def external_call_events(
    request: HttpRequest, tool_call_id: str
) -> HttpResponseBase:
    """Serve ``GET /api/external/tool-calls/<id>/events/``: its state as Server-Sent Events.

    One ``state`` event now and one per change, each the JSON of
    :func:`approvals.selectors.external_call_status`; the stream ends after a
    final state (succeeded, failed, rejected, denied, refused, expired,
    cancelled). 401 without credentials, 404 for a call the user may not see.
    """
    found = await _visible(request, tool_call_id)
    if isinstance(found, str):
        if found:
            return error_response(401, "not_authenticated", found)
        return error_response(
            404, "not_found", "The resource was not found, or you may not see it."
        )
    call = found

    async def frames() -> AsyncIterator[str]:
        yield KEEPALIVE
        seq = 0
        async for state in state_follow(
            thread_pk=call.thread_id,
            read=sync_to_async(lambda: external_call_status(call)),
            done=lambda s: s["status"] in EXTERNAL_FINAL_STATUSES,
            timeout=None,
        ):
            seq += 1
            yield json_sse_frame("state", state, seq=seq)

    response = StreamingHttpResponse(frames(), content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response


# drf-spectacular documents the async views through these DRF views (``cls``).
external_call_detail.cls = ExternalCallDetailApi  # type: ignore[attr-defined]
external_call_detail.initkwargs = {}  # type: ignore[attr-defined]
external_call_events.cls = ExternalCallEventsApi  # type: ignore[attr-defined]
external_call_events.initkwargs = {}  # type: ignore[attr-defined]
