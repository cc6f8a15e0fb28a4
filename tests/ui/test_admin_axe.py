"""Every admin page a staff user can open, in Debian's chromium at 1920, 1400 and
390 px: axe-core finds nothing, and no visible text shows a raw ISO timestamp with
microseconds. Nothing is excused: on these rows not even the stored JSON the admin
shows as recorded (event payloads, arguments, a sweep's recoveries) contains one.

The pages are found, not listed: the admin index, each app's index, every model
registered on ``django.contrib.admin.site`` (its changelist, its add page when the
superuser may add, the change and history pages of its first row and, when the
superuser may delete it, its delete confirmation), the audit chain's verify
page, the password pages and the login page. A model registered later is covered
without editing this file, and fails until the data below gives it a row.
Implements DC-03.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.admin.utils import quote
from django.contrib.auth.models import Group
from django.test import RequestFactory
from django.urls import reverse
from django.utils import timezone

from approvals.models import (
    ApprovalGrant,
    ApprovalRequest,
    ChatMessage,
    ChatUserLink,
    JanitorSweep,
    NotificationDelivery,
)
from demo.models import Refund
from orchestration.pipeline import approval_decide
from tests.helpers.governance import refund_policy
from tests.helpers.ui import PASSWORD, make_user, pending_request, watch_errors
from tests.ui.axe import axe_violations
from threads.models import Event, Message, ToolCall
from threads.services import message_post, thread_create

VIEWPORTS = (
    {"width": 1920, "height": 1080},
    {"width": 1400, "height": 900},
    {"width": 390, "height": 844},
)
# The model pages, one test per group: approvals, threads (with demo) and the rest
# (Django's auth, DRF's tokens, django-axes, and any app registered later).
GROUPS = ("approvals", "threads", "others")
RAW_ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+")


def _superuser() -> Any:
    user = make_user("root")
    user.is_staff = user.is_superuser = True
    user.save()
    return user


def _rows(executor: Any) -> Any:
    """Create one realistic row of every registered model; return the superuser.

    A refund asked of the demo agent, approved and executed (thread, runs, messages,
    tool calls, events, the request, its vote, audit entries, the execution and the
    refund), a second request still pending, a group, a token, a policy, a grant,
    a janitor sweep, notification and chat rows, and a login's lockout records.
    """
    from axes.models import AccessAttempt, AccessFailureLog, AccessLog
    from rest_framework.authtoken.models import Token

    root = _superuser()
    owner = make_user("olivia", "demo.add_refund")
    ada = make_user("ada", "approvals.decide_approvalrequest", "demo.add_refund")
    ada.is_staff = True
    ada.save()
    ada.groups.add(Group.objects.create(name="finance"))
    Token.objects.create(user=ada)

    thread = thread_create(owner=owner, title="refund A-1001")
    message_post(thread=thread, content="refund order A-1001 25.00")
    executor.settle(thread)
    call = ToolCall.objects.get(thread=thread, name="refund_order")
    approval = ApprovalRequest.objects.get(tool_call=call)
    approval_decide(
        approval=approval, decided_by=ada, decision="approve", reason="checked"
    )
    executor.settle(thread)
    assert Refund.objects.filter(order_id="A-1001").exists()
    assert Message.objects.filter(thread=thread, role="tool").exists()
    assert Event.objects.filter(thread=thread).exists()

    pending = pending_request(owner, call_id="c-pending", amount=40.0)
    now = timezone.now()
    NotificationDelivery.objects.create(
        approval=pending,
        event=NotificationDelivery.Event.REQUESTED,
        target="ops-webhook",
        kind="webhook",
        status=NotificationDelivery.Status.FAILED,
        attempts=3,
        last_error="HTTP 503 from https://hooks.example.com/countersign",
        last_attempt_at=now,
    )
    ChatMessage.objects.create(
        approval=pending,
        target="slack-finance",
        surface="slack",
        channel="C0FINANCE",
        message_id="1764770000.000100",
    )
    ChatUserLink.objects.create(
        surface="slack", workspace="T0ACME", external_id="U0ADA", user=ada
    )
    refund_policy()
    ApprovalGrant.objects.create(
        tool_name="refund_order",
        agent="demo",
        scope=ApprovalGrant.Scope.THREAD,
        thread=thread,
        constraint={"type": "object", "properties": {"amount": {"maximum": 50}}},
        granted_by=ada,
        approval=approval,
        expires_at=now + timedelta(days=1),
    )
    JanitorSweep.objects.create(
        started_at=now,
        duration_ms=12,
        total=1,
        counts={"stale_runs": 1},
        recovered=[{"kind": "stale_runs", "run": "r-lost"}],
    )
    access = {
        "user_agent": "Mozilla/5.0",
        "ip_address": "203.0.113.7",
        "username": "mallory",
        "http_accept": "text/html",
        "path_info": "/admin/login/",
    }
    AccessAttempt.objects.create(
        **access, get_data="", post_data="username=mallory", failures_since_start=2
    )
    AccessFailureLog.objects.create(**access, locked_out=False)
    AccessLog.objects.create(**{**access, "username": "ada"})
    return root


def _group(model: Any) -> str:
    """Return the test a registered model's pages belong to (each under the timeout)."""
    app = model._meta.app_label
    if app in GROUPS:
        return app
    return "threads" if app in {"threads", "demo"} else "others"


def _model_urls(root: Any, group: str) -> list[str]:
    """Return the changelist, add, and first row's change, history and delete pages of ``group``'s models."""
    request = RequestFactory().get("/admin/")
    request.user = root
    urls = []
    for model, model_admin in admin.site._registry.items():
        if _group(model) != group:
            continue
        name = f"admin:{model._meta.app_label}_{model._meta.model_name}"
        urls.append(reverse(f"{name}_changelist"))
        if model_admin.has_add_permission(request):
            urls.append(reverse(f"{name}_add"))
        first = model_admin.get_queryset(request).order_by("pk").first()
        assert first is not None, f"no {model._meta.label} row: create one in _rows"
        urls.append(reverse(f"{name}_change", args=[quote(first.pk)]))
        # The row's history, and its delete confirmation where the superuser may delete.
        urls.append(reverse(f"{name}_history", args=[quote(first.pk)]))
        if model_admin.has_delete_permission(request, first):
            urls.append(reverse(f"{name}_delete", args=[quote(first.pk)]))
    return urls


def _site_urls(root: Any) -> list[str]:
    """Return the admin's own pages: index, app indexes, password pages, verify."""
    apps = sorted({model._meta.app_label for model in admin.site._registry})
    return [
        reverse("admin:index"),
        *(reverse("admin:app_list", args=[app]) for app in apps),
        reverse("admin:password_change"),
        reverse("admin:password_change_done"),
        reverse("admin:auth_user_password_change", args=[root.pk]),
        reverse("admin:approvals_auditentry_verify"),
        # The changelist as a reviewer sees it: every status, a search.
        reverse("admin:approvals_approvalrequest_changelist") + "?status=all",
        reverse("admin:approvals_auditentry_changelist") + "?q=approvals",
    ]


def _check(page: Any, url: str, problems: dict[str, list[str]]) -> None:
    """Open ``url`` and check it at each width, recording each finding in ``problems``.

    ``problems`` maps a finding (axe rule and target, an HTTP status or a raw
    timestamp) to the ``"<path> @<width>"`` where it showed, so a fault in the
    admin's shared chrome is reported once, not once per page.
    """
    response = page.goto(url)
    assert response is not None
    path = url.split("/", 3)[-1]
    if response.status != 200:
        problems.setdefault(f"HTTP {response.status}", []).append(path)
        return
    for viewport in VIEWPORTS:
        page.set_viewport_size(viewport)
        where = f"/{path} @{viewport['width']}"
        for violation in axe_violations(page):
            for node in violation["nodes"]:
                summary = " ".join(node["summary"].split())[:200]
                finding = (
                    f"{violation['id']} ({violation['impact']}) "
                    f"{', '.join(node['target'])}: {summary}"
                )
                problems.setdefault(finding, []).append(where)
        text = page.locator("body").inner_text()
        raw = RAW_ISO.search(text)
        if raw:
            problems.setdefault(f"raw timestamp {raw.group()!r}", []).append(where)
        # A template comment Django did not strip ({# #} spans one line only).
        if "{#" in text or "#}" in text:
            problems.setdefault("template comment shown", []).append(where)


def _report(problems: dict[str, list[str]]) -> str:
    return f"{len(problems)} finding(s):\n" + "\n".join(
        f"{finding}\n    on {len(where)}: {', '.join(where[:6])}"
        for finding, where in problems.items()
    )


def _open_logged_in(
    browser: Any, server: Any, problems: dict[str, list[str]], *, check_login: bool
) -> tuple[Any, Any]:
    """Log in as root through the admin's login page (checked first when asked)."""
    context = browser.new_context(viewport=VIEWPORTS[0])
    context.set_default_timeout(20_000)
    page = context.new_page()
    watch_errors(page)
    if check_login:
        _check(page, f"{server.url}{reverse('admin:login')}", problems)
    else:
        page.goto(f"{server.url}{reverse('admin:login')}")
    page.get_by_label("Username").fill("root")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{server.url}{reverse('admin:index')}")
    return context, page


# Each group opens ~15-25 pages at three widths: about a minute on a loaded machine.
@pytest.mark.timeout(300)
@pytest.mark.parametrize("executor", ["embedded"], indirect=True)
@pytest.mark.parametrize("group", ["site", *GROUPS])
def test_dc03_every_admin_page_passes_axe_at_three_widths(
    browser, quick_server, executor, group
):
    """Login, index, app indexes, password pages and audit verify (``site``), and
    every registered model's changelist, add, change, history and delete page (by
    group): no axe
    violation, no raw ISO timestamp, no script error."""
    root = _rows(executor)
    urls = _site_urls(root) if group == "site" else _model_urls(root, group)
    problems: dict[str, list[str]] = {}
    context, page = _open_logged_in(
        browser, quick_server, problems, check_login=group == "site"
    )
    try:
        for url in urls:
            _check(page, f"{quick_server.url}{url}", problems)
    finally:
        context.close()
    assert not problems, _report(problems)
    assert page.js_errors == []


def test_policy_agent_filter_names_the_blank_agent(admin_client):
    """The policies' agent filter offers "every agent" for the blank agent (a link
    with no text otherwise) and lists only those rows; an unknown agent lists none."""
    refund_policy()
    refund_policy(agent="demo")
    url = reverse("admin:approvals_toolpolicy_changelist")

    listed = admin_client.get(url)
    every = admin_client.get(url, {"agent": "every agent"})
    demo = admin_client.get(url, {"agent": "demo"})
    unknown = admin_client.get(url, {"agent": "no-such-agent"})

    assert listed.status_code == 200
    assert b'href="?agent=every+agent"' in listed.content
    assert b'href="?agent="' not in listed.content
    assert [p.agent for p in every.context["cl"].result_list] == [""]
    assert [p.agent for p in demo.context["cl"].result_list] == ["demo"]
    assert unknown.status_code == 200
    assert list(unknown.context["cl"].result_list) == []


def test_thread_add_page_has_no_history_inlines(admin_client):
    """A thread being added has no runs, messages or tool calls: no empty tables."""
    response = admin_client.get(reverse("admin:threads_thread_add"))

    assert response.status_code == 200
    assert response.context["inline_admin_formsets"] == []
