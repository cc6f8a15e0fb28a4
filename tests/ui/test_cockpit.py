"""The operator's cockpit in a real browser: deciding on the thread page,
the "waiting for you" bar, the tab-title count and browser notifications, with two
browser contexts (operator and approver) at desktop and phone widths.

The decision goes through the queue's REST endpoints and service; the demo refund
ledger proves it executed exactly once. Implements DC-03, DC-05, SEC-02.
"""

from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import expect

from approvals.models import ApprovalRequest
from demo.models import Refund
from tests.helpers.ui import (
    PASSWORD,
    card,
    make_user,
    no_horizontal_scroll,
    open_as,
    screenshot,
    start_refund,
    watch_errors,
)
from tests.ui.axe import assert_no_axe_violations

DESKTOP = {"width": 1400, "height": 900}
PHONE = {"width": 390, "height": 844}


def in_viewport(page: Any, selector: str) -> bool:
    return page.evaluate(
        """(selector) => {
          const r = document.querySelector(selector).getBoundingClientRect();
          return r.top >= 0 && r.top < window.innerHeight;
        }""",
        selector,
    )


def test_approver_decides_on_the_thread_page_at_phone_width_and_it_runs_once(
    browser, ui_server
):
    """Title count and a notification announce the request; the bar jumps to the card;
    a confirmed approval on the thread page refunds exactly once."""
    # Given an operator at a desktop and an approver on a phone, notifications granted
    make_user("olivia", "demo.add_refund")
    make_user("alice", "approvals.decide_approvalrequest", "demo.add_refund")
    operator, page = open_as(browser, ui_server, "olivia", viewport=DESKTOP)
    approver, phone = open_as(
        browser, ui_server, "alice", viewport=PHONE, notifications=True
    )
    try:
        expect(phone).to_have_title("Threads · Countersign")
        toggle = phone.locator("#notify-toggle")
        expect(toggle).to_have_accessible_name("Notify me")
        toggle.click()
        expect(toggle).to_have_attribute("aria-pressed", "true")
        expect(toggle).to_have_text("Notifications on")
        assert (
            phone.evaluate("localStorage.getItem('countersign.notifications')") == "on"
        )
        no_horizontal_scroll(phone)

        # When the operator asks for a refund that needs approval
        url = start_refund(
            page, ui_server, "Refund A-1001", "refund order A-1001 25.00"
        )

        # Then the approver's tab title counts it and one notification names it
        expect(phone).to_have_title("(1) Threads · Countersign")
        phone.wait_for_function("window.__notifications.length === 1")
        note = phone.evaluate("window.__notifications[0]")
        assert note["title"] == "Approval needed: refund_order"
        assert "A-1001" in note["body"]
        assert note["tag"].startswith("countersign-approval-")
        # and the operator (no decide permission) sees the card but no way to decide
        refund = card(page, "refund_order")
        expect(refund.locator(".call-pending")).to_contain_text("expires in")
        expect(refund.get_by_role("button", name="Approve")).to_have_count(0)
        expect(page.locator("#waiting-bar")).to_be_hidden()

        # When the approver opens the thread on the phone
        phone.goto(url)
        expect(phone.locator("#thread")).to_have_attribute("data-ready", "1")
        expect(phone).to_have_title("(1) Refund A-1001 · Countersign")
        # ... they read it and decide, but only its owner writes to it (four-eyes).
        expect(phone.locator("#composer-input")).to_be_disabled()
        expect(phone.locator("#composer-reason")).to_contain_text(
            "only its owner can write here"
        )
        bar = phone.locator("#waiting-bar")
        expect(bar).to_be_visible()
        expect(bar).to_contain_text("refund_order")
        pending = card(phone, "refund_order")
        # destructive, within the demo's 100.00 threshold: medium, still confirmed
        expect(pending.locator(".risk")).to_have_text("medium risk")
        expect(pending.locator(".pending-expiry")).to_contain_text("expires in")
        queue_link = pending.get_by_role("link", name="Open in the approval queue")
        expect(queue_link).to_have_attribute(
            "href", re.compile(r"^/approvals/#req-\d+$")
        )
        no_horizontal_scroll(phone)
        assert_no_axe_violations(phone)
        phone.evaluate("window.scrollTo(0, 0)")

        # and uses the bar
        phone.get_by_role("link", name="Go to the request").click()

        # Then the pending card is in view and focused
        card_id = pending.get_attribute("id")
        assert card_id is not None
        assert card_id.startswith("call-")
        expect(pending).to_be_focused()
        assert in_viewport(phone, f"#{card_id}")
        screenshot(phone, "cockpit-thread-pending-phone")

        # When the approver approves, confirming the high-risk call, then undoes it
        pending.get_by_role("button", name="Approve", exact=True).click()
        expect(pending.locator(".confirm")).to_contain_text(
            "This call changes or deletes data"
        )
        pending.get_by_role("button", name="Yes, approve").click()
        undo = pending.get_by_role("button", name="Undo")
        expect(undo).to_be_focused()
        expect(pending.locator(".call-decision")).to_contain_text(
            re.compile(r"Approved by alice at .*Executes in \d s unless you undo")
        )
        undo.click()

        # Then the request waits again, on both pages, and nothing ran
        expect(
            pending.get_by_role("button", name="Approve", exact=True)
        ).to_be_visible()
        expect(pending.locator(".call-state")).to_have_text("pending approval")
        expect(refund.locator(".call-state")).to_have_text("pending approval")
        expect(phone.locator("#waiting-bar")).to_be_visible()
        assert Refund.objects.filter(order_id="A-1001").count() == 0

        # When the approver approves again and lets the window pass
        pending.get_by_role("button", name="Approve", exact=True).click()
        pending.get_by_role("button", name="Yes, approve").click()

        # Then both pages show it decided and done, and the ledger has one refund
        for view in (phone, page):
            decided = card(view, "refund_order")
            expect(decided.locator(".call-state")).to_have_text("done", timeout=30_000)
            expect(decided.locator(".call-decision")).to_contain_text(
                "Approved by alice at"
            )
            expect(decided.locator(".call-decision")).to_contain_text(
                "Executed: succeeded"
            )
        expect(phone.locator("#waiting-bar")).to_be_hidden()
        expect(phone).to_have_title("Refund A-1001 · Countersign")
        approval = ApprovalRequest.objects.get(tool_name="refund_order")
        assert approval.status == "approved"
        assert approval.decided_by is not None
        assert approval.decided_by.username == "alice"
        refunds = list(Refund.objects.filter(order_id="A-1001"))
        assert [str(r.amount) for r in refunds] == ["25.00"]
        # (a page opened after the request arrived does not notify it again)
        assert phone.evaluate("window.__notifications.length") == 0
        no_horizontal_scroll(phone)
        assert phone.js_errors == []
        assert page.js_errors == []
        screenshot(phone, "cockpit-thread-decided-phone")
    finally:
        operator.close()
        approver.close()


def test_rejection_on_the_thread_page_reads_as_words(browser, ui_server):
    """A rejection with a reason shows who, when and why in words, no error code or JSON;
    nothing is refunded."""
    # Given a refund waiting for approval, and an approver at a desktop
    make_user("olivia", "demo.add_refund")
    make_user("alice", "approvals.decide_approvalrequest", "demo.add_refund")
    operator, page = open_as(browser, ui_server, "olivia", viewport=DESKTOP)
    approver, desk = open_as(browser, ui_server, "alice", viewport=DESKTOP)
    try:
        url = start_refund(
            page, ui_server, "Refund A-1002", "refund order A-1002 30.00"
        )
        desk.goto(url)
        pending = card(desk, "refund_order")
        expect(pending.get_by_role("button", name="Reject")).to_be_visible()

        # When the approver rejects without a reason, then with one
        pending.get_by_role("button", name="Reject").click()
        expect(pending.get_by_role("alert")).to_have_text(
            "Give a reason to reject: it is sent to the agent."
        )
        pending.get_by_label("Reason for rejecting").fill("wrong order")
        pending.get_by_role("button", name="Reject").click()

        # Then both pages say who rejected it, when, why, and that it did not run
        for view in (desk, page):
            decided = card(view, "refund_order")
            expect(decided.locator(".call-state")).to_have_text("declined")
            decision = decided.locator(".call-decision")
            expect(decision).to_contain_text("Rejected by alice at")
            expect(decision).to_contain_text("“wrong order”")
            expect(decision).to_contain_text("The call did not run.")
            result = decided.locator(".call-result")
            expect(result.locator(".result-head")).to_have_text(
                "Rejected — the call did not run"
            )
            expect(result).to_contain_text("Reason: wrong order")
            text = decided.inner_text()
            assert "declined_by_operator" not in text.lower()
            assert '"executed"' not in text
            assert "{" not in result.inner_text()
        assert Refund.objects.filter(order_id="A-1002").count() == 0
        approval = ApprovalRequest.objects.get(tool_name="refund_order")
        assert (approval.status, approval.reason) == ("rejected", "wrong order")
        assert_no_axe_violations(page)
        screenshot(page, "cockpit-thread-rejected")
    finally:
        operator.close()
        approver.close()


def test_view_only_approver_gets_a_permission_page_not_a_404(browser, ui_server):
    """ "Open thread" from the queue, for a user who may only view it: a 403 page naming
    the missing permission and whom to ask; an unknown thread: a 404 page, not Django's."""
    from threads.services import thread_create

    # Given a view-only approver and another user's thread with a request
    owner = make_user("olivia", "demo.add_refund")
    make_user("vera", "approvals.view_approvalrequest")
    admin = make_user("root")
    admin.is_superuser = True
    admin.save()
    thread = thread_create(owner=owner, title="secret refund")
    context, page = open_as(browser, ui_server, "vera", viewport=DESKTOP)
    try:
        # When she opens the thread
        response = page.goto(f"{ui_server.url}/threads/{thread.thread_id}/")

        # Then a permission page says what is missing and what to do
        assert response is not None
        assert response.status == 403
        expect(page.get_by_role("heading", level=1)).to_have_text(
            "You can't open this thread"
        )
        body = page.locator("main")
        expect(body).to_contain_text("approvals.decide_approvalrequest")
        expect(body).to_contain_text("Ask an administrator (root)")
        expect(body).to_contain_text("thread's owner, olivia")
        expect(body.get_by_role("link", name="approval queue")).to_have_attribute(
            "href", "/approvals/"
        )
        assert "secret refund" not in page.content()
        for viewport in (DESKTOP, PHONE):
            page.set_viewport_size(viewport)
            no_horizontal_scroll(page)
            assert_no_axe_violations(page)
        screenshot(page, "cockpit-permission-page-phone")

        # and an unknown thread is a 404 page of the UI, not the debug page
        response = page.goto(f"{ui_server.url}/threads/no-such-thread/")
        assert response is not None
        assert response.status == 404
        expect(page.get_by_role("heading", level=1)).to_have_text("No such thread")
        expect(page.get_by_role("link", name="Back to your threads")).to_be_visible()
    finally:
        context.close()


def _long_thread(owner: Any, *, messages: int = 30) -> Any:
    """Return a thread whose log holds ``messages`` text turns and a 120-line tool result."""
    from threads.models import Run
    from threads.recording import RunRecorder
    from threads.services import thread_create

    thread = thread_create(owner=owner, title="long thread")
    run = Run.objects.create(
        thread=thread, run_id="run-long", status=Run.Status.RUNNING
    )
    recorder = RunRecorder(run, coalesce_ms=0, coalesce_bytes=0, publish=False)
    events: list[dict[str, Any]] = [
        {"type": "RUN_STARTED", "threadId": thread.thread_id, "runId": "run-long"},
        {
            "type": "TOOL_CALL_START",
            "toolCallId": "c-long",
            "toolCallName": "lookup_order",
        },
        {
            "type": "TOOL_CALL_ARGS",
            "toolCallId": "c-long",
            "delta": '{"order_id": "A-1001"}',
        },
        {"type": "TOOL_CALL_END", "toolCallId": "c-long"},
        {
            "type": "TOOL_CALL_RESULT",
            "messageId": "r-long",
            "toolCallId": "c-long",
            "content": "\n".join(f"line {n}: order history entry" for n in range(120)),
        },
    ]
    for n in range(messages):
        events += [
            {"type": "TEXT_MESSAGE_START", "messageId": f"m{n}", "role": "assistant"},
            {
                "type": "TEXT_MESSAGE_CONTENT",
                "messageId": f"m{n}",
                "delta": f"Note {n}: ",
            },
            {
                "type": "TEXT_MESSAGE_CONTENT",
                "messageId": f"m{n}",
                "delta": "all is well.",
            },
            {"type": "TEXT_MESSAGE_END", "messageId": f"m{n}"},
        ]
    events.append(
        {"type": "RUN_FINISHED", "threadId": thread.thread_id, "runId": "run-long"}
    )
    recorder.record(events)
    recorder.flush()
    run.status = Run.Status.FINISHED
    run.save(update_fields=["status"])
    return thread


def _at_bottom(page: Any) -> bool:
    return page.evaluate(
        "() => window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 2"
    )


# Counts the polite region's announcements (each textContent replacement is one).
COUNT_ANNOUNCEMENTS = """() => {
  window.__announced = [];
  new MutationObserver(() => {
    window.__announced.push(document.getElementById("announcer").textContent);
  }).observe(document.getElementById("announcer"), { childList: true, characterData: true, subtree: true });
}"""


POST_MESSAGE = """async (content) => {
  const response = await fetch(document.getElementById("thread").dataset.messagesUrl, {
    method: "POST",
    headers: {"Content-Type": "application/json", "X-CSRFToken": document.body.dataset.csrfToken},
    body: JSON.stringify({content}),
  });
  return response.status;
}"""


def test_long_thread_opens_at_latest_follows_unless_scrolled_up_and_collapses_results(
    browser, ui_server
):
    """Open at the latest message; new content is followed at the end, offered with a
    "New messages" button when scrolled up; long results collapse; one announcement per
    finished message."""
    # Given a long thread
    owner = make_user("olivia")
    thread = _long_thread(owner)
    context, page = open_as(browser, ui_server, "olivia", viewport=DESKTOP)
    try:
        # When the owner opens it
        page.goto(f"{ui_server.url}/threads/{thread.thread_id}/")
        expect(page.locator("#thread")).to_have_attribute("data-ready", "1")

        # Then it opens at the latest message, far below the top
        assert page.evaluate("document.documentElement.scrollHeight") > 3 * 900
        assert _at_bottom(page)
        assert page.evaluate("window.scrollY") > 0
        # and the 120-line result is collapsed until asked for
        result = page.locator('[data-tool-call-id="c-long"] .call-result')
        toggle = result.locator("button.result-toggle")
        expect(toggle).to_have_attribute("aria-expanded", "false")
        expect(toggle).to_have_accessible_name(
            re.compile(r"^Show the full result \(120 lines, \d+ characters\)$")
        )
        body = result.locator("pre")
        collapsed = body.evaluate("el => el.getBoundingClientRect().height")
        full = body.evaluate("el => el.scrollHeight")
        assert collapsed < full / 4, (collapsed, full)
        toggle.click()
        expect(toggle).to_have_attribute("aria-expanded", "true")
        expect(toggle).to_have_accessible_name("Show less")
        assert body.evaluate("el => el.getBoundingClientRect().height") >= full - 1
        toggle.click()
        expect(toggle).to_have_attribute("aria-expanded", "false")
        # and the transcript itself is no live region: one polite announcer instead
        transcript = page.locator("#transcript")
        assert transcript.get_attribute("aria-live") is None
        assert transcript.get_attribute("role") is None
        expect(page.locator("#announcer")).to_have_attribute("aria-live", "polite")
        expect(page.locator("#announcer")).to_have_text("")
        page.evaluate(COUNT_ANNOUNCEMENTS)

        # When a new answer streams in while the owner is at the end
        page.evaluate("window.scrollTo(0, document.documentElement.scrollHeight)")
        page.get_by_label("Message", exact=True).fill("What is the weather in Oslo?")
        page.get_by_role("button", name="Send").click()
        answer = page.locator(".msg-assistant").last
        expect(answer).to_contain_text("Oslo", timeout=30_000)
        expect(page.locator("#composer-send")).to_be_enabled(timeout=30_000)

        # Then the page followed it, and announced the finished message once
        page.wait_for_function(
            "() => window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 2"
        )
        expect(page.locator("#jump-latest")).to_be_hidden()
        announced = page.evaluate("window.__announced")
        assert len(announced) == 1, announced
        assert announced[0].startswith("Agent: ")
        assert "Oslo" in announced[0]

        # When the owner scrolls up and another answer arrives
        page.mouse.move(700, 400)
        page.mouse.wheel(0, -100_000)
        page.wait_for_function("() => window.scrollY === 0")
        # (sent from another tab: typing here would scroll the composer into view)
        status = page.evaluate(POST_MESSAGE, "What is the weather in Paris?")
        assert status == 201
        expect(page.locator(".msg-assistant").last).to_contain_text(
            "Paris", timeout=30_000
        )

        # Then the page stays where the owner is, and offers a jump to the new messages
        jump = page.get_by_role("button", name="New messages ↓")
        expect(jump).to_be_visible()
        assert page.evaluate("window.scrollY") == 0
        jump.click()
        page.wait_for_function(
            "() => window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 2"
        )
        expect(jump).to_be_hidden()
        assert len(page.evaluate("window.__announced")) == 2
        assert page.js_errors == []
    finally:
        context.close()


WIDTHS = (360, 390, 430, 1400, 1920)


def _recorded_pending_refund(owner: Any, *, call_id: str) -> ApprovalRequest:
    """Return the pending request of a refund the agent streamed, as a run leaves it."""
    from orchestration.pipeline import pending_calls_dispatch
    from threads.models import Run
    from threads.recording import RunRecorder
    from threads.services import thread_create

    thread = thread_create(owner=owner, title=f"refund {call_id}")
    run = Run.objects.create(
        thread=thread,
        run_id=f"run-{call_id}",
        status=Run.Status.RUNNING,
        input={"tools": [{"name": "lookup_order"}, {"name": "refund_order"}]},
    )
    recorder = RunRecorder(run, coalesce_ms=0, coalesce_bytes=0, publish=False)
    arguments = '{"order_id": "A-1001", "amount": 25.0, "reason": "customer request"}'
    recorder.record(
        [
            {"type": "RUN_STARTED", "threadId": thread.thread_id, "runId": run.run_id},
            {
                "type": "TOOL_CALL_START",
                "toolCallId": call_id,
                "toolCallName": "refund_order",
            },
            {"type": "TOOL_CALL_ARGS", "toolCallId": call_id, "delta": arguments},
            {"type": "TOOL_CALL_END", "toolCallId": call_id},
            {"type": "RUN_FINISHED", "threadId": thread.thread_id, "runId": run.run_id},
        ]
    )
    run.refresh_from_db()
    pending_calls_dispatch(run=run)
    return ApprovalRequest.objects.get(tool_call__tool_call_id=call_id)


def _check_widths(
    page: Any, name: str, *, axe_widths: tuple[int, ...] = (1400, 390)
) -> None:
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        no_horizontal_scroll(page)
        if width in axe_widths:
            assert_no_axe_violations(page)
    screenshot(page, f"cockpit-{name}-360")


def test_pages_fit_phone_widths_and_pass_axe(browser, ui_server):
    """Login, thread list and a thread with a pending card: no horizontal scroll at
    360-430, 1400 and 1920 px, the top bar's "Log out" readable, zero axe violations."""
    # Given an approver with a long name, and a thread with a pending refund and results
    approver = make_user(
        "alexandrina-approver", "approvals.decide_approvalrequest", "demo.add_refund"
    )
    owner = make_user("olivia", "demo.add_refund")
    thread = _long_thread(approver, messages=3)
    approval = _recorded_pending_refund(owner, call_id="call-wide")
    context = browser.new_context(viewport=DESKTOP)
    page = context.new_page()
    watch_errors(page)
    try:
        # The login page
        page.goto(f"{ui_server.url}/accounts/login/")
        _check_widths(page, "login")
        page.get_by_label("Username").fill("alexandrina-approver")
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Log in").click()
        page.wait_for_url(f"{ui_server.url}/")

        # The thread list (the request waits: the title counts it)
        expect(page).to_have_title("(1) Threads · Countersign")
        _check_widths(page, "thread-list")
        page.set_viewport_size(PHONE)
        logout = page.get_by_role("button", name="Log out")
        box = logout.bounding_box()
        assert box is not None
        assert box["x"] + box["width"] <= PHONE["width"]
        topbar = page.locator(".topbar").bounding_box()
        assert topbar is not None
        assert topbar["y"] <= box["y"]
        assert box["y"] + box["height"] <= topbar["y"] + topbar["height"]

        # A thread with collapsed results
        page.goto(f"{ui_server.url}/threads/{thread.thread_id}/")
        expect(page.locator("#thread")).to_have_attribute("data-ready", "1")
        _check_widths(page, "thread")

        # A thread with a pending card this user can decide, opened from its link
        page.goto(
            f"{ui_server.url}/threads/{approval.thread.thread_id}/#call-call-wide"
        )
        expect(page.locator("#thread")).to_have_attribute("data-ready", "1")
        expect(page.locator("#waiting-bar")).to_be_visible()
        expect(page.locator("#call-call-wide")).to_be_focused()
        _check_widths(page, "thread-pending")
        assert page.js_errors == []
    finally:
        context.close()


def test_approver_without_the_tools_permission_is_told_why_and_who_can(
    browser, ui_server
):
    """Deciding needs the tool's own permission too: the card says so and names who
    can; no Approve button, no bar; rejecting is still possible, so the title counts
    it, as his "I can decide" view lists it."""
    # Given a pending refund, and an approver who may decide but not refund
    owner = make_user("olivia", "demo.add_refund")
    make_user("alice", "approvals.decide_approvalrequest", "demo.add_refund")
    make_user("bob", "approvals.decide_approvalrequest")
    approval = _recorded_pending_refund(owner, call_id="call-noperm")
    context, page = open_as(browser, ui_server, "bob", viewport=PHONE)
    try:
        expect(page).to_have_title("Threads · Countersign")
        # When bob opens the thread
        page.goto(f"{ui_server.url}/threads/{approval.thread.thread_id}/")
        expect(page.locator("#thread")).to_have_attribute("data-ready", "1")

        # Then the card says he can't approve it, why, and who can
        pending = card(page, "refund_order")
        notice = pending.locator(".pending-auth")
        # in words: the permission's name, never its codename
        expect(notice).to_have_text(
            "Approving refund_order also needs the permission “Can add refund”, "
            "which your account lacks; you may still reject it. Who can: alice."
        )
        expect(pending.get_by_role("button", name="Approve", exact=True)).to_have_count(
            0
        )
        expect(pending.get_by_role("button", name="Reject")).to_be_visible()
        expect(page.locator("#waiting-bar")).to_be_hidden()
        expect(page).to_have_title("(1) refund call-noperm · Countersign")
        no_horizontal_scroll(page)
        assert_no_axe_violations(page)
        approval.refresh_from_db()
        assert approval.status == "pending"
        assert page.js_errors == []
    finally:
        context.close()


def test_refused_execution_names_its_error_once_in_words(browser, ui_server):
    """A call refused at execution shows "Execution refused" and the sentence once:
    no upper-cased code, no JSON with the same words again."""
    from django.db import transaction

    from threads.answers import error_content, tool_message_write
    from threads.models import Run, ToolCall
    from threads.recording import RunRecorder
    from threads.services import thread_create

    # Given a call answered with the application's refusal
    owner = make_user("olivia")
    thread = thread_create(owner=owner, title="refused")
    run = Run.objects.create(thread=thread, run_id="run-r", status=Run.Status.RUNNING)
    recorder = RunRecorder(run, coalesce_ms=0, coalesce_bytes=0, publish=False)
    recorder.record(
        [
            {"type": "RUN_STARTED", "threadId": thread.thread_id, "runId": "run-r"},
            {
                "type": "TOOL_CALL_START",
                "toolCallId": "c-r",
                "toolCallName": "lookup_order",
            },
            {
                "type": "TOOL_CALL_ARGS",
                "toolCallId": "c-r",
                "delta": '{"order_id": "A-1"}',
            },
            {"type": "TOOL_CALL_END", "toolCallId": "c-r"},
            {"type": "RUN_FINISHED", "threadId": thread.thread_id, "runId": "run-r"},
        ]
    )
    recorder.flush()
    detail = "the approver lacks the permission 'demo.add_refund'"
    with transaction.atomic():
        call = ToolCall.objects.select_for_update().get(tool_call_id="c-r")
        tool_message_write(
            call=call,
            content=error_content(error="refused", detail=detail),
            error="refused",
            state=ToolCall.State.FAILED,
        )
    context, page = open_as(browser, ui_server, "olivia", viewport=PHONE)
    try:
        # When the owner opens the thread
        page.goto(f"{ui_server.url}/threads/{thread.thread_id}/")
        expect(page.locator("#thread")).to_have_attribute("data-ready", "1")

        # Then the card says it in words, once
        result = page.locator('[data-tool-call-id="c-r"] .call-result')
        expect(result.locator(".result-head")).to_have_text("Execution refused")
        expect(result.locator(".result-words")).to_have_text(detail)
        text = result.inner_text()
        assert text.count("demo.add_refund") == 1
        assert "{" not in text
        assert "ERROR" not in text
        expect(page.locator('[data-tool-call-id="c-r"] .call-state')).to_have_text(
            "failed"
        )
        no_horizontal_scroll(page)
        assert_no_axe_violations(page)
    finally:
        context.close()
