"""The thread list in a real browser: login required, strict CSP, new threads appear live."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.helpers.ui import login, make_user
from threads.services import thread_create
from web.middleware import CONTENT_SECURITY_POLICY


def test_dc05_thread_list_requires_login_and_shows_new_threads_live(browser, ui_server):
    """Anonymous visitors go to the login page; a new thread shows without a reload."""
    # Given an operator with one thread, and an anonymous visitor
    owner = make_user("olivia")
    thread_create(owner=owner, title="First <b>thread</b>")
    anonymous = browser.new_context()
    try:
        page = anonymous.new_page()
        response = page.goto(f"{ui_server.url}/")
        assert "/accounts/login/" in page.url
        assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    finally:
        anonymous.close()
    context, page = login(browser, ui_server, "olivia")
    try:
        # When the operator is on the list
        rows = page.locator("#thread-rows tr")
        expect(rows).to_have_count(1)
        expect(rows.first).to_contain_text("First <b>thread</b>")
        expect(rows.first).to_contain_text("demo")
        expect(rows.first).to_contain_text("idle")
        page.evaluate("window.__marker = 1")
        # and a thread is created elsewhere (another tab, the API)
        thread_create(owner=owner, title="Second thread")
        # Then it appears without a reload, newest first
        expect(rows).to_have_count(2, timeout=15_000)
        expect(rows.first).to_contain_text("Second thread")
        assert page.evaluate("window.__marker") == 1
        # and the title links to the thread page
        page.get_by_role("link", name="Second thread").click()
        expect(page.get_by_role("heading", name="Second thread")).to_be_visible()
        # and logging out leads back to the login page
        page.get_by_role("button", name="Log out").click()
        expect(page.get_by_role("heading", name="Log in")).to_be_visible()
    finally:
        context.close()


def test_queue_page_explains_itself_to_users_who_may_not_see_it(client, db):
    """A user without approval permissions gets a 403 page that says why and what to do."""
    from tests.helpers.ui import PASSWORD, make_user

    make_user("bob")
    client.login(username="bob", password=PASSWORD)
    response = client.get("/approvals/")
    assert response.status_code == 403
    text = response.content.decode()
    assert "You may not see the approval queue" in text
    assert "Back to your threads" in text


def test_the_new_thread_form_offers_only_agents_that_run_here(
    client, db, external_agents, gateway_settings
):
    """External agents and MCP gateways take no message here: the form leaves them out."""
    from django.conf import settings

    from tests.fixtures.mcp import GATEWAY
    from tests.helpers.ui import PASSWORD, make_user

    make_user("bob")
    client.login(username="bob", password=PASSWORD)
    response = client.get("/")
    assert response.status_code == 200
    offered = response.context["agents"]
    assert "demo" in offered
    assert "billing" in settings.COUNTERSIGN_AGENTS
    assert not {"billing", "helper"} & set(offered)
    assert GATEWAY in settings.COUNTERSIGN_AGENTS
    assert GATEWAY not in offered
    assert '<option value="billing">' not in response.content.decode()
