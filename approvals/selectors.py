"""Reads for the approval queue: who may see which requests, and the queue's order.

Implements SEC-02 (an operator sees exactly what was proposed and decided) and the
visibility rules of the REST API (DC-05).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

from django.db.models import (
    Exists,
    JSONField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
)
from django.utils import timezone

from approvals.authorization import approval_authorization, approval_tool
from approvals.facts import approval_facts, approval_review, arguments_diff
from approvals.governance import assigned_to
from approvals.models import (
    DECIDE_PERMISSION,
    ApprovalGrant,
    ApprovalRequest,
    ApprovalSnooze,
    ApprovalVote,
    ToolExecution,
    pending_first,
)
from approvals.services.decisions import edited_arguments_validate
from approvals.services.notify import approval_snapshot
from core.conf import countersign_settings
from core.types import AnyUser, JSONValue
from threads.models import Message, ToolCall
from threads.selectors import thread_named, thread_visible_to

VIEW_PERMISSION = "approvals.view_approvalrequest"


def can_see_queue(user: AnyUser) -> bool:
    """Return whether ``user`` may open the queue: the decide or the view permission.

    The one check the queue page, the thread page's queue link and the admin's
    read-only request pages share (staff without either see only their own).
    Implements SEC-06.
    """
    return bool(user.has_perm(DECIDE_PERMISSION) or user.has_perm(VIEW_PERMISSION))


def approval_visible_to(*, user: AnyUser) -> QuerySet[ApprovalRequest]:
    """Return the requests ``user`` may see.

    Holders of the decide or view permission see every request; other users
    (staff included: ``is_staff`` only opens the admin) see the requests on the
    threads they may read. Implements SEC-06.
    """
    approvals = ApprovalRequest.objects.select_related(
        "tool_call",
        "thread",
        "run",
        "decided_by",
        "supersedes",
        "superseded_by__tool_call",
        "claimed_by",
    ).prefetch_related("approver_groups", "votes__voter")
    if not getattr(user, "is_authenticated", False):
        return approvals.none()
    if can_see_queue(user):
        return approvals
    return approvals.filter(thread__in=thread_visible_to(user=user))


def approval_list(
    *,
    user: AnyUser,
    tool: str | None = None,
    thread_id: str | None = None,
    status: str | None = None,
    older_than: float | None = None,
    assigned_to_me: bool = False,
) -> QuerySet[ApprovalRequest]:
    """Return the requests ``user`` may see: pending first, then newest first.

    ``older_than`` (seconds) keeps requests made at least that long ago;
    ``assigned_to_me`` only the pending ones ``user`` may work on now
    (:func:`approvals.governance.assigned_to`) and has not snoozed.
    """
    approvals = approval_visible_to(user=user)
    if assigned_to_me:
        approvals = approvals.filter(
            pk__in=assigned_to(
                user=user, approvals=ApprovalRequest.objects.all()
            ).values("pk")
        ).exclude(Exists(_live_snoozes(user)))
    if tool is not None:
        approvals = approvals.filter(tool_name=tool)
    if thread_id is not None:
        approvals = approvals.filter(thread_named(user=user, thread_id=thread_id))
    if status is not None:
        approvals = approvals.filter(status=status)
    if older_than is not None:
        approvals = approvals.filter(
            requested_at__lte=timezone.now() - timedelta(seconds=older_than)
        )
    # pending_first() is the indexed expression (approval_list_order); a page's
    # executions and results come with its rows (approval_outcome), not a query each.
    return (
        approvals.select_related("tool_call__execution")
        .annotate(pending_rank=pending_first(), call_result=_call_result())
        .order_by("pending_rank", "-requested_at", "-id")
    )


def _call_result() -> Subquery:
    """Return the content of the tool message answering a request's own call (or NULL)."""
    return Subquery(
        Message.objects.filter(
            thread_id=OuterRef("thread_id"),
            role=Message.Role.TOOL,
            tool_call_id=OuterRef("tool_call__tool_call_id"),
        ).values("content")[:1],
        output_field=JSONField(),
    )


def approval_get(
    *, user: AnyUser, pk: int, prefetch: bool = True
) -> ApprovalRequest | None:
    """Return request ``pk`` if ``user`` may see it, else ``None``.

    ``prefetch=False`` leaves out its votes and approver groups: for a caller that
    decides the request, which reads them again under its row lock anyway (B2).
    """
    approvals = approval_visible_to(user=user)
    if not prefetch:
        approvals = approvals.prefetch_related(None)
    return approvals.filter(pk=pk).first()


# -- the context of one request (queue card, admin change form, thread page) ------

#: Longest excerpt of a rationale or an earlier result shown on a card, in characters.
CONTEXT_TEXT_CHARS = 600


def content_text(content: JSONValue) -> str:
    """Return the text of an AG-UI message ``content``: the string, or its text parts joined.

    Media parts are named (``[image]``) rather than dropped silently (TC-15).
    """
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return "" if content is None else str(content)
    pieces = []
    for part in content:
        if isinstance(part, dict) and part.get("type") == "text":
            pieces.append(str(part.get("text", "")))
        elif isinstance(part, dict):
            pieces.append(f"[{part.get('type', 'part')}]")
    return "\n".join(p for p in pieces if p)


def _excerpt(text: str) -> str:
    text = text.strip()
    if len(text) <= CONTEXT_TEXT_CHARS:
        return text
    return text[: CONTEXT_TEXT_CHARS - 1].rstrip() + "…"


def _turn_messages(approval: ApprovalRequest) -> list[Message]:
    """Return the messages of the turn that proposed ``approval``'s call, oldest first.

    The turn runs from the last user message before the call's assistant message
    up to that message (the call's own run segments included).
    """
    call = approval.call
    messages = Message.objects.filter(thread_id=approval.thread_id)
    anchor = None
    if call is not None and call.parent_message_id:
        anchor = messages.filter(message_id=call.parent_message_id).first()
    if anchor is not None:
        upto = messages.filter(
            Q(position__lt=anchor.position)
            | Q(position=anchor.position, id__lte=anchor.pk)
        )
    else:
        created = call.created_at if call is not None else approval.requested_at
        upto = messages.filter(created_at__lte=created)
    last_user = upto.filter(role=Message.Role.USER).order_by("-position", "-id").first()
    if last_user is not None:
        upto = upto.filter(
            Q(position__gt=last_user.position)
            | Q(position=last_user.position, id__gt=last_user.pk)
        )
    return list(upto.order_by("position", "id"))


def approval_rationale(approval: ApprovalRequest) -> str:
    """Return the assistant text that preceded ``approval``'s call in its turn, or ``""``.

    The call's own assistant message when it has text, else the last assistant
    text of the turn. Model output, shown as text only (SEC-03).
    """
    texts = [
        content_text(m.content)
        for m in _turn_messages(approval)
        if m.role == Message.Role.ASSISTANT
    ]
    texts = [t for t in texts if t.strip()]
    return _excerpt(texts[-1]) if texts else ""


def approval_based_on(approval: ApprovalRequest) -> list[dict[str, Any]]:
    """Return the tool results of the same turn the call was proposed after.

    ``[{"toolCallId", "tool", "content", "error"}]``, oldest first; ``content`` is
    text (an excerpt), data from wherever the tool got it (SEC-03).
    """
    results = [m for m in _turn_messages(approval) if m.role == Message.Role.TOOL]
    names = dict(
        ToolCall.objects.filter(
            thread_id=approval.thread_id,
            tool_call_id__in=[m.tool_call_id for m in results],
        ).values_list("tool_call_id", "name")
    )
    return [
        {
            "toolCallId": m.tool_call_id,
            "tool": names.get(m.tool_call_id or "", m.name or ""),
            "content": _excerpt(content_text(m.content)),
            "error": m.error,
        }
        for m in results
    ]


#: Risk levels from least to most; the policy's ``risk_level`` uses the same words.
RISK_LEVELS = ("low", "medium", "high", "critical")


def approval_risk(
    approval: ApprovalRequest, *, arguments: JSONValue | None = None
) -> dict[str, Any]:
    """Return ``{"level": "critical"|"high"|"medium"|"low", "reasons": [str]}`` for ``approval``.

    Graded on the arguments that would run (``approved_arguments``), or on
    ``arguments`` when given: an approver's edit before it is approved
    (:func:`approval_edit_preview`), so the confirmation shows the risk of what
    is about to run.

    The one risk every surface shows (REST ``risk``, queue, admin, thread page,
    AG-UI interrupt metadata, metrics). Proportionate to what the call does:
    a numeric argument over ``COUNTERSIGN["RISK_THRESHOLDS"][tool][argument]``
    is high; a destructive tool (declared, or an MCP server's
    ``destructiveHint``) is high, unless thresholds are declared for it and
    every one of them is present and within its limit, then medium (a 0.99
    refund is not a 150.00 one). Low: a read-only tool. Medium: any other
    write. A policy's declared ``risk_level`` / ``risk_reason`` (stored on the
    request when it was routed) joins them: the level is the higher of the
    declared and the computed one (a policy cannot talk a call down), its
    reason (``"policy: ..."``) listed last. Destructive calls are confirmed
    before approval at any level. Implements LP-01.
    """
    tool = approval_tool(approval)
    reasons = []
    computed = "medium"
    destructive = approval.is_destructive or getattr(tool, "is_destructive", False)
    thresholds = (countersign_settings.RISK_THRESHOLDS or {}).get(
        approval.tool_name, {}
    )
    if arguments is None:
        arguments = approval.approved_arguments
    over, within = [], []
    for name, limit in sorted(thresholds.items()):
        value = arguments.get(name) if isinstance(arguments, dict) else None
        numeric = isinstance(value, int | float) and not isinstance(value, bool)
        if numeric and value > limit:
            over.append(f"{name} {value:g} is over the policy threshold {limit:g}")
        elif numeric:
            within.append(f"{name} {value:g} is within the policy threshold {limit:g}")
    graded = bool(thresholds) and len(within) == len(thresholds)
    if destructive and graded:
        reasons.append(
            "destructive: the tool declares that it changes or deletes data, "
            f"but {' and '.join(within)}"
        )
    elif destructive:
        reasons.append("destructive: the tool declares that it changes or deletes data")
        computed = "high"
    if over:
        reasons.extend(over)
        computed = "high"
    if (
        computed == "medium"
        and not destructive
        and getattr(tool, "is_read_only", False)
    ):
        computed = "low"
        reasons.append("read-only: the tool changes nothing")
    elif computed == "medium" and not destructive:
        reasons.append("the tool writes; its policy asks a person")
    declared = approval.risk_level if approval.risk_level in RISK_LEVELS else ""
    level = max((computed, declared or computed), key=RISK_LEVELS.index)
    if approval.risk_reason:
        reasons.append(f"policy: {approval.risk_reason}")
    elif level != computed:
        reasons.append(f"policy: {declared} risk")
    return {"level": level, "reasons": reasons}


def approval_outcome(approval: ApprovalRequest) -> dict[str, Any] | None:
    """Return how a decided request ended, in words, or ``None`` while it is pending.

    ``{"status", "decidedBy", "decidedAt", "reason", "summary", "execution":
    {"state", "error", "result", "finishedAt"} | None}``; ``summary`` is a
    sentence ("approved by ada at 12:00:03 UTC; executed: succeeded").
    """
    if approval.status == ApprovalRequest.Status.PENDING:
        return None
    who = getattr(approval.decided_by, "username", None)
    when = approval.decided_at
    execution = None
    record = approval.call_execution()
    if record is not None:
        content = approval.call_result_content()
        execution = {
            "state": record.state,
            "error": record.error,
            "result": _excerpt(content_text(content)) if content is not None else "",
            "finishedAt": record.finished_at.isoformat()
            if record.finished_at
            else None,
        }
    summary = str(approval.status)
    if who:
        summary += f" by {who}"
    if when:
        summary += f" at {when.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"
    if approval.reason:
        summary += f": {approval.reason}"
    if execution is not None:
        label = ToolExecution.State(record.state).label if record else ""
        summary += f"; execution {label}"
        if execution["error"]:
            summary += f" ({execution['error']})"
    return {
        "status": approval.status,
        "decidedBy": who,
        "decidedAt": when.isoformat() if when else None,
        "reason": approval.reason,
        "summary": summary,
        "execution": execution,
    }


def approval_undo_until(approval: ApprovalRequest) -> str | None:
    """Return (ISO 8601) until when ``approval`` can be undone, or ``None``.

    Set while an approved call's execution waits, never attempted, for its
    ``not_before`` (:func:`approvals.services.decisions.approval_undo`).
    """
    if approval.status != ApprovalRequest.Status.APPROVED:
        return None
    execution = approval.call_execution()
    if (
        execution is None
        or execution.state != ToolExecution.State.QUEUED
        or execution.attempts != 0
        or execution.not_before is None
        or execution.not_before <= timezone.now()
    ):
        return None
    return execution.not_before.isoformat()


def approval_edit_preview(
    approval: ApprovalRequest, *, arguments: JSONValue
) -> dict[str, Any]:
    """Return what approving ``approval`` with the edited ``arguments`` would mean.

    ``{"arguments", "risk", "review", "needsConfirmation"}``: the edit as it
    would run (validated like an approval's edit), its risk
    (:func:`approval_risk`, so an edit that crosses a threshold reads high, with
    the threshold among the reasons) and its review
    (:func:`approvals.facts.approval_review`: summary, facts, warnings), and
    whether the page must ask before approving it (destructive, or high risk).
    The one reading of an edit that every surface's confirmation shows. Changes
    nothing. Raises :class:`approvals.exceptions.InvalidEditedArguments` (naming
    the field and what to do) for arguments the approval would refuse.
    Implements LP-01, SEC-02.
    """
    edited = edited_arguments_validate(approval=approval, edited=arguments).as_dict()
    risk = approval_risk(approval, arguments=edited)
    tool = approval_tool(approval)
    destructive = approval.is_destructive or getattr(tool, "is_destructive", False)
    return {
        "arguments": edited,
        "risk": risk,
        "review": approval_review(approval, arguments=edited),
        "needsConfirmation": bool(destructive) or risk["level"] in ("high", "critical"),
    }


def approval_snoozed_until(approval: ApprovalRequest, user: AnyUser) -> str | None:
    """Return (ISO 8601) until when ``user`` snoozed pending ``approval``, or ``None``.

    ``None`` for a request that is not pending, an anonymous user, no snooze, or
    one whose time has passed (:class:`approvals.models.ApprovalSnooze`). One query.
    """
    pk = getattr(user, "pk", None)
    if pk is None or approval.status != ApprovalRequest.Status.PENDING:
        return None
    until = (
        ApprovalSnooze.objects.filter(
            approval=approval, user_id=pk, until__gt=timezone.now()
        )
        .values_list("until", flat=True)
        .first()
    )
    return until.isoformat() if until else None


def approval_context(
    approval: ApprovalRequest, user: AnyUser, *, detail: bool = True
) -> dict[str, Any]:
    """Return everything a card shows about ``approval`` to ``user``, as one JSON dict.

    Shared by the queue, the admin change form and the thread page. Keys: those
    of :func:`approvals.services.notify.approval_snapshot` (``id``, ``tool``,
    ``label``, ``kind``, ``status``, ``threadId``, ``proposedArguments``,
    ``editedArguments``, ``requestedAt``, ``expiresAt``, ``decidedBy``...) and
    ``thread`` ``{"threadId", "title", "url"}``, ``callUrl`` (the call in its thread, ``#call-<toolCallId>``),
    ``requester`` (username), ``agent``, ``rationale`` (assistant text before the
    call), ``basedOn`` (:func:`approval_based_on`), ``risk``
    (:func:`approval_risk`), ``requestedAt``, ``expiresAt``, ``undoUntil``
    (ISO time until which an approval may be undone, or ``None``),
    ``snoozedUntil`` (:func:`approval_snoozed_until` for ``user``),
    ``proposedArguments``, ``editedArguments``, ``argumentsDiff``
    (:func:`arguments_diff`), ``parametersSchema`` (the tool's JSON Schema, for the
    edit form, or ``None``), ``canAuthorize`` and ``authorization``
    (:meth:`approvals.authorization.Authorization.as_json`), ``outcome``
    (:func:`approval_outcome`), ``facts`` (:func:`approvals.facts.approval_facts`
    for ``user``: votes, waiting groups, proposed vs approved arguments, who
    decided, the phase and the sentences every surface shows). Model output and tool results are plain text
    for the page to render as text (SEC-03). ``detail=False`` (a queue line
    that is not open) leaves out what reads the thread's messages:
    ``rationale`` and ``basedOn`` are ``None`` and ``detail`` is false, and the
    page reads the card again when it is opened. Implements SEC-02, DC-03.
    """
    thread = approval.thread
    call = approval.call
    tool = approval_tool(approval)
    authorization = approval_authorization(approval, user)
    requester = approval.requested_by or thread.owner
    thread_url = f"/threads/{quote(thread.thread_id)}/"
    facts = approval_facts(approval, user)
    parameters = getattr(tool, "parameters", None)
    return {
        # The broadcast shape first (label, schema verdict, re-approval, decision).
        **approval_snapshot(approval),
        "thread": {
            "threadId": thread.thread_id,
            "title": thread.title or "(untitled thread)",
            "url": thread_url,
        },
        "callUrl": thread_url
        + (f"#call-{quote(call.tool_call_id)}" if call is not None else ""),
        "requester": getattr(requester, "username", None),
        "agent": approval.run.agent,
        "detail": detail,
        "rationale": approval_rationale(approval) if detail else None,
        "basedOn": approval_based_on(approval) if detail else None,
        "risk": approval_risk(approval),
        "undoUntil": facts["undoUntil"],
        "snoozedUntil": approval_snoozed_until(approval, user),
        "argumentsDiff": arguments_diff(
            approval.proposed_arguments, approval.edited_arguments
        ),
        "parametersSchema": parameters if isinstance(parameters, dict) else None,
        "canAuthorize": authorization.can_authorize,
        "authorization": authorization.as_json(),
        "outcome": approval_outcome(approval),
        "facts": facts,
    }


#: The queue's views: what each lists (``snoozed``: the pending requests the
#: viewer snoozed, :mod:`approvals.services.snooze`).
QUEUE_VIEWS = ("pending", "decided", "snoozed")
#: The pending view's orders: by urgency (soonest expiry, then the riskier) or age.
QUEUE_SORTS = ("expires", "requested")
#: How many requests one page of the queue shows.
QUEUE_PAGE_SIZE = 25


def approvals_waiting_for(
    *, user: AnyUser, approvals: QuerySet[ApprovalRequest] | None = None
) -> QuerySet[ApprovalRequest]:
    """Return the pending requests of ``approvals`` that wait for ``user`` to decide.

    ``approvals`` defaults to every request ``user`` may see. Waiting for a user:
    assigned to them (:func:`approvals.governance.assigned_to`: their groups or
    claim, not their own under four-eyes), not voted on by them already and not
    snoozed by them. The one definition behind the queue's "I can decide" view and
    its count, and the tab title's count (``/attention.json``), so the two never
    disagree. Implements DC-03.
    """
    if approvals is None:
        approvals = approval_visible_to(user=user)
    voted = ApprovalVote.objects.filter(
        approval=OuterRef("pk"),
        voter_id=getattr(user, "pk", None),
        reset_at__isnull=True,
    )
    return (
        assigned_to(user=user, approvals=approvals)
        .exclude(Exists(voted))
        .exclude(Exists(_live_snoozes(user)))
    )


def approval_queue(
    *,
    user: AnyUser,
    view: str = "pending",
    tool: str = "",
    agent: str = "",
    requester: str = "",
    risk: str = "",
    search: str = "",
    sort: str = "expires",
    mine: bool = False,
    page: int = 1,
) -> dict[str, Any]:
    """Return one page of the queue for ``user``: ``{"cards", "page", "pages", "total"}``.

    ``cards`` are :func:`approval_context` dicts, at most :data:`QUEUE_PAGE_SIZE`;
    ``page`` (1-based, clamped to the last page) and ``pages`` say where the page
    is, ``total`` how many requests match. ``view`` ``pending`` (urgent first with
    ``sort="expires"``: soonest expiry, destructive calls first among equals;
    else oldest request first), ``decided`` (most recently decided first) or
    ``snoozed`` (the pending requests ``user`` snoozed, soonest back first);
    ``mine`` keeps the pending requests ``user`` can decide now (assigned to them,
    not their own under four-eyes, not voted on already, not snoozed by them);
    ``tool``, ``agent``,
    ``requester`` (username) filter exactly, ``risk`` by level, ``search``
    matches tool, thread title, requester, reason and the arguments' text.
    Counting and paging happen in the database; only one page's cards are
    built, except that a ``risk`` filter (computed per request) reads every
    match. Implements DC-03.
    """
    approvals = approval_visible_to(user=user).select_related(
        "requested_by", "thread__owner"
    )
    if view == "decided":
        approvals = approvals.exclude(status=ApprovalRequest.Status.PENDING).order_by(
            "-decided_at", "-id"
        )
    elif view == "snoozed":
        approvals = (
            approvals.filter(status=ApprovalRequest.Status.PENDING)
            .annotate(snoozed_until=Subquery(_live_snoozes(user).values("until")[:1]))
            .filter(snoozed_until__isnull=False)
            .order_by("snoozed_until", "id")
        )
    else:
        approvals = approvals.filter(status=ApprovalRequest.Status.PENDING)
        approvals = approvals.order_by(
            *(
                ("expires_at", "-is_destructive", "id")
                if sort == "expires"
                else ("requested_at", "id")
            )
        )
        if mine:
            approvals = approvals_waiting_for(user=user, approvals=approvals)
    if tool:
        approvals = approvals.filter(tool_name=tool)
    if agent:
        approvals = approvals.filter(run__agent=agent)
    if requester:
        approvals = approvals.filter(
            Q(requested_by__username=requester)
            | Q(requested_by__isnull=True, thread__owner__username=requester)
        )
    if search:
        approvals = approvals.filter(
            Q(tool_name__icontains=search)
            | Q(thread__title__icontains=search)
            | Q(requested_by__username__icontains=search)
            | Q(reason__icontains=search)
            | Q(tool_call__arguments_text__icontains=search)
        )
    if risk:
        rows = [a for a in approvals if approval_risk(a)["level"] == risk]
        total = len(rows)
    else:
        total = approvals.count()
    pages = max(1, -(-total // QUEUE_PAGE_SIZE))
    page = min(max(1, page), pages)
    window = slice((page - 1) * QUEUE_PAGE_SIZE, page * QUEUE_PAGE_SIZE)
    if risk:
        chosen = rows[window]
    else:
        # The page's ids first (a narrow, distinct read), then their rows: DISTINCT
        # over every column of 1,000 joined rows costs more than the page itself.
        ids = list(approvals.values_list("pk", flat=True)[window])
        rows_by_pk = (
            approval_visible_to(user=user)
            .select_related("requested_by", "thread__owner", "tool_call__execution")
            .annotate(call_result=_call_result())
            .in_bulk(ids)
        )
        chosen = [rows_by_pk[pk] for pk in ids if pk in rows_by_pk]
    return {
        # The first line opens selected: its detail comes with the page.
        "cards": [
            approval_context(a, user, detail=index == 0)
            for index, a in enumerate(chosen)
        ],
        "page": page,
        "pages": pages,
        "total": total,
    }


def _live_snoozes(user: AnyUser) -> QuerySet[ApprovalSnooze]:
    """Return ``user``'s snoozes of the outer query's request that have not ended yet."""
    pk = getattr(user, "pk", None)
    if pk is None:  # anonymous: nothing is snoozed
        return ApprovalSnooze.objects.none()
    return ApprovalSnooze.objects.filter(
        approval=OuterRef("pk"), user_id=pk, until__gt=timezone.now()
    )


def approval_queue_facets(*, user: AnyUser) -> dict[str, list[str]]:
    """Return the values the queue's filters offer: ``{"tools", "agents", "requesters"}``."""
    # No order: DISTINCT would otherwise be taken over the ordering columns too.
    approvals = approval_visible_to(user=user).order_by()
    tools = approvals.values_list("tool_name", flat=True).distinct()
    agents = approvals.values_list("run__agent", flat=True).distinct()
    requesters = approvals.values_list("thread__owner__username", flat=True).distinct()
    return {
        "tools": sorted({t for t in tools if t}),
        "agents": sorted({a for a in agents if a}),
        "requesters": sorted({r for r in requesters if r}),
    }


def grant_list(
    *, user: AnyUser, tool: str | None = None, active: bool | None = None
) -> QuerySet[ApprovalGrant]:
    """Return the scoped grants ``user`` may see, newest first (deciders and viewers see all).

    ``active`` true keeps the unrevoked, unexpired ones; false the others.
    """
    grants = ApprovalGrant.objects.select_related(
        "thread", "user", "granted_by", "revoked_by"
    )
    if not getattr(user, "is_authenticated", False) or not (can_see_queue(user)):
        return grants.none()
    if tool is not None:
        grants = grants.filter(tool_name=tool)
    if active is not None:
        live = Q(revoked_at__isnull=True, expires_at__gt=timezone.now())
        grants = grants.filter(live) if active else grants.exclude(live)
    return grants


def grant_get(*, user: AnyUser, pk: int) -> ApprovalGrant | None:
    """Return grant ``pk`` if ``user`` may see it, else ``None``."""
    return grant_list(user=user).filter(pk=pk).first()


def approvals_past_expiry(*, now: datetime) -> list[ApprovalRequest]:
    """Return the pending requests whose ``expires_at`` is at or before ``now``.

    Read without locks: the expiring service locks each and checks it again.
    """
    return list(
        ApprovalRequest.objects.filter(
            status=ApprovalRequest.Status.PENDING, expires_at__lte=now
        )
    )


def approvals_pending_summary() -> tuple[dict[tuple[str, str], int], datetime | None]:
    """Return the pending requests counted by ``(group, risk level)``, and the oldest's request time.

    A request routed to several groups counts once under each; one any decider
    may take counts under the group ``""``. The risk level is
    :func:`approval_risk`'s. The time is ``None`` when nothing is pending. For the
    metrics endpoint (docs/observability.md): reads every pending request.
    """
    counts: dict[tuple[str, str], int] = {}
    oldest: datetime | None = None
    pending = (
        ApprovalRequest.objects.filter(status=ApprovalRequest.Status.PENDING)
        .select_related("run")
        .prefetch_related("approver_groups")
    )
    for approval in pending.iterator(chunk_size=500):
        level = str(approval_risk(approval)["level"])
        for group in [g.name for g in approval.approver_groups.all()] or [""]:
            counts[(group, level)] = counts.get((group, level), 0) + 1
        if oldest is None or approval.requested_at < oldest:
            oldest = approval.requested_at
    return counts, oldest


#: An external call's ``status`` by its call's state (docs/integrations.md).
_EXTERNAL_STATUS: dict[str, str] = {
    ToolCall.State.PENDING: "pending",
    ToolCall.State.AWAITING_APPROVAL: "pending",
    ToolCall.State.APPROVED: "approved",
    ToolCall.State.EXECUTING: "claimed",
    ToolCall.State.SUCCEEDED: "succeeded",
    ToolCall.State.FAILED: "failed",
    ToolCall.State.DECLINED: "rejected",
    ToolCall.State.EXPIRED: "expired",
    ToolCall.State.CANCELLED: "cancelled",
    ToolCall.State.OUTCOME_UNKNOWN: "outcome_unknown",
}
#: Statuses after which nothing changes any more for the caller.
EXTERNAL_FINAL_STATUSES = frozenset(
    {
        "succeeded",
        "failed",
        "rejected",
        "responded",
        "denied",
        "expired",
        "cancelled",
        "refused",
    }
)
#: Statuses a waiting caller stops at: decided, or final.
EXTERNAL_DECIDED_STATUSES = EXTERNAL_FINAL_STATUSES | {
    "approved",
    "claimed",
    "outcome_unknown",
}


def external_call_get(*, user: AnyUser, tool_call_id: str) -> ToolCall | None:
    """Return the external agent's call ``tool_call_id`` if ``user`` may see it, else ``None``.

    Visible to the token that declared it (the thread's owner) and to whoever may
    see its thread (operators with the decide permission, staff).
    """
    return (
        ToolCall.objects.select_related("run", "thread", "thread__owner")
        .filter(tool_call_id=tool_call_id, thread__in=thread_visible_to(user=user))
        .exclude(run__input__external__isnull=True)
        .first()
    )


def external_call_status(call: ToolCall) -> dict[str, Any]:
    """Return what the approval API tells a caller about its declared ``call`` (camelCase JSON).

    ``{"toolCallId", "threadId", "runId", "agent", "tool", "status", "approvalId",
    "expiresAt", "decision", "claim", "outcome"}``. ``status`` is ``pending``
    (waiting for a person), ``approved`` (claim it, then run it), ``claimed``,
    ``succeeded``/``failed`` (the outcome reported), ``rejected``, ``denied``
    (the policy refuses it), ``refused`` (it may not run: the arguments or the
    authorization changed), ``responded`` (an approver answered it with text:
    do not run it, use ``decision.response`` as its result), ``expired``,
    ``cancelled`` or ``outcome_unknown``. ``decision`` is ``null`` until
    decided, then ``{"approved", "arguments", "argumentsHash", "edited",
    "authorizedBy", "reason", "response", "decidedBy", "decidedAt"}``:
    ``arguments`` are the ones to run (an approver's edit included),
    ``response`` the approver's text (``null`` unless ``responded``). ``claim`` is ``{"holder", "leaseExpiresAt", "notBefore"}`` once an
    execution exists; ``outcome`` is ``{"content", "error"}`` once the call is
    answered. Implements SEC-02, DC-05.
    """
    call.refresh_from_db()
    approval = ApprovalRequest.objects.filter(tool_call=call).first()
    execution = ToolExecution.objects.filter(tool_call=call).first()
    answer = (
        Message.objects.filter(thread_id=call.thread_id, tool_call_id=call.tool_call_id)
        .only("content", "error")
        .first()
    )
    status = _EXTERNAL_STATUS.get(call.state, call.state)
    responded = (
        approval is not None and approval.status == ApprovalRequest.Status.RESPONDED
    )
    if responded:
        status = "responded"
    elif answer is not None and answer.error == "policy_denied":
        status = "denied"
    elif answer is not None and answer.error == "refused" and execution is not None:
        status = "refused" if not execution.outcome_sha256 else status
    decision: dict[str, Any] | None = None
    if execution is not None:
        decision = {
            "approved": True,
            "arguments": execution.arguments,
            "argumentsHash": execution.arguments_hash,
            "edited": bool(approval is not None and approval.edited),
            "authorizedBy": execution.authorized_by,
        }
    elif approval is not None and approval.status != ApprovalRequest.Status.PENDING:
        decision = {
            "approved": False,
            "arguments": None,
            "argumentsHash": None,
            "edited": False,
            "authorizedBy": None,
        }
    elif status in ("denied", "expired", "cancelled"):
        decision = {
            "approved": False,
            "arguments": None,
            "argumentsHash": None,
            "edited": False,
            "authorizedBy": "policy" if status == "denied" else None,
        }
    if decision is not None:
        decided = approval is not None and approval.decided_at is not None
        decision |= {
            "reason": approval.reason if approval is not None else "",
            "response": approval.response
            if approval is not None and responded
            else None,
            "decidedBy": getattr(approval.decided_by, "username", None)
            if approval is not None
            else None,
            "decidedAt": approval.decided_at.isoformat()
            if decided and approval is not None and approval.decided_at
            else None,
        }
    return {
        "toolCallId": call.tool_call_id,
        "threadId": call.thread.thread_id,
        "runId": call.run.run_id,
        "agent": call.run.agent,
        "tool": call.name,
        "status": status,
        "approvalId": approval.pk if approval is not None else None,
        "expiresAt": approval.expires_at.isoformat() if approval is not None else None,
        "decision": decision,
        "claim": None
        if execution is None
        else {
            "holder": execution.holder or None,
            "leaseExpiresAt": execution.lease_expires_at.isoformat()
            if execution.lease_expires_at and execution.holder
            else None,
            "notBefore": execution.not_before.isoformat()
            if execution.not_before
            else None,
        },
        "outcome": None
        if answer is None
        else {"content": answer.content, "error": answer.error},
    }
