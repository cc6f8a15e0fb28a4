"""Approvals decided in chat: the chat surface interface and what every surface shares.

A *chat surface* (Slack today; Microsoft Teams or Mattermost next) posts one
message per approval request, rewrites it whenever the request changes, and
turns the clicks and forms people send back into :class:`ChatAction` values.
It implements :class:`ChatSurface`:

- ``post`` / ``update``: send the card (:func:`chat_card`) as a new message or
  over the one posted before (:class:`approvals.models.ChatMessage`);
- ``verify``: whether an inbound request is signed by the platform for a
  target, fresh (no replay outside the platform's clock window);
- ``parse_action``: the request's body as a :class:`ChatAction` (or
  :class:`ChatInputError` naming the field at fault);
- ``user_email``: the verified email of the acting chat user, or ``None``;
- ``form_open``: the reject (reason) or edit (the tool's fields) form;
- ``tell``: a message only the acting user sees;
- ``reply_body``: the HTTP answer to the inbound request (a form's errors).

Deliveries reuse the notification rows and task (:mod:`.delivery`): a chat
target's ``requested`` delivery posts, its ``updated`` deliveries rewrite, with the
same retries and the same admin page. Deciding is never here: the web shell
hands a parsed action to :func:`orchestration.chat.chat_action_take`, which
decides through :func:`orchestration.pipeline.approval_decide` like every other
surface.

The interface's types live in :mod:`.surface` and are re-exported here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from django.core import signing
from django.db import IntegrityError, transaction
from django.urls import reverse
from django.utils import timezone

from approvals.models import ApprovalRequest, ChatMessage, ChatRequestSeen, ChatUserLink
from approvals.notifications.links import approval_link_url
from approvals.notifications.surface import (
    ChatAction,
    ChatDeliveryError,
    ChatInputError,
    ChatReply,
    ChatSurface,
    PostedMessage,
)
from approvals.notifications.targets import Target, chat_targets
from approvals.selectors import approval_context
from core.conf import countersign_settings
from core.types import User

#: How long a platform's signed request stays valid, in seconds (Slack: five minutes).
REQUEST_WINDOW_SECONDS = 5 * 60
#: How long the link a chat user follows to link their account stays valid, in seconds.
USER_LINK_MAX_AGE_SECONDS = 24 * 3600
USER_LINK_SALT = "countersign.chat.user-link"


__all__ = [
    "ChatAction",
    "ChatDeliveryError",
    "ChatInputError",
    "ChatReply",
    "ChatSurface",
    "PostedMessage",
    "chat_card",
    "chat_request_verify",
    "chat_send",
    "chat_surface",
    "chat_user_link",
    "chat_user_link_read",
    "chat_user_link_url",
    "chat_user_resolve",
    "edit_values",
]


def chat_surface(kind: str) -> ChatSurface:
    """Return the surface of chat target kind ``kind``; raise ``KeyError`` for another kind."""
    from approvals.notifications.slack import SlackSurface

    surfaces: dict[str, ChatSurface] = {"slack": SlackSurface()}
    return surfaces[kind]


def chat_card(approval: ApprovalRequest) -> dict[str, Any]:
    """Return what a chat message shows about ``approval``.

    :func:`approvals.selectors.approval_context` as a channel sees it (no
    particular viewer, so ``canAuthorize`` is false and ``authorization.whoCan``
    names who can), plus ``link``: the signed link that opens it in Countersign.
    Surfaces map this dict to their markup and add nothing of their own, so a
    fact added to the context reaches every surface.
    """
    return {
        **approval_context(approval, AnonymousUser()),
        "link": approval_link_url(approval.pk),
    }


def chat_send(*, target: Target, approval: ApprovalRequest, event: str) -> None:
    """Post or rewrite ``approval``'s messages on ``target`` for ``event``.

    ``requested`` and ``escalated`` post the card to the channel routed for the
    request's approver groups unless a message is there already (an escalation
    to a group with its own channel tells that channel too); every other
    message of the request is rewritten. Idempotent: a retried attempt finds
    what the last one posted (:class:`~approvals.models.ChatMessage`, recorded
    as each post succeeds) and rewrites it. After sending, the card is read
    again and sent once more if the request changed meanwhile, so the last
    attempt to finish shows the latest state even when two overlap. Raises
    :class:`ChatDeliveryError` when the platform refuses, or when an
    ``updated`` finds no message yet (retried until the post is done).
    """
    surface = chat_surface(target.kind)
    messages = list(ChatMessage.objects.filter(approval=approval, target=target.name))
    card = chat_card(approval)
    channel = target.channel_for(list(card.get("approverGroups") or []))
    if event in ("requested", "escalated") and channel not in {
        m.channel for m in messages
    }:
        posted = surface.post(target=target, channel=channel, card=card)
        ChatMessage.objects.create(
            approval=approval,
            target=target.name,
            surface=target.kind,
            channel=posted.channel,
            message_id=posted.message_id,
        )
    elif not messages:
        raise ChatDeliveryError(
            "the request's message is not posted yet; this update is retried after it"
        )
    for message in messages:
        surface.update(target=target, message=message, card=card)
    # A change committed while this attempt was on the wire may have been shown
    # by a rewrite that arrived first, or by none: show the state as it is now.
    approval.refresh_from_db()
    now = chat_card(approval)
    if _without_link(now) != _without_link(card):
        for message in ChatMessage.objects.filter(
            approval=approval, target=target.name
        ):
            surface.update(target=target, message=message, card=now)


def _without_link(card: dict[str, Any]) -> dict[str, Any]:
    # The link is signed with the current second: not a change of the request.
    return {k: v for k, v in card.items() if k != "link"}


def chat_request_verify(
    *, kind: str, body: bytes, headers: Mapping[str, str]
) -> Target | None:
    """Return the ``kind`` target whose secret signed this request, or ``None``.

    ``None`` (answer 401, record nothing) when no configured target's secret
    verifies the signature, the timestamp is outside the platform's window, or the
    same signed request was taken before (a replay). A taken request's signature
    is kept for :data:`REQUEST_WINDOW_SECONDS`. Implements SEC-02 (only a person
    the platform vouches for decides).
    """
    surface = chat_surface(kind)
    for target in chat_targets(kind):
        signature = surface.verify(target=target, body=body, headers=headers)
        if signature:
            return target if _first_sight(signature) else None
    return None


def _first_sight(signature: str) -> bool:
    """Record ``signature`` as taken; ``False`` when it was taken before."""
    now = timezone.now()
    window = timedelta(seconds=2 * REQUEST_WINDOW_SECONDS)
    ChatRequestSeen.objects.filter(seen_at__lt=now - window).delete()
    try:
        with transaction.atomic():
            ChatRequestSeen.objects.create(signature=signature[:200], seen_at=now)
    except IntegrityError:
        return False
    return True


def chat_user_resolve(*, target: Target, action: ChatAction) -> User | None:
    """Return the Countersign user behind ``action``'s chat user, or ``None``.

    The user's own link (:class:`~approvals.models.ChatUserLink`) first; else the
    one active account whose email equals the chat user's verified email
    (``surface.user_email``). ``None`` when neither names exactly one active
    account: the surface tells the person how to link theirs.
    """
    link = (
        ChatUserLink.objects.select_related("user")
        .filter(
            surface=target.kind,
            workspace=action.workspace,
            external_id=action.user_id,
            user__is_active=True,
        )
        .first()
    )
    if link is not None:
        return link.user
    email = chat_surface(target.kind).user_email(target=target, action=action)
    if not email:
        return None
    matches = list(
        get_user_model().objects.filter(email__iexact=email, is_active=True)[:2]
    )
    return matches[0] if len(matches) == 1 else None


def chat_user_link_url(*, kind: str, action: ChatAction) -> str:
    """Return the signed link with which ``action``'s chat user links their account.

    Valid for :data:`USER_LINK_MAX_AGE_SECONDS`; opening it needs a login.
    """
    token = signing.dumps(
        {"s": kind, "w": action.workspace, "u": action.user_id}, salt=USER_LINK_SALT
    )
    base = str(countersign_settings.PUBLIC_URL).rstrip("/")
    return base + reverse("chat-user-link", args=[token])


def chat_user_link_read(token: str) -> tuple[str, str, str]:
    """Return ``(surface, workspace, user id)`` a user-link token names.

    Raises :class:`django.core.signing.SignatureExpired` when it is too old and
    :class:`django.core.signing.BadSignature` when it was not made here.
    """
    value = signing.loads(token, salt=USER_LINK_SALT, max_age=USER_LINK_MAX_AGE_SECONDS)
    if not isinstance(value, dict) or not all(
        isinstance(value.get(k), str) and value.get(k) for k in ("s", "w", "u")
    ):
        raise signing.BadSignature("the link names no chat user")
    return value["s"], value["w"], value["u"]


def chat_user_link(*, token: str, user: User) -> ChatUserLink:
    """Link the chat user ``token`` names to ``user`` (replacing an earlier link).

    Raises what :func:`chat_user_link_read` raises.
    """
    surface, workspace, external_id = chat_user_link_read(token)
    link, _ = ChatUserLink.objects.update_or_create(
        surface=surface,
        workspace=workspace,
        external_id=external_id,
        defaults={"user": user},
    )
    return link


def edit_values(
    schema: Mapping[str, Any] | None, fields: tuple[tuple[str, str | None], ...]
) -> tuple[dict[str, Any], dict[str, str]]:
    """Return the arguments an edit form's text ``fields`` stand for, and the fields' errors.

    Each field is read as its schema property's type says: ``integer`` and
    ``number`` as numbers, ``boolean`` as ``true``/``false``, ``object``,
    ``array`` and untyped ones as JSON, anything else as text. An empty field is
    left out. The arguments are then validated whole by the same ladder as the
    web form's (:func:`orchestration.pipeline.approval_decide`).
    """
    properties = (schema or {}).get("properties") or {}
    values: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for name, text in fields:
        if text is None or text == "":
            continue
        kind = (properties.get(name) or {}).get("type")
        try:
            values[name] = _typed(kind, text)
        except ValueError as error:
            errors[name] = str(error)
    return values, errors


def _typed(kind: Any, text: str) -> Any:
    if kind == "integer":
        try:
            return int(text.strip())
        except ValueError:
            raise ValueError(f"{text!r} is not a whole number") from None
    if kind == "number":
        try:
            number = float(text.strip())
        except ValueError:
            raise ValueError(f"{text!r} is not a number") from None
        return int(number) if number.is_integer() and "." not in text else number
    if kind == "boolean":
        if text.strip().lower() in ("true", "false"):
            return text.strip().lower() == "true"
        raise ValueError("choose true or false")
    if kind == "string" or (isinstance(kind, list) and "string" in kind):
        return text
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise ValueError('write a JSON value (e.g. [1, 2] or {"a": 1})') from None
