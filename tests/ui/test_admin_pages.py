"""The admin's approval pages at 1920, 1400 and 390 px in Debian's chromium: axe-core
finds nothing on the changelist and the change page, the decision comes before the
request's fields, every field of a pending request is read-only, and no time is shown
as a raw ISO timestamp with microseconds. Implements DC-03, SEC-02.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from approvals.models import ApprovalRequest
from orchestration.pipeline import approval_decide
from tests.helpers.ui import make_user, no_horizontal_scroll, open_as, pending_request
from tests.ui.axe import assert_no_axe_violations

VIEWPORTS = {
    "1920": {"width": 1920, "height": 1080},
    "1400": {"width": 1400, "height": 900},
    "390": {"width": 390, "height": 844},
}
RAW_ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+")
EDIT = {"order_id": "A-1001", "amount": 20.0, "reason": "customer request"}


def _staff(username: str, *permissions: str):
    user = make_user(username, *permissions)
    user.is_staff = True
    user.save()
    return user


def _no_raw_iso(page) -> None:
    text = page.locator("body").inner_text()
    assert not RAW_ISO.search(text), RAW_ISO.search(text)


@pytest.mark.parametrize("width", list(VIEWPORTS))
def test_dc03_admin_approval_pages_pass_axe_decision_first_read_only(
    browser, quick_server, width
):
    """Changelist and change page: no axe violation, Decide above the fields, no
    editable field nor Save button, times formatted, votes in a headed table."""
    owner = make_user("olivia", "demo.add_refund")
    perms = (
        "approvals.decide_approvalrequest",
        "approvals.view_approvalrequest",
        "demo.add_refund",
    )
    ada = _staff("ada", *perms)
    # the votes are shown to those who may view them
    _staff("grace", *perms, "approvals.view_approvalvote")
    # Given a request half approved (ada voted with an edit, one more is needed)
    pending = pending_request(owner, call_id="c-pending", amount=25.0)
    ApprovalRequest.objects.filter(pk=pending.pk).update(approvals_required=2)
    pending.refresh_from_db()
    approval_decide(
        approval=pending, decided_by=ada, decision="approve", edited_arguments=EDIT
    )
    # and a rejected one
    decided = pending_request(owner, call_id="c-decided", amount=7.0)
    approval_decide(approval=decided, decided_by=ada, decision="reject", reason="no")
    context, page = open_as(browser, quick_server, "grace", viewport=VIEWPORTS[width])
    try:
        # The changelist, pending and all
        for query in ("", "?status=all"):
            page.goto(f"{quick_server.url}/admin/approvals/approvalrequest/{query}")
            expect(page.locator("#result_list tbody tr").first).to_be_visible()
            assert_no_axe_violations(page)
            _no_raw_iso(page)

        # The change page of the pending request
        page.goto(
            f"{quick_server.url}/admin/approvals/approvalrequest/{pending.pk}/change/"
        )
        decide = page.get_by_role("region", name="Decide")
        expect(decide).to_be_visible()
        first_fieldset = page.locator("#approvalrequest_form fieldset").first
        decide_box, fields_box = decide.bounding_box(), first_fieldset.bounding_box()
        assert decide_box is not None
        assert fields_box is not None
        assert decide_box["y"] < fields_box["y"]
        # every field of the request is shown, none can be edited, nothing to save
        form = page.locator("#approvalrequest_form")
        editable = form.locator(
            "input:not([type=hidden]), textarea, select, button, [contenteditable]"
        )
        expect(editable).to_have_count(0)
        for internal in (
            "schema_hash",
            "previous_schema_hash",
            "reapproval",
            "trace_context",
        ):
            expect(form.locator(f".field-{internal} .readonly")).to_have_count(1)
        expect(page.get_by_role("button", name="Save")).to_have_count(0)
        # the vote, in a table with a header on every column
        votes = page.get_by_role("region", name="Votes", exact=True)
        expect(votes.locator("tbody tr")).to_have_count(1)
        expect(votes.locator("tbody tr")).to_contain_text("ada")
        expect(votes.locator("th:empty")).to_have_count(0)
        # times in the admin's one format
        expect(page.get_by_role("region", name="Where it stands")).to_contain_text(
            re.compile(r"Expires\s*\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC")
        )
        _no_raw_iso(page)
        assert_no_axe_violations(page)
        if width == "390":
            no_horizontal_scroll(page)

        # The change page of the decided request: no Decide panel, still clean
        page.goto(
            f"{quick_server.url}/admin/approvals/approvalrequest/{decided.pk}/change/"
        )
        expect(page.get_by_role("region", name="Where it stands")).to_be_visible()
        expect(page.get_by_role("region", name="Decide")).to_have_count(0)
        _no_raw_iso(page)
        assert_no_axe_violations(page)
    finally:
        context.close()
