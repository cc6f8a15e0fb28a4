"""The main operator flow in a real browser, on the embedded pool and on a Celery worker:
a refund streams, waits for an approver, and finishes live on the requester's page."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from tests.helpers.ui import login, make_user, screenshot

RECORD_STATES = """() => {
  window.__marker = 1;
  window.__states = {};
  const transcript = document.getElementById("transcript");
  new MutationObserver((mutations) => {
    for (const m of mutations) {
      const el = m.target;
      if (!el.classList || !el.classList.contains("call")) continue;
      const name = el.querySelector(".call-name").textContent;
      (window.__states[name] ||= []).push(el.dataset.state);
    }
  }).observe(transcript, { subtree: true, attributes: true, attributeFilter: ["data-state"] });
}"""
#: The thread page's state read (web.ui.threads.thread_ui_state), fetched as the page does.
STATE_READ = """async () => {
  const url = document.getElementById("thread").dataset.stateUrl;
  return (await fetch(url, { credentials: "same-origin" })).json();
}"""
RANK = {
    "streaming": 0,
    "complete": 1,
    "pending": 2,
    "awaiting_approval": 3,
    "approved": 4,
    "executing": 5,
    "succeeded": 7,
}


def _call(page, name: str):
    return page.locator(".call", has=page.locator(".call-name", has_text=name))


def test_dc05_refund_streams_waits_for_approval_and_finishes_without_reload(
    browser, ui_server_factory, executor
):
    """post → lookup and refund cards stream → "pending approval" → a second operator
    approves in the queue → the first page shows done, the result and "Refund done"."""
    # Given an operator and an approver who may both refund, and a server in this mode
    make_user("olivia", "demo.add_refund")
    make_user("alice", "approvals.decide_approvalrequest", "demo.add_refund")
    redis_url = executor.worker.broker_url if executor.mode == "celery" else ""
    server = ui_server_factory(redis_url=redis_url)
    operator, page = login(browser, server, "olivia")
    approver, queue = login(browser, server, "alice")
    try:
        queue.goto(f"{server.url}/approvals/")
        expect(queue.locator("#queue-empty")).to_be_visible()
        # When the operator creates a thread and asks for a refund
        page.get_by_label("Title").fill("Refund A-1001")
        page.get_by_role("button", name="Create thread").click()
        page.wait_for_url(re.compile(r".*/threads/[^/]+/$"))
        expect(page.locator("#thread")).to_have_attribute("data-ready", "1")
        page.evaluate(RECORD_STATES)
        page.get_by_label("Message", exact=True).fill("refund order A-1001 25.00")
        page.get_by_role("button", name="Send").click()

        # Then the lookup runs and the refund card waits for approval, composer blocked
        lookup, refund = _call(page, "lookup_order"), _call(page, "refund_order")
        expect(lookup.locator(".call-state")).to_have_text("done")
        expect(lookup.locator(".call-label")).to_have_text("Looking up order A-1001")
        expect(refund.locator(".call-state")).to_have_text("pending approval")
        expect(refund.locator(".call-label")).to_contain_text("on order A-1001")
        expect(refund.locator(".call-args")).to_contain_text('"order_id": "A-1001"')
        expect(page.locator("#composer-send")).to_be_disabled()
        expect(page.locator("#composer-reason")).to_contain_text("approve")
        expect(page.locator("#thread-status")).to_have_text("waiting for approval")
        # and both calls belong to the one run the message started, shown as one
        # run with the agent's two segments inside
        expect(lookup).to_have_attribute("data-run-id", re.compile(r".+"))
        run_id = lookup.get_attribute("data-run-id")
        expect(refund).to_have_attribute("data-run-id", run_id or "")
        state = page.evaluate(STATE_READ)
        assert [(r["runId"], r["outcome"]) for r in state["runs"]] == [
            (run_id, "interrupt")
        ]
        assert len(state["runs"][0]["segments"]) == 2
        screenshot(page, f"thread-pending-approval-{executor.mode}")

        # and the request arrives live in the approver's queue
        item = queue.locator(".req", has_text="refund_order")
        expect(item).to_have_count(1)
        expect(item.locator(".req-args")).to_contain_text('"amount": 25')
        # "valid" is never claimed (the tool may still refuse); its own review reads
        # neither the schema verdict nor the arguments-mismatch line shows
        expect(item.locator(".verdict:not([hidden])")).to_have_count(0)
        expect(item.locator(".req-summary")).to_have_text(
            "Refund 25.00 EUR to Ada Lovelace on order A-1001"
        )
        expect(item.locator(".req-expiry")).to_contain_text("expires in")
        expect(
            item.get_by_role("link", name="Show the call in its thread")
        ).to_be_visible()
        screenshot(queue, f"approval-queue-{executor.mode}")

        # When the approver approves it, confirming the destructive refund
        item.get_by_role("button", name="Approve", exact=True).click()
        queue.get_by_role("dialog").get_by_role("button", name="Confirm").click()
        # (the card goes when the undo window ends)
        expect(item).to_have_count(0, timeout=30_000)

        # Then the first page, never reloaded, shows the call done and the agent's answer
        expect(refund.locator(".call-state")).to_have_text("done", timeout=30_000)
        expect(refund.locator(".call-result")).to_contain_text("A-1001")
        final = page.locator(".msg-assistant", has_text="Refund done")
        expect(final).to_have_count(1, timeout=30_000)
        expect(page.locator("#thread-status")).to_have_text("idle")
        expect(page.locator("#composer-send")).to_be_enabled()
        # The approval's continuation is Countersign's own run, the second one shown
        runs = page.evaluate(STATE_READ)["runs"]
        assert (runs[0]["runId"], runs[0]["outcome"]) == (run_id, "interrupt")
        assert [(r["status"], r["outcome"]) for r in runs[1:]] == [
            ("finished", "success")
        ]
        assert page.evaluate("window.__marker") == 1
        states = page.evaluate("window.__states")["refund_order"]
        assert states[0] == "streaming", states
        assert states[-1] == "succeeded", states
        assert "awaiting_approval" in states, states
        ranks = [RANK[s] for s in states]
        assert ranks == sorted(ranks), states
        assert (
            page.locator(".msg-user", has_text="refund order A-1001 25.00").count() == 1
        )
        assert page.js_errors == []
        assert queue.js_errors == []
        screenshot(page, f"thread-done-{executor.mode}")

        # and a fresh load shows the same transcript
        fresh = operator.new_page()
        fresh.goto(page.url)
        expect(fresh.locator("#thread")).to_have_attribute("data-ready", "1")
        expect(_call(fresh, "refund_order").locator(".call-state")).to_have_text("done")
        expect(fresh.locator(".msg-assistant", has_text="Refund done")).to_have_count(1)
        assert (
            fresh.locator("#transcript").inner_text()
            == page.locator("#transcript").inner_text()
        )
    finally:
        operator.close()
        approver.close()
        if executor.worker is not None:  # shown by pytest only when the test failed
            print(executor.worker.log_path.read_text(errors="replace")[-4000:])


def test_dc05_edited_call_shows_both_versions_live(browser, ui_server):
    """An approver's edit shows on the requester's page as "edited", with the proposed
    and the approved arguments, and the call then runs with the edited ones."""
    from orchestration.pipeline import pending_calls_dispatch
    from threads.models import Run
    from threads.recording import RunRecorder
    from threads.services import thread_create

    # Given a run that left a refund pending approval
    owner = make_user("olivia", "demo.add_refund")
    make_user("alice", "approvals.decide_approvalrequest", "demo.add_refund")
    thread = thread_create(owner=owner, title="edit")
    run = Run.objects.create(
        thread=thread,
        run_id="run-1",
        status=Run.Status.RUNNING,
        input={"tools": [{"name": "lookup_order"}, {"name": "refund_order"}]},
    )
    recorder = RunRecorder(run, coalesce_ms=0, coalesce_bytes=0, publish=False)
    proposed = '{"order_id": "A-1001", "amount": 25.0, "reason": "customer request"}'
    recorder.record(
        [
            {"type": "RUN_STARTED", "threadId": thread.thread_id, "runId": "run-1"},
            {
                "type": "TOOL_CALL_START",
                "toolCallId": "c1",
                "toolCallName": "refund_order",
            },
            {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": proposed},
            {"type": "TOOL_CALL_END", "toolCallId": "c1"},
            {"type": "RUN_FINISHED", "threadId": thread.thread_id, "runId": "run-1"},
        ]
    )
    run.refresh_from_db()
    pending_calls_dispatch(run=run)
    operator, page = login(browser, ui_server, "olivia")
    approver, queue = login(browser, ui_server, "alice")
    try:
        page.goto(f"{ui_server.url}/threads/{thread.thread_id}/")
        card = page.locator('[data-tool-call-id="c1"]')
        expect(card.locator(".call-state")).to_have_text("pending approval")
        expect(card.locator(".badge-edited")).to_be_hidden()

        # When the approver edits the amount and approves
        queue.goto(f"{ui_server.url}/approvals/")
        item = queue.locator(".req", has_text="refund_order")
        item.get_by_role("button", name="Edit & approve").click()
        item.get_by_role("button", name="Edit as raw JSON").click()
        item.get_by_label("Edited arguments", exact=False).fill(
            '{"order_id": "A-1001", "amount": 20.0, "reason": "customer request"}'
        )
        item.get_by_role("button", name="Approve edited arguments").click()
        queue.get_by_role("dialog").get_by_role("button", name="Confirm").click()
        expect(item).to_have_count(0, timeout=30_000)

        # Then the requester's page marks the call edited, shows both versions, and ends done
        expect(card.locator(".badge-edited")).to_be_visible()
        edited = card.locator(".call-edited")
        expect(edited).to_contain_text("Proposed by the agent")
        expect(edited).to_contain_text('"amount": 25')
        expect(edited).to_contain_text("Approved as edited by alice")
        expect(edited).to_contain_text('"amount": 20')
        expect(card.locator(".call-state")).to_have_text("done", timeout=30_000)
        expect(card.locator(".call-result")).to_contain_text('"amount": "20.00"')
        screenshot(page, "thread-edited-call")
    finally:
        operator.close()
        approver.close()
