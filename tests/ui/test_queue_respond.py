"""Respond and snooze on the approval queue (and the answer on the thread page), in chromium.

An approver answers a held refund with text from its card (keyboard only: Tab to
"Respond", type, Tab to "Send answer"): the refund never runs and the call's
one tool message carries the text. Another request is snoozed: it leaves "I can
decide", shows under "Snoozed" with "Unsnooze", stays pending for everyone, and
comes back when unsnoozed. axe-core finds nothing on either view. Implements
SEC-02, DC-03.
"""

from __future__ import annotations

import json
from typing import Any

from playwright.sync_api import expect

from approvals.models import ApprovalRequest, ApprovalSnooze, ToolExecution
from tests.helpers.ui import make_user, open_as, pending_request, start_refund
from tests.ui.axe import assert_no_axe_violations
from threads.models import Message

DESKTOP = {"width": 1400, "height": 900}
TEXT = "Already refunded by voucher: tell the customer."


def _req(page: Any, approval: ApprovalRequest) -> Any:
    return page.locator(f'[data-approval-id="{approval.pk}"]')


def test_dc03_respond_with_text_and_snooze_from_the_queue(browser, quick_server):
    """Respond by keyboard: the call is answered with the text, nothing runs. Snooze:
    out of "I can decide", listed under "Snoozed", back after "Unsnooze"."""
    owner = make_user("olivia", "demo.add_refund")
    answered = pending_request(owner, call_id="call-1", amount=25.0)
    snoozed = pending_request(owner, call_id="call-2", amount=5.0)
    make_user("ada", "approvals.decide_approvalrequest", "demo.add_refund")
    context, page = open_as(browser, quick_server, "ada", viewport=DESKTOP)
    try:
        page.goto(f"{quick_server.url}/approvals/")
        card = _req(page, answered)
        card.locator(".req-tool").click()
        respond = card.get_by_role("button", name="Respond", exact=True)
        respond.focus()
        page.keyboard.press("Enter")
        expect(respond).to_have_attribute("aria-expanded", "true")
        box = card.get_by_label("Answer for the agent")
        expect(box).to_be_focused()
        assert_no_axe_violations(page)

        # an empty answer is refused in place, nothing is sent
        page.keyboard.press("Tab")
        expect(card.get_by_role("button", name="Send answer")).to_be_focused()
        page.keyboard.press("Enter")
        expect(card.locator("p.error[role=alert]")).to_contain_text(
            "Write the answer first"
        )
        assert ApprovalRequest.objects.get(pk=answered.pk).status == "pending"

        box.fill(TEXT)
        box.focus()
        page.keyboard.press("Tab")
        page.keyboard.press("Enter")
        expect(card).to_have_count(0)
        decided = ApprovalRequest.objects.get(pk=answered.pk)
        assert (decided.status, decided.response) == ("responded", TEXT)
        assert not ToolExecution.objects.exists()
        [content] = Message.objects.filter(
            role="tool", tool_call_id="call-1"
        ).values_list("content", flat=True)
        assert json.loads(content)["response"] == TEXT

        # the thread page says who answered instead of running it, and what
        page.goto(f"{quick_server.url}/threads/{answered.thread.thread_id}/")
        expect(
            page.get_by_text("Answered instead of running it by ada")
        ).to_be_visible()
        expect(page.get_by_text(f"The agent was told: {TEXT}")).to_be_visible()
        assert_no_axe_violations(page)

        # the thread page answers a held call in place too (the demo agent, for real)
        operator, operator_page = open_as(
            browser, quick_server, "olivia", viewport=DESKTOP
        )
        try:
            url = start_refund(
                operator_page, quick_server, "Voucher", "refund order A-1001 7.00"
            )
        finally:
            operator.close()
        on_thread = ApprovalRequest.objects.get(
            status="pending", thread__title="Voucher"
        )
        page.goto(url)
        page.get_by_role("button", name="Respond", exact=True).click()
        page.get_by_label("Answer for the agent (the tool does not run)").fill(TEXT)
        page.get_by_role("button", name="Send answer").click()
        expect(
            page.get_by_text("Answered instead of running it by ada")
        ).to_be_visible()
        assert ApprovalRequest.objects.get(pk=on_thread.pk).status == "responded"
        assert_no_axe_violations(page)

        # the decided view says who answered and what
        page.goto(f"{quick_server.url}/approvals/?view=decided")
        expect(_req(page, answered)).to_contain_text("Answered by ada")
        expect(_req(page, answered)).to_contain_text(TEXT)

        # snooze the other one for 4 hours: gone from "I can decide"
        page.goto(f"{quick_server.url}/approvals/")
        card = _req(page, snoozed)
        card.locator(".req-tool").click()
        card.get_by_label("Snooze for").select_option("14400")
        card.get_by_role("button", name="Snooze").click()
        expect(card).to_have_count(0)
        snooze = ApprovalSnooze.objects.get(approval=snoozed)
        assert snooze.user.username == "ada"
        assert ApprovalRequest.objects.get(pk=snoozed.pk).status == "pending"
        page.reload()
        expect(_req(page, snoozed)).to_have_count(0)
        # still in "All pending"
        page.get_by_role("link", name="All pending").click()
        expect(_req(page, snoozed)).to_have_count(1)

        # listed under "Snoozed", with Unsnooze
        page.get_by_role("link", name="Snoozed").click()
        card = _req(page, snoozed)
        expect(card).to_have_count(1)
        assert_no_axe_violations(page)
        card.locator(".req-tool").click()
        card.get_by_role("button", name="Unsnooze").click()
        expect(card).to_have_count(0)
        assert not ApprovalSnooze.objects.exists()
        page.get_by_role("link", name="I can decide").click()
        expect(_req(page, snoozed)).to_have_count(1)
    finally:
        context.close()
