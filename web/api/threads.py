"""REST API for threads, messages, runs, tool calls, the event log and the catalogue.

Views are shells (STYLE.md 3): each parses its input with a nested
``InputSerializer`` (or ``FilterSerializer`` for query strings), calls one
service or selector, and returns an ``OutputSerializer``'s data. Objects are
looked up among those the user may see, so another user's thread, run or tool
call answers 404. Errors are mapped in ``web.exception_handler``.
Implements DC-05 (a REST API for integrations).

Over 400 lines because it holds the REST views of one app (threads, messages, runs,
calls), each a thin shell, plus the idempotency and throttling they share.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from django.http import Http404, HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.pagination import CursorPagination, LimitOffsetPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.urls import replace_query_param
from rest_framework.views import APIView

from approvals.services import client_run_cancel, thread_pending_calls_cancel
from core.types import logged_in
from threads.agent_config import agent_settings
from threads.exceptions import UnknownAgent
from threads.idempotency import MAX_KEY_LENGTH, idempotent_response
from threads.models import Run, Thread, ToolCall
from threads.selectors import (
    agent_list,
    client_run,
    run_get,
    thread_by_agui_id,
    thread_client_runs,
    thread_events_after,
    thread_list,
    thread_messages_agui,
    thread_write_check,
    tool_call_get,
    tool_call_list,
    tool_list,
)
from threads.services import message_post, thread_archive, thread_create
from web.exception_handler import error_body
from web.ratelimit import PerTokenThrottle
from web.serializers.threads import (
    THREAD_STATUSES,
    AgentOutputSerializer,
    AguiMessageField,
    ContentField,
    ErrorSerializer,
    EventField,
    MessageOutputSerializer,
    QueryFilterSerializer,
    RunOutputSerializer,
    StrictSerializer,
    ThreadOutputSerializer,
    ToolCallOutputSerializer,
    ToolOutputSerializer,
    results_of,
)

#: Largest integer accepted in a query string (fits a signed 64-bit column).
MAX_INT = 2**63 - 1

_ERROR_TEXT = {
    400: "Invalid input: `fields` names each bad field.",
    401: "No credentials, or invalid ones: send `Authorization: Token <key>`.",
    403: "Not allowed (missing permission, or a missing CSRF token with session auth).",
    404: "Not found, or not yours to see.",
    409: "Conflicts with the current state; `detail` says why and what to do.",
    422: "The Idempotency-Key was already used for a different request.",
    429: "Too many requests; retry after the `Retry-After` header's seconds.",
}


def errors(*codes: int) -> dict[int, OpenApiResponse]:
    """Return the documented error responses ``codes`` (plus 401, 403 and 429, always).

    429 is on every operation because every REST request is counted against its
    token's rate (``web.ratelimit.ApiRateThrottle``) and unknown tokens against
    their address's.
    """
    wanted = sorted({401, 403, 429, *codes})
    return {
        code: OpenApiResponse(ErrorSerializer, description=_ERROR_TEXT[code])
        for code in wanted
    }


def visible_thread(request: Request, thread_id: str, *, write: bool = False) -> Thread:
    """Return thread ``thread_id`` if the user may see it; raise 404 otherwise.

    ``thread_id`` is a thread's global id or one of the user's own AG-UI client
    ids (:func:`threads.selectors.thread_by_agui_id`).

    With ``write``, also refuse (403 ``not_thread_owner``) a user who may read it
    but does not own it (:func:`threads.selectors.thread_write_check`).
    """
    thread = thread_by_agui_id(user=request.user, agui_id=thread_id)
    if thread is None:
        raise Http404(f"thread {thread_id!r} not found")
    if write:
        thread_write_check(user=request.user, thread=thread)
    return thread


#: What an Idempotency-Key may be: printable ASCII, no surrounding spaces (which
#: HTTP servers strip), 1 to MAX_KEY_LENGTH characters. The schema says the same.
IDEMPOTENCY_KEY_PATTERN = r"^[!-~]([ -~]*[!-~])?$"

IDEMPOTENCY_KEY_PARAMETER = OpenApiParameter(
    "Idempotency-Key",
    {
        "type": "string",
        "minLength": 1,
        "maxLength": MAX_KEY_LENGTH,
        "pattern": IDEMPOTENCY_KEY_PATTERN,
    },
    location=OpenApiParameter.HEADER,
    required=False,
    description="Retries with the same key and body return the first response and do "
    "nothing again; the same key with another body is 422.",
)


def respond_idempotently(
    request: Request, *, operation: str, produce: Callable[[], tuple[int, Any]]
) -> Response:
    """Answer with ``produce()``, once per ``Idempotency-Key`` when the header is sent.

    Raises a 400 validation error for a malformed key and
    :class:`threads.exceptions.IdempotencyKeyReused` (422) for a key reused with
    another body.
    """
    key = request.headers.get("Idempotency-Key")
    if key is None:
        code, body = produce()
        return Response(body, status=code)
    if len(key) > MAX_KEY_LENGTH or not re.fullmatch(IDEMPOTENCY_KEY_PATTERN, key):
        raise serializers.ValidationError(
            {"Idempotency-Key": [f"must be 1-{MAX_KEY_LENGTH} printable characters"]}
        )
    stored = idempotent_response(
        user=logged_in(request.user),
        key=key,
        operation=operation,
        body=request.data,
        produce=produce,
    )
    headers = {"Idempotent-Replayed": "true"} if stored.replayed else {}
    return Response(stored.body, status=stored.status, headers=headers)


def query_int(
    request: Request, name: str, *, minimum: int, maximum: int | None = None
) -> int | None:
    """Return query parameter ``name`` as one integer ``>= minimum``, or ``None`` if absent.

    Above ``maximum`` is refused; with ``maximum=None`` any size is read (the caller
    clamps). Raises a 400 validation error naming the parameter when it is
    repeated, empty, not an integer or out of range (DRF's paginators would
    silently ignore it, while the schema documents an integer).
    """
    values = request.query_params.getlist(name)
    if not values:
        return None
    problem = None
    if len(values) > 1:
        problem = "must be given once"
    elif not re.fullmatch(r"[0-9]{1,100}", values[0]) or not (
        minimum
        <= int(values[0])
        <= (maximum if maximum is not None else int(values[0]))
    ):
        problem = (
            f"must be an integer from {minimum} to {maximum}"
            if maximum is not None
            else f"must be an integer of at least {minimum}"
        )
    if problem is not None:
        raise serializers.ValidationError({name: [problem]})
    return int(values[0])


#: The query parameters :class:`BoundedLimitOffsetPagination` reads (``QueryFilterSerializer.paging``).
OFFSET_PAGING = ("limit", "offset")
#: The query parameters :class:`ThreadCursorPagination` reads.
CURSOR_PAGING = ("cursor", "limit")


def limit_parameter() -> OpenApiParameter:
    """Document ``?limit=`` as the paginators read it."""
    return OpenApiParameter(
        "limit",
        {"type": "integer", "minimum": 1, "maximum": 200},
        description="Page size, at most 200.",
    )


def offset_parameter() -> OpenApiParameter:
    """Document ``?offset=`` as the paginator reads it."""
    return OpenApiParameter(
        "offset",
        {"type": "integer", "minimum": 0},
        description="Items to skip (beyond the last item: an empty page).",
    )


class ThreadCursorPagination(CursorPagination):
    """Newest threads first; ``?limit=`` up to 200; opaque ``cursor`` links."""

    ordering = "-id"
    page_size = 50
    page_size_query_param = "limit"
    max_page_size = 200

    def get_page_size(self, request: Request) -> int:
        limit = query_int(request, "limit", minimum=1, maximum=self.max_page_size)
        return self.page_size if limit is None else limit

    def decode_cursor(self, request: Request) -> Any:
        cursor = super().decode_cursor(request)
        position = getattr(cursor, "position", None)
        if position is not None and not (
            str(position).isdigit() and int(position) <= MAX_INT
        ):
            raise NotFound(self.invalid_cursor_message)
        return cursor


class BoundedLimitOffsetPagination(LimitOffsetPagination):
    """``?limit=`` (default 50, at most 200) and ``?offset=`` (at most 10⁹)."""

    default_limit = 50
    max_limit = 200
    max_offset = 10**9

    def get_limit(self, request: Request) -> int:
        limit = query_int(request, "limit", minimum=1, maximum=self.max_limit)
        return self.default_limit if limit is None else limit

    def get_offset(self, request: Request) -> int:
        offset = query_int(request, "offset", minimum=0)
        return 0 if offset is None else min(offset, self.max_offset)


def offset_page(
    rows: Any,
    *,
    request: Request,
    view: APIView,
    serializer: type[serializers.BaseSerializer],
    context: dict[str, Any] | None = None,
) -> Response:
    """Return the ``?limit=&offset=`` page of ``rows`` (a queryset or list), serialized.

    The body is ``{"count", "next", "previous", "results"}``
    (:class:`BoundedLimitOffsetPagination`); ``results`` are ``serializer(page,
    many=True, context=context)``. The one body of every offset-paged list
    endpoint. Raises DRF's 400 ``ValidationError`` for a bad ``limit`` or ``offset``.
    """
    paginator = BoundedLimitOffsetPagination()
    page: list[Any] | None = paginator.paginate_queryset(rows, request, view=view)
    results = serializer(page, many=True, context=context or {}).data
    return paginator.get_paginated_response(results)


class MessageRateThrottle(PerTokenThrottle):
    """Limit message posting per API token (per user for session auth).

    The rate is ``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]["messages"]`` read at
    request time (STYLE.md 17), ``"30/min"`` when unset.
    """

    scope = "messages"


# -- threads -------------------------------------------------------------------------


class ThreadListCreateApi(APIView):
    """``GET /api/threads/`` lists threads; ``POST`` creates one."""

    class FilterSerializer(QueryFilterSerializer):
        paging = CURSOR_PAGING
        status = serializers.ChoiceField(choices=THREAD_STATUSES, required=False)
        owner = serializers.CharField(
            required=False,
            max_length=150,
            help_text="Username (staff see every owner).",
        )
        archived = serializers.BooleanField(
            required=False, default=False, help_text="Include archived threads."
        )

    class InputSerializer(StrictSerializer):
        title = serializers.CharField(
            required=False, allow_blank=True, max_length=300, default=""
        )
        agent = serializers.CharField(required=False, max_length=100, default="demo")

        def validate_agent(self, value: str) -> str:
            try:
                agent_settings(value)
            except UnknownAgent as error:
                raise serializers.ValidationError(str(error)) from error
            return value

    OutputSerializer = ThreadOutputSerializer

    @extend_schema(
        operation_id="threads_list",
        parameters=[
            FilterSerializer,
            OpenApiParameter("cursor", str, description="Opaque cursor from `next`."),
            limit_parameter(),
        ],
        responses={
            200: results_of(
                "PaginatedThreadList", ThreadOutputSerializer, paginated="cursor"
            ),
            **errors(400, 404),
        },
    )
    def get(self, request: Request) -> Response:
        """List the threads you may see, newest first (staff see every owner's)."""
        filters = self.FilterSerializer.validated_query(request)
        threads = thread_list(user=request.user, **filters)
        paginator = ThreadCursorPagination()
        page = paginator.paginate_queryset(threads, request, view=self)
        return paginator.get_paginated_response(
            self.OutputSerializer(page, many=True).data
        )

    @extend_schema(
        operation_id="threads_create",
        request=InputSerializer,
        parameters=[IDEMPOTENCY_KEY_PARAMETER],
        responses={201: ThreadOutputSerializer, **errors(400, 422)},
    )
    def post(self, request: Request) -> Response:
        """Create a thread talking to ``agent`` (default ``demo``); honours Idempotency-Key."""
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)

        def produce() -> tuple[int, Any]:
            thread = thread_create(owner=logged_in(request.user), **data.validated_data)
            return status.HTTP_201_CREATED, self.OutputSerializer(thread).data

        return respond_idempotently(request, operation="thread_create", produce=produce)


class ThreadDetailApi(APIView):
    """``GET /api/threads/<threadId>/``."""

    OutputSerializer = ThreadOutputSerializer

    @extend_schema(
        operation_id="threads_retrieve",
        responses={200: OutputSerializer, **errors(404)},
    )
    def get(self, request: Request, thread_id: str) -> Response:
        return Response(self.OutputSerializer(visible_thread(request, thread_id)).data)


class ThreadArchiveApi(APIView):
    """``POST /api/threads/<threadId>/archive/``: archive (idempotent)."""

    OutputSerializer = ThreadOutputSerializer

    @extend_schema(
        operation_id="threads_archive",
        request=None,
        responses={200: OutputSerializer, **errors(404)},
    )
    def post(self, request: Request, thread_id: str) -> Response:
        thread = thread_archive(thread=visible_thread(request, thread_id, write=True))
        return Response(self.OutputSerializer(thread).data)


class ThreadCancelPendingApi(APIView):
    """``POST /api/threads/<threadId>/cancel-pending/``: abandon the calls still waiting.

    Each unanswered call of the last run is answered with a tool message saying it
    was cancelled and why (FT-06), pending approvals become ``cancelled``, and the
    thread accepts a new message. For the thread's owner, staff and approvers.
    """

    class InputSerializer(StrictSerializer):
        reason = serializers.CharField(max_length=2000)

    class OutputSerializer(serializers.Serializer):
        cancelledToolCallIds = serializers.ListField(child=serializers.CharField())

    @extend_schema(
        operation_id="threads_cancel_pending",
        request=InputSerializer,
        responses={200: OutputSerializer, **errors(400, 403, 404)},
    )
    def post(self, request: Request, thread_id: str) -> Response:
        thread = visible_thread(request, thread_id)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        cancelled = thread_pending_calls_cancel(
            thread=thread,
            cancelled_by=logged_in(request.user),
            reason=data.validated_data["reason"],
        )
        return Response(self.OutputSerializer({"cancelledToolCallIds": cancelled}).data)


class ThreadMessagesApi(APIView):
    """``GET /api/threads/<threadId>/messages/``; ``POST`` a user message and start a run."""

    class InputSerializer(StrictSerializer):
        content = ContentField()

    class OutputSerializer(serializers.Serializer):
        message = MessageOutputSerializer()
        run = RunOutputSerializer()

    def get_throttles(self) -> list[Any]:
        throttles = super().get_throttles()
        if self.request.method == "POST":
            return [*throttles, MessageRateThrottle()]
        return throttles

    @extend_schema(
        operation_id="threads_messages_list",
        responses={
            200: results_of(
                "MessageList", serializers.ListField(child=AguiMessageField())
            ),
            **errors(404),
        },
    )
    def get(self, request: Request, thread_id: str) -> Response:
        """Return the thread's whole history as AG-UI messages, in order."""
        thread = visible_thread(request, thread_id)
        QueryFilterSerializer.validated_query(request)
        return Response({"results": thread_messages_agui(thread=thread)})

    @extend_schema(
        operation_id="threads_messages_create",
        request=InputSerializer,
        parameters=[IDEMPOTENCY_KEY_PARAMETER],
        responses={201: OutputSerializer, **errors(400, 404, 409, 422, 429)},
    )
    def post(self, request: Request, thread_id: str) -> Response:
        """Post a user message and start a run; 409 while a run or a call is pending."""
        thread = visible_thread(request, thread_id, write=True)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)

        def produce() -> tuple[int, Any]:
            message, run = message_post(
                thread=thread, content=data.validated_data["content"]
            )
            body = self.OutputSerializer(
                {"message": message, "run": client_run(run=run)}
            ).data
            return status.HTTP_201_CREATED, body

        return respond_idempotently(
            request, operation=f"message_post:{thread.thread_id}", produce=produce
        )


class ThreadEventsApi(APIView):
    """``GET /api/threads/<threadId>/events/?after=<seq>&limit=<n>``: replay the log."""

    class FilterSerializer(QueryFilterSerializer):
        after = serializers.IntegerField(
            required=False,
            default=0,
            min_value=0,
            max_value=MAX_INT,
            help_text="Return events with a larger `seq`.",
        )
        limit = serializers.IntegerField(
            required=False, default=100, min_value=1, max_value=1000
        )

    @extend_schema(
        operation_id="threads_events_list",
        parameters=[FilterSerializer],
        responses={
            200: results_of(
                "EventPage",
                serializers.ListField(child=EventField()),
                paginated="after",
            ),
            **errors(400, 404),
        },
    )
    def get(self, request: Request, thread_id: str) -> Response:
        thread = visible_thread(request, thread_id)
        filters = self.FilterSerializer.validated_query(request)
        after, limit = filters["after"], filters["limit"]
        events = thread_events_after(thread=thread, after=after, limit=limit + 1)
        more = len(events) > limit
        events = events[:limit]
        last = events[-1].seq if events else after
        next_url = (
            replace_query_param(request.build_absolute_uri(), "after", last)
            if more
            else None
        )
        return Response(
            {
                "results": [event.as_wire() for event in events],
                "next": next_url,
                "lastSeq": last,
            }
        )


# -- runs ----------------------------------------------------------------------------


def visible_run(request: Request, run_id: str) -> Run:
    """Return run ``run_id`` if the user may see its thread; raise 404 otherwise."""
    run = run_get(user=request.user, run_id=run_id)
    if run is None:
        raise Http404(f"run {run_id!r} not found")
    return run


class ThreadRunsApi(APIView):
    """``GET /api/threads/<threadId>/runs/``: the thread's runs as its AG-UI clients saw them.

    One entry per POST or posted message (and per run Countersign started itself),
    oldest first, each with the agent's own runs inside it as ``segments``.
    """

    OutputSerializer = RunOutputSerializer

    @extend_schema(
        operation_id="threads_runs_list",
        responses={200: results_of("RunList", RunOutputSerializer), **errors(404)},
    )
    def get(self, request: Request, thread_id: str) -> Response:
        thread = visible_thread(request, thread_id)
        QueryFilterSerializer.validated_query(request)
        runs = thread_client_runs(thread=thread)
        return Response({"results": self.OutputSerializer(runs, many=True).data})


class RunDetailApi(APIView):
    """``GET /api/runs/<runId>/``: a client-visible run, its segments nested.

    A segment's own id (``segments[].runId``) answers the run it is part of.
    """

    OutputSerializer = RunOutputSerializer

    @extend_schema(
        operation_id="runs_retrieve", responses={200: OutputSerializer, **errors(404)}
    )
    def get(self, request: Request, run_id: str) -> Response:
        run = client_run(run=visible_run(request, run_id))
        return Response(self.OutputSerializer(run).data)


class RunCancelApi(APIView):
    """``POST /api/runs/<runId>/cancel/``: stop a client's run, whatever part of it is live.

    The run the client named by its ``runId`` is cancelled as a whole: the agent
    segment running or queued inside it is stopped, calls Countersign has not
    started yet are answered as cancelled, and its stream ends with
    ``{type:"cancelled"}``; 409 once it has ended.
    """

    OutputSerializer = RunOutputSerializer

    @extend_schema(
        operation_id="runs_cancel",
        request=None,
        responses={200: OutputSerializer, **errors(404, 409)},
    )
    def post(self, request: Request, run_id: str) -> Response:
        run = client_run_cancel(
            run=visible_run(request, run_id), cancelled_by=logged_in(request.user)
        )
        return Response(self.OutputSerializer(client_run(run=run)).data)


# -- tool calls ----------------------------------------------------------------------


class ToolCallListApi(APIView):
    """``GET /api/tool-calls/?thread=&state=&name=``: newest first."""

    class FilterSerializer(QueryFilterSerializer):
        paging = OFFSET_PAGING
        thread = serializers.CharField(
            required=False, max_length=200, help_text="threadId"
        )
        state = serializers.ChoiceField(choices=ToolCall.State.choices, required=False)
        name = serializers.CharField(required=False, max_length=200)

    OutputSerializer = ToolCallOutputSerializer

    @extend_schema(
        operation_id="tool_calls_list",
        parameters=[
            FilterSerializer,
            limit_parameter(),
            offset_parameter(),
        ],
        responses={
            200: results_of(
                "PaginatedToolCallList", ToolCallOutputSerializer, paginated="offset"
            ),
            **errors(400),
        },
    )
    def get(self, request: Request) -> Response:
        values = self.FilterSerializer.validated_query(request)
        calls = tool_call_list(
            user=request.user,
            thread_id=values.get("thread"),
            state=values.get("state"),
            name=values.get("name"),
        )
        return offset_page(
            calls, request=request, view=self, serializer=self.OutputSerializer
        )


class ToolCallDetailApi(APIView):
    """``GET /api/tool-calls/<toolCallId>/`` (``?thread=`` picks the thread if ids collide)."""

    class FilterSerializer(QueryFilterSerializer):
        thread = serializers.CharField(
            required=False, max_length=200, help_text="threadId"
        )

    OutputSerializer = ToolCallOutputSerializer

    @extend_schema(
        operation_id="tool_calls_retrieve",
        parameters=[FilterSerializer],
        responses={200: OutputSerializer, **errors(400, 404)},
    )
    def get(self, request: Request, tool_call_id: str) -> Response:
        filters = self.FilterSerializer.validated_query(request)
        call = tool_call_get(
            user=request.user,
            tool_call_id=tool_call_id,
            thread_id=filters.get("thread"),
        )
        if call is None:
            raise Http404(f"tool call {tool_call_id!r} not found")
        return Response(self.OutputSerializer(call).data)


# -- catalogue -----------------------------------------------------------------------


class ToolListApi(APIView):
    """``GET /api/tools/?agent=``: the tools each agent offers, with schemas and policies."""

    class FilterSerializer(QueryFilterSerializer):
        agent = serializers.CharField(required=False, max_length=100)

    OutputSerializer = ToolOutputSerializer

    @extend_schema(
        operation_id="tools_list",
        parameters=[FilterSerializer],
        responses={
            200: results_of("ToolList", ToolOutputSerializer),
            **errors(400, 404),
        },
    )
    def get(self, request: Request) -> Response:
        filters = self.FilterSerializer.validated_query(request)
        tools = tool_list(agent=filters.get("agent"))
        return Response({"results": self.OutputSerializer(tools, many=True).data})


class AgentListApi(APIView):
    """``GET /api/agents/``: the configured agents and their tools."""

    OutputSerializer = AgentOutputSerializer

    @extend_schema(
        operation_id="agents_list",
        responses={200: results_of("AgentList", AgentOutputSerializer), **errors()},
    )
    def get(self, request: Request) -> Response:
        QueryFilterSerializer.validated_query(request)
        return Response(
            {"results": self.OutputSerializer(agent_list(), many=True).data}
        )


@csrf_exempt  # answers 404 whatever the method; nothing to protect
def api_not_found(request: HttpRequest, path: str = "") -> JsonResponse:
    """Answer unknown ``/api/`` paths with the API's 404 body (not Django's HTML page)."""

    return JsonResponse(
        error_body(
            type="not_found",
            detail=f"No API endpoint at {request.path!r}; the endpoints are listed at "
            "/api/docs/ (paths end with a slash).",
        ),
        status=404,
    )
