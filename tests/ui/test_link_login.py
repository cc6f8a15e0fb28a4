"""A signed approval link opened while logged out: the login page says what waits
(only what the notification carrying the link said) and returns to the request after
login. Implements DC-05, SEC-06."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from approvals.notifications.links import approval_link_token
from orchestration.pipeline import approval_decide
from tests.helpers.ui import PASSWORD, make_user, pending_request

pytestmark = pytest.mark.django_db

LOGIN = "/accounts/login/"


def _login_page(client, next_url: str) -> str:
    response = client.get(f"{LOGIN}?next={quote(next_url)}")
    assert response.status_code == 200
    return response.content.decode()


def test_dc05_login_from_a_signed_link_says_what_waits_and_returns_to_it(client):
    """The sentence names the linked request's label, tool and requester, never its
    arguments nor another request; after login the link opens the request's card."""
    owner = make_user("olivia", "demo.add_refund")
    make_user("ada", "approvals.decide_approvalrequest", "demo.add_refund")
    approval = pending_request(owner, call_id="c-linked", amount=25.0)
    pending_request(owner, call_id="c-other", amount=99.0)
    link = f"/approvals/link/{approval_link_token(approval.pk)}/"

    # Given a logged-out visitor opening the link, they are sent to the login page
    response = client.get(link)
    assert response.status_code == 302
    assert response["Location"] == f"{LOGIN}?next={quote(link)}"
    page = client.get(response["Location"]).content.decode()

    # Then the page says what waits, and nothing more
    assert (
        "Sign in to decide: Refunding 25.00 EUR on order A-1001 (refund_order), "
        "requested by olivia." in page
    )
    assert "99" not in page
    assert "customer request" not in page  # an argument the link's text never had

    # When they log in, they land on the request in the queue
    response = client.post(
        LOGIN, {"username": "ada", "password": PASSWORD, "next": link}, follow=True
    )
    assert [url for url, _ in response.redirect_chain] == [
        link,
        f"/approvals/#req-{approval.pk}",
    ]
    assert response.status_code == 200


def test_dc05_login_says_nothing_for_other_or_bad_links(client):
    """A forged, altered or unknown link, or any other address, adds no sentence; a
    decided request says it is decided already."""
    owner = make_user("olivia", "demo.add_refund")
    ada = make_user("ada", "approvals.decide_approvalrequest", "demo.add_refund")
    approval = pending_request(owner, call_id="c-linked", amount=25.0)
    token = approval_link_token(approval.pk)
    for next_url in (
        "/approvals/link/forged/",
        f"/approvals/link/{token[:-2]}xx/",
        f"/approvals/link/{approval_link_token(10**9)}/",
        "/approvals/",
        f"https://evil.example/approvals/link/{token}/",
        "",
    ):
        page = _login_page(client, next_url)
        assert "Sign in to" not in page, next_url
        assert "Refunding" not in page, next_url

    approval_decide(approval=approval, decided_by=ada, decision="reject", reason="no")
    page = _login_page(client, f"/approvals/link/{token}/")
    assert "Sign in to see how it ended: Refunding 25.00 EUR on order A-1001" in page
    assert "is rejected already." in page
