"""What the approver and the operator are told, in Debian's chromium: the confirmation
of an edit shows the edit and its own risk (queue and thread page), a snooze says
when it ends and can be lifted, money reads the same everywhere, an answered call is
"responded" with its sentence ending once, and the composer names the approver.

Two contexts (the operator who owns the thread, an approver). DC-03, LP-01, SEC-02.
"""

from __future__ import annotations

import json
import re

from playwright.sync_api import expect

from approvals.models import ApprovalRequest
from tests.helpers.ui import (
    card,
    make_user,
    open_as,
    pending_request,
    start_refund,
    watch_errors,
)
from tests.ui.axe import assert_no_axe_violations

DESKTOP = {"width": 1400, "height": 900}
DECIDER = (
    "approvals.decide_approvalrequest",
    "approvals.view_approvalrequest",
    "demo.add_refund",
)
ANSWER = "Order A-1001 was refunded by voucher already."
UTC_TITLE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$")


def test_the_thread_page_confirms_the_edit_says_money_once_and_shows_responded(
    browser, quick_server
):
    """The operator waits "for an approver to decide"; the refund reads 25.00 EUR live
    and after a reload; the approver's edit to 150 is confirmed as high risk over the
    threshold, for 150.00 EUR; answering it shows "responded" on both pages, with the
    answer's own full stop ending the sentence."""
    make_user("olivia", "demo.add_refund")
    make_user("ada", *DECIDER)
    operator, page = open_as(browser, quick_server, "olivia", viewport=DESKTOP)
    approver, other = open_as(browser, quick_server, "ada", viewport=DESKTOP)
    errors = watch_errors(other)
    try:
        # Given the operator's refund, waiting
        url = start_refund(
            page, quick_server, "Refund A-1001", "refund order A-1001 25.00"
        )
        expect(page.locator("#composer-reason")).to_have_text(
            "Waiting for an approver to decide 1 tool call — or cancel below."
        )
        label = card(page, "refund_order").locator(".call-label")
        expect(label).to_have_text("Refunding 25.00 EUR on order A-1001")
        page.reload()
        expect(page.locator("#thread")).to_have_attribute("data-ready", "1")
        expect(label).to_have_text("Refunding 25.00 EUR on order A-1001")

        # When the approver edits the amount to 150 and asks to approve the edit
        other.goto(url)
        expect(other.locator("#thread")).to_have_attribute("data-ready", "1")
        pending = card(other, "refund_order")
        expect(pending.locator(".pending-risk")).to_contain_text("medium risk")
        pending.get_by_role("button", name="Edit & approve").click()
        pending.get_by_label("Edited arguments", exact=False).fill(
            json.dumps(
                {"order_id": "A-1001", "amount": 150, "reason": "customer request"}
            )
        )
        pending.get_by_role("button", name="Approve edited arguments").click()

        # Then the confirmation is about the edit: its amount, its risk, its threshold
        confirm = pending.locator(".confirm")
        expect(confirm).to_be_visible()
        expect(confirm).to_contain_text("Approve refund_order as edited?")
        expect(confirm).to_contain_text("Refund 150.00 EUR to Ada Lovelace")
        expect(confirm).to_contain_text("This call is high risk.")
        expect(confirm).to_contain_text("amount 150 is over the policy threshold 100")
        expect(confirm).not_to_contain_text("within the policy threshold")
        expect(pending.get_by_role("button", name="Yes, approve")).to_be_focused()
        assert_no_axe_violations(other)
        confirm.get_by_role("button", name="Cancel").click()
        expect(confirm).to_be_hidden()

        # When the approver answers the call instead of running it
        pending.get_by_role("button", name="Respond").click()
        pending.get_by_label("Answer for the agent", exact=False).fill(ANSWER)
        pending.get_by_role("button", name="Send answer").click()

        # Then both pages say "responded", and the sentence ends once
        for view in (other, page):
            decided = card(view, "refund_order")
            expect(decided.locator(".call-state")).to_have_text("responded")
            sentence = decided.locator(".call-decision")
            expect(sentence).to_contain_text(f"“{ANSWER}” The call did not run.")
            text = sentence.inner_text()
            assert ".." not in text
            assert ".”." not in text
        page.reload()
        expect(page.locator("#thread")).to_have_attribute("data-ready", "1")
        expect(card(page, "refund_order").locator(".call-state")).to_have_text(
            "responded"
        )
        assert errors == []
    finally:
        operator.close()
        approver.close()


def test_the_queue_confirms_the_edit_and_a_snooze_says_until_when(
    browser, quick_server
):
    """Edit & approve to 150 asks with the edit's risk (high, over the threshold) and
    amount; a snooze shows "Snoozed until <local time>" (UTC on hover), after a reload
    too, and Unsnooze lifts it."""
    owner = make_user("olivia", "demo.add_refund")
    make_user("ada", *DECIDER)
    approval = pending_request(owner, call_id="call-edit", amount=25.0)
    context, page = open_as(browser, quick_server, "ada", viewport=DESKTOP)
    errors = watch_errors(page)
    try:
        page.goto(f"{quick_server.url}/approvals/?view=pending&mine=0")
        item = page.locator(f'[data-approval-id="{approval.pk}"]')
        expect(item.locator(".badge.risk-medium")).to_have_text("medium risk")

        # Edit & approve: the dialog is about the edited arguments
        item.get_by_role("button", name="Edit & approve").click()
        item.get_by_label("amount *").fill("150")
        item.get_by_role("button", name="Approve edited arguments").click()
        dialog = page.get_by_role("dialog")
        expect(dialog).to_be_visible()
        expect(dialog).to_contain_text("Approve refund_order as edited?")
        expect(dialog).to_contain_text("Refund 150.00 EUR to Ada Lovelace")
        expect(dialog).to_contain_text("This call is high risk.")
        expect(dialog).to_contain_text("amount 150 is over the policy threshold 100")
        expect(dialog).to_contain_text('"amount":150')
        dialog.get_by_role("button", name="Cancel").click()
        expect(dialog).to_be_hidden()
        assert ApprovalRequest.objects.get(pk=approval.pk).status == "pending"

        # Snooze: the card says until when, in local time with UTC on hover
        item.get_by_role("button", name="Snooze", exact=True).click()
        snoozed = item.locator(".req-snoozed")
        expect(snoozed).to_contain_text("Snoozed until ")
        expect(snoozed.locator("time")).to_have_attribute("title", UTC_TITLE)
        expect(item.get_by_role("button", name="Unsnooze")).to_be_visible()
        page.reload()
        expect(snoozed).to_contain_text("Snoozed until ")
        assert_no_axe_violations(page)

        # "I can decide" leaves it out, the socket's snapshot included
        frames: list[str] = []
        page.on(
            "websocket",
            lambda ws: ws.on("framereceived", lambda f: frames.append(str(f))),
        )
        page.goto(f"{quick_server.url}/approvals/")
        for _ in range(400):
            if any('"snapshot"' in f for f in frames):
                break
            page.wait_for_timeout(50)
        assert any('"snapshot"' in f for f in frames)
        page.wait_for_load_state("networkidle")
        expect(item).to_have_count(0)
        page.goto(f"{quick_server.url}/approvals/?view=pending&mine=0")

        # Unsnooze: back to a plain pending card
        item.get_by_role("button", name="Unsnooze").click()
        expect(snoozed).to_be_hidden()
        expect(item.get_by_role("button", name="Snooze", exact=True)).to_be_visible()
        page.reload()
        expect(item.locator(".req-snoozed")).to_be_hidden()
        assert errors == []
    finally:
        context.close()
