"""Respond instead: an approver answers a held call with text; the tool never runs.

Through :func:`orchestration.pipeline.approval_decide` with ``decision="respond"``,
on a request recorded without any agent run (no executor: nothing is executed,
callbacks on commit do not fire inside a test transaction). The end-to-end flow
with the demo agent is in ``tests/api/test_respond_api.py``. Implements SEC-02,
DC-03, DC-04, FT-06.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.utils import timezone

from approvals.exceptions import (
    ApprovalAlreadyDecided,
    ApprovalExpired,
    ApprovalNotAuthorized,
    ApprovalPermissionDenied,
    InvalidRespondText,
    RespondNotSupported,
)
from approvals.facts import approval_facts
from approvals.models import (
    RESPOND_MAX_CHARS,
    ApprovalRequest,
    AuditEntry,
    ToolExecution,
)
from orchestration.pipeline import approval_decide
from threads.models import Message, Run, ToolCall

pytestmark = pytest.mark.django_db

TEXT = "Order A-1001 was already refunded by voucher; tell the customer that."


def respond(approval, user, text=TEXT):
    """Answer a fresh copy of ``approval`` with ``text`` as ``user``."""
    return approval_decide(
        approval=ApprovalRequest.objects.get(pk=approval.pk),
        decided_by=user,
        decision="respond",
        response=text,
    )


def tool_messages(approval):
    return list(
        Message.objects.filter(
            role="tool", tool_call_id=approval.tool_call.tool_call_id
        ).values_list("content", "error")
    )


def test_respond_answers_the_call_with_the_text_and_runs_nothing(
    approval, nonstaff_approver
):
    """The call gets one tool message with the text; no execution; the run continues."""
    decided = respond(approval, nonstaff_approver)

    assert (decided.status, decided.response, decided.decided_by, decided.reason) == (
        "responded",
        TEXT,
        nonstaff_approver,
        "",
    )
    assert decided.decided_at is not None
    [(content, error)] = tool_messages(approval)
    assert json.loads(content) == {
        "status": "responded",
        "response": TEXT,
        "by": "ada",
        "executed": False,
    }
    assert error == "answered_by_operator"
    assert ToolCall.objects.get(pk=approval.tool_call_id).state == "declined"
    assert not ToolExecution.objects.exists()
    runs = list(Run.objects.filter(thread=approval.thread).order_by("pk"))
    assert [r.status for r in runs] == ["finished", "queued"]


def test_respond_is_audited_for_the_request_and_the_call(approval, nonstaff_approver):
    """The decision's entry keeps who answered and what; the call's says it was answered."""
    respond(approval, nonstaff_approver)

    entries = {
        e.action: e
        for e in AuditEntry.objects.filter(
            action__in=["approval.responded", "tool_call.responded"]
        )
    }
    assert set(entries) == {"approval.responded", "tool_call.responded"}
    decision = entries["approval.responded"]
    assert decision.actor_label == "ada"
    assert decision.before == {"status": "pending"}
    assert decision.after["status"] == "responded"
    assert decision.after["response"] == TEXT
    assert entries["tool_call.responded"].after == {"reason": TEXT}


def test_facts_say_who_answered_and_what(approval, nonstaff_approver):
    """Every surface's facts: phase ``responded``, a headline quoting the text."""
    before = approval_facts(approval, nonstaff_approver)
    assert before["viewer"]["canRespond"] is True

    decided = respond(approval, nonstaff_approver)
    facts = approval_facts(decided, nonstaff_approver)

    assert facts["phase"] == "responded"
    assert facts["standing"] is True
    assert facts["decidedBy"] == ["ada"]
    assert (
        facts["headline"] == f"Answered by ada instead of running it: “{TEXT}”"
    )  # TEXT ends in its own full stop
    assert facts["viewer"]["canRespond"] is False


def test_a_repeated_identical_response_is_a_no_op(approval, nonstaff_approver):
    """The same person sending the same text twice gets the request back; one message."""
    first = respond(approval, nonstaff_approver)
    again = respond(approval, nonstaff_approver)

    assert (again.pk, again.status, again.decided_at) == (
        first.pk,
        "responded",
        first.decided_at,
    )
    assert len(tool_messages(approval)) == 1


def test_a_second_different_response_is_refused(
    approval, nonstaff_approver, second_approver
):
    """Other text, or another approver, on an answered request: 409, nothing changes."""
    respond(approval, nonstaff_approver)

    with pytest.raises(ApprovalAlreadyDecided, match="already 'responded' by ada"):
        respond(approval, nonstaff_approver, text="something else")
    with pytest.raises(ApprovalAlreadyDecided, match="already 'responded'"):
        respond(approval, second_approver)
    assert ApprovalRequest.objects.get(pk=approval.pk).response == TEXT
    assert len(tool_messages(approval)) == 1


def test_respond_after_approve_or_reject_is_refused(
    approval, nonstaff_approver, second_approver
):
    """An approved request cannot be answered with text; nor can one answered already."""
    approval_decide(approval=approval, decided_by=nonstaff_approver, decision="approve")

    with pytest.raises(ApprovalAlreadyDecided, match="already 'approved' by ada"):
        respond(approval, second_approver)
    assert ApprovalRequest.objects.get(pk=approval.pk).status == "approved"
    assert ApprovalRequest.objects.get(pk=approval.pk).response is None


def test_approve_or_reject_after_respond_is_refused(approval, nonstaff_approver):
    """Once answered, neither approval nor rejection is recorded."""
    respond(approval, nonstaff_approver)

    with pytest.raises(ApprovalAlreadyDecided):
        approval_decide(
            approval=approval, decided_by=nonstaff_approver, decision="approve"
        )
    with pytest.raises(ApprovalAlreadyDecided):
        approval_decide(
            approval=approval,
            decided_by=nonstaff_approver,
            decision="reject",
            reason="no",
        )
    assert not ToolExecution.objects.exists()


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "the answer is empty"),
        ("   \n\t ", "the answer is empty"),
        ("x" * (RESPOND_MAX_CHARS + 1), "at most 10000"),
        (None, "must be text, not NoneType"),
        (["a list"], "must be text, not list"),
        ({"text": "nested"}, "must be text, not dict"),
        (42, "must be text, not int"),
    ],
)
def test_malformed_text_is_refused_and_nothing_is_recorded(
    approval, nonstaff_approver, text, match
):
    """Blank, over-long or non-text answers: a clear error; the request stays pending."""
    with pytest.raises(InvalidRespondText, match=match):
        respond(approval, nonstaff_approver, text=text)

    assert ApprovalRequest.objects.get(pk=approval.pk).status == "pending"
    assert tool_messages(approval) == []


def test_the_longest_text_is_taken_whole(approval, nonstaff_approver):
    """Text of exactly the bound is kept as given, surrounding whitespace included."""
    text = " " + "y" * (RESPOND_MAX_CHARS - 2) + "\n"

    decided = respond(approval, nonstaff_approver, text=text)

    assert decided.response == text
    assert json.loads(tool_messages(approval)[0][0])["response"] == text


@pytest.mark.parametrize("kind", ["interrupt", "input"])
def test_only_a_held_tool_call_can_be_answered_with_text(
    approval, nonstaff_approver, kind
):
    """An interrupt or input request takes a response on approve, not text: 400."""
    ApprovalRequest.objects.filter(pk=approval.pk).update(kind=kind)

    with pytest.raises(RespondNotSupported, match=f"is a {kind} request"):
        respond(approval, nonstaff_approver)
    assert ApprovalRequest.objects.get(pk=approval.pk).status == "pending"


def test_responding_needs_the_decide_permission(approval, user, other_user):
    """Without ``decide_approvalrequest`` nothing is recorded."""
    with pytest.raises(ApprovalPermissionDenied, match="may not decide"):
        respond(approval, other_user)
    assert ApprovalRequest.objects.get(pk=approval.pk).status == "pending"


def test_the_requester_may_not_answer_their_own_call(approval, user):
    """Four-eyes holds for an answer as for a rejection: the requester is refused."""
    ApprovalRequest.objects.filter(pk=approval.pk).update(requester_may_approve=False)
    user.user_permissions.add(Permission.objects.get(codename="decide_approvalrequest"))
    requester = type(user).objects.get(pk=user.pk)
    assert approval.requested_by_id == requester.pk

    with pytest.raises(ApprovalNotAuthorized, match="four-eyes"):
        respond(approval, requester)
    assert ApprovalRequest.objects.get(pk=approval.pk).status == "pending"


def test_one_answer_ends_an_n_of_m_request(
    approval, nonstaff_approver, second_approver
):
    """Two approvals required: one approval given, then one answer ends it; nothing ran."""
    ApprovalRequest.objects.filter(pk=approval.pk).update(approvals_required=2)
    approval_decide(
        approval=ApprovalRequest.objects.get(pk=approval.pk),
        decided_by=nonstaff_approver,
        decision="approve",
    )
    assert ApprovalRequest.objects.get(pk=approval.pk).status == "pending"

    decided = respond(approval, second_approver)

    assert (decided.status, decided.decided_by) == ("responded", second_approver)
    assert not ToolExecution.objects.exists()
    assert len(tool_messages(approval)) == 1


def test_an_expired_request_is_answered_as_expired_not_with_the_text(
    approval, nonstaff_approver
):
    """Expiry still applies: the call is told it expired, and the responder is told so."""
    ApprovalRequest.objects.filter(pk=approval.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )

    with pytest.raises(ApprovalExpired):
        respond(approval, nonstaff_approver)
    expired = ApprovalRequest.objects.get(pk=approval.pk)
    assert (expired.status, expired.response) == ("expired", None)
    [(content, error)] = tool_messages(approval)
    assert (json.loads(content)["status"], error) == ("expired", "approval_expired")


def test_the_admin_change_page_offers_respond_and_shows_the_answer(
    client, approval, approver
):
    """Admin: a "Respond" button beside Approve/Reject; the answer shows once given."""
    from django.urls import reverse

    client.force_login(approver)
    change = reverse("admin:approvals_approvalrequest_change", args=[approval.pk])
    decide = reverse("admin:approvals_approvalrequest_decide", args=[approval.pk])
    page = client.get(change).content.decode()
    assert 'name="decision" value="respond"' in page
    assert 'name="text"' in page

    blank = client.post(decide, {"decision": "respond", "text": "  "}, follow=True)
    assert "The answer is empty; write what the agent" in blank.content.decode()
    long = client.post(
        decide,
        {"decision": "respond", "text": "x" * (RESPOND_MAX_CHARS + 1)},
        follow=True,
    )
    assert "at most 10000 characters (it has 10001)" in long.content.decode()
    assert ApprovalRequest.objects.get(pk=approval.pk).status == "pending"

    done = client.post(
        decide,
        {"decision": "respond", "text": "Use the voucher <b>instead</b>."},
        follow=True,
    )
    text = done.content.decode()

    assert "_order: answered instead of running it." in text
    assert "Answered instead" in text
    assert "Use the voucher &lt;b&gt;instead&lt;/b&gt;." in text
    assert 'value="respond"' not in text  # decided: nothing to respond to
    decided = ApprovalRequest.objects.get(pk=approval.pk)
    assert (decided.status, decided.decided_by) == ("responded", approver)


def test_an_answer_is_announced_as_decided_with_the_text(
    settings, approval, nonstaff_approver, django_capture_on_commit_callbacks
):
    """``approval.decided`` once, with status ``responded``; the email says the text."""
    from approvals.models import NotificationDelivery
    from approvals.notifications.channels import notification_content

    settings.COUNTERSIGN = {
        **settings.COUNTERSIGN,
        "NOTIFICATIONS": [{"name": "mail", "kind": "email", "to": ["a@example.com"]}],
    }
    with django_capture_on_commit_callbacks(execute=True):
        decided = respond(approval, nonstaff_approver)

    assert list(
        NotificationDelivery.objects.filter(approval=approval).values_list(
            "event", "target"
        )
    ) == [("decided", "mail")]
    content = notification_content(approval=decided, event="decided")
    data = content.payload["data"]
    assert content.payload["type"] == "approval.decided"
    assert (data["status"], data["response"], data["decidedBy"]) == (
        "responded",
        TEXT,
        "ada",
    )
    assert data["facts"]["phase"] == "responded"
    assert f"Answered instead of running it: {TEXT}" in content.body
