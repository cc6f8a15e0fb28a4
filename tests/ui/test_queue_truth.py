"""What the approver is shown in the queue, in Debian's chromium: the tab title and
the page count tell the same story (also after live updates and inside an undo
window), an undone edit is never silently lost, the live region announces arrivals
and outcomes, and each final state has its own look. Implements DC-03, DC-05, SEC-02.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from approvals.models import ApprovalRequest, ToolExecution
from orchestration.pipeline import approval_decide
from tests.helpers.ui import make_user, open_as, pending_request, start_refund
from tests.ui.axe import assert_no_axe_violations

DESKTOP = {"width": 1400, "height": 900}
TITLE = "Approval queue · Countersign"


@pytest.fixture
def long_undo_server(ui_server_factory):
    """A server whose UI approvals can be undone for long enough to look at them."""
    return ui_server_factory(extra_env={"COUNTERSIGN_DECISION_UNDO_SECONDS": "60"})


def _req(page: Any, approval: ApprovalRequest) -> Any:
    return page.locator(f'[data-approval-id="{approval.pk}"]')


def _newest() -> ApprovalRequest:
    approval = ApprovalRequest.objects.order_by("-id").first()
    assert approval is not None
    return approval


def test_dc03_title_and_count_agree_and_an_undone_edit_is_never_lost(
    browser, long_undo_server
):
    """ "(n)" in the title is the "I can decide" count, on arrival, inside the undo
    window and after undo; "All pending" names both numbers; undoing an edited
    approval says what was discarded, puts the edit back in the editor, and the plain
    button reads "Approve as proposed"."""
    server = long_undo_server
    owner = make_user("olivia", "demo.add_refund")
    ada = make_user(
        "ada",
        "approvals.decide_approvalrequest",
        "demo.add_refund",
        "threads.view_thread",
    )
    # Given one request waiting for ada, and one ada asked for herself (four-eyes)
    first = pending_request(owner, call_id="c-first", amount=7.0)
    pending_request(ada, call_id="c-own", amount=3.0)
    operator, thread_page = open_as(browser, server, "olivia", viewport=DESKTOP)
    context, page = open_as(browser, server, "ada", viewport=DESKTOP)
    try:
        # "All pending" counts both and says how many are hers, as the title does
        page.goto(f"{server.url}/approvals/?view=pending&mine=0")
        expect(page).to_have_title(f"(1) {TITLE}")
        expect(page.locator(".queue-head .meta")).to_contain_text(
            "2 pending · 1 you can decide"
        )
        page.goto(f"{server.url}/approvals/")
        expect(page).to_have_title(f"(1) {TITLE}")
        expect(page.locator("#queue-count")).to_have_text("1")
        expect(_req(page, first)).to_be_visible()

        # When a request arrives live, both count it and the live region says so
        start_refund(thread_page, server, "Arrival", "refund order A-1001 25.00")
        arrival = _newest()
        item = _req(page, arrival)
        expect(item).to_be_visible()
        expect(page.locator("#queue-count")).to_have_text("2")
        expect(page).to_have_title(f"(2) {TITLE}")
        expect(page.locator("#queue-live")).to_have_text(
            re.compile(rf"^New request: refund_order #{arrival.pk}")
        )

        # When ada approves it with an edit: inside the undo window it counts no more
        item.locator(".req-tool").click()
        item.get_by_role("button", name="Edit & approve").click()
        item.get_by_label("amount *").fill("10")
        item.get_by_role("button", name="Approve edited arguments").click()
        page.get_by_role("dialog").get_by_role("button", name="Confirm").click()
        undo = item.get_by_role("button", name="Undo")
        expect(undo).to_be_visible()
        expect(page.locator("#queue-count")).to_have_text("1")
        expect(page).to_have_title(f"(1) {TITLE}")
        arrival.refresh_from_db()
        assert arrival.status == "approved"
        assert arrival.edited_arguments["amount"] == 10
        # and the card shows what will run: the edit, with the proposal beside it
        expect(item.locator(".req-args")).to_contain_text('"amount": 10')
        expect(item).to_contain_text("Arguments as edited")
        expect(item).to_contain_text("Refund 10.00 EUR")

        # When she undoes it
        undo.click()

        # Then the card says plainly that the edit was discarded, and keeps it at hand
        notice = item.locator(".req-undo-notice")
        expect(notice).to_be_visible()
        expect(notice).to_contain_text(
            "Undone: your edit (amount 25 → 10) was discarded"
        )
        expect(item.get_by_label("amount *")).to_have_value("10")
        expect(item.get_by_role("button", name="Approve as proposed")).to_be_visible()
        expect(item.locator(".req-args")).to_contain_text('"amount": 25')
        expect(page.locator("#queue-live")).to_contain_text("Undone: your edit")
        expect(page.locator("#queue-count")).to_have_text("2")
        expect(page).to_have_title(f"(2) {TITLE}")
        arrival.refresh_from_db()
        assert arrival.status == "pending"
        assert arrival.edited_arguments is None
        assert not ToolExecution.objects.filter(tool_call=arrival.tool_call).exists()
        assert_no_axe_violations(page)

        # and after another card is decided elsewhere, both still agree
        approval_decide(approval=first, decided_by=ada, decision="reject", reason="no")
        page.reload()
        expect(page.locator("#queue-count")).to_have_text("1")
        expect(page).to_have_title(f"(1) {TITLE}")

        # Approving the edit again from the editor runs the edit, not the proposal
        item = _req(page, arrival)
        item.locator(".req-tool").click()
        item.get_by_role("button", name="Edit & approve").click()
        item.get_by_label("amount *").fill("10")
        item.get_by_role("button", name="Approve edited arguments").click()
        page.get_by_role("dialog").get_by_role("button", name="Confirm").click()
        expect(item.get_by_role("button", name="Undo")).to_be_visible()
        arrival.refresh_from_db()
        assert arrival.edited_arguments["amount"] == 10
    finally:
        operator.close()
        context.close()


def test_dc05_live_region_outcomes_final_state_looks_and_empty_queue(
    browser, quick_server
):
    """The live region names each outcome (approved, then executed; rejected); the
    decided view shows approved-and-executed, rejected and expired with their own word,
    icon and colour, newest first; an empty queue shows no bulk bar; axe finds nothing."""
    server = quick_server
    owner = make_user("olivia", "demo.add_refund")
    make_user(
        "ada",
        "approvals.decide_approvalrequest",
        "demo.add_refund",
        "threads.view_thread",
    )
    stale = pending_request(owner, call_id="c-stale", amount=4.0)
    # expired an hour ago (as approvals_expire leaves it, without its run's continuation)
    ApprovalRequest.objects.filter(pk=stale.pk).update(
        status="expired", decided_at=timezone.now() - timedelta(hours=1)
    )
    unwanted = pending_request(owner, call_id="c-unwanted", amount=9.0)
    operator, thread_page = open_as(browser, server, "olivia", viewport=DESKTOP)
    context, page = open_as(browser, server, "ada", viewport=DESKTOP)
    try:
        start_refund(thread_page, server, "Live outcomes", "refund order A-1001 25.00")
        refund = _newest()
        page.goto(f"{server.url}/approvals/")
        live = page.locator("#queue-live")
        expect(page.locator("#bulk")).to_be_visible()

        # When ada rejects one request, the live region says so
        item = _req(page, unwanted)
        item.locator(".req-tool").click()
        item.get_by_label("Reason for rejecting").fill("duplicate")
        item.get_by_role("button", name="Reject").click()
        expect(live).to_have_text(f"refund_order #{unwanted.pk} rejected by ada")

        # When she approves the other, it says approved, then executed
        item = _req(page, refund)
        item.locator(".req-tool").click()
        item.get_by_role("button", name="Approve", exact=True).click()
        page.get_by_role("dialog").get_by_role("button", name="Confirm").click()
        expect(live).to_have_text(
            re.compile(rf"^refund_order #{refund.pk} (approved by ada|executed)$")
        )
        expect(live).to_have_text(f"refund_order #{refund.pk} executed", timeout=30_000)

        # Then the queue is empty: its sentence, no bulk bar
        expect(page.locator("#queue-empty")).to_be_visible()
        expect(page.locator("#bulk")).to_be_hidden()
        expect(page.locator("#queue-count")).to_have_text("0")
        page.reload()
        expect(page.locator("#queue-empty")).to_be_visible()
        expect(page.locator("#bulk")).to_be_hidden()
        assert_no_axe_violations(page)

        # The decided view: newest first, each final state its own word and look
        page.goto(f"{server.url}/approvals/?view=decided")
        rows = page.locator("#queue > li")
        expect(rows).to_have_count(3)
        ids = [
            int(x)
            for x in rows.evaluate_all("els => els.map(e => e.dataset.approvalId)")
        ]
        assert ids == [refund.pk, unwanted.pk, stale.pk]
        states = {
            refund.pk: ("Approved · executed", "state-succeeded"),
            unwanted.pk: ("Rejected", "state-rejected"),
            stale.pk: ("Expired", "state-expired"),
        }
        looks = set()
        for pk, (text, css) in states.items():
            badge = page.locator(f'[data-approval-id="{pk}"] .final-state')
            expect(badge).to_have_text(text)
            expect(badge).to_have_class(re.compile(rf"\b{css}\b"))
            looks.add(
                badge.evaluate(
                    """el => [getComputedStyle(el).color, getComputedStyle(el).backgroundColor,
                       getComputedStyle(el, '::before').content].join('|')"""
                )
            )
        assert len(looks) == 3, looks  # colour and icon differ, beside the word
        assert_no_axe_violations(page)
    finally:
        operator.close()
        context.close()
