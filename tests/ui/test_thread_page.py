"""The thread page in a real browser: results are data (SEC-03), and a dropped socket
catches up after a server restart without losing or duplicating anything (DC-02)."""

from __future__ import annotations

import base64
import json

from playwright.sync_api import expect

from tests.helpers.ui import login, make_user, screenshot
from threads.models import Run
from threads.recording import RunRecorder
from threads.services import thread_create

XSS = '<script>window.__xss = 1</script><img src=x onerror="window.__xss = 2">'
# A 1x1 transparent PNG.
PNG_1PX = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360000002000154a24f5d00000000"
        "49454e44ae426082"
    )
).decode()


def _recorder(thread, run_id: str) -> RunRecorder:
    run = Run.objects.create(thread=thread, run_id=run_id, status=Run.Status.RUNNING)
    return RunRecorder(run, coalesce_ms=0, coalesce_bytes=0, publish=False)


def _transcript(page) -> str:
    return page.locator("#transcript").inner_text()


def _open_thread(page, server, thread) -> None:
    page.goto(f"{server.url}/threads/{thread.thread_id}/")
    expect(page.locator("#thread")).to_have_attribute("data-ready", "1")


def test_sec03_markup_in_results_and_text_is_shown_as_text(browser, ui_server):
    """A result carrying <script> and <img onerror> shows literally and runs nothing (SEC-03)."""
    # Given a thread whose log holds markup in a tool result (string and parts) and in text
    owner = make_user("olivia")
    thread = thread_create(owner=owner, title="xss")
    thread_id = thread.thread_id
    recorder = _recorder(thread, "run-xss")
    recorder.record(
        [
            {"type": "RUN_STARTED", "threadId": thread_id, "runId": "run-xss"},
            {
                "type": "TOOL_CALL_START",
                "toolCallId": "c1",
                "toolCallName": "get_weather",
            },
            {
                "type": "TOOL_CALL_ARGS",
                "toolCallId": "c1",
                "delta": json.dumps({"city": XSS}),
            },
            {"type": "TOOL_CALL_END", "toolCallId": "c1"},
            {
                "type": "TOOL_CALL_RESULT",
                "messageId": "r1",
                "toolCallId": "c1",
                "content": XSS,
            },
            {
                "type": "TOOL_CALL_START",
                "toolCallId": "c2",
                "toolCallName": "render_chart",
            },
            {"type": "TOOL_CALL_ARGS", "toolCallId": "c2", "delta": "{}"},
            {"type": "TOOL_CALL_END", "toolCallId": "c2"},
            {
                "type": "TOOL_CALL_RESULT",
                "messageId": "r2",
                "toolCallId": "c2",
                "content": [
                    {"type": "text", "text": XSS},
                    {
                        "type": "image",
                        "source": {
                            "type": "data",
                            "value": PNG_1PX,
                            "mimeType": "image/png",
                        },
                    },
                    {
                        "type": "image",
                        "source": {"type": "url", "value": "javascript:window.__xss=3"},
                    },
                ],
            },
            {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
            {
                "type": "TEXT_MESSAGE_CONTENT",
                "messageId": "m1",
                "delta": f"Echo: {XSS}",
            },
            {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
            {"type": "RUN_FINISHED", "threadId": thread_id, "runId": "run-xss"},
        ]
    )
    recorder.flush()
    context, page = login(browser, ui_server, "olivia")
    try:
        # When the owner opens the thread
        response = page.goto(f"{ui_server.url}/threads/{thread_id}/")
        expect(page.locator("#thread")).to_have_attribute("data-ready", "1")
        # Then the markup is visible as text, nothing ran, and no element was created
        csp = response.headers["content-security-policy"]
        assert "script-src 'self'" in csp
        assert "default-src 'self'" in csp
        call = page.locator('[data-tool-call-id="c1"]')
        expect(call.locator(".call-result")).to_contain_text(XSS)
        expect(call.locator(".call-state")).to_have_text("done")
        expect(call.locator(".call-label")).to_contain_text("Checking the weather in")
        chart = page.locator('[data-tool-call-id="c2"]')
        expect(chart.locator(".call-result")).to_contain_text(XSS)
        expect(chart.locator(".part-image img")).to_have_count(1)
        expect(chart.locator(".part-missing")).to_have_count(1)
        expect(page.locator('[data-message-id="m1"]')).to_contain_text(f"Echo: {XSS}")
        page.wait_for_timeout(300)
        assert page.evaluate("typeof window.__xss") == "undefined"
        assert page.locator("#transcript script").count() == 0
        assert page.locator('#transcript img[src="x"]').count() == 0
        src = chart.locator(".part-image img").get_attribute("src")
        assert src.startswith("data:image/png;base64,")
        assert page.js_errors == []  # no script error, no CSP violation
    finally:
        context.close()


def test_dc02_restart_mid_stream_reconnects_and_matches_a_fresh_load(
    browser, ui_server
):
    """Killing the server mid-stream shows the offline banner; after a restart on the same
    port the page catches up from its last seq, with the same transcript as a fresh load."""
    # Given a run that has streamed half of its answer
    owner = make_user("olivia")
    thread = thread_create(owner=owner, title="restart")
    thread_id = thread.thread_id
    recorder = _recorder(thread, "run-1")
    recorder.record(
        [
            {"type": "RUN_STARTED", "threadId": thread_id, "runId": "run-1"},
            {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
            {
                "type": "TEXT_MESSAGE_CONTENT",
                "messageId": "m1",
                "delta": "First half, ",
            },
        ]
    )
    context, page = login(browser, ui_server, "olivia")
    try:
        _open_thread(page, ui_server, thread)
        expect(page.locator('[data-message-id="m1"]')).to_have_text("AgentFirst half, ")
        banner = page.get_by_role("status").filter(has_text="Offline")
        expect(banner).to_have_count(0)

        # When the server dies while the agent keeps producing events
        ui_server.kill()
        expect(page.locator("#offline-banner")).to_be_visible()
        expect(page.locator("#offline-banner")).to_have_text("Offline — reconnecting…")
        recorder.record(
            [
                {
                    "type": "TEXT_MESSAGE_CONTENT",
                    "messageId": "m1",
                    "delta": "second half.",
                },
                {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
                {
                    "type": "TOOL_CALL_START",
                    "toolCallId": "c1",
                    "toolCallName": "get_weather",
                },
                {
                    "type": "TOOL_CALL_ARGS",
                    "toolCallId": "c1",
                    "delta": '{"city": "Oslo"}',
                },
                {"type": "TOOL_CALL_END", "toolCallId": "c1"},
                {
                    "type": "TOOL_CALL_RESULT",
                    "messageId": "r1",
                    "toolCallId": "c1",
                    "content": "4 °C, light rain",
                },
                {"type": "RUN_FINISHED", "threadId": thread_id, "runId": "run-1"},
            ]
        )
        # and a new server starts on the same port
        ui_server.start()

        # Then the page reconnects, catches up once, and matches a fresh load
        expect(page.locator("#offline-banner")).to_be_hidden(timeout=30_000)
        expect(page.locator('[data-message-id="m1"]')).to_have_text(
            "AgentFirst half, second half."
        )
        expect(page.locator('[data-tool-call-id="c1"] .call-state')).to_have_text(
            "done"
        )
        expect(page.locator("#thread-status")).to_have_text("idle")
        assert page.locator("[data-message-id]").count() == 1
        assert page.locator("[data-tool-call-id]").count() == 1
        fresh = context.new_page()
        _open_thread(fresh, ui_server, thread)
        expect(fresh.locator('[data-tool-call-id="c1"] .call-state')).to_have_text(
            "done"
        )
        expect(fresh.locator("#thread-status")).to_have_text("idle")
        assert _transcript(fresh) == _transcript(page)
        assert fresh.locator("#thread").get_attribute("data-last-seq") == page.locator(
            "#thread"
        ).get_attribute("data-last-seq")
        screenshot(page, "thread-after-restart")
    finally:
        context.close()


def test_ft06_owner_cancels_waiting_calls_from_the_thread_page(browser, ui_server):
    """An owner without the decide permission can abandon a waiting call and go on (FT-06)."""
    from approvals.models import ApprovalRequest

    owner = make_user("olivia")
    thread = thread_create(owner=owner, title="cancel me")
    context, page = login(browser, ui_server, "olivia")
    _open_thread(page, ui_server, thread)
    page.get_by_role("textbox", name="Message").fill("refund order A-1001 25.00")
    page.get_by_role("button", name="Send").click()

    form = page.locator("#cancel-pending")
    expect(form).to_be_visible(timeout=30_000)
    expect(page.get_by_role("textbox", name="Message")).to_be_disabled()
    page.get_by_label("Reason").fill("changed my mind")
    page.get_by_role("button", name="Cancel waiting calls").click()

    expect(form).to_be_hidden()
    expect(page.get_by_role("textbox", name="Message")).to_be_enabled(timeout=15_000)
    approval = ApprovalRequest.objects.get(thread=thread)
    assert (approval.status, approval.reason) == ("cancelled", "changed my mind")
    assert page.js_errors == []
    screenshot(page, "thread-calls-cancelled")
    context.close()
