"""The operator's cockpit in a real browser (issue 15): deciding on the thread page,
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
from tests.ui.axe import assert_no_axe_violations
from tests.ui.conftest import PASSWORD, make_user, screenshot, watch_errors

DESKTOP = {"width": 1400, "height": 900}
PHONE = {"width": 390, "height": 844}

# Records every Notification the page constructs (the browser shows none headless).
WRAP_NOTIFICATION = """(() => {
  const Real = window.Notification;
  window.__notifications = [];
  class Recorded extends Real {
    constructor(title, options) {
      super(title, options);
      window.__notifications.push({ title, body: (options && options.body) || "", tag: (options && options.tag) || "" });
    }
  }
  Object.defineProperty(Recorded, "permission", { get: () => Real.permission });
  Recorded.requestPermission = (...args) => Real.requestPermission(...args);
  window.Notification = Recorded;
})();"""


def open_as(
    browser: Any,
    server: Any,
    username: str,
    *,
    viewport: dict[str, int],
    notifications: bool = False,
) -> tuple[Any, Any]:
    """Log ``username`` in through the form in a new context of ``viewport``."""
    context = browser.new_context(
        viewport=viewport,
        permissions=["notifications"] if notifications else [],
    )
    context.set_default_timeout(20_000)
    if notifications:
        context.add_init_script(WRAP_NOTIFICATION)
    page = context.new_page()
    watch_errors(page)
    page.goto(f"{server.url}/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{server.url}/")
    return context, page


def no_horizontal_scroll(page: Any) -> None:
    """Assert the document is no wider than the viewport (no horizontal scroll)."""
    widths = page.evaluate(
        "() => [document.documentElement.scrollWidth, window.innerWidth]"
    )
    assert widths[0] <= widths[1], f"page {widths[0]} px wide in {widths[1]} px"


def card(page: Any, name: str) -> Any:
    return page.locator(".call", has=page.locator(".call-name", has_text=name))


def start_refund(page: Any, server: Any, title: str, text: str) -> str:
    """Create a thread as the page's user and ask for a refund; return the thread URL."""
    page.get_by_label("Title").fill(title)
    page.get_by_role("button", name="Create thread").click()
    page.wait_for_url(re.compile(r".*/threads/[^/]+/$"))
    expect(page.locator("#thread")).to_have_attribute("data-ready", "1")
    page.get_by_label("Message", exact=True).fill(text)
    page.get_by_role("button", name="Send").click()
    expect(card(page, "refund_order").locator(".call-state")).to_have_text(
        "pending approval", timeout=30_000
    )
    return page.url


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
        bar = phone.locator("#waiting-bar")
        expect(bar).to_be_visible()
        expect(bar).to_contain_text("refund_order")
        pending = card(phone, "refund_order")
        expect(pending.locator(".risk")).to_have_text("high risk")
        expect(pending.locator(".pending-expiry")).to_contain_text("expires in")
        queue_link = pending.get_by_role("link", name="Open in the approval queue")
        expect(queue_link).to_have_attribute(
            "href", re.compile(r"^/approvals/#approval-\d+$")
        )
        no_horizontal_scroll(phone)
        assert_no_axe_violations(phone)
        phone.evaluate("window.scrollTo(0, 0)")

        # and uses the bar
        phone.get_by_role("link", name="Go to the request").click()

        # Then the pending card is in view and focused
        card_id = pending.get_attribute("id")
        assert card_id and card_id.startswith("call-")
        expect(pending).to_be_focused()
        assert in_viewport(phone, f"#{card_id}")
        screenshot(phone, "cockpit-thread-pending-phone")

        # When the approver approves, confirming the high-risk call
        pending.get_by_role("button", name="Approve", exact=True).click()
        expect(pending.locator(".confirm")).to_contain_text("high risk")
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
        assert (approval.status, approval.decided_by.username) == ("approved", "alice")
        refunds = list(Refund.objects.filter(order_id="A-1001"))
        assert [str(r.amount) for r in refunds] == ["25.00"]
        # (a page opened after the request arrived does not notify it again)
        assert phone.evaluate("window.__notifications.length") == 0
        no_horizontal_scroll(phone)
        assert phone.js_errors == [] and page.js_errors == []
        screenshot(phone, "cockpit-thread-decided-phone")
    finally:
        operator.close()
        approver.close()
