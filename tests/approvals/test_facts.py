"""The facts every surface renders (approvals.facts.approval_facts), state by state.

A 2-of-2 refund routed to the finance group, decided through the same step the
shells call; each state's facts are read for the approvers, the requester and an
outsider, in the sentences pages show. SEC-02, DC-03.
"""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Permission

from approvals.facts import approval_facts
from approvals.models import ApprovalRequest
from approvals.selectors import approval_get
from tests.helpers.api import pending_refund_thread
from tests.helpers.governance import approve_as, decider, refund_policy

pytestmark = pytest.mark.django_db

CODENAME = re.compile(r"\w+\.\w+_\w+|'|\[|\]|\d{4}-\d\d-\d\dT")


def facts_for(approval, user):
    """Return the facts of a freshly read ``approval`` as ``user`` sees them."""
    return approval_facts(approval_get(user=user, pk=approval.pk), user)


@pytest.fixture
def two_of_two(django_user_model, finance):
    """A refund of 25.00 requested by olivia (a finance decider), needing 2 approvals."""
    refund_policy(approvals_required=2)
    olivia = decider(django_user_model, "olivia", "finance")
    thread = pending_refund_thread(olivia)
    approval = ApprovalRequest.objects.get(thread=thread)
    approval.requested_by = olivia
    approval.save(update_fields=["requested_by"])
    return approval, olivia


def test_a_fresh_request_waits_for_two_approvals_from_its_group(two_of_two, finance):
    """Nobody voted: "0 of 2", the group named, the approver may act."""
    approval, _ = two_of_two
    facts = facts_for(approval, finance[0])
    assert facts["phase"] == "waiting"
    assert facts["standing"] is False
    assert facts["votes"] == {
        "given": 0,
        "required": 2,
        "remaining": 2,
        "voters": [],
        "waitingGroups": ["finance"],
        "rejections": [],
        "text": "0 of 2 approvals",
    }
    assert facts["headline"] == "Waiting for 2 approvals from the finance group."
    assert facts["viewer"] == {
        "canApprove": True,
        "canReject": True,
        "canRespond": True,
        "hasVoted": False,
        "whyNot": "",
        "whoCan": "",
    }


def test_after_one_vote_the_next_approver_sees_1_of_2_and_the_voter(
    two_of_two, finance
):
    """The second approver's facts name the vote given, the voter and the group still to act."""
    approval, _ = two_of_two
    ada, grace, _hopper = finance
    approve_as(approval, ada)
    facts = facts_for(approval, grace)
    assert facts["votes"]["text"] == "1 of 2 approvals"
    assert facts["votes"]["voters"] == ["ada"]
    assert facts["headline"] == (
        "Waiting for 1 more approval from the finance group (1 of 2 given: ada)."
    )
    assert facts["viewer"]["canApprove"] is True
    # ada voted already: she is told so, and who else can.
    mine = facts_for(approval, ada)["viewer"]
    assert mine["canApprove"] is False
    assert mine["hasVoted"] is True
    assert mine["whyNot"] == (
        "You voted on this request already; it needs 1 more approval from "
        "another approver."
    )
    assert mine["whoCan"] == "Who can: grace and hopper."


def test_the_requester_and_an_outsider_are_told_why_in_plain_words(
    two_of_two, django_user_model
):
    """Four-eyes and group refusals are sentences for a person, without codenames."""
    approval, olivia = two_of_two
    own = facts_for(approval, olivia)["viewer"]
    assert own["canApprove"] is False
    assert own["whyNot"] == "You asked for this call, so another approver must decide."
    assert own["whoCan"] == ("Who can: ada, grace and hopper.")
    linus = decider(django_user_model, "linus", "support")
    outsider = facts_for(approval, linus)["viewer"]
    assert (
        outsider["whyNot"]
        == "Only members of the finance group can decide this request."
    )
    viewer = django_user_model.objects.create_user(username="vera", password="pw")
    viewer.user_permissions.add(Permission.objects.get(codename="view_approvalrequest"))
    viewer = django_user_model.objects.get(pk=viewer.pk)
    looking = facts_for(approval, viewer)["viewer"]
    assert looking["whyNot"].startswith(
        "Your account may view requests but not decide them (it lacks the "
        "permission “Can approve or reject tool calls”)."
    )
    for sentence in (own, outsider, looking):
        assert not CODENAME.search(sentence["whyNot"] + sentence["whoCan"]), sentence


def test_a_decider_without_the_tools_permission_is_told_which_one(
    two_of_two, django_user_model
):
    """The tool's own permission is named by its human name; rejecting stays open."""
    approval, _ = two_of_two
    dora = decider(django_user_model, "dora", "finance")
    dora.user_permissions.remove(Permission.objects.get(codename="add_refund"))
    dora = django_user_model.objects.get(pk=dora.pk)
    viewer = facts_for(approval, dora)["viewer"]
    assert viewer["canApprove"] is False
    assert viewer["canReject"] is True
    assert viewer["whyNot"] == (
        "Approving refund_order also needs the permission “Can add refund”, "
        "which your account lacks; you may still reject it."
    )


def test_an_edited_approval_keeps_both_versions_and_names_the_editor(
    two_of_two, finance
):
    """An approver's edit: proposed and approved apart, the diff and who edited."""
    approval, _ = two_of_two
    ada, grace, _ = finance
    proposed = dict(approval.proposed_arguments)
    approve_as(approval, ada, edited_arguments={**proposed, "amount": 10.0})
    facts = facts_for(approval, grace)
    arguments = facts["arguments"]
    assert arguments["proposed"] == proposed
    assert arguments["approved"] == {**proposed, "amount": 10.0}
    assert arguments["edited"] is True
    assert arguments["editedBy"] == "ada"
    assert arguments["diff"] == [
        {
            "path": "amount",
            "change": "changed",
            "proposed": proposed["amount"],
            "edited": 10.0,
        }
    ]


def test_the_second_approval_decides_and_both_approvers_are_named(two_of_two, finance):
    """After the N-th vote the request is approved by both voters, not only the last."""
    approval, _ = two_of_two
    ada, grace, _ = finance
    approve_as(approval, ada)
    approve_as(approval, grace)
    facts = facts_for(approval, ada)
    assert facts["decidedBy"] == ["ada", "grace"]
    assert facts["votes"]["text"] == "2 of 2 approvals"
    # No worker ran inside the test transaction: approved, queued, standing.
    assert facts["phase"] == "approved"
    assert facts["standing"] is True
    assert facts["headline"] == "Approved by ada and grace; it is running."
    assert facts["viewer"]["canApprove"] is False
    assert facts["viewer"]["whyNot"] == ""


def test_an_approval_in_its_undo_window_does_not_stand_yet(two_of_two, finance):
    """Approved with an undo window: phase undo_window, undoUntil set, not standing."""
    approval, _ = two_of_two
    ada, grace, _ = finance
    approve_as(approval, ada)
    approve_as(approval, grace, undo_seconds=30)
    facts = facts_for(approval, ada)
    assert facts["phase"] == "undo_window"
    assert facts["standing"] is False
    assert facts["undoUntil"] is not None
    assert facts["headline"] == (
        "Approved by ada and grace; it runs in a few seconds unless it is undone."
    )


def test_a_rejection_names_the_rejecter_and_the_reason(two_of_two, finance):
    """One rejection rejects: the facts quote it."""
    approval, _ = two_of_two
    from orchestration.pipeline import approval_decide

    approval_decide(
        approval=approval,
        decided_by=finance[1],
        decision="reject",
        reason="order was never paid",
    )
    facts = facts_for(approval, finance[0])
    assert facts["phase"] == "rejected"
    assert facts["decidedBy"] == ["grace"]
    assert facts["headline"] == "Rejected by grace: “order was never paid”."


def test_words_ending_in_a_full_stop_end_the_headline_once(two_of_two, finance):
    """A reason or an answer that ends in its own full stop is quoted as it is: no "..",
    no full stop after the closing quote."""
    from orchestration.pipeline import approval_decide

    approval, _ = two_of_two
    approval_decide(
        approval=approval,
        decided_by=finance[1],
        decision="reject",
        reason="Order was never paid.",
    )
    headline = facts_for(approval, finance[0])["headline"]
    assert headline == "Rejected by grace: “Order was never paid.”"
    assert ".." not in headline
    assert ".”." not in headline


def test_the_demo_refund_reads_as_money_with_its_order_and_warns_before_approval(
    user,
):
    """The tool's review: a summary in money (currency, two decimals), the facts it
    rests on, and a warning when the amount exceeds what is left to refund."""
    fine = ApprovalRequest.objects.get(thread=pending_refund_thread(user))
    too_much = ApprovalRequest.objects.get(
        thread=pending_refund_thread(
            user,
            thread_id="t-big",
            arguments='{"order_id": "A-1001", "amount": 600, "reason": "whole order"}',
        )
    )

    review = approval_facts(fine)["review"]
    assert review["summary"] == "Refund 25.00 EUR to Ada Lovelace on order A-1001"
    assert review["facts"][:3] == [
        {"label": "Order total", "value": "500.00 EUR"},
        {"label": "Refunded already", "value": "0.00 EUR"},
        {"label": "Left to refund", "value": "500.00 EUR"},
    ]
    assert review["warnings"] == []
    assert approval_facts(too_much)["review"]["warnings"] == [
        "600.00 EUR exceeds what is left to refund (500.00 EUR): the refund "
        "would be refused"
    ]


def test_a_tool_without_a_review_reads_as_its_arguments(user):
    """An unknown tool (no review, no schema) falls back to one line per argument, by name."""
    approval = ApprovalRequest.objects.get(thread=pending_refund_thread(user))
    ApprovalRequest.objects.filter(pk=approval.pk).update(tool_name="remote_refund")
    review = approval_facts(ApprovalRequest.objects.get(pk=approval.pk))["review"]
    assert review == {
        "summary": "remote_refund",
        "facts": [
            {"label": "amount", "value": "25.0"},
            {"label": "order_id", "value": "A-1001"},
            {"label": "reason", "value": "customer request"},
        ],
        "warnings": [],
        "declared": False,
    }
