"""Celery tasks of the approval workflow's notifications: thin shells around services.

Each task imports its service in its body (a worker's boot imports no service
stack; see :mod:`threads.tasks`, bench B6). The pipeline's tasks (executing a
call, expiring approvals) are :mod:`orchestration.tasks`, under their old names.
"""

from __future__ import annotations

from celery import shared_task


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
