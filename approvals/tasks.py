"""Celery tasks of the approval workflow: thin shells around services (STYLE.md 6).

Each task imports its service in its body (a worker's boot imports no service
stack; see :mod:`threads.tasks`, bench B6).
"""

from __future__ import annotations

from celery import shared_task


@shared_task(
    name="approvals.tasks.execute_tool_call",
    acks_late=True,
    reject_on_worker_lost=True,
    ignore_result=True,
)
def execute_tool_call(*, tool_call_pk: int) -> None:
    """Execute approved call ``tool_call_pk`` exactly once (``tool_call_execute``).

    A delivery that finds another one holding the execution lease is scheduled
    again for when the lease ends, so a dead worker's call is still finished.
    """
    from orchestration.executions import tool_call_execute_supervised

    tool_call_execute_supervised(tool_call_pk=tool_call_pk)


@shared_task(name="approvals.tasks.expire_approvals", ignore_result=True)
def expire_approvals() -> int:
    """Escalate requests past their step's time, then expire those past their final deadline.

    Run by Celery beat (or the embedded beat); returns how many expired.
    """
    from approvals.services import approvals_expire
    from approvals.services.escalation import approvals_escalate

    approvals_escalate()
    return approvals_expire()


@shared_task(
    name="approvals.tasks.deliver_notification", acks_late=True, ignore_result=True
)
def deliver_notification(*, delivery_pk: int) -> None:
    """Make one attempt at notification delivery ``delivery_pk`` (retries schedule themselves)."""
    from approvals.notifications.delivery import notification_deliver

    notification_deliver(delivery_pk=delivery_pk)


@shared_task(name="approvals.tasks.announce_expiring_approvals", ignore_result=True)
def announce_expiring_approvals() -> int:
    """Announce requests about to expire and re-send lost deliveries (run by Celery beat)."""
    from approvals.notifications.delivery import deliveries_requeue
    from approvals.services.expiring import approvals_expiring_announce

    deliveries_requeue()
    return approvals_expiring_announce()
