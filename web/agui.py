"""AG-UI over HTTP: ``POST /agui/<agent>/`` and ``GET /agui/threads/<threadId>/events``.

``POST`` takes one ``RunAgentInput`` (parsed with the official models), merges its
messages into the persisted thread, starts the run and answers ``200
text/event-stream`` with one ``data:`` frame per event, ending with the run's
``RUN_FINISHED`` or ``RUN_ERROR``. Input rejected before the run is an HTTP error
with a JSON body naming the problem (AGUI-1.0.md §2.5). ``GET`` follows a thread's
log across runs, resuming after ``?after=<seq>`` or ``Last-Event-ID``.
Authentication: ``Authorization: Token <key>`` or ``Bearer <key>`` (no CSRF
token needed) or a session (CSRF checked).
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import IntegrityError
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.middleware.csrf import CsrfViewMiddleware
from django.views.decorators.csrf import csrf_exempt
from pydantic import ValidationError
from rest_framework.authtoken.models import Token

from agentcore.events import (
    AgentCapabilities,
    HumanInTheLoopCapabilities,
    IdentityCapabilities,
    RunAgentInput,
    ToolsCapabilities,
    TransportCapabilities,
)
from core.errors import CountersignError
from core.types import AnyUser
from orchestration.resume import agui_run_start
from threads.agent_config import agent_toolset
from threads.ids import check_input_messages, input_call_ids_unique
from threads.selectors import thread_by_agui_id, thread_write_check
from threads.validation import MAX_ID_LENGTH, PUBLIC_ID, JSONInputError, parse_json
from web.exception_handler import integrity_conflict
from web.ratelimit import (
    agui_wait,
    auth_failure_record,
    auth_failure_wait,
    retry_after,
)
from web.sse import follow_log

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def error_response(status: int, type_: str, detail: str, **extra: Any) -> JsonResponse:
    """Return the project's 4xx body: ``{"type", "detail", ...}``."""
    return JsonResponse({"type": type_, "detail": detail, **extra}, status=status)


def _throttled(wait: float | None, why: str) -> JsonResponse:
    """Return the 429 answer of a rate limit, with ``Retry-After``."""
    response = error_response(
        429,
        "throttled",
        f"{why}; retry after the Retry-After header's seconds",
    )
    response["Retry-After"] = retry_after(wait)
    return response


def _admit(request: HttpRequest) -> tuple[Any, JsonResponse | None]:
    """Return ``(user, refusal)``: :func:`_authenticate`, then the AG-UI rate limits.

    Refusals: 401 (403 for a failed CSRF check) without valid credentials; 429
    with ``Retry-After`` when the client's address sent too many unknown tokens
    or the token (or session) made too many AG-UI requests (``web.ratelimit``).
    """
    user, failure = _authenticate(request)
    if failure == _TOO_MANY_FAILURES:
        return None, _throttled(auth_failure_wait(request), failure)
    if failure:
        status = 403 if "CSRF" in failure else 401
        return None, error_response(status, "not_authenticated", failure)
    token_key = _token_key(request)
    wait = agui_wait(user=user, token_key=token_key)
    if wait is not None:
        return None, _throttled(wait, "too many AG-UI requests for this token")
    return user, None


_TOO_MANY_FAILURES = "too many requests with an unknown token from this address"


def _token_key(request: HttpRequest) -> str | None:
    parts = request.headers.get("Authorization", "").split()
    return parts[1] if len(parts) == 2 else None


def _authenticate(request: HttpRequest) -> tuple[Any, str | None]:
    """Return ``(user, failure)``: token auth first, then session auth with CSRF.

    An unknown token counts against the client's address (``web.ratelimit``);
    past the rate every token from it fails with :data:`_TOO_MANY_FAILURES`.
    """
    header = request.headers.get("Authorization", "")
    if header:
        parts = header.split()
        if len(parts) != 2 or parts[0] not in ("Token", "Bearer"):
            return None, "Authorization header must be 'Token <key>' or 'Bearer <key>'"
        if auth_failure_wait(request) is not None:
            return None, _TOO_MANY_FAILURES
        token = Token.objects.select_related("user").filter(key=parts[1]).first()
        if token is None or not token.user.is_active:
            if auth_failure_record(request) is not None:
                return None, _TOO_MANY_FAILURES
            return None, "invalid token"
        return token.user, None
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return (
            None,
            "authentication required: send 'Authorization: Token <key>' or log in",
        )
    if request.method == "POST":
        rejected = CsrfViewMiddleware(lambda r: HttpResponse()).process_view(
            request, lambda r: HttpResponse(), (), {}
        )
        if rejected is not None:
            return (
                None,
                "CSRF check failed: send the X-CSRFToken header, or use token auth",
            )
    return user, None


def _input_problem(run_input: RunAgentInput) -> tuple[str, str] | None:
    """Return ``(field, sentence)`` for input the official models accept but we cannot store.

    Thread and run ids must be URL-safe (they appear in URLs), ids at most 200
    characters, message ids unique within the input, tools advertised once. (What
    no JSON value may hold — NUL, lone surrogates, non-finite numbers, deep
    nesting — was refused while parsing, by :func:`threads.validation.parse_json`.)
    """

    for field, value in (
        ("threadId", run_input.thread_id),
        ("runId", run_input.run_id),
    ):
        if not PUBLIC_ID.match(value):
            return field, (
                f"{field} {value[:40]!r} must be 1 to 200 characters of letters, digits "
                "and . _ ~ : @ + -"
            )
    names: set[str] = set()
    for index, tool in enumerate(run_input.tools or []):
        if tool.name in names:
            return f"tools.{index}.name", (
                f"tools.{index}.name {tool.name!r} repeats an earlier tool; "
                "each tool is advertised once"
            )
        names.add(tool.name)
    seen: set[str] = set()
    for index, message in enumerate(run_input.messages):
        if not message.id or len(message.id) > MAX_ID_LENGTH:
            return (
                f"messages.{index}.id",
                f"messages.{index}.id must be 1 to 200 characters",
            )
        if message.id in seen:
            return f"messages.{index}.id", (
                f"messages.{index}.id {message.id!r} repeats an earlier message id; "
                "message ids are unique within a thread"
            )
        seen.add(message.id)
        for call_index, call in enumerate(getattr(message, "tool_calls", None) or []):
            if not call.id or len(call.id) > MAX_ID_LENGTH:
                where = f"messages.{index}.toolCalls.{call_index}.id"
                return where, f"{where} must be 1 to 200 characters"
    return None


def _tool_name_problem(agent: str, run_input: RunAgentInput) -> tuple[str, str] | None:
    """Return ``(field, sentence)`` for a client tool named like one Countersign answers.

    A client's frontend tool (FT-01) whose name resolves to one of the agent's own
    or application tools would be handed to the client as pending and answered by
    Countersign as well; it is refused before the run starts. Raises
    :class:`threads.exceptions.UnknownAgent` for an unknown agent.
    """

    toolset = agent_toolset(agent)
    for index, tool in enumerate(run_input.tools or []):
        own = toolset.resolve(tool.name)
        if own is not None:
            where = f"tools.{index}.name"
            return where, (
                f"{where} {tool.name!r} is also the name of agent {agent!r}'s "
                f"{own.runs_on}-side tool {own.name!r}, which Countersign answers itself; "
                "rename the client tool"
            )
    return None


def _id_problem(*, user: AnyUser, run_input: RunAgentInput) -> CountersignError | None:
    """Return the refusal for input ids that collide with the thread's history, or ``None``.

    Checked before the run is created (nothing is recorded on a refusal). The
    thread is the user's own by its client id, or one they may read
    (:func:`threads.selectors.thread_by_agui_id`); any other id is a new thread of
    theirs. See :mod:`threads.ids`.
    """

    thread = thread_by_agui_id(user=user, agui_id=run_input.thread_id)
    if thread is not None:
        # A reader who does not own the thread learns that first, not its id clashes.
        try:
            thread_write_check(user=user, thread=thread)
        except CountersignError as error:
            return error
    # One dump of the whole list, not one per message (B9).
    messages = run_input.model_dump(
        mode="json", by_alias=True, exclude_none=True, include={"messages"}
    )["messages"]
    try:
        check_input_messages(
            thread=thread,
            messages=input_call_ids_unique(thread=thread, messages=messages),
        )
    except CountersignError as error:
        return error
    return None


def _validation_fields(error: ValidationError) -> dict[str, str]:
    return {
        ".".join(str(p) for p in item["loc"]) or "body": item["msg"]
        for item in error.errors()
    }


@csrf_exempt
async def agui_run(request: HttpRequest, agent: str) -> HttpResponseBase:
    """Start a run of ``agent`` from a ``RunAgentInput`` and stream its events as SSE."""
    if request.method != "POST":
        return error_response(
            405, "method_not_allowed", "POST a RunAgentInput JSON object"
        )
    user, refusal = await sync_to_async(_admit)(request)
    if refusal is not None:
        return refusal
    try:
        raw = request.body
    except RequestDataTooBig:
        return error_response(
            413,
            "payload_too_large",
            f"the RunAgentInput is larger than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes; "
            "send less history, or start a new thread",
        )
    try:
        body = parse_json(raw)
    except JSONInputError as error:
        if error.field is None:
            return error_response(400, "invalid_json", str(error))
        return error_response(
            400, "invalid_input", str(error), fields={error.field: str(error)}
        )
    if not isinstance(body, dict):
        return error_response(
            400, "invalid_input", "the body must be one RunAgentInput object"
        )
    try:
        run_input = RunAgentInput.model_validate(body)
    except ValidationError as error:
        fields = _validation_fields(error)
        return error_response(
            400,
            "invalid_input",
            "RunAgentInput is malformed: "
            + "; ".join(f"{k}: {v}" for k, v in fields.items()),
            fields=fields,
        )
    problem = _input_problem(run_input)
    if problem is None:
        try:
            problem = await sync_to_async(_tool_name_problem)(agent, run_input)
        except CountersignError as error:
            return error_response(error.status, error.code, str(error))
    if problem is not None:
        field, detail = problem
        return error_response(400, "invalid_input", detail, fields={field: detail})
    taken = await sync_to_async(_id_problem)(user=user, run_input=run_input)
    if taken is not None:
        field = getattr(taken, "field", "messages")
        return error_response(
            taken.status, taken.code, str(taken), fields={field: str(taken)}
        )
    try:
        thread, run, start = await sync_to_async(agui_run_start)(
            user=user, agent=agent, run_input=run_input
        )
    except CountersignError as error:
        at = getattr(error, "field", None)
        extra = dict(getattr(error, "extra", None) or {})
        if at:
            extra["fields"] = {at: str(error)}
        return error_response(error.status, error.code, str(error), **extra)
    except IntegrityError as error:
        # A concurrent input took the id between the check and the insert.

        conflict = integrity_conflict(error)
        fields = {k: v[0] for k, v in conflict["fields"].items()}
        return error_response(409, conflict["type"], conflict["detail"], fields=fields)
    response = StreamingHttpResponse(
        follow_log(thread=thread, after=start, run=run),
        content_type="text/event-stream",
    )
    for key, value in SSE_HEADERS.items():
        response[key] = value
    return response


def capabilities_for(agent: str) -> dict[str, Any]:
    """Return agent ``agent``'s AG-UI ``AgentCapabilities`` (camelCase JSON).

    Declares what Countersign does for every agent: SSE streaming, agent-side
    tools plus client-provided ones, and human-in-the-loop through interrupts
    that accept ``editedArgs`` (IR-05). Raises
    :class:`threads.exceptions.UnknownAgent`.
    """
    toolset = agent_toolset(agent)
    capabilities = AgentCapabilities(
        identity=IdentityCapabilities(name=agent, type="countersign"),
        transport=TransportCapabilities(streaming=True, resumable=True),
        tools=ToolsCapabilities(
            supported=True,
            items=[t.agui_tool() for t in toolset],
            client_provided=True,
        ),
        human_in_the_loop=HumanInTheLoopCapabilities(
            supported=True, approvals=True, interrupts=True, approve_with_edits=True
        ),
    )
    return capabilities.model_dump(mode="json", by_alias=True, exclude_none=True)


async def agui_capabilities(request: HttpRequest, agent: str) -> HttpResponseBase:
    """``GET /agui/<agent>/capabilities``: the agent's ``AgentCapabilities`` as JSON."""
    if request.method != "GET":
        return error_response(405, "method_not_allowed", "GET the capabilities")
    _, refusal = await sync_to_async(_admit)(request)
    if refusal is not None:
        return refusal
    try:
        body = await sync_to_async(capabilities_for)(agent)
    except CountersignError as error:
        return error_response(error.status, error.code, str(error))
    return JsonResponse(body)


async def agui_thread_events(request: HttpRequest, thread_id: str) -> HttpResponseBase:
    """Follow ``thread_id``'s event log as SSE from ``?after=<seq>`` or ``Last-Event-ID``."""
    user, refusal = await sync_to_async(_admit)(request)
    if refusal is not None:
        return refusal
    raw = request.GET.get("after") or request.headers.get("Last-Event-ID") or "0"
    try:
        after = int(raw)
        if after < 0:
            raise ValueError
    except ValueError:
        return error_response(
            400, "invalid_after", f"after must be a sequence number >= 0, not {raw!r}"
        )

    thread = await sync_to_async(thread_by_agui_id)(user=user, agui_id=thread_id)
    if thread is None:
        return error_response(404, "not_found", f"thread {thread_id!r} was not found")
    response = StreamingHttpResponse(
        follow_log(thread=thread, after=after), content_type="text/event-stream"
    )
    for key, value in SSE_HEADERS.items():
        response[key] = value
    return response
