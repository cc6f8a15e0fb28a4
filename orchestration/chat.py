"""Deciding from a chat message: one step for every chat surface's button and form.

The web shell verifies and parses the platform's request
(:mod:`approvals.notifications.chat`) and hands the :class:`ChatAction` here. The
person is mapped to their Countersign account, then the action goes through the
same step as the web, the admin, the REST API and AG-UI resumes
(:func:`orchestration.pipeline.approval_decide`, or ``approval_undo``), so every
rule applies: the decide permission, the tool's permission, approver groups,
four-eyes, N of M, claims, expiry. An unmapped person, a refusal or a stale
message is answered to that person only, and nothing is recorded.
Implements SEC-02, DC-03.
"""

from __future__ import annotations

from approvals.authorization import approval_tool
from approvals.exceptions import (
    ApprovalAlreadyDecided,
    ApprovalError,
    ApprovalExpired,
    InvalidEditedArguments,
    ReasonRequired,
)
from approvals.models import ApprovalRequest
from approvals.notifications.chat import (
    ChatAction,
    ChatDeliveryError,
    ChatReply,
    chat_card,
    chat_surface,
    chat_user_link_url,
    chat_user_resolve,
    edit_values,
)
from approvals.notifications.delivery import updates_create
from approvals.notifications.targets import Target
from approvals.services import approval_undo
from core.conf import countersign_settings
from core.text import sentence
from orchestration.pipeline import approval_decide

#: Forms whose errors the platform shows on the form itself.
_FORMS = ("reject_submit", "edit_submit", "respond_submit")


def chat_action_take(*, target: Target, action: ChatAction) -> ChatReply:
    """Carry out ``action`` (a verified chat request of ``target``); return the reply.

    - ``approve``: approves through ``approval_decide`` (with the web's undo window,
      ``DECISION_UNDO_SECONDS``); ``undo`` takes it back while it may be;
    - ``reject`` / ``edit`` / ``respond``: open the reason form / the form with the
      tool's fields / the answer form;
    - ``reject_submit``: rejects with the reason; ``respond_submit``: answers the
      call with the text instead of running it (``decision="respond"``, the
      queue's rules: ``respond_not_supported`` for a request that holds no
      tool call); ``edit_submit``: approves the
      edited arguments, read per the tool's schema and validated like the web
      form's (``InvalidEditedArguments`` → the form's errors);
    - ``open`` / ``ignored``: nothing.

    The chat message itself follows through the ``approval_changed`` signal;
    an action on a decided, expired or unknown request refreshes it and tells
    the person. Never raises for a person's mistake or a refusal: the reply's
    ``errors`` (forms) or a message only they see says what happened.
    Implements SEC-02, DC-03.
    """
    if action.kind in ("open", "ignored") or action.approval_pk is None:
        return ChatReply()
    surface = chat_surface(target.kind)
    user = chat_user_resolve(target=target, action=action)
    if user is None:
        link = chat_user_link_url(kind=target.kind, action=action)
        return _refused(
            target,
            action,
            "Countersign does not know who you are, so nothing was recorded. "
            "Your chat account's email must be verified and equal your Countersign "
            f"email, or link your account once (sign-in required): {link}",
        )
    approval = (
        ApprovalRequest.objects.select_related("thread", "run", "decided_by")
        .filter(pk=action.approval_pk)
        .first()
    )
    if approval is None:
        return _refused(
            target,
            action,
            f"Approval request {action.approval_pk} no longer exists in Countersign.",
        )
    try:
        if action.kind in ("reject", "edit", "respond"):
            if approval.status != ApprovalRequest.Status.PENDING:
                raise ApprovalAlreadyDecided(f"this request is {approval.status}")
            surface.form_open(
                target=target, action=action, card=chat_card(approval), form=action.kind
            )
            return ChatReply()
        if action.kind == "undo":
            approval_undo(approval=approval, user=user)
            return ChatReply()
        if action.kind == "reject_submit":
            approval_decide(
                approval=approval,
                decided_by=user,
                decision="reject",
                reason=action.reason,
            )
            return ChatReply()
        if action.kind == "respond_submit":
            approval_decide(
                approval=approval,
                decided_by=user,
                decision="respond",
                response=action.response,
            )
            return ChatReply()
        edited = None
        if action.kind == "edit_submit":
            tool = approval_tool(approval)
            schema = getattr(tool, "parameters", None)
            edited, errors = edit_values(
                schema if isinstance(schema, dict) else None, action.fields
            )
            if errors:
                return ChatReply(errors=errors)
        decided = approval_decide(
            approval=approval,
            decided_by=user,
            decision="approve",
            edited_arguments=edited,
            undo_seconds=float(countersign_settings.DECISION_UNDO_SECONDS),
        )
        if decided.status == ApprovalRequest.Status.PENDING:
            _tell_progress(target, action, decided, user.get_username())
        return ChatReply()
    except (ApprovalAlreadyDecided, ApprovalExpired) as stale:
        updates_create(approval=approval)
        return _refused(target, action, sentence(f"Nothing recorded: {stale}"))
    except (InvalidEditedArguments, ReasonRequired) as invalid:
        return _refused(target, action, str(invalid), field=_field_of(invalid, action))
    except ApprovalError as refused:
        return _refused(target, action, sentence(f"Nothing recorded: {refused}"))
    except ChatDeliveryError as failed:
        return _refused(target, action, f"The form did not open: {failed}")


def _refused(
    target: Target, action: ChatAction, text: str, *, field: str = ""
) -> ChatReply:
    """Tell the person ``text``; on a form, show it on the form as well."""
    if action.kind in _FORMS:
        return ChatReply(errors={field: text})
    chat_surface(target.kind).tell(target=target, action=action, text=text)
    return ChatReply()


def _field_of(error: ApprovalError, action: ChatAction) -> str:
    """Return the form field an error is about: the reason, or the argument it names."""
    if isinstance(error, ReasonRequired):
        return "reason"
    message = str(error)
    return next((name for name, _ in action.fields if repr(name) in message), "")


def _tell_progress(
    target: Target, action: ChatAction, approval: ApprovalRequest, user_name: str
) -> None:
    """Tell a voter whose approval did not decide yet how many more are needed."""
    card = chat_card(approval)
    votes = card.get("approvals") or {}
    who = (card.get("authorization") or {}).get("whoCan") or {}
    waiting = [
        *(u for u in who.get("users", []) if u != user_name),
        *(f"group {g}" for g in who.get("groups", [])),
    ]
    text = (
        f"Your approval is recorded: {votes.get('given', 0)} of "
        f"{votes.get('required', 1)}. Waiting for another approver"
        + (f" ({', '.join(map(str, waiting))})" if waiting else "")
        + "."
    )
    chat_surface(target.kind).tell(target=target, action=action, text=text)
