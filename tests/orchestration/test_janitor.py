"""The janitor enqueues again work whose broker message was lost."""

from __future__ import annotations

from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from orchestration.janitor import lost_messages_requeue
from threads.models import Message, Run
from threads.services import thread_create


def test_lost_run_message_is_enqueued_again(user, executor):
    """A run left ``queued`` (its message lost) runs after the janitor's pass."""
    thread = thread_create(owner=user, title="lost")
    with transaction.atomic():
        Message.objects.create(
            thread=thread, role="user", content="What is the weather in Oslo?"
        )
        run = Run.objects.create(
            thread=thread, status=Run.Status.QUEUED
        )  # never enqueued
    Run.objects.filter(pk=run.pk).update(
        created_at=timezone.now() - timedelta(minutes=5)
    )

    assert lost_messages_requeue(stale_seconds=60) == {
        "runs_requeued": 1,
        "executions_requeued": 0,
    }
    executor.settle(thread)

    run.refresh_from_db()
    assert run.status == Run.Status.FINISHED
    assert Message.objects.filter(thread=thread, role="tool").count() == 1
    # A fresh queued run is left alone.
    assert lost_messages_requeue(stale_seconds=60) == {
        "runs_requeued": 0,
        "executions_requeued": 0,
    }
