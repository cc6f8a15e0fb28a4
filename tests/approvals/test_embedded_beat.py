"""The embedded default runs the beat schedule itself: approvals expire under `make run`."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from approvals.models import ApprovalRequest
from threads.execution import start_embedded_beat, stop_embedded_beat
from threads.models import Message


@pytest.mark.parametrize("executor", ["embedded"], indirect=True)
def test_pending_approval_expires_without_celery_beat(pending_refund, executor):
    call = pending_refund
    ApprovalRequest.objects.filter(tool_call=call).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    # The schedule's 30 s intervals, scaled down for the test; only a served app
    # (lifespan startup) starts the beat, so nothing else runs it in this process.
    stop_embedded_beat()
    assert start_embedded_beat(interval_scale=0.01) is True
    try:
        executor.wait_for(
            lambda: ApprovalRequest.objects.get(tool_call=call).status == "expired",
            timeout=20,
        )
    finally:
        stop_embedded_beat()
    executor.settle(call.thread)
    answer = Message.objects.get(
        thread=call.thread, role="tool", tool_call_id=call.tool_call_id
    )
    assert answer.error == "approval_expired"
