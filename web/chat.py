"""Chat platforms' inbound requests: Slack's interactivity endpoint and the account link.

``POST /integrations/slack/interactions/`` is the Request URL of the Slack app's
interactivity (docs/slack.md). It verifies the request's signature and timestamp
against the configured Slack targets (a forged, stale or replayed request: 401,
nothing recorded), parses it, and hands the action to one orchestration step
(:func:`orchestration.chat.chat_action_take`), which decides as every other
surface does. It answers within Slack's 3-second budget: deciding is one
transaction, and the message is rewritten by a delivery task afterwards.

``/integrations/chat/link/<token>/`` is where a chat user whom Countersign could
not map links their account, once, after signing in.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core import signing
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods, require_POST

from approvals.notifications.chat import (
    ChatInputError,
    chat_request_verify,
    chat_surface,
    chat_user_link,
    chat_user_link_read,
)
from core.types import logged_in
from orchestration.chat import chat_action_take

#: Largest interactivity body read, in bytes (Slack's payloads are a few kB).
MAX_BODY_BYTES = 256 * 1024


@csrf_exempt  # Slack signs its requests instead; a browser never posts here.
@require_POST
def slack_interactions(request: HttpRequest) -> HttpResponse:
    """Take one Slack interaction: a button, a form sent, or anything to acknowledge.

    401 ``invalid_signature`` when no Slack target's signing secret verifies
    ``X-Slack-Signature`` over the body with a fresh ``X-Slack-Request-Timestamp``,
    or the same request came before; 400 naming the field for a body that is
    not Slack's payload; else 200, empty or with a form's errors.
    Implements SEC-02, DC-03.
    """
    length = request.headers.get("content-length") or "0"
    if not length.isdigit() or int(length) > MAX_BODY_BYTES:
        return _error(413, "payload", "send a body of at most 256 kB")
    body = request.body
    target = chat_request_verify(kind="slack", body=body, headers=request.headers)
    if target is None:
        return _error(
            401,
            "X-Slack-Signature",
            "the request is not signed by a configured Slack app, is older than "
            "five minutes, or was sent before",
        )
    surface = chat_surface("slack")
    try:
        action = surface.parse_action(body=body, headers=request.headers)
    except ChatInputError as error:
        return _error(400, error.field, str(error))
    reply = chat_action_take(target=target, action=action)
    answer = surface.reply_body(action=action, reply=reply)
    return JsonResponse(answer) if answer is not None else HttpResponse(status=200)


def _error(status: int, field: str, detail: str) -> JsonResponse:
    return JsonResponse(
        {
            "error": "invalid_request" if status != 401 else "invalid_signature",
            "field": field,
            "detail": detail,
        },
        status=status,
    )


@require_http_methods(["GET", "POST"])
@login_required
def chat_user_link_page(request: HttpRequest, token: str) -> HttpResponse:
    """Ask the signed-in user to confirm (GET), then link the chat account (POST).

    A link older than a day answers 410, a forged or altered one 400.
    """
    try:
        surface, workspace, external_id = chat_user_link_read(token)
        if request.method == "POST":
            chat_user_link(token=token, user=logged_in(request.user))
    except signing.SignatureExpired:
        return render(request, "ui/chat_link.html", {"problem": "expired"}, status=410)
    except signing.BadSignature:
        return render(request, "ui/chat_link.html", {"problem": "invalid"}, status=400)
    return render(
        request,
        "ui/chat_link.html",
        {
            "surface": surface.title(),
            "workspace": workspace,
            "external_id": external_id,
            "linked": request.method == "POST",
        },
    )
