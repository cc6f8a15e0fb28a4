"""Slack as a chat surface (:class:`approvals.notifications.chat.ChatSurface`), on ``slack_sdk``.

Messages go through ``slack_sdk.WebClient`` (``chat.postMessage``, ``chat.update``,
``views.open``, ``chat.postEphemeral``, ``users.info``) at the target's ``api_url``;
inbound requests are verified with ``slack_sdk.signature.SignatureVerifier`` (the
``v0`` HMAC of the body, and a timestamp within five minutes). The Block Kit
message is a thin mapping of :func:`approvals.notifications.chat.chat_card`: it
shows the card's facts and adds none. docs/slack.md has the app manifest.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any
from urllib.parse import parse_qs

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web import SlackResponse

from approvals.models import ChatMessage
from approvals.notifications.surface import (
    ActionKind,
    ChatAction,
    ChatDeliveryError,
    ChatInputError,
    ChatReply,
    PostedMessage,
)
from approvals.notifications.targets import Target
from core.conf import countersign_settings

#: Seconds a call made while Slack waits for our answer may take (its budget is 3 s).
INTERACTIVE_TIMEOUT_SECONDS = 2
#: The ``action_id`` of each button, and the ``callback_id`` of each form.
BUTTONS: Mapping[str, ActionKind] = {
    "countersign.approve": "approve",
    "countersign.reject": "reject",
    "countersign.edit": "edit",
    "countersign.respond": "respond",
    "countersign.undo": "undo",
    "countersign.open": "open",
}
FORMS: Mapping[str, ActionKind] = {
    "countersign.reject": "reject_submit",
    "countersign.edit": "edit_submit",
    "countersign.respond": "respond_submit",
}
#: Block ids of the forms' inputs: the reason, the answer, and one per argument (prefix + name).
REASON_BLOCK = "reason"
RESPONSE_BLOCK = "response"
ARGUMENT_BLOCK = "arg:"
#: Slack's limits, in characters: section text, a field, a header, a button's text.
_TEXT, _FIELD, _HEADER, _BUTTON = 3000, 2000, 150, 75


class SlackSurface:
    """Slack's implementation of the chat surface (module docstring)."""

    kind = "slack"

    def post(
        self, *, target: Target, channel: str, card: dict[str, Any]
    ) -> PostedMessage:
        """Post ``card`` to ``channel`` with ``chat.postMessage``."""
        text, blocks = slack_message(card)
        response = _call(
            "chat.postMessage",
            lambda: _client(target).chat_postMessage(
                channel=channel, text=text, blocks=blocks, unfurl_links=False
            ),
        )
        return PostedMessage(
            channel=str(response.get("channel") or channel),
            message_id=str(response.get("ts") or ""),
        )

    def update(
        self, *, target: Target, message: ChatMessage, card: dict[str, Any]
    ) -> None:
        """Rewrite ``message`` with ``chat.update``."""
        text, blocks = slack_message(card)
        _call(
            "chat.update",
            lambda: _client(target).chat_update(
                channel=message.channel, ts=message.message_id, text=text, blocks=blocks
            ),
        )

    def verify(self, *, target: Target, body: bytes, headers: Mapping[str, str]) -> str:
        """Return the ``X-Slack-Signature`` if ``target``'s signing secret made it, fresh; else ``""``."""
        lowered = {k.lower(): v for k, v in headers.items()}
        try:
            valid = SignatureVerifier(target.signing_secret).is_valid_request(
                body, lowered
            )
        except (ValueError, UnicodeDecodeError):
            # A timestamp that is no number, a body that is no UTF-8: not Slack's.
            return ""
        return lowered.get("x-slack-signature", "") if valid else ""

    def parse_action(self, *, body: bytes, headers: Mapping[str, str]) -> ChatAction:
        """Return the action of an interactivity request (``payload=<JSON>``, form-encoded).

        ``block_actions`` of our buttons and ``view_submission`` of our forms are
        actions; any other type (``view_closed``, a shortcut...) is ``ignored``.
        Raises :class:`ChatInputError` naming the member that is missing or wrong.
        """
        try:
            form = parse_qs(body.decode("utf-8"), strict_parsing=False)
        except UnicodeDecodeError:
            raise ChatInputError(
                "the body is not UTF-8 form data", field="payload"
            ) from None
        raw = form.get("payload")
        if not raw:
            raise ChatInputError(
                "no 'payload' form field: send Slack's interactivity payload",
                field="payload",
            )
        try:
            payload = json.loads(raw[0])
        except json.JSONDecodeError:
            raise ChatInputError("'payload' is not JSON", field="payload") from None
        if not isinstance(payload, dict):
            raise ChatInputError("'payload' is not a JSON object", field="payload")
        kind = payload.get("type")
        if kind == "block_actions":
            action = _button(payload)
        elif kind == "view_submission":
            action = _submission(payload)
        else:
            return ChatAction(kind="ignored")
        return replace(
            action,
            workspace=_text(payload, "team", "id") or _text(payload, "user", "team_id"),
            user_id=_text(payload, "user", "id"),
        )

    def user_email(self, *, target: Target, action: ChatAction) -> str | None:
        """Return the user's email from ``users.info`` if Slack says it is confirmed."""
        try:
            response = _call(
                "users.info",
                lambda: _client(target, interactive=True).users_info(
                    user=action.user_id
                ),
            )
        except ChatDeliveryError:
            return None
        user = response.get("user") or {}
        profile = user.get("profile") or {}
        email = profile.get("email")
        if not isinstance(email, str) or user.get("is_email_confirmed") is not True:
            return None
        if user.get("deleted") or user.get("is_bot"):
            return None
        return email

    def form_open(
        self, *, target: Target, action: ChatAction, card: dict[str, Any], form: str
    ) -> None:
        """Open the reject, edit or respond modal with ``views.open`` on the click's ``trigger_id``."""
        views = {"reject": reject_view, "respond": respond_view, "edit": edit_view}
        view = views.get(form, edit_view)(card, action)
        _call(
            "views.open",
            lambda: _client(target, interactive=True).views_open(
                trigger_id=action.trigger_id, view=view
            ),
        )

    def tell(self, *, target: Target, action: ChatAction, text: str) -> None:
        """Post ``text`` with ``chat.postEphemeral`` to the acting user (errors ignored)."""
        if not action.channel or not action.user_id:
            return
        # A hint only: the message itself shows the request's state.
        with contextlib.suppress(ChatDeliveryError):
            _call(
                "chat.postEphemeral",
                lambda: _client(target, interactive=True).chat_postEphemeral(
                    channel=action.channel, user=action.user_id, text=text[:_TEXT]
                ),
            )

    def reply_body(
        self, *, action: ChatAction, reply: ChatReply
    ) -> dict[str, Any] | None:
        """Return ``{"response_action": "errors", ...}`` for a form with errors, else ``None``."""
        if not reply.errors or action.kind not in FORMS.values():
            return None
        single = {"reject_submit": REASON_BLOCK, "respond_submit": RESPONSE_BLOCK}
        first = single.get(
            action.kind,
            ARGUMENT_BLOCK + (action.fields[0][0] if action.fields else ""),
        )
        errors: dict[str, str] = {}
        for name, problem in reply.errors.items():
            if action.kind in single or not name:
                block = first
            else:
                block = ARGUMENT_BLOCK + name
            errors[block] = (errors.get(block, "") + " " + problem).strip()[:_FIELD]
        return {"response_action": "errors", "errors": errors}


def _client(target: Target, *, interactive: bool = False) -> WebClient:
    timeout = (
        INTERACTIVE_TIMEOUT_SECONDS
        if interactive
        else max(1, int(float(countersign_settings.NOTIFY_TIMEOUT_SECONDS)))
    )
    # No retry handlers: a delivery's retries are the notification task's
    # (recorded, visible in the admin), and Slack waits 3 s for an interaction.
    return WebClient(
        token=target.token,
        base_url=target.api_url,
        timeout=timeout,
        retry_handlers=[],
    )


def _call(method: str, send: Callable[[], SlackResponse]) -> SlackResponse:
    """Make one Web API call; raise :class:`ChatDeliveryError` (no token, no body) if refused."""
    try:
        return send()
    except SlackApiError as error:
        response = error.response
        headers = {k.lower(): v for k, v in (response.headers or {}).items()}
        retry_after = _seconds(headers.get("retry-after"))
        code = response.get("error") if isinstance(response.data, dict) else None
        raise ChatDeliveryError(
            f"Slack {method} answered HTTP {response.status_code}"
            + (f" {code}" if code else "")
            + (f"; retry after {retry_after:g} s" if retry_after is not None else ""),
            retry_after=retry_after,
        ) from None
    except (SlackClientError, OSError) as error:
        raise ChatDeliveryError(
            f"Slack {method}: {type(error).__name__}: {error}"[:500]
        ) from None


def _seconds(value: Any) -> float | None:
    if isinstance(value, list):
        value = value[0] if value else None
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return None
    return seconds if seconds >= 0 else None


def _text(payload: Mapping[str, Any], *path: str) -> str:
    value: Any = payload
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value if isinstance(value, str) else ""


def _approval_pk(value: Any, field: str) -> int:
    try:
        pk = int(value)
    except (TypeError, ValueError):
        raise ChatInputError(
            f"{field} is {value!r}; it must be an approval request's id", field=field
        ) from None
    if pk <= 0:
        raise ChatInputError(f"{field} must be a positive id", field=field)
    return pk


def _button(payload: dict[str, Any]) -> ChatAction:
    actions = payload.get("actions")
    if not isinstance(actions, list) or not actions or not isinstance(actions[0], dict):
        raise ChatInputError("'actions' must be a non-empty list", field="actions")
    action = actions[0]
    kind = BUTTONS.get(str(action.get("action_id")))
    if kind is None:
        return ChatAction(kind="ignored")
    channel = _text(payload, "container", "channel_id") or _text(
        payload, "channel", "id"
    )
    message_id = _text(payload, "container", "message_ts") or _text(
        payload, "message", "ts"
    )
    return ChatAction(
        kind=kind,
        approval_pk=_approval_pk(action.get("value"), "actions[0].value"),
        channel=channel,
        message_id=message_id,
        trigger_id=_text(payload, "trigger_id"),
    )


def _submission(payload: dict[str, Any]) -> ChatAction:
    view = payload.get("view")
    if not isinstance(view, dict):
        raise ChatInputError("'view' must be an object", field="view")
    kind = FORMS.get(str(view.get("callback_id")))
    if kind is None:
        return ChatAction(kind="ignored")
    try:
        meta = json.loads(str(view.get("private_metadata") or ""))
    except json.JSONDecodeError:
        meta = None
    if not isinstance(meta, dict):
        raise ChatInputError(
            "'view.private_metadata' is not the form's JSON",
            field="view.private_metadata",
        )
    values = (view.get("state") or {}).get("values")
    if not isinstance(values, dict):
        raise ChatInputError(
            "'view.state.values' must be an object", field="view.state.values"
        )
    entered = {
        block: _entered(element)
        for block, elements in values.items()
        if isinstance(elements, dict)
        for element in elements.values()
    }
    return ChatAction(
        kind=kind,
        approval_pk=_approval_pk(meta.get("approval"), "view.private_metadata"),
        channel=str(meta.get("channel") or ""),
        message_id=str(meta.get("ts") or ""),
        reason=(entered.get(REASON_BLOCK) or "").strip(),
        response=(entered.get(RESPONSE_BLOCK) or "").strip(),
        fields=tuple(
            (block[len(ARGUMENT_BLOCK) :], text)
            for block, text in entered.items()
            if block.startswith(ARGUMENT_BLOCK)
        ),
    )


def _entered(element: Any) -> str | None:
    """Return the text an input element holds: a typed value or a chosen option's value."""
    if not isinstance(element, dict):
        return None
    option = element.get("selected_option")
    if isinstance(option, dict):
        value = option.get("value")
        return value if isinstance(value, str) else None
    value = element.get("value")
    return value if isinstance(value, str) else None


# -- Block Kit: the message and the two forms ---------------------------------------


def _esc(text: Any) -> str:
    """Escape ``text`` for Slack's mrkdwn (``&``, ``<``, ``>``): model output stays text."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, indent=1)


def _when(iso: str | None) -> str:
    """Return ``iso`` as Slack's date token (shown in each reader's time zone)."""
    if not iso:
        return "—"
    moment = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    return (
        f"<!date^{int(moment.timestamp())}^{{date_short_pretty}} {{time}}|{_esc(iso)}>"
    )


def slack_message(card: Mapping[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """Return the fallback text and the Block Kit blocks showing ``card``.

    ``card`` is :func:`approvals.notifications.chat.chat_card`: the summary, risk,
    arguments (and an edit's diff), votes, waiting groups, expiry, then the
    outcome and the execution's result; buttons Approve (not for an MCP server's
    input request, answered on the web), Reject, Edit (when the tool has a
    schema) and Open in Countersign while it is pending, Undo while an approval
    can be taken back. Model output and tool results are escaped, never
    markup (no mention, no link): SEC-03.
    """
    title = str(card.get("label") or card.get("tool") or "Approval request")
    status = str(card.get("status") or "")
    risk = card.get("risk") or {}
    votes = card.get("approvals") or {}
    outcome = card.get("outcome")
    # The fallback text is mrkdwn too (and what notifications show): escaped.
    text = f"Approval {_esc(status)}: {_esc(title)}"
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": _cut(title, _HEADER)}}
    ]
    facts = [
        f"*Status*\n{_esc(status)}",
        f"*Risk*\n{_esc(risk.get('level', '—'))}",
        f"*Tool*\n`{_esc(card.get('tool'))}`",
        f"*Requested by*\n{_esc(card.get('requester') or 'unknown')}",
        f"*Thread*\n{_esc((card.get('thread') or {}).get('title', ''))}",
        f"*Expires*\n{_when(card.get('expiresAt'))}",
    ]
    if votes.get("required", 1) > 1 or votes.get("given"):
        given = ", ".join(votes.get("by") or []) or "none yet"
        facts.append(
            f"*Approvals*\n{votes.get('given', 0)} of {votes.get('required', 1)} ({_esc(given)})"
        )
    if card.get("approverGroups"):
        facts.append(f"*Approvers*\n{_esc(', '.join(card['approverGroups']))}")
    if card.get("claimedBy"):
        facts.append(f"*Claimed by*\n{_esc(card['claimedBy'])}")
    blocks.append(
        {
            "type": "section",
            "fields": [{"type": "mrkdwn", "text": _cut(f, _FIELD)} for f in facts[:10]],
        }
    )
    if risk.get("reasons"):
        blocks.append(
            {
                "type": "context",
                "elements": [
                    {
                        "type": "mrkdwn",
                        "text": _cut(
                            "Risk: " + "; ".join(_esc(r) for r in risk["reasons"]),
                            _TEXT,
                        ),
                    }
                ],
            }
        )
    if card.get("message"):
        blocks.append(_section(f"*Message*\n{_esc(card['message'])}"))
    if card.get("rationale"):
        blocks.append(_section(f"*Why the agent asks*\n{_esc(card['rationale'])}"))
    if card.get("kind") == "tool_call" or card.get("proposedArguments"):
        blocks.append(
            _section(
                f"*Arguments proposed*\n```{_esc(_json(card.get('proposedArguments')))}```"
            )
        )
    diff = card.get("argumentsDiff") or []
    if diff:
        lines = [
            f"• `{_esc(d['path'])}`: {_esc(json.dumps(d['proposed']))} → {_esc(json.dumps(d['edited']))}"
            for d in diff
        ]
        blocks.append(_section("*Edited*\n" + "\n".join(lines)))
    if outcome:
        blocks.append(_section(f"*Outcome*\n{_esc(outcome.get('summary', status))}"))
        text = f"{_esc(title)}: {_esc(outcome.get('summary', status))}"
        execution = outcome.get("execution") or {}
        if execution.get("result"):
            blocks.append(_section(f"*Result*\n```{_esc(execution['result'])}```"))
    blocks.append({"type": "actions", "elements": _buttons(card)})
    return _cut(text, _TEXT), blocks


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": _cut(text, _TEXT)}}


def _button_of(action_id: str, label: str, pk: Any, style: str = "") -> dict[str, Any]:
    button: dict[str, Any] = {
        "type": "button",
        "action_id": action_id,
        "text": {"type": "plain_text", "text": label[:_BUTTON]},
        "value": str(pk),
    }
    if style:
        button["style"] = style
    return button


def _buttons(card: Mapping[str, Any]) -> list[dict[str, Any]]:
    pk = card.get("id")
    buttons: list[dict[str, Any]] = []
    if card.get("status") == "pending":
        # An input request is answered with a value its schema describes: on the web.
        if card.get("kind") != "input":
            buttons.append(_button_of("countersign.approve", "Approve", pk, "primary"))
        buttons.append(_button_of("countersign.reject", "Reject", pk, "danger"))
        if _editable(card):
            buttons.append(_button_of("countersign.edit", "Edit", pk))
        # As on the queue: a held tool call can be answered with text instead.
        if card.get("kind") == "tool_call":
            buttons.append(_button_of("countersign.respond", "Respond", pk))
    elif card.get("undoUntil"):
        buttons.append(_button_of("countersign.undo", "Undo approval", pk))
    buttons.append(
        {
            "type": "button",
            "action_id": "countersign.open",
            "text": {"type": "plain_text", "text": "Open in Countersign"},
            "url": str(card.get("link", ""))[:3000],
        }
    )
    return buttons


def _editable(card: Mapping[str, Any]) -> bool:
    schema = card.get("parametersSchema") or {}
    return card.get("kind") == "tool_call" and bool(schema.get("properties"))


def _metadata(card: Mapping[str, Any], action: ChatAction) -> str:
    return json.dumps(
        {"approval": card.get("id"), "channel": action.channel, "ts": action.message_id}
    )


def reject_view(card: Mapping[str, Any], action: ChatAction) -> dict[str, Any]:
    """Return the modal asking why ``card``'s request is rejected (the agent is told)."""
    title = str(card.get("label") or card.get("tool"))
    return _modal(
        "countersign.reject",
        card,
        action,
        title="Reject request",
        submit="Reject",
        blocks=[
            _section(f"*{_esc(title)}*"),
            _text_input(REASON_BLOCK, "Reason (the agent is told)", max_length=2000),
        ],
    )


def respond_view(card: Mapping[str, Any], action: ChatAction) -> dict[str, Any]:
    """Return the modal asking for the answer the agent gets instead of the tool's result.

    Submitting it answers the call with that text (the tool does not run), as the
    queue's Respond does; who may is who may reject. Implements DC-03.
    """
    title = str(card.get("label") or card.get("tool"))
    return _modal(
        "countersign.respond",
        card,
        action,
        title="Respond instead",
        submit="Send answer",
        blocks=[
            _section(
                f"*{_esc(title)}*\nThe tool does not run: the agent gets your "
                "answer as the call's result and continues."
            ),
            _text_input(RESPONSE_BLOCK, "Answer for the agent", max_length=3000),
        ],
    )


def _text_input(block_id: str, label: str, *, max_length: int) -> dict[str, Any]:
    """Return a modal's multi-line text input block, read back as ``block_id``'s ``value``."""
    return {
        "type": "input",
        "block_id": block_id,
        "label": {"type": "plain_text", "text": label},
        "element": {
            "type": "plain_text_input",
            "action_id": "value",
            "multiline": True,
            "max_length": max_length,
        },
    }


def _modal(
    callback_id: str,
    card: Mapping[str, Any],
    action: ChatAction,
    *,
    title: str,
    submit: str,
    blocks: list[dict[str, Any]],
) -> dict[str, Any]:
    """Return a modal view whose submission names ``card``'s request and message."""
    return {
        "type": "modal",
        "callback_id": callback_id,
        "private_metadata": _metadata(card, action),
        "title": {"type": "plain_text", "text": title},
        "submit": {"type": "plain_text", "text": submit},
        "close": {"type": "plain_text", "text": "Cancel"},
        "blocks": blocks,
    }


def edit_view(card: Mapping[str, Any], action: ChatAction) -> dict[str, Any]:
    """Return the modal with one input per argument of the tool's schema, filled in.

    Numbers get a number input, booleans and enums a select, strings a text
    input, anything else a JSON text input. Sending it approves the edited
    arguments (validated like the web form's).
    """
    schema = card.get("parametersSchema") or {}
    properties = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    current = card.get("editedArguments") or card.get("proposedArguments") or {}
    blocks: list[dict[str, Any]] = [
        _section(
            f"*{_esc(card.get('label') or card.get('tool'))}*\nProposed:\n"
            f"```{_esc(_json(card.get('proposedArguments')))}```"
        )
    ]
    for name, spec in list(properties.items())[:90]:
        spec = spec if isinstance(spec, dict) else {}
        block: dict[str, Any] = {
            "type": "input",
            "block_id": ARGUMENT_BLOCK + str(name),
            "optional": name not in required,
            "label": {"type": "plain_text", "text": str(name)[:2000]},
            "element": _input(
                spec, current.get(name) if isinstance(current, dict) else None
            ),
        }
        if spec.get("description"):
            block["hint"] = {
                "type": "plain_text",
                "text": str(spec["description"])[:2000],
            }
        blocks.append(block)
    return _modal(
        "countersign.edit",
        card,
        action,
        title="Edit and approve",
        submit="Approve edited",
        blocks=blocks,
    )


def _option(value: str) -> dict[str, Any]:
    return {"text": {"type": "plain_text", "text": value[:75]}, "value": value[:150]}


def _input(spec: Mapping[str, Any], value: Any) -> dict[str, Any]:
    kind = spec.get("type")
    element: dict[str, Any]
    if isinstance(spec.get("enum"), list) and all(
        isinstance(v, str) for v in spec["enum"]
    ):
        element = {
            "type": "static_select",
            "options": [_option(v) for v in spec["enum"][:100]],
        }
        if isinstance(value, str) and value in spec["enum"]:
            element["initial_option"] = _option(value)
    elif kind == "boolean":
        element = {
            "type": "static_select",
            "options": [_option("true"), _option("false")],
        }
        if isinstance(value, bool):
            element["initial_option"] = _option("true" if value else "false")
    elif kind in ("integer", "number"):
        element = {"type": "number_input", "is_decimal_allowed": kind == "number"}
        if isinstance(value, int | float) and not isinstance(value, bool):
            element["initial_value"] = str(value)
    elif kind == "string":
        element = {"type": "plain_text_input"}
        if isinstance(value, str):
            element["initial_value"] = value[:3000]
    else:
        element = {"type": "plain_text_input", "multiline": True}
        if value is not None:
            element["initial_value"] = json.dumps(value, ensure_ascii=False)[:3000]
    element["action_id"] = "value"
    return element
