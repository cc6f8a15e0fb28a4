"""The approval queue in the Django admin (DC-03).

Pending requests are listed with the tool, the arguments pretty-printed with their
schema verdict, the thread, the requester, the age and a destructive badge.
Approve and reject are actions (single and bulk, with a reason) and an
edit-then-approve form; a held call can be answered with text instead (the
change page's "Respond instead" form); all of them call :func:`orchestration.pipeline.approval_decide`
and require ``approvals.decide_approvalrequest``. Decided requests are read-only;
the audit trail is append-only. The janitor's sweeps that recovered something
are listed read-only, with the last 24 hours' totals per kind in the title.
Outbound notification deliveries are listed read-only with their attempts and
last error, newest first and filterable by status, so a broken target shows.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, timedelta
from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.core.exceptions import PermissionDenied
from django.db.models import Model, Q, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import NoReverseMatch, path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.timesince import timesince

from agentcore.policy import DECLARATION_FIELDS, PolicyError, decision_from
from approvals.exceptions import ApprovalError
from approvals.models import (
    DECIDE_PERMISSION,
    RESPOND_MAX_CHARS,
    ApprovalGrant,
    ApprovalRequest,
    ApprovalVote,
    AuditEntry,
    ChatMessage,
    ChatUserLink,
    JanitorSweep,
    NotificationDelivery,
    ToolExecution,
    ToolPolicy,
)
from core.types import logged_in
from threads.validation import JSONInputError, parse_json

if TYPE_CHECKING:
    # A stub-only TypedDict: what a list filter's choices yield.
    from django.contrib.admin.filters import _ListFilterChoices
    from django.contrib.admin.views.main import ChangeList

    from approvals.services.decisions import Decision

# The selectors and services are imported where an admin page uses them: admin
# autodiscovery runs in every process's Django setup, and they import the approval,
# recording and tool stacks with the protocol models (bench B6).


def _seconds(value: Any) -> str:
    """Return a time as ``YYYY-MM-DD HH:MM:SS UTC`` (the audit trail's precision)."""
    if value is None:
        return "—"
    return f"{value.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"


def audit_target_url(entry: AuditEntry) -> str:
    """Return the admin page of an audit entry's target, or ``""`` when it has none."""
    app_label, _, model = entry.target_type.partition(".")
    try:
        return reverse(f"admin:{app_label}_{model}_change", args=[entry.target_id])
    except NoReverseMatch:
        return ""


def diff_text(diff: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Return ``diff`` with the two values as compact JSON text, for templates."""
    from threads.answers import compact_json

    return [
        {
            **d,
            "proposed": compact_json(d["proposed"]),
            "edited": compact_json(d["edited"]),
        }
        for d in diff
    ]


def approval_audit_trail(approval: ApprovalRequest) -> list[dict[str, Any]]:
    """Return the audit entries of ``approval`` and its execution, newest first.

    ``[{"at", "actor", "action", "url", "target", "diff", "reason"}]``; ``diff`` is
    the edited-against-proposed difference an approval recorded (IR-11).
    """
    from approvals.selectors import arguments_diff

    targets = Q(target_type="approvals.approvalrequest", target_id=str(approval.pk))
    call = approval.call
    execution = ToolExecution.objects.filter(tool_call=call).first() if call else None
    if execution is not None:
        targets |= Q(target_type="approvals.toolexecution", target_id=str(execution.pk))
    rows = []
    for entry in AuditEntry.objects.filter(targets).order_by("-id")[:100]:
        after = entry.after if isinstance(entry.after, dict) else {}
        rows.append(
            {
                "at": _seconds(entry.created_at),
                "actor": entry.actor_label or "system",
                "action": entry.action,
                "url": audit_target_url(entry),
                "target": f"{entry.target_type} #{entry.target_id}",
                "diff": diff_text(
                    arguments_diff(
                        after.get("proposed_arguments"), after.get("edited_arguments")
                    )
                ),
                "reason": after.get("reason") or after.get("detail") or "",
            }
        )
    return rows


def _pretty(value: Any) -> str:
    return format_html(
        '<pre class="cs-args">{}</pre>', json.dumps(value, indent=2, ensure_ascii=False)
    )


class DecisionForm(forms.Form):
    """The reason (and, for edit-then-approve, the edited arguments) of a decision."""

    reason = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    edited_arguments = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 8, "cols": 80}),
        help_text="JSON object; leave empty to approve the arguments as proposed.",
    )

    response = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 6, "cols": 80}),
        help_text="For an interrupt or input request: the answer, as JSON matching "
        "the response schema shown above (IR-18).",
    )

    text = forms.CharField(
        required=False,
        strip=False,
        max_length=RESPOND_MAX_CHARS,
        widget=forms.Textarea(attrs={"rows": 4, "cols": 80}),
        help_text="What the agent is told instead of the tool's result; the tool "
        "does not run.",
    )

    def clean_response(self) -> Any:
        raw = self.cleaned_data.get("response", "").strip()
        if not raw:
            return None
        try:
            return parse_json(raw)
        except JSONInputError as error:
            raise forms.ValidationError(f"not valid JSON: {error}") from error

    def clean_edited_arguments(self) -> Any:
        raw = self.cleaned_data.get("edited_arguments", "").strip()
        if not raw:
            return None

        try:
            # The one check every entry point uses: depth, NaN, NUL, surrogates.
            value = parse_json(raw)
        except JSONInputError as error:
            raise forms.ValidationError(f"not valid JSON: {error}") from error
        if not isinstance(value, dict):
            raise forms.ValidationError("edited arguments must be a JSON object")
        return value


def _decide_many(
    request: HttpRequest,
    queryset: QuerySet[ApprovalRequest],
    decision: Decision,
    reason: str,
) -> None:
    from approvals.services.votes import approvals_progress
    from orchestration.pipeline import approval_decide

    done = 0
    for approval in queryset:
        try:
            decided = approval_decide(
                approval=approval,
                decided_by=logged_in(request.user),
                decision=decision,
                reason=reason,
            )
        except ApprovalError as error:
            messages.error(request, f"{approval}: {error}")
            continue
        if decided.status == ApprovalRequest.Status.PENDING:
            # N of M: the vote counts, the call waits for more approvers.
            state = approvals_progress(decided)
            messages.info(
                request,
                f"{approval}: your {decision} is recorded; "
                f"{state['given']} of {state['required']} approvals given",
            )
            continue
        done += 1
    if done:
        verb = "approved" if decision == "approve" else "rejected"
        messages.success(request, f"{done} call(s) {verb}.")


class StatusFilter(admin.SimpleListFilter):
    """The status filter, on ``pending`` until another status (or "all") is chosen."""

    title = "status"
    parameter_name = "status"
    ALL = "all"

    def lookups(
        self, request: HttpRequest, model_admin: admin.ModelAdmin[Any]
    ) -> list[tuple[str, str]]:
        return [*ApprovalRequest.Status.choices, (self.ALL, "all")]

    def _chosen(self) -> str:
        return self.value() or ApprovalRequest.Status.PENDING

    def choices(self, changelist: ChangeList) -> Iterator[_ListFilterChoices]:
        for value, label in self.lookup_choices:
            yield {
                "selected": self._chosen() == value,
                "query_string": changelist.get_query_string(
                    {self.parameter_name: value}
                ),
                "display": label,
            }

    def queryset(
        self, request: HttpRequest, queryset: QuerySet[ApprovalRequest]
    ) -> QuerySet[ApprovalRequest]:
        chosen = self._chosen()
        return queryset if chosen == self.ALL else queryset.filter(status=chosen)


class ApprovalVoteInline(admin.TabularInline):
    """Each approver's vote (four-eyes, N of M), read-only; reset votes say why."""

    model = ApprovalVote
    extra = 0
    can_delete = False
    # A table with a header on every column (axe: empty-table-header).
    template = "admin/approvals/approvalrequest/votes_inline.html"
    fields = (
        "voter",
        "decision",
        "arguments_hash",
        "reason",
        "created_at",
        "reset_at",
        "reset_reason",
    )
    readonly_fields = fields

    def has_add_permission(
        self, request: HttpRequest, obj: Model | None = None
    ) -> bool:
        return False

    def has_change_permission(
        self, request: HttpRequest, obj: Model | None = None
    ) -> bool:
        return False


@admin.register(ApprovalRequest)
class ApprovalRequestAdmin(admin.ModelAdmin):
    # Status and decider first: they are what a reviewer scans for.
    list_display = (
        "tool_badge",
        "status",
        "decided_by",
        "decided_at_seconds",
        "risk",
        "thread_link",
        "requested_by",
        "age",
        "expires_at",
        "progress",
        "groups_label",
        "claimed_by",
        "schema_verdict",
        "arguments_pretty",
    )
    list_filter = (StatusFilter, "tool_name", "is_destructive", "approver_groups")
    inlines = [ApprovalVoteInline]
    search_fields = ("tool_name", "thread__thread_id", "tool_call__tool_call_id")
    actions = ["approve_selected", "reject_selected"]
    readonly_fields = (
        "kind",
        "tool_name",
        "tool_call",
        "interrupt_id",
        "message",
        "response_schema_pretty",
        "response_pretty",
        "thread",
        "run",
        "status",
        "is_destructive",
        "requested_by",
        "requested_at",
        "expires_at",
        "decided_by",
        "decided_at",
        "reason",
        "proposed_pretty",
        "edited_pretty",
        "approved_arguments_hash",
        "schema_valid",
        "schema_errors",
        "reapproval_note",
        "superseded_by",
        "progress",
        "groups_label",
        "requester_may_approve",
        "rejections_required",
        "escalation",
        "escalation_step",
        "step_deadline",
        "risk",
        "policy_source",
        "claimed_by",
        "claimed_at",
        # Bookkeeping of re-approvals and schemas: shown, never edited.
        "reapproval",
        "reapproval_count",
        "schema_hash",
        "previous_schema_hash",
        # The W3C trace context of the request's span: observability, never edited.
        "trace_context",
    )
    exclude = (
        "proposed_arguments",
        "edited_arguments",
        "response_schema",
        "response",
        "approver_groups",
        "approvals_required",
        "risk_level",
        "risk_reason",
        # Notification bookkeeping, not a field to edit.
        "expiry_announced_at",
    )

    class Media:
        css = {"all": ("ui/admin-approvals.css",)}

    change_form_template = "admin/approvals/approvalrequest/change_form.html"

    def get_queryset(self, request: HttpRequest) -> QuerySet[ApprovalRequest]:
        return (
            super()
            .get_queryset(request)
            .select_related(
                "thread", "requested_by", "decided_by", "tool_call", "supersedes"
            )
        )

    @admin.display(description="decided at", ordering="decided_at")
    def decided_at_seconds(self, obj: ApprovalRequest) -> str:
        return _seconds(obj.decided_at)

    @admin.display(description="risk")
    def risk(self, obj: ApprovalRequest) -> str:
        """The unified risk (:func:`approvals.selectors.approval_risk`: computed and policy)."""
        from approvals.selectors import approval_risk

        risk = approval_risk(obj)
        return format_html(
            '<span title="{}">{}</span>', "; ".join(risk["reasons"]), risk["level"]
        )

    def get_list_display(self, request: HttpRequest) -> Any:
        """Add the "you can authorize" column, computed for the user viewing the list."""
        from approvals.facts import approval_facts

        user = request.user

        @admin.display(description="you can authorize")
        def you_can_authorize(obj: ApprovalRequest) -> str:
            if obj.status != ApprovalRequest.Status.PENDING:
                return "—"
            viewer = approval_facts(obj, user)["viewer"]
            if viewer["canApprove"]:
                return "yes"
            return format_html("no: {} {}", viewer["whyNot"], viewer["whoCan"])

        shown = list(super().get_list_display(request))
        shown.insert(shown.index("risk") + 1, you_can_authorize)
        return shown

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(
        self, request: HttpRequest, obj: ApprovalRequest | None = None
    ) -> bool:
        return False

    def has_change_permission(
        self, request: HttpRequest, obj: ApprovalRequest | None = None
    ) -> bool:
        # Fields are read-only; "change" only opens the decision form.
        from approvals.selectors import can_see_queue

        return can_see_queue(request.user)

    def has_decide_permission(self, request: HttpRequest) -> bool:
        """Return whether the user may decide (``approvals.decide_approvalrequest``)."""
        return request.user.has_perm(DECIDE_PERMISSION)

    @admin.display(description="approvals")
    def progress(self, obj: ApprovalRequest) -> str:
        """``"1 of 2 (ada)"``: the same state the REST API and the interrupts show."""
        from approvals.services.votes import approvals_progress

        state = approvals_progress(obj)
        by = f" ({', '.join(state['by'])})" if state["by"] else ""
        return f"{state['given']} of {state['required']}{by}"

    @admin.display(description="approver groups")
    def groups_label(self, obj: ApprovalRequest) -> str:
        return ", ".join(sorted(g.name for g in obj.approver_groups.all())) or "anyone"

    @admin.display(description="tool", ordering="tool_name")
    def tool_badge(self, obj: ApprovalRequest) -> str:
        if obj.is_destructive:
            return format_html(
                '{} <span class="cs-badge cs-destructive" title="destructive">destructive</span>',
                obj.tool_name,
            )
        return obj.tool_name

    @admin.display(description="arguments")
    def arguments_pretty(self, obj: ApprovalRequest) -> str:
        shown = (
            format_html(
                "<strong>edited</strong>{}<details><summary>proposed</summary>{}</details>",
                _pretty(obj.edited_arguments),
                _pretty(obj.proposed_arguments),
            )
            if obj.edited
            else _pretty(obj.proposed_arguments)
        )
        if not obj.reapproval:
            return shown
        why = ApprovalRequest.Reapproval(obj.reapproval).label
        return format_html("<p><strong>{}</strong></p>{}", why, shown)

    @admin.display(description="changed since approval")
    def reapproval_note(self, obj: ApprovalRequest) -> str:
        """The re-approval context: why, and what the earlier request approved."""
        previous = obj.previous
        if not obj.reapproval or previous is None:
            return "—"
        why = ApprovalRequest.Reapproval(obj.reapproval).label
        if obj.reapproval == ApprovalRequest.Reapproval.SCHEMA_CHANGED:
            why += f" (schema {obj.previous_schema_hash[:12]} → {obj.schema_hash[:12]})"
        return format_html(
            "{} — request #{} approved:{}now:{}",
            why,
            previous.pk,
            _pretty(previous.approved_arguments),
            _pretty(obj.proposed_arguments),
        )

    @admin.display(description="proposed arguments")
    def proposed_pretty(self, obj: ApprovalRequest) -> str:
        return _pretty(obj.proposed_arguments)

    @admin.display(description="edited arguments")
    def edited_pretty(self, obj: ApprovalRequest) -> str:
        return _pretty(obj.edited_arguments) if obj.edited else "—"

    @admin.display(description="response schema")
    def response_schema_pretty(self, obj: ApprovalRequest) -> str:
        return _pretty(obj.response_schema) if obj.response_schema else "—"

    @admin.display(description="response")
    def response_pretty(self, obj: ApprovalRequest) -> str:
        return _pretty(obj.response) if obj.response is not None else "—"

    @admin.display(description="schema", boolean=False)
    def schema_verdict(self, obj: ApprovalRequest) -> str:
        return "valid" if obj.schema_valid else f"invalid: {obj.schema_errors}"

    @admin.display(description="thread")
    def thread_link(self, obj: ApprovalRequest) -> str:
        url = reverse("admin:threads_thread_change", args=[obj.thread_id])
        return format_html('<a href="{}">{}</a>', url, obj.thread)

    @admin.display(description="age")
    def age(self, obj: ApprovalRequest) -> str:
        return timesince(obj.requested_at, timezone.now())

    @admin.action(permissions=["decide"], description="Approve selected calls")
    def approve_selected(
        self, request: HttpRequest, queryset: QuerySet[ApprovalRequest]
    ) -> Any:
        return self._confirm(request, queryset, "approve")

    @admin.action(
        permissions=["decide"], description="Reject selected calls (reason required)"
    )
    def reject_selected(
        self, request: HttpRequest, queryset: QuerySet[ApprovalRequest]
    ) -> Any:
        return self._confirm(request, queryset, "reject")

    def _confirm(
        self,
        request: HttpRequest,
        queryset: QuerySet[ApprovalRequest],
        decision: Decision,
    ) -> Any:
        if not self.has_decide_permission(request):
            raise PermissionDenied
        if "confirm" in request.POST:
            form = DecisionForm(request.POST)
            if form.is_valid():
                _decide_many(request, queryset, decision, form.cleaned_data["reason"])
                return None
        else:
            form = DecisionForm()
        return TemplateResponse(
            request,
            "admin/approvals/approvalrequest/confirm_decision.html",
            {
                **self.admin_site.each_context(request),
                "title": f"{decision.title()} {queryset.count()} call(s)",
                "queryset": queryset,
                "decision": decision,
                "form": form,
                "action": f"{decision}_selected",
                "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
                "opts": self.model._meta,
            },
        )

    def get_urls(self) -> list[Any]:
        return [
            path(
                "<int:pk>/decide/",
                self.admin_site.admin_view(self.decide_view),
                name="approvals_approvalrequest_decide",
            ),
            *super().get_urls(),
        ]

    def decide_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        """Approve, edit-then-approve, reject or answer with text one request (POST only)."""
        from orchestration.pipeline import approval_decide

        approval = get_object_or_404(ApprovalRequest, pk=pk)
        change_url = reverse("admin:approvals_approvalrequest_change", args=[pk])
        if request.method != "POST":
            return HttpResponseRedirect(change_url)
        if not self.has_decide_permission(request):
            raise PermissionDenied
        form = DecisionForm(request.POST)
        posted = request.POST.get("decision")
        decisions: dict[str | None, Decision] = {
            "approve": "approve",
            "reject": "reject",
            "respond": "respond",
        }
        if posted not in decisions or not form.is_valid():
            messages.error(
                request, f"invalid decision: {form.errors.as_text() or posted!r}"
            )
            return HttpResponseRedirect(change_url)
        decision = decisions[posted]
        edited = form.cleaned_data["edited_arguments"]
        if edited == approval.proposed_arguments or decision == "respond":
            edited = None  # the form is pre-filled with the proposed arguments
        try:
            approval_decide(
                approval=approval,
                decided_by=logged_in(request.user),
                decision=decision,
                reason="" if decision == "respond" else form.cleaned_data["reason"],
                edited_arguments=edited,
                response=form.cleaned_data["text"]
                if decision == "respond"
                else form.cleaned_data["response"],
            )
            done = {"approve": "approved", "reject": "rejected"}.get(
                decision, "answered instead of running it"
            )
            messages.success(request, f"{approval.tool_name}: {done}.")
        except ApprovalError as error:
            messages.error(request, str(error))
        return HttpResponseRedirect(change_url)

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        from approvals.selectors import approval_context

        approval = self.get_object(request, object_id)
        card = approval_context(approval, request.user) if approval else None
        extra = {
            **(extra_context or {}),
            # Nothing here is edited through the form: the Decide panel decides.
            "show_save": False,
            "show_save_and_continue": False,
            "show_save_and_add_another": False,
            "show_delete": False,
            "expires_text": _seconds(approval.expires_at) if approval else "",
            "card": card,
            "card_diff": diff_text(card["argumentsDiff"]) if card else [],
            "audit": approval_audit_trail(approval) if approval else [],
            "can_decide": self.has_decide_permission(request)
            and approval is not None
            and approval.status == ApprovalRequest.Status.PENDING,
            "decision_form": DecisionForm(
                initial={
                    "edited_arguments": json.dumps(
                        approval.proposed_arguments if approval else {}, indent=2
                    )
                }
            ),
            # An interrupt bound to no call is answered with a response, not arguments.
            "can_respond": approval is not None
            and approval.kind == ApprovalRequest.Kind.TOOL_CALL
            and bool(card and card["facts"]["viewer"]["canRespond"]),
            "asks_response": approval is not None
            and approval.tool_call_id is None
            and approval.kind != ApprovalRequest.Kind.TOOL_CALL,
            "decide_url": reverse(
                "admin:approvals_approvalrequest_decide", args=[object_id]
            ),
        }
        return super().change_view(request, object_id, form_url, extra)


class ReadOnlyAdmin(admin.ModelAdmin):
    """Refuse add, change and delete."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(
        self, request: HttpRequest, obj: Model | None = None
    ) -> bool:
        return False

    def has_delete_permission(
        self, request: HttpRequest, obj: Model | None = None
    ) -> bool:
        return False


@admin.register(ToolExecution)
class ToolExecutionAdmin(ReadOnlyAdmin):
    list_display = (
        "tool_call",
        "state",
        "authorized_by",
        "attempts",
        "error",
        "started_at",
    )
    list_filter = ("state", "authorized_by")


@admin.register(AuditEntry)
class AuditEntryAdmin(ReadOnlyAdmin):
    """The audit trail, newest first, times to the second, each target linked.

    ``verify/`` checks the chain (``approvals.services.audit_verify``) and names
    its first broken link; the list links to it.
    """

    change_list_template = "admin/approvals/auditentry/change_list.html"

    list_display = (
        "created_at_seconds",
        "actor_label",
        "action",
        "target_link",
        "hash",
    )
    list_filter = ("action", "target_type")
    search_fields = ("target_id", "actor_label")
    ordering = ("-id",)

    class Media:
        css = {"all": ("ui/admin-approvals.css",)}

    @admin.display(description="time (UTC)", ordering="created_at")
    def created_at_seconds(self, entry: AuditEntry) -> str:
        return _seconds(entry.created_at)

    @admin.display(description="target", ordering="target_type")
    def target_link(self, entry: AuditEntry) -> str:
        url = audit_target_url(entry)
        label = f"{entry.target_type} #{entry.target_id}"
        return format_html('<a href="{}">{}</a>', url, label) if url else label

    def get_urls(self) -> list[Any]:
        return [
            path(
                "verify/",
                self.admin_site.admin_view(self.verify_view),
                name="approvals_auditentry_verify",
            ),
            *super().get_urls(),
        ]

    def verify_view(self, request: HttpRequest) -> HttpResponse:
        """Check the whole chain and show the first broken link (SEC-04)."""
        from approvals.services import audit_verify

        if not self.has_view_permission(request):
            raise PermissionDenied
        result = audit_verify()
        link = result.first_broken
        broken_url = ""
        if link is not None and link.entry_id is not None:
            broken_url = reverse(
                "admin:approvals_auditentry_change", args=[link.entry_id]
            )
        return TemplateResponse(
            request,
            "admin/approvals/auditentry/verify.html",
            {
                **self.admin_site.each_context(request),
                "title": "Audit chain verification",
                "result": result,
                "link": link,
                "broken_url": broken_url,
                "opts": self.model._meta,
            },
        )


@admin.register(JanitorSweep)
class JanitorSweepAdmin(ReadOnlyAdmin):
    """The janitor's recoveries: one row per sweep that recovered something."""

    list_display = ("started_at", "total", "summary", "duration_ms")
    readonly_fields = ("started_at", "duration_ms", "total", "counts", "recovered")
    date_hierarchy = "started_at"

    @admin.display(description="recovered")
    def summary(self, sweep: JanitorSweep) -> str:
        return ", ".join(f"{k} {v}" for k, v in sorted(sweep.counts.items()) if v)

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        totals: dict[str, int] = {}
        since = timezone.now() - timedelta(hours=24)
        for counts in JanitorSweep.objects.filter(started_at__gte=since).values_list(
            "counts", flat=True
        ):
            for kind, n in counts.items():
                totals[kind] = totals.get(kind, 0) + int(n)
        described = ", ".join(f"{k} {v}" for k, v in sorted(totals.items()) if v)
        title = f"Janitor sweeps — last 24 h: {described or 'nothing recovered'}"
        return super().changelist_view(
            request, {**(extra_context or {}), "title": title}
        )


@admin.register(NotificationDelivery)
class NotificationDeliveryAdmin(ReadOnlyAdmin):
    """Each outbound notification and how it went (filter by status to see failures)."""

    list_display = (
        "created_at",
        "event",
        "target",
        "kind",
        "status",
        "attempts",
        "last_error",
        "last_attempt_at",
        "delivered_at",
        "request_link",
    )
    list_filter = ("status", "event", "target", "kind")
    search_fields = ("target", "last_error")
    readonly_fields = (
        "approval",
        "event",
        "target",
        "kind",
        "group",
        "status",
        "attempts",
        "last_error",
        "created_at",
        "last_attempt_at",
        "next_attempt_at",
        "delivered_at",
    )

    @admin.display(description="request")
    def request_link(self, delivery: NotificationDelivery) -> str:
        url = reverse(
            "admin:approvals_approvalrequest_change", args=[delivery.approval_id]
        )
        return format_html('<a href="{}">#{}</a>', url, delivery.approval_id)


@admin.register(ChatMessage)
class ChatMessageAdmin(ReadOnlyAdmin):
    """The chat messages posted for requests (docs/slack.md); rewritten by deliveries."""

    list_display = (
        "created_at",
        "surface",
        "target",
        "channel",
        "message_id",
        "approval",
    )
    list_filter = ("surface", "target")
    search_fields = ("channel", "message_id")
    readonly_fields = (
        "approval",
        "target",
        "surface",
        "channel",
        "message_id",
        "created_at",
    )


@admin.register(ChatUserLink)
class ChatUserLinkAdmin(admin.ModelAdmin):
    """Chat users linked to accounts by their owners; delete one to undo a link."""

    list_display = ("surface", "workspace", "external_id", "user", "created_at")
    list_filter = ("surface",)
    search_fields = ("external_id", "user__username")
    readonly_fields = ("surface", "workspace", "external_id", "user", "created_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        # Only the person can vouch for their chat account (the signed link).
        return False


class ToolPolicyForm(forms.ModelForm):
    """Validates a policy row as a declaration (:func:`agentcore.policy.decision_from`)."""

    class Meta:
        model = ToolPolicy
        fields = ("agent", "tool_name", "enabled", *DECLARATION_FIELDS)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        row = ToolPolicy(
            **{
                k: v
                for k, v in data.items()
                if k != "groups" and k in {f.name for f in ToolPolicy._meta.fields}
            }
        )
        declared = row.declaration_without_groups()
        declared["groups"] = sorted(g.name for g in data.get("groups") or [])
        try:
            decision_from(declared, source="admin")
        except PolicyError as error:
            raise forms.ValidationError(f"invalid policy: {error}") from error
        return data


class PolicyAgentFilter(admin.SimpleListFilter):
    """The agent filter, naming the blank agent "every agent" (a link needs a name)."""

    title = "agent"
    parameter_name = "agent"
    EVERY = "every agent"

    def lookups(
        self, request: HttpRequest, model_admin: admin.ModelAdmin[Any]
    ) -> list[tuple[str, str]]:
        agents = (
            ToolPolicy.objects.order_by("agent")
            .values_list("agent", flat=True)
            .distinct()
        )
        # "" is no value to a list filter: the blank agent gets its own word.
        return [(agent or self.EVERY, agent or self.EVERY) for agent in agents]

    def queryset(
        self, request: HttpRequest, queryset: QuerySet[ToolPolicy]
    ) -> QuerySet[ToolPolicy]:
        chosen = self.value()
        if chosen is None:
            return queryset
        return queryset.filter(agent="" if chosen == self.EVERY else chosen)


@admin.register(ToolPolicy)
class ToolPolicyAdmin(admin.ModelAdmin):
    """Static tool policies, editable without code; they override settings and code."""

    form = ToolPolicyForm
    list_display = (
        "tool_name",
        "agent",
        "enabled",
        "action",
        "approvals_required",
        "requester_may_approve",
        "expiry_seconds",
        "risk_level",
    )
    list_filter = ("enabled", "action", PolicyAgentFilter)
    filter_horizontal = ("groups",)


@admin.register(ApprovalGrant)
class ApprovalGrantAdmin(ReadOnlyAdmin):
    """Scoped grants ("always allow"): listed read-only, revocable with an action."""

    list_display = (
        "tool_name",
        "agent",
        "scope",
        "thread",
        "user",
        "granted_by",
        "created_at",
        "expires_at",
        "revoked_at",
    )
    list_filter = ("scope", "tool_name", "agent")
    readonly_fields = (
        "tool_name",
        "agent",
        "scope",
        "thread",
        "user",
        "constraint",
        "granted_by",
        "approval",
        "created_at",
        "expires_at",
        "revoked_at",
        "revoked_by",
        "revoke_reason",
    )
    actions = ["revoke_selected"]

    def has_revoke_permission(self, request: HttpRequest) -> bool:
        """Return whether the user may revoke grants (the decide permission)."""
        return request.user.has_perm(DECIDE_PERMISSION)

    @admin.action(permissions=["revoke"], description="Revoke selected grants")
    def revoke_selected(
        self, request: HttpRequest, queryset: QuerySet[ApprovalGrant]
    ) -> None:
        from approvals.services.grants import grant_revoke

        revoked = 0
        for grant in queryset.filter(revoked_at__isnull=True):
            try:
                grant_revoke(
                    grant=grant, revoked_by=logged_in(request.user), reason="admin"
                )
            except ApprovalError as error:
                self.message_user(request, str(error), messages.ERROR)
                continue
            revoked += 1
        self.message_user(request, f"{revoked} grant(s) revoked", messages.SUCCESS)
