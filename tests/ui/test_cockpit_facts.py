"""The facts every surface shows, in a real browser: votes under N of M, the plain
"why not / who can" sentences, and a queue of 1,000 requests that opens on the most
urgent one with its Approve above the fold, at phone and desktop sizes.

Two contexts (the requester, an approver) on Debian's chromium. DC-03, SEC-02.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone
from playwright.sync_api import expect

from approvals.models import ApprovalRequest
from approvals.selectors import QUEUE_PAGE_SIZE
from orchestration.pipeline import approval_decide
from tests.helpers.ui import (
    make_user,
    no_horizontal_scroll,
    open_as,
    pending_request,
    watch_errors,
)
from tests.ui.axe import assert_no_axe_violations

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1400, "height": 900}
DECIDER = (
    "approvals.decide_approvalrequest",
    "approvals.view_approvalrequest",
    "demo.add_refund",
)
PENDING = 1000


def above_the_fold(locator) -> bool:
    """Whether the element's box lies wholly within the first screen (no scrolling)."""
    return locator.evaluate(
        """(el) => {
          const r = el.getBoundingClientRect();
          return r.top >= 0 && r.bottom <= window.innerHeight && r.height > 0;
        }"""
    )


def _many(owner, count: int) -> None:
    """Make ``count`` pending requests by copying one (a queue that has grown)."""
    template = pending_request(owner, call_id="bulk-0", amount=1.0)
    rows = []
    for index in range(1, count):
        copy = ApprovalRequest.objects.get(pk=template.pk)
        copy.pk = None
        copy.tool_call = None  # a request may outlive its call's row (superseded)
        copy.expires_at = timezone.now() + timedelta(hours=3, seconds=index)
        rows.append(copy)
    ApprovalRequest.objects.bulk_create(rows)


@pytest.mark.parametrize("viewport", [PHONE, DESKTOP], ids=["390", "1400"])
def test_votes_plain_refusals_and_a_thousand_requests_in_pages(
    browser, quick_server, viewport
):
    """Under 2-of-2 routed to "finance": the requester is told in words why not and who
    can; after ada's vote, grace sees "1 of 2" naming ada and the group, and the most
    urgent request (with its Approve) is on the first screen of 1,000 paged 25 at a
    time; her approval is the second vote, and the decided line names both."""
    finance = Group.objects.create(name="finance")
    olivia = make_user("olivia", *DECIDER)
    ada = make_user("ada", *DECIDER)
    grace = make_user("grace", *DECIDER)
    for user in (olivia, ada, grace):
        user.groups.add(finance)
    _many(olivia, PENDING - 1)
    urgent = pending_request(olivia, call_id="urgent", amount=25.0)
    ApprovalRequest.objects.filter(pk=urgent.pk).update(
        approvals_required=2, expires_at=timezone.now() + timedelta(minutes=30)
    )
    urgent.approver_groups.set([finance])
    approval_decide(approval=urgent, decided_by=ada, decision="approve")

    requester, own = open_as(browser, quick_server, "olivia", viewport=viewport)
    approver, page = open_as(browser, quick_server, "grace", viewport=viewport)
    errors = watch_errors(page)
    try:
        # The requester: her own request is not hers to decide, said in words
        own.goto(f"{quick_server.url}/approvals/?mine=0")
        mine = own.locator(f'[data-approval-id="{urgent.pk}"]')
        expect(mine.locator(".req-auth")).to_have_text(
            "You asked for this call, so another approver must decide. Who can: grace."
        )
        expect(mine.get_by_role("button", name="Approve", exact=True)).to_be_disabled()
        # ... and "I can decide" (her default) leaves it out
        own.goto(f"{quick_server.url}/approvals/")
        expect(own.locator(f'[data-approval-id="{urgent.pk}"]')).to_have_count(0)

        # The second approver: the first page of 1,000, the urgent one first and open
        page.goto(f"{quick_server.url}/approvals/")
        items = page.locator(".req")
        expect(items).to_have_count(QUEUE_PAGE_SIZE)
        expect(page.locator("#queue-count")).to_have_text(str(PENDING))
        expect(page.locator(".queue-head")).to_contain_text("page 1 of 40")
        first = items.first
        expect(first).to_have_attribute("data-approval-id", str(urgent.pk))
        expect(first).to_have_attribute("aria-current", "true")
        expect(first.locator(".badge-votes")).to_have_text("1 of 2 approvals")
        expect(first.locator(".req-headline")).to_have_text(
            "Waiting for 1 more approval from the finance group (1 of 2 given: ada)."
        )
        approve = first.get_by_role("button", name="Approve", exact=True)
        expect(approve).to_be_enabled()
        assert above_the_fold(approve), "Approve is below the first screen"
        no_horizontal_scroll(page)
        assert_no_axe_violations(page)
        # the next page is one link away
        expect(page.get_by_role("link", name="Next page")).to_have_attribute(
            "href", "?page=2"
        )

        # Keyboard only: the confirm dialog's Confirm has the focus, Enter approves
        first.locator(".req-open").focus()
        page.keyboard.press("a")
        dialog = page.get_by_role("dialog", name="Approve refund_order?")
        expect(dialog.get_by_role("button", name="Confirm")).to_be_focused()
        assert_no_axe_violations(page)
        page.keyboard.press("Enter")
        expect(page.locator(f'[data-approval-id="{urgent.pk}"]')).to_have_count(0)
        urgent.refresh_from_db()
        assert urgent.status == "approved"
        assert sorted(urgent.votes.values_list("voter__username", flat=True)) == [
            "ada",
            "grace",
        ]

        # The decided view names both approvers, newest decision first
        page.goto(f"{quick_server.url}/approvals/?view=decided")
        decided = page.locator(".req").first
        expect(decided).to_have_attribute("data-approval-id", str(urgent.pk))
        expect(decided.locator(".req-outcome")).to_contain_text(
            "Approved by ada and grace"
        )
        assert_no_axe_violations(page)
        assert errors == []
    finally:
        requester.close()
        approver.close()
