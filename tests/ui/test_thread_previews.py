"""Previews on the thread page in a real browser (B1, "show first, persist in batches").

The server runs with the Redis channel layer and this process sends to it through
the same Redis (its own prefix), so a recorder here previews to the page exactly as
a Celery worker does. A preview's text shows as a tentative suffix until the log's
row replaces it; a preview the log never gets is gone at the run's end or 5 s after
it came (docs/architecture.md "Previews"). Implements DC-02.
"""

from __future__ import annotations

import uuid

from playwright.sync_api import expect

from tests.helpers.ui import login, make_user
from threads.models import Run
from threads.realtime import group_send, thread_group_name
from threads.recording import RunRecorder
from threads.services import thread_create

RECORD_TEXTS = """() => {
  window.__texts = [];
  const body = document.querySelector('[data-message-id="m1"] .msg-body');
  new MutationObserver(() => window.__texts.push(body.textContent)).observe(body, {
    subtree: true, childList: true, characterData: true,
  });
}"""


def _ghost(thread, p: int, delta: str) -> None:
    """Send a preview no recorder made: the log never gets it."""
    group_send(
        thread_group_name(thread.pk),
        {
            "type": "thread.preview",
            "runId": "ghost-run",
            "previews": [
                {
                    "p": p,
                    "event": {
                        "type": "TEXT_MESSAGE_CONTENT",
                        "messageId": "m1",
                        "delta": delta,
                    },
                }
            ],
        },
    )


def test_b1_previews_show_tentatively_and_unconfirmed_ones_go(
    browser, ui_server_factory, redis_url, settings
):
    """Tentative text is replaced by the committed text with no duplication; a preview
    never confirmed disappears after 5 s, and at the run's end."""
    prefix = f"uipv{uuid.uuid4().hex[:8]}"
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [redis_url], "prefix": prefix},
        }
    }
    server = ui_server_factory(
        redis_url=redis_url, extra_env={"CHANNEL_LAYER_PREFIX": prefix}
    )
    # Given a run whose message has started (committed)
    owner = make_user("olivia")
    thread = thread_create(owner=owner, title="previews")
    ids = {"threadId": thread.thread_id, "runId": "run-pv"}
    run = Run.objects.create(thread=thread, run_id="run-pv", status=Run.Status.RUNNING)
    recorder = RunRecorder(run, coalesce_ms=60_000, coalesce_bytes=1_000_000)
    recorder.record(
        [
            {"type": "RUN_STARTED", **ids},
            {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
        ]
    )
    recorder.flush()
    context, page = login(browser, server, "olivia")
    try:
        page.goto(f"{server.url}/threads/{thread.thread_id}/")
        expect(page.locator("#thread")).to_have_attribute("data-ready", "1")
        message = page.locator('[data-message-id="m1"]')
        body = message.locator(".msg-body")
        tentative = message.locator(".tentative")
        expect(page.locator("#thread")).to_have_attribute("data-last-seq", "2")
        page.evaluate(RECORD_TEXTS)

        # When two deltas are previewed but not written yet
        recorder.record(
            [
                {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "Hello "},
                {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "world"},
            ]
        )
        # Then their text shows, tentatively and hidden from assistive technology
        expect(tentative).to_have_text("Hello world")
        expect(tentative).to_have_attribute("aria-hidden", "true")
        expect(page.locator("#thread")).to_have_attribute("data-last-seq", "2")

        # When the batch is written, the committed text replaces it, once
        recorder.flush()
        expect(page.locator("#thread")).to_have_attribute("data-last-seq", "3")
        expect(tentative).to_have_count(0)
        expect(body).to_have_text("Hello world")
        texts = page.evaluate("window.__texts")
        assert all("Hello world".startswith(t) for t in texts), texts
        assert "Hello world" in texts

        # When a preview comes that the log never gets, it shows, then goes (5 s)
        _ghost(thread, 1, " (never logged)")
        expect(tentative).to_have_text(" (never logged)")
        expect(tentative).to_have_count(0, timeout=20_000)
        expect(body).to_have_text("Hello world")

        # and one still shown when the log reaches the run's end goes with it
        recorder.record([{"type": "TEXT_MESSAGE_END", "messageId": "m1"}])
        recorder.flush()
        expect(page.locator("#thread")).to_have_attribute("data-last-seq", "4")
        _ghost(thread, 2, " (lost too)")
        expect(tentative).to_have_text(" (lost too)")
        recorder.record([{"type": "RUN_FINISHED", **ids}])
        expect(page.locator("#thread")).to_have_attribute("data-last-seq", "5")
        # (read at once: the page dropped it with the RUN_FINISHED it just applied)
        assert tentative.count() == 0
        expect(body).to_have_text("Hello world")
        assert page.js_errors == []
    finally:
        context.close()
