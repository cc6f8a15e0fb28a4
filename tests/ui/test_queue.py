"""The approval queue page in a real browser: read-only without the decide permission,
keyboard shortcuts, reject with a reason, and edit-then-approve validated by the server."""

from __future__ import annotations

import re
from datetime import timedelta

from django.utils import timezone
from playwright.sync_api import expect

from approvals.models import ApprovalRequest
from tests.helpers.ui import login, make_user, pending_request, screenshot
from threads.models import Run
from threads.services import thread_create


def _confirm(page) -> None:
    """Confirm the decision the queue asks about (destructive or bulk)."""
    dialog = page.get_by_role("dialog")
    expect(dialog).to_be_visible()
    dialog.get_by_role("button", name="Confirm").click()
    expect(dialog).to_be_hidden()


def _status(approval: ApprovalRequest) -> str:
    approval.refresh_from_db()
    return approval.status


def test_dc03_read_only_user_sees_the_queue_without_decide_buttons(
    browser, quick_server
):
    """A user with only the view permission sees every request and no way to decide."""
    # Given two pending requests and a user who may only view them
    owner = make_user("olivia", "demo.add_refund")
    first = pending_request(owner, call_id="call-1", amount=10.0)
    pending_request(owner, call_id="call-2", amount=20.0)
    make_user("rita", "approvals.view_approvalrequest")
    context, page = login(browser, quick_server, "rita")
    try:
        # When they open the queue
        page.goto(f"{quick_server.url}/approvals/")
        # Then both requests show with their arguments, and no decision control exists
        expect(page.locator(".req")).to_have_count(2)
        expect(page.locator(".req").first.locator(".req-args")).to_contain_text(
            '"amount": 10'
        )
        decide = re.compile("Approve|Reject|Edit")
        expect(page.locator("#queue").get_by_role("button", name=decide)).to_have_count(
            0
        )
        expect(page.get_by_role("button", name="Approve selected")).to_have_count(0)
        expect(page.get_by_role("note")).to_contain_text("not decide")
        page.keyboard.press("a")
        page.wait_for_timeout(500)
        assert _status(first) == "pending"
    finally:
        context.close()


def test_dc03_keyboard_reject_and_edit_then_approve(browser, quick_server):
    """j/k move the selection, a approves it (not while typing), r asks for a reason, and
    edited arguments are validated again by the server, errors shown."""
    owner = make_user("olivia", "demo.add_refund")
    first = pending_request(owner, call_id="call-1", amount=10.0)
    second = pending_request(owner, call_id="call-2", amount=20.0)
    third = pending_request(owner, call_id="call-3", amount=30.0)
    make_user("alice", "approvals.decide_approvalrequest", "demo.add_refund")
    context, page = login(browser, quick_server, "alice")
    try:
        page.goto(f"{quick_server.url}/approvals/")
        items = page.locator(".req")
        expect(items).to_have_count(3)
        expect(items.nth(0)).to_have_attribute("aria-current", "true")
        screenshot(page, "approval-queue-three")

        # j and k move the selection
        page.keyboard.press("j")
        expect(items.nth(1)).to_have_attribute("aria-current", "true")
        page.keyboard.press("j")
        page.keyboard.press("k")
        expect(items.nth(1)).to_have_attribute("aria-current", "true")
        page.keyboard.press("k")
        expect(items.nth(0)).to_have_attribute("aria-current", "true")

        # typing "a" in a field approves nothing
        page.get_by_placeholder("Reason (required to reject)").first.fill("a")
        page.get_by_placeholder("Reason (required to reject)").first.press("a")
        page.wait_for_timeout(300)
        assert _status(first) == "pending"
        page.get_by_placeholder("Reason (required to reject)").first.fill("")

        # a approves the selected request, after confirming (a destructive refund)
        items.nth(0).locator(".req-tool").click()
        page.keyboard.press("a")
        _confirm(page)
        expect(page.locator(f'[data-approval-id="{first.pk}"]')).to_have_count(0)
        assert _status(first) == "approved"
        expect(items).to_have_count(2)

        # r asks for a reason, Enter rejects with it
        second_item = page.locator(f'[data-approval-id="{second.pk}"]')
        expect(second_item).to_have_attribute("aria-current", "true")
        page.keyboard.press("r")
        reason = second_item.get_by_label("Reason for rejecting")
        expect(reason).to_be_focused()
        reason.fill("duplicate request")
        reason.press("Enter")
        expect(second_item).to_have_count(0)
        assert _status(second) == "rejected"
        second.refresh_from_db()
        assert second.reason == "duplicate request"

        # edit-then-approve: invalid edits are refused by the server, with the reason shown
        third_item = page.locator(f'[data-approval-id="{third.pk}"]')
        third_item.get_by_role("button", name="Edit & approve").click()
        third_item.get_by_role("button", name="Edit as raw JSON").click()
        editor = third_item.get_by_label("Edited arguments", exact=False)
        expect(editor).to_be_focused()
        editor.fill(
            '{"order_id": "A-1001", "amount": "lots", "reason": "customer request"}'
        )
        third_item.get_by_role("button", name="Approve edited arguments").click()
        # the server checks the edit before the confirmation: no dialog for an invalid one
        expect(third_item.get_by_role("alert")).to_contain_text("invalid")
        expect(page.get_by_role("dialog")).to_have_count(0)
        # the reason once: the field error repeating the detail is not appended again
        shown = third_item.get_by_role("alert").inner_text()
        assert shown.startswith("edited arguments are invalid: ")
        assert shown.count("edited arguments are invalid") == 1
        assert "editedArguments:" not in shown
        assert _status(third) == "pending"
        editor.fill("{not json")
        third_item.get_by_role("button", name="Approve edited arguments").click()
        expect(third_item.get_by_role("alert")).to_contain_text("Not valid JSON")
        editor.fill(
            '{"order_id": "A-1001", "amount": 12.5, "reason": "partial refund"}'
        )
        third_item.get_by_role("button", name="Approve edited arguments").click()
        _confirm(page)
        expect(third_item).to_have_count(0)
        third.refresh_from_db()
        assert third.status == "approved"
        assert third.edited_arguments == {
            "order_id": "A-1001",
            "amount": 12.5,
            "reason": "partial refund",
        }
        expect(page.locator("#queue-empty")).to_be_visible()
    finally:
        context.close()


def test_dc03_bulk_approve_and_live_removal(browser, quick_server):
    """Selected requests are approved together; a decision taken elsewhere disappears live."""
    owner = make_user("olivia", "demo.add_refund")
    first = pending_request(owner, call_id="call-1", amount=10.0)
    second = pending_request(owner, call_id="call-2", amount=20.0)
    third = pending_request(owner, call_id="call-3", amount=30.0)
    make_user("alice", "approvals.decide_approvalrequest", "demo.add_refund")
    make_user("bob", "approvals.decide_approvalrequest", "demo.add_refund")
    alice, page = login(browser, quick_server, "alice")
    bob, other = login(browser, quick_server, "bob")
    try:
        page.goto(f"{quick_server.url}/approvals/")
        other.goto(f"{quick_server.url}/approvals/")
        expect(page.locator(".req")).to_have_count(3)
        expect(other.locator(".req")).to_have_count(3)
        # bulk rejection needs a reason
        page.get_by_label(f"Select refund_order request {first.pk}").check()
        page.get_by_label(f"Select refund_order request {second.pk}").check()
        page.get_by_role("button", name="Reject selected").click()
        expect(page.locator("#bulk-error")).to_contain_text("reason")
        page.get_by_role("button", name="Approve selected").click()
        _confirm(page)
        expect(page.locator(".req")).to_have_count(1)
        assert (_status(first), _status(second), _status(third)) == (
            "approved",
            "approved",
            "pending",
        )
        # the other approver's queue followed without a reload
        expect(other.locator(".req")).to_have_count(1)
        expect(other.locator(f'[data-approval-id="{third.pk}"]')).to_have_count(1)
    finally:
        alice.close()
        bob.close()


def test_reapproval_card_shows_both_versions(browser, quick_server):
    """A call sent back after approval says why and shows the approved and current arguments."""
    # Given a request approved at 10.00 whose call came back with 20.00
    owner = make_user("olivia", "demo.add_refund")
    approver = make_user("ada", "approvals.decide_approvalrequest")
    again = pending_request(owner, call_id="call-1", amount=20.0)
    earlier = ApprovalRequest.objects.create(
        thread=again.thread,
        run=again.run,
        tool_name="refund_order",
        is_destructive=True,
        requested_by=owner,
        expires_at=timezone.now() + timedelta(hours=1),
        proposed_arguments={**again.proposed_arguments, "amount": 10.0},
        status=ApprovalRequest.Status.APPROVED,
        decided_by=approver,
        decided_at=timezone.now(),
        superseded_by=again,
    )
    ApprovalRequest.objects.filter(pk=again.pk).update(
        reapproval=ApprovalRequest.Reapproval.ARGUMENTS_CHANGED, reapproval_count=1
    )
    context, page = login(browser, quick_server, "ada")
    try:
        # When the operator opens the queue
        page.goto(f"{quick_server.url}/approvals/")
        # Then only the new request is listed, with the line and both versions
        card = page.locator(".req")
        expect(card).to_have_count(1)
        expect(card.locator(".req-changed")).to_have_text(
            f"Arguments changed since approval (request #{earlier.pk})"
        )
        expect(card.locator(".req-previous-args")).to_contain_text('"amount": 10')
        expect(card.locator(".req-args")).to_contain_text('"amount": 20')
        screenshot(page, "queue-reapproval")
    finally:
        context.close()


def _pending_question(owner) -> ApprovalRequest:
    """Return a pending interrupt bound to no call, as a remote agent's question leaves one."""
    thread = thread_create(owner=owner, title="shipping question")
    schema = {
        "type": "object",
        "properties": {
            "carrier": {"type": "string", "enum": ["dhl", "ups"]},
            "express": {"type": "boolean"},
        },
        "required": ["carrier"],
    }
    interrupt = {
        "id": "ask-1",
        "reason": "input_required",
        "message": "Which carrier should ship order A-1001?",
        "responseSchema": schema,
    }
    run = Run.objects.create(
        thread=thread,
        status=Run.Status.AWAITING_TOOLS,
        outcome=Run.Outcome.INTERRUPT,
        interrupts=[interrupt],
    )
    return ApprovalRequest.objects.create(
        kind=ApprovalRequest.Kind.INTERRUPT,
        thread=thread,
        run=run,
        tool_name="input_required",
        interrupt_id="ask-1",
        message=interrupt["message"],
        response_schema=schema,
        requested_by=owner,
        expires_at=timezone.now() + timedelta(hours=1),
        proposed_arguments={},
    )


def test_ir18_question_card_shows_the_message_and_answers_with_its_form(
    browser, quick_server
):
    """A remote agent's question: its message, a form from its schema, the answer sent."""
    # Given a pending question and an operator
    owner = make_user("olivia")
    question = _pending_question(owner)
    make_user(
        "ada", "approvals.decide_approvalrequest", "approvals.view_approvalrequest"
    )
    context, page = login(browser, quick_server, "ada")
    try:
        page.goto(f"{quick_server.url}/approvals/")
        card = page.locator(".req")
        # Then the card shows the question and a form, not arguments to edit
        expect(card.locator(".req-message")).to_have_text(
            "Which carrier should ship order A-1001?"
        )
        expect(card.locator(".req-args")).to_be_hidden()
        expect(card.get_by_role("button", name="Edit & approve")).to_be_hidden()
        # When the operator approves without choosing the required carrier
        card.get_by_role("button", name="Approve", exact=True).click()
        expect(card.locator(".error")).to_contain_text("carrier")
        assert _status(question) == "pending"
        # And then fills the form in and approves
        card.get_by_label("carrier *").select_option("ups")
        card.get_by_label("express").check()
        card.get_by_role("button", name="Approve", exact=True).click()
        expect(page.locator(".req")).to_have_count(0)
        question.refresh_from_db()
        assert (question.status, question.response) == (
            "approved",
            {"carrier": "ups", "express": True},
        )
        question.run.refresh_from_db()
        assert question.run.resume == [
            {
                "interruptId": "ask-1",
                "status": "resolved",
                "payload": {"carrier": "ups", "express": True},
            }
        ]
    finally:
        context.close()
