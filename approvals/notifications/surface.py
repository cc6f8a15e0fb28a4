"""The chat surface interface: what a chat platform implements to carry approvals.

:mod:`approvals.notifications.chat` describes the whole; Slack's implementation is
:mod:`approvals.notifications.slack`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from approvals.notifications.targets import Target

if TYPE_CHECKING:
    from approvals.models import ChatMessage

#: What a person did: a button (``approve``, ``reject``, ``edit``, ``undo``, ``open``),
#: a form sent (``reject_submit``, ``edit_submit``), or something to acknowledge only.
ActionKind = Literal[
    "approve",
    "reject",
    "edit",
    "respond",
    "undo",
    "open",
    "reject_submit",
    "edit_submit",
    "respond_submit",
    "ignored",
]


class ChatInputError(Exception):
    """A chat request that cannot be read; ``field`` names the member at fault."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


class ChatDeliveryError(Exception):
    """The chat platform did not take a message; ``str()`` is the sanitized reason.

    ``retry_after`` (seconds) is the platform's own wait (HTTP 429's
    ``Retry-After``), or ``None``.
    """

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


@dataclass(frozen=True, slots=True)
class PostedMessage:
    """Where a surface posted a message: ``channel`` and the surface's ``message_id``."""

    channel: str
    message_id: str


@dataclass(frozen=True, slots=True)
class ChatAction:
    """One thing a chat user did, as a surface parsed it.

    ``approval_pk`` is the request it acts on (``None`` for ``ignored``);
    ``workspace`` and ``user_id`` who did it (Slack: team and user ids);
    ``channel`` and ``message_id`` the request's message; ``trigger_id`` what a
    form needs to open (Slack's ``trigger_id``); ``reason`` a rejection's reason;
    ``response`` an approver's answer for the agent (the respond form);
    ``fields`` an edit form's values as ``(argument name, text or None)``.
    """

    kind: ActionKind
    approval_pk: int | None = None
    workspace: str = ""
    user_id: str = ""
    channel: str = ""
    message_id: str = ""
    trigger_id: str = ""
    reason: str = ""
    response: str = ""
    fields: tuple[tuple[str, str | None], ...] = ()


@dataclass(frozen=True, slots=True)
class ChatReply:
    """What an action came to, for the surface's HTTP answer.

    ``errors`` maps a form field (``reason``, or an argument's name) to what is
    wrong with it; empty when the form may close.
    """

    errors: Mapping[str, str] = field(default_factory=dict)


class ChatSurface(Protocol):
    """What a chat platform implements to carry approvals (module docstring)."""

    kind: str

    def post(
        self, *, target: Target, channel: str, card: dict[str, Any]
    ) -> PostedMessage:
        """Post ``card`` to ``channel``; raise :class:`ChatDeliveryError`."""
        ...

    def update(
        self, *, target: Target, message: ChatMessage, card: dict[str, Any]
    ) -> None:
        """Rewrite ``message`` with ``card``; raise :class:`ChatDeliveryError`."""
        ...

    def verify(self, *, target: Target, body: bytes, headers: Mapping[str, str]) -> str:
        """Return the request's signature if ``target`` signed it within the window, else ``""``."""
        ...

    def parse_action(self, *, body: bytes, headers: Mapping[str, str]) -> ChatAction:
        """Return the action in a verified request's body; raise :class:`ChatInputError`."""
        ...

    def user_email(self, *, target: Target, action: ChatAction) -> str | None:
        """Return the acting user's verified email address, or ``None``."""
        ...

    def form_open(
        self, *, target: Target, action: ChatAction, card: dict[str, Any], form: str
    ) -> None:
        """Open the ``"reject"``, ``"edit"`` or ``"respond"`` form for ``card``; raise :class:`ChatDeliveryError`."""
        ...

    def tell(self, *, target: Target, action: ChatAction, text: str) -> None:
        """Show ``text`` to the acting user only (best effort: never raises)."""
        ...

    def reply_body(
        self, *, action: ChatAction, reply: ChatReply
    ) -> dict[str, Any] | None:
        """Return the JSON answer to the inbound request, or ``None`` for an empty 200."""
        ...
