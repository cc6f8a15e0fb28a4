"""Admin for threads. History (events, messages, tool calls) is read-only here."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin
from django.db.models import Model
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from threads.models import Event, Message, Run, Thread, ToolCall


class ReadOnlyMixin:
    """Refuse add, change and delete: the log and its projections are history."""

    def has_add_permission(
        self, request: HttpRequest, obj: Model | None = None
    ) -> bool:
        return False

    def has_change_permission(
        self, request: HttpRequest, obj: Model | None = None
    ) -> bool:
        return False

    def has_delete_permission(
        self, request: HttpRequest, obj: Model | None = None
    ) -> bool:
        return False


def _pretty(value: Any) -> str:
    # Focusable: a long line scrolls inside it on a phone (scrollable-region-focusable).
    return format_html(
        '<pre class="cs-json" tabindex="0">{}</pre>',
        json.dumps(value, indent=2, ensure_ascii=False),
    )


class MessageInline(ReadOnlyMixin, admin.TabularInline):
    model = Message
    fields = (
        "position",
        "message_id",
        "role",
        "content",
        "tool_call_id",
        "error",
        "run",
    )
    readonly_fields = fields
    extra = 0
    show_change_link = True


class ToolCallInline(ReadOnlyMixin, admin.TabularInline):
    model = ToolCall
    fields = ("tool_call_id", "name", "arguments_text", "state", "run")
    readonly_fields = fields
    extra = 0
    show_change_link = True


class RunInline(ReadOnlyMixin, admin.TabularInline):
    model = Run
    fk_name = "thread"
    fields = (
        "run_id",
        "status",
        "outcome",
        "pending_tool_call_ids",
        "error_message",
        "created_at",
    )
    readonly_fields = fields
    extra = 0
    show_change_link = True


@admin.register(Thread)
class ThreadAdmin(admin.ModelAdmin):
    list_display = ("thread_id", "title", "agent", "owner", "updated_at")
    search_fields = ("thread_id", "title")
    list_filter = ("agent",)
    readonly_fields = (
        "thread_id",
        "next_seq",
        "events_link",
        "created_at",
        "updated_at",
    )
    inlines = [RunInline, MessageInline, ToolCallInline]

    def get_inlines(self, request: HttpRequest, obj: Thread | None) -> list[Any]:
        """Show the history inlines on a thread's page, not on the add page (it has none)."""
        return list(self.inlines) if obj is not None else []

    @admin.display(description="event log")
    def events_link(self, obj: Thread) -> str:

        url = reverse("admin:threads_event_changelist") + f"?thread__id__exact={obj.pk}"
        return format_html('<a href="{}">{} events</a>', url, obj.events.count())


@admin.register(Run)
class RunAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ("run_id", "thread", "agent", "status", "outcome", "created_at")
    list_filter = ("status", "outcome", "agent")
    search_fields = ("run_id", "thread__thread_id")


@admin.register(Message)
class MessageAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ("message_id", "thread", "role", "tool_call_id", "position")
    list_filter = ("role",)
    search_fields = ("message_id", "tool_call_id", "thread__thread_id")


@admin.register(ToolCall)
class ToolCallAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ("tool_call_id", "name", "thread", "run", "state", "created_at")
    list_filter = ("state", "name")
    search_fields = ("tool_call_id", "thread__thread_id")
    readonly_fields = ("arguments_pretty",)

    @admin.display(description="arguments")
    def arguments_pretty(self, obj: ToolCall) -> str:
        return (
            _pretty(obj.arguments) if obj.arguments is not None else obj.arguments_text
        )


@admin.register(Event)
class EventAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ("seq", "type", "thread", "run", "created_at")
    list_filter = ("type",)
    search_fields = ("thread__thread_id",)
    readonly_fields = ("payload_pretty",)

    @admin.display(description="payload")
    def payload_pretty(self, obj: Event) -> str:
        return _pretty(obj.payload)
