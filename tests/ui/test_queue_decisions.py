"""The approval queue and the admin as operators and approvers use them, in
Debian's chromium with two browser contexts, at 1400, 1920 and 390 px.

Safe decisions (a decider without the tool's permission sees why and who can, and is
refused), the context on every card, confirmation of destructive and bulk decisions,
the undo window before execution, switchable shortcuts (WCAG 2.1.4), the schema form
with its diff, the decided view, filters and the CSV export, the admin's pending
changelist, Decide panel and audit trail; axe-core finds nothing on any of these pages.
Implements SEC-02, SEC-03, DC-03, DC-05.
"""

from __future__ import annotations

import csv
import io
import json
import re
from typing import Any

import pytest
from playwright.sync_api import expect

from approvals.models import ApprovalRequest, AuditEntry, ToolExecution
from demo.models import Refund
from tests.helpers.ui import (
    make_user,
    no_horizontal_scroll,
    open_as,
    pending_request,
    screenshot,
    start_refund,
)
from tests.ui.axe import assert_no_axe_violations
from threads.models import Message, ToolCall

DESKTOP = {"width": 1400, "height": 900}
WIDE = {"width": 1920, "height": 1080}
PHONE = {"width": 390, "height": 844}
UNDO_SECONDS = "6"


@pytest.fixture
def undo_server(ui_server_factory):
    """A server whose UI approvals wait UNDO_SECONDS before they execute."""
    return ui_server_factory(
        extra_env={"COUNTERSIGN_DECISION_UNDO_SECONDS": UNDO_SECONDS}
    )


def _pending(owner: Any, *, call_id: str, amount: float, title: str) -> ApprovalRequest:
    """Return a pending refund request with the turn that led to it (as the demo leaves one)."""
    approval = pending_request(owner, call_id=call_id, amount=amount)
    thread, run, call = approval.thread, approval.run, approval.tool_call
    thread.title = title
    thread.save(update_fields=["title"])
    Message.objects.create(
        thread=thread, role="user", content="Refund A-1001 please", position=1, run=run
    )
    ToolCall.objects.create(
        thread=thread,
        run=run,
        tool_call_id=f"{call_id}-lookup",
        name="lookup_order",
        arguments={"order_id": "A-1001"},
        state=ToolCall.State.SUCCEEDED,
    )
    Message.objects.create(
        thread=thread,
        role="tool",
        tool_call_id=f"{call_id}-lookup",
        content='{"order_id":"A-1001","total":"120.00","status":"delivered"}',
        position=3,
        run=run,
    )
    Message.objects.create(
        thread=thread,
        role="assistant",
        message_id=f"{call_id}-msg",
        content=f"The parcel arrived damaged, so I will refund {amount:.2f}.",
        position=4,
        run=run,
    )
    ToolCall.objects.filter(pk=call.pk).update(parent_message_id=f"{call_id}-msg")
    return approval


def _status(approval: ApprovalRequest) -> str:
    approval.refresh_from_db()
    return approval.status


def _req(page: Any, approval: ApprovalRequest) -> Any:
    return page.locator(f'[data-approval-id="{approval.pk}"]')


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1400", "390"])
def test_sec02_queue_refuses_the_unauthorized_confirms_and_undoes(
    browser, undo_server, viewport
):
    """Operator asks for a refund in the thread; an approver lacking demo.add_refund sees
    why and who can, with Approve disabled; the approver who can confirms, undoes inside
    the window (nothing runs), approves again and it executes exactly once."""
    make_user("olivia", "demo.add_refund")
    make_user("dora", "approvals.decide_approvalrequest")
    make_user(
        "ada",
        "approvals.decide_approvalrequest",
        "demo.add_refund",
        "threads.view_thread",
    )
    operator, thread_page = open_as(browser, undo_server, "olivia", viewport=viewport)
    dora, dora_page = open_as(browser, undo_server, "dora", viewport=viewport)
    ada, page = open_as(browser, undo_server, "ada", viewport=viewport)
    try:
        # Given the operator's refund waiting for approval (the demo agent, for real)
        start_refund(
            thread_page, undo_server, "Damaged parcel", "refund order A-1001 25.00"
        )
        approval = ApprovalRequest.objects.get(tool_name="refund_order")

        # When dora opens the queue, the card says she cannot approve and who can
        dora_page.goto(f"{undo_server.url}/approvals/")
        dcard = _req(dora_page, approval)
        # in words: the permission's name, never its codename
        expect(dcard.locator(".req-auth")).to_contain_text("your account lacks")
        expect(dcard.locator(".req-auth")).to_contain_text("“Can add refund”")
        expect(dcard.locator(".req-auth")).not_to_contain_text("demo.add_refund")
        expect(dcard.locator(".req-auth")).to_contain_text("Who can: ada")
        expect(dcard.get_by_role("button", name="Approve", exact=True)).to_be_disabled()
        # and the server refuses her crafted approval (403), the request stays pending
        refused = dora_page.evaluate(
            """async (id) => {
              const token = document.cookie.split('; ').find(c => c.startsWith('csrftoken=')).split('=')[1];
              const r = await fetch(`/api/approvals/${id}/approve/`, {method: 'POST', headers: {'Content-Type': 'application/json', 'X-CSRFToken': token}, body: '{}'});
              return [r.status, await r.json()];
            }""",
            approval.pk,
        )
        assert refused[0] == 403
        assert refused[1]["type"] == "not_authorized"
        assert _status(approval) == "pending"
        assert_no_axe_violations(dora_page)
        no_horizontal_scroll(dora_page)

        # The card carries the context: thread, requester, agent, risk, expiry, call link
        page.goto(f"{undo_server.url}/approvals/")
        item = _req(page, approval)
        expect(item.locator(".req-thread")).to_have_text("Thread: Damaged parcel")
        expect(item.locator(".req-call")).to_have_attribute(
            "href",
            f"/threads/{approval.thread.thread_id}/#call-{approval.call.tool_call_id}",
        )
        expect(item.locator(".req-requester")).to_have_text("requested by olivia")
        expect(item.locator(".req-agent")).to_have_text("agent demo")
        # destructive, within the demo's 100.00 threshold: medium (still confirmed)
        expect(item.locator(".badge.risk-medium")).to_have_text("medium risk")
        expect(item.locator(".req-risk-reasons")).to_contain_text("destructive")
        expect(item.locator(".req-expiry")).to_contain_text("expires in")
        expect(item.locator(".req-based-on")).to_contain_text("lookup_order")
        assert_no_axe_violations(page)
        no_horizontal_scroll(page)

        # Approve asks first; Cancel leaves it pending
        item.get_by_role("button", name="Approve", exact=True).click()
        dialog = page.get_by_role("dialog")
        expect(dialog).to_be_visible()
        expect(dialog).to_contain_text("destructive")
        assert_no_axe_violations(page)
        dialog.get_by_role("button", name="Cancel").click()
        expect(dialog).to_be_hidden()
        assert _status(approval) == "pending"

        # Confirm: approved, and an undo offer while execution waits
        item.get_by_role("button", name="Approve", exact=True).click()
        dialog.get_by_role("button", name="Confirm").click()
        undo = item.get_by_role("button", name="Undo")
        expect(undo).to_be_visible()
        # the headline says what stands, not "Waiting for a decision"
        expect(item.locator(".req-headline")).to_have_text(
            re.compile(
                r"^Approved by you — executes in \d+ s; you can undo it until then\.$"
            )
        )
        screenshot(page, f"queue-undo-{viewport['width']}")
        assert _status(approval) == "approved"
        undo.click()
        expect(item.get_by_role("button", name="Approve", exact=True)).to_be_visible()
        assert _status(approval) == "pending"
        assert not ToolExecution.objects.filter(tool_call=approval.call).exists()
        assert Refund.objects.count() == 0
        assert AuditEntry.objects.filter(action="approval.undone").count() == 1

        # Approve for good: once the window ends the card goes and the refund runs once
        item.get_by_role("button", name="Approve", exact=True).click()
        dialog.get_by_role("button", name="Confirm").click()
        expect(item).to_have_count(0, timeout=30_000)
        execution = ToolExecution.objects.get(tool_call=approval.call)
        for _ in range(100):
            execution.refresh_from_db()
            if execution.state == "succeeded":
                break
            page.wait_for_timeout(200)
        assert execution.state == "succeeded"
        assert execution.attempts == 1
        assert Refund.objects.count() == 1
    finally:
        operator.close()
        dora.close()
        ada.close()


def test_wcag_2_1_4_shortcuts_are_listed_switchable_and_confirm_destructive(
    browser, quick_server
):
    """The shortcuts are listed behind "?"; switched off, keys do nothing (persisted
    across reloads); switched on, 'a' on a destructive call asks first (the dialog's
    Confirm has the focus) and never approves alone."""
    owner = make_user("olivia", "demo.add_refund")
    first = _pending(owner, call_id="call-1", amount=25.0, title="first refund")
    make_user("ada", "approvals.decide_approvalrequest", "demo.add_refund")
    context, page = open_as(browser, quick_server, "ada", viewport=DESKTOP)
    try:
        page.goto(f"{quick_server.url}/approvals/")
        page.keyboard.press("?")
        shortcuts = page.get_by_role("dialog", name="Keyboard shortcuts")
        expect(shortcuts).to_contain_text("approve")
        assert_no_axe_violations(page)
        toggle = page.get_by_label("Enable single-key shortcuts")
        expect(toggle).to_be_checked()
        shortcuts.get_by_role("button", name="Close").click()
        expect(page.get_by_role("button", name="Keyboard shortcuts")).to_be_focused()

        # 'a' opens the confirmation for the destructive refund, nothing more
        _req(page, first).locator(".req-tool").click()
        page.keyboard.press("a")
        dialog = page.get_by_role("dialog", name=re.compile("Approve"))
        expect(dialog).to_be_visible()
        expect(dialog.get_by_role("button", name="Confirm")).to_be_focused()
        page.keyboard.press("Escape")
        expect(dialog).to_be_hidden()
        assert _status(first) == "pending"

        # switched off, 'a' does nothing, and it stays off after a reload
        page.get_by_role("button", name="Keyboard shortcuts").click()
        toggle.uncheck()
        shortcuts.get_by_role("button", name="Close").click()
        _req(page, first).locator(".req-tool").click()
        page.keyboard.press("a")
        page.wait_for_timeout(300)
        expect(dialog).to_be_hidden()
        page.reload()
        page.get_by_role("button", name="Keyboard shortcuts").click()
        expect(page.get_by_label("Enable single-key shortcuts")).not_to_be_checked()
        page.get_by_role("button", name="Close").click()
        page.keyboard.press("j")
        page.keyboard.press("a")
        page.wait_for_timeout(300)
        expect(page.get_by_role("dialog")).to_be_hidden()
        assert _status(first) == "pending"
        assert_no_axe_violations(page)
    finally:
        context.close()


def test_dc03_schema_form_diff_decided_view_filters_and_csv(browser, quick_server):
    """Edit in the form generated from the tool's schema (raw JSON still there) with a
    highlighted diff; bulk reject with confirmation; the decided view says who, when,
    why, the diff and how execution ended; filters, search and the CSV export."""
    owner = make_user("olivia", "demo.add_refund")
    edited = _pending(owner, call_id="call-1", amount=25.0, title="edit me")
    big = _pending(owner, call_id="call-2", amount=150.0, title="big refund")
    third = _pending(owner, call_id="call-3", amount=5.0, title="small refund")
    make_user("ada", "approvals.decide_approvalrequest", "demo.add_refund")
    context, page = open_as(browser, quick_server, "ada", viewport=WIDE)
    try:
        page.goto(f"{quick_server.url}/approvals/")
        # the over-threshold refund says why it is high risk
        expect(_req(page, big).locator(".req-risk-reasons")).to_contain_text(
            "amount 150 is over the policy threshold 100"
        )
        # its rationale is the assistant text before the call, read when it is opened
        _req(page, big).locator(".req-tool").click()
        expect(_req(page, big).locator(".req-rationale")).to_have_text(
            "The parcel arrived damaged, so I will refund 150.00."
        )

        # edit through the schema form: the diff highlights what changed
        card = _req(page, edited)
        card.locator(".req-tool").click()  # one line open at a time
        card.get_by_role("button", name="Edit & approve").click()
        amount = card.get_by_label("amount *")
        expect(amount).to_have_value("25")
        amount.fill("12.5")
        expect(card.locator(".edit-diff del")).to_have_text("25")
        expect(card.locator(".edit-diff ins")).to_have_text("12.5")
        card.get_by_role("button", name="Edit as raw JSON").click()
        expect(card.get_by_label("Edited arguments", exact=False)).to_have_value(
            json.dumps(
                {"order_id": "A-1001", "amount": 12.5, "reason": "customer request"},
                indent=2,
            )
        )
        assert_no_axe_violations(page)
        card.get_by_role("button", name="Approve edited arguments").click()
        page.get_by_role("dialog").get_by_role("button", name="Confirm").click()
        expect(card).to_have_count(0)
        edited.refresh_from_db()
        assert edited.edited_arguments["amount"] == 12.5

        # bulk reject: a reason, then a confirmation listing the requests
        page.get_by_label(f"Select refund_order request {big.pk}").check()
        page.get_by_label(f"Select refund_order request {third.pk}").check()
        page.get_by_label("Reason for rejecting the selected calls").fill(
            "duplicate of an earlier refund"
        )
        page.get_by_role("button", name="Reject selected").click()
        dialog = page.get_by_role("dialog")
        expect(dialog).to_contain_text("big refund")
        dialog.get_by_role("button", name="Confirm").click()
        expect(page.locator(".req")).to_have_count(0)
        assert (_status(big), _status(third)) == ("rejected", "rejected")

        # the decided view: who, when, why in words, the diff, the execution's end
        page.goto(f"{quick_server.url}/approvals/?view=decided")
        decided = _req(page, big)
        expect(decided.locator(".req-outcome")).to_contain_text(
            "Rejected by ada: “duplicate of an earlier refund”"
        )
        expect(decided).not_to_contain_text("DECLINED_BY_OPERATOR")
        done = _req(page, edited)
        expect(done.locator(".req-diff del")).to_have_text("25")
        expect(done.locator(".req-diff ins")).to_have_text("12.5")
        expect(done.locator(".req-outcome")).to_contain_text("Approved by ada")
        assert_no_axe_violations(page)

        # filters and search (folded away until asked for)
        page.get_by_text("Filter and sort").click()
        page.get_by_label("Risk").select_option("high")
        page.get_by_role("button", name="Apply").click()
        expect(page.locator(".req")).to_have_count(1)  # only the one over 100.00
        page.get_by_label("Search").fill("big refund")
        page.get_by_role("button", name="Apply").click()
        expect(page.locator(".req")).to_have_count(1)
        page.goto(f"{quick_server.url}/approvals/?risk=low")
        expect(page.locator(".req")).to_have_count(0)

        # the CSV export of decisions
        response = page.request.get(f"{quick_server.url}/api/approvals/decisions.csv")
        assert response.status == 200
        assert response.headers["content-type"].startswith("text/csv")
        rows = list(csv.DictReader(io.StringIO(response.text())))
        by_id = {int(r["id"]): r for r in rows}
        assert set(by_id) == {edited.pk, big.pk, third.pk}
        assert by_id[big.pk]["status"] == "rejected"
        assert by_id[big.pk]["decidedBy"] == "ada"
        assert by_id[big.pk]["reason"] == "duplicate of an earlier refund"
        assert by_id[edited.pk]["edited"] == "yes"
        assert json.loads(by_id[edited.pk]["approvedArguments"])["amount"] == 12.5
    finally:
        context.close()


@pytest.mark.parametrize("viewport", [DESKTOP, WIDE], ids=["1400", "1920"])
def test_dc03_admin_pending_changelist_decide_panel_and_audit_trail(
    browser, quick_server, viewport
):
    """The changelist opens on pending with status and decider columns; the change form's
    Decide panel has real width; Approve is disabled with the reason for a decider
    lacking the tool's permission; the audit trail is newest first with links and
    seconds; axe finds nothing on either page."""
    owner = make_user("olivia", "demo.add_refund")
    approval = _pending(owner, call_id="call-1", amount=25.0, title="admin refund")
    decided = _pending(owner, call_id="call-2", amount=7.0, title="already decided")
    ada = make_user(
        "ada",
        "approvals.decide_approvalrequest",
        "approvals.view_approvalrequest",
        "approvals.view_auditentry",
        "demo.add_refund",
    )
    ada.is_staff = True
    ada.save()
    dora = make_user(
        "dora", "approvals.decide_approvalrequest", "approvals.view_approvalrequest"
    )
    dora.is_staff = True
    dora.save()
    from orchestration.pipeline import approval_decide

    approval_decide(
        approval=decided, decided_by=ada, decision="reject", reason="not needed"
    )
    context, page = open_as(browser, quick_server, "ada", viewport=viewport)
    try:
        page.goto(f"{quick_server.url}/admin/approvals/approvalrequest/")
        expect(page.locator("#changelist-filter .selected").first).to_have_text(
            "pending"
        )
        rows = page.locator("#result_list tbody tr")
        expect(rows).to_have_count(1)
        page.goto(f"{quick_server.url}/admin/approvals/approvalrequest/?status=all")
        expect(rows).to_have_count(2)
        page.goto(f"{quick_server.url}/admin/approvals/approvalrequest/")
        header = page.locator("#result_list thead")
        expect(header).to_contain_text("Status")
        expect(header).to_contain_text("Decided by")
        expect(header).to_contain_text("You can authorize")
        assert_no_axe_violations(page)

        page.goto(
            f"{quick_server.url}/admin/approvals/approvalrequest/{approval.pk}/change/"
        )
        panel = page.get_by_role("region", name="Decide")
        expect(panel).to_be_visible()
        box = panel.bounding_box()
        assert box is not None
        assert box["width"] > 600, box
        assert box["x"] + box["width"] <= viewport["width"]
        context_panel = page.get_by_role("region", name="Where it stands")
        expect(context_panel).to_contain_text("admin refund")
        expect(context_panel).to_contain_text("The parcel arrived damaged")
        expect(context_panel).to_contain_text("medium")
        assert_no_axe_violations(page)
        screenshot(page, f"admin-decide-{viewport['width']}")

        # approve with an edit: the audit trail shows it first, with its diff
        page.get_by_label("Arguments to approve (edit to change)").fill(
            json.dumps(
                {"order_id": "A-1001", "amount": 20, "reason": "customer request"}
            )
        )
        panel.get_by_role("button", name="Approve").click()
        expect(page.locator(".messagelist")).to_contain_text("approved")
        audit = page.get_by_role("region", name="Audit trail (newest first)")
        rows = audit.locator("tbody tr")
        first_row = rows.filter(has_text="approval.approved")
        expect(first_row).to_have_count(1)
        expect(first_row.locator("del")).to_have_text("25.0")
        expect(first_row.locator("ins")).to_have_text("20")
        expect(first_row.locator("td").first).to_have_text(
            re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$")
        )
        expect(first_row.locator("a")).to_have_attribute(
            "href", f"/admin/approvals/approvalrequest/{approval.pk}/change/"
        )
        # newest first: what the execution did after the approval comes above it
        actions = [t.split("\t")[2].strip() for t in rows.all_inner_texts()]
        # the edited approval: new arguments (votes_reset), the vote, then the decision
        assert actions[-3:] == [
            "approval.approved",
            "approval.vote.approve",
            "approval.votes_reset",
        ], actions
        # the audit list itself: newest first, each target linked
        page.goto(f"{quick_server.url}/admin/approvals/auditentry/")
        newest = AuditEntry.objects.order_by("-id").first()
        expect(page.locator("#result_list tbody tr").first).to_contain_text(
            newest.action
        )
        assert_no_axe_violations(page)
    finally:
        context.close()

    # a decider without the tool's permission: Approve disabled, with the reason
    other = _pending(owner, call_id="call-3", amount=9.0, title="dora's view")
    context, page = open_as(browser, quick_server, "dora", viewport=viewport)
    try:
        page.goto(
            f"{quick_server.url}/admin/approvals/approvalrequest/{other.pk}/change/"
        )
        panel = page.get_by_role("region", name="Decide")
        expect(panel.get_by_role("button", name="Approve")).to_be_disabled()
        expect(panel).to_contain_text(
            "Approving refund_order also needs the permission “Can add refund”, "
            "which your account lacks"
        )
        expect(panel).not_to_contain_text("demo.add_refund")
        assert_no_axe_violations(page)
    finally:
        context.close()
    assert _status(other) == "pending"
