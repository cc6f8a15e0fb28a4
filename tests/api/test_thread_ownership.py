"""Only a thread's owner writes to it; approvers and staff who may read it get 403.

An approver may read every thread with an approval request (to decide with the
context), but a message they posted there would start a run on the owner's behalf
and make the owner the requester of its calls: they could then approve a call they
asked for themselves. Found by a new-user trial of four-eyes approval. SEC-02.
"""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Permission

from approvals.models import ApprovalRequest
from tests.helpers.api import pending_refund_thread, token_client
from threads.models import Message, Run, Thread


@pytest.mark.django_db
def test_an_approver_reads_but_cannot_write_to_anothers_thread(user, approver_api):
    thread = pending_refund_thread(user)
    before = (Message.objects.count(), Run.objects.count())

    # Reading is allowed (the approver decides with the conversation in view).
    assert approver_api.get(f"/api/threads/{thread.thread_id}/").status_code == 200
    assert (
        approver_api.get(f"/api/threads/{thread.thread_id}/messages/").status_code
        == 200
    )

    posted = approver_api.post(
        f"/api/threads/{thread.thread_id}/messages/",
        {"content": "refund order A-1001 5.00"},
        format="json",
    )
    assert posted.status_code == 403
    assert posted.json()["type"] == "not_thread_owner"
    assert "only its owner can post messages" in posted.json()["detail"]

    archived = approver_api.post(f"/api/threads/{thread.thread_id}/archive/")
    assert archived.status_code == 403
    assert archived.json()["type"] == "not_thread_owner"
    thread.refresh_from_db()
    assert thread.archived_at is None

    # Nothing was recorded by the refusals.
    assert (Message.objects.count(), Run.objects.count()) == before
    assert ApprovalRequest.objects.filter(thread=thread).count() == 1


@pytest.mark.django_db
def test_staff_cannot_post_into_anothers_thread_either(user, django_user_model):
    staff = django_user_model.objects.create_user(
        username="grace", password="pw-grace-1", is_staff=True
    )
    staff.user_permissions.add(
        Permission.objects.get(codename="decide_approvalrequest")
    )
    thread = pending_refund_thread(user, thread_id="t-staff")
    answer = token_client(staff).post(
        f"/api/threads/{thread.thread_id}/messages/",
        {"content": "hello"},
        format="json",
    )
    assert answer.status_code == 403
    assert answer.json()["type"] == "not_thread_owner"


@pytest.mark.django_db(transaction=True)
def test_agui_run_on_anothers_thread_is_refused_before_anything_is_recorded(
    user, nonstaff_approver
):
    thread = pending_refund_thread(user, thread_id="t-agui-owned")
    runs = Run.objects.filter(thread=thread).count()
    messages = Message.objects.filter(thread=thread).count()
    body = {
        "threadId": thread.thread_id,
        "runId": "r-intruder",
        "messages": [{"id": "u-intruder", "role": "user", "content": "hi"}],
        "tools": [],
        "context": [],
        "state": {},
        "forwardedProps": {},
    }
    answer = token_client(nonstaff_approver).post(
        "/agui/demo/", data=json.dumps(body), content_type="application/json"
    )
    try:
        assert answer.status_code == 403
        assert (
            json.loads(
                b"".join(answer.streaming_content)
                if answer.streaming
                else answer.content
            )["type"]
            == "not_thread_owner"
        )
    finally:
        answer.close()
    assert Run.objects.filter(thread=thread).count() == runs
    assert Message.objects.filter(thread=thread).count() == messages


@pytest.mark.django_db(transaction=True)
def test_the_owner_still_runs_agents_on_their_thread(user):
    thread = Thread.objects.create(thread_id="t-agui-mine", owner=user, agent="demo")
    body = {
        "threadId": thread.thread_id,
        "tools": [],
        "context": [],
        "state": {},
        "forwardedProps": {},
    }
    owned = token_client(user).post(
        "/agui/demo/",
        data=json.dumps(
            {
                **body,
                "runId": "r-owner",
                "messages": [{"id": "u-owner", "role": "user", "content": "hi"}],
            }
        ),
        content_type="application/json",
    )
    try:
        assert owned.status_code == 200
    finally:
        owned.close()
