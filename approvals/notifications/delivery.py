"""Recording and sending notification deliveries, with retries and backoff.

:func:`deliveries_create` makes one :class:`NotificationDelivery` per target
subscribed to an event and enqueues :func:`approvals.tasks.deliver_notification` for each after commit;
:func:`notification_deliver` (the task's body) makes one attempt and either
records it delivered, schedules the next attempt (``NOTIFY_RETRY_BACKOFF_SECONDS``
doubled per attempt, at most ``NOTIFY_RETRY_MAX_DELAY_SECONDS``), or records it
failed after ``NOTIFY_MAX_ATTEMPTS``. Nothing here runs inside the workflow's
transactions or holds their locks, so a slow or broken target never delays a
decision, a run or an execution.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone
from kombu.exceptions import OperationalError

from approvals.locks import delivery_lock
from approvals.models import ApprovalRequest, ChatMessage, NotificationDelivery
from approvals.notifications.channels import (
    DeliveryFailed,
    notification_content,
    notification_send,
)
from approvals.notifications.chat import ChatDeliveryError, chat_send
from approvals.notifications.targets import (
    CHAT_KINDS,
    configured_targets,
    target_named,
)
from approvals.transitions import delivery_transition
from core import metrics
from core.conf import countersign_settings
from threads.execution import Task, enqueue, enqueue_later

logger = logging.getLogger(__name__)


def _deliver_task() -> Task:
    """Return the Celery task that makes one delivery attempt."""
    # Imported here: a task module imports Celery, which a web process imports
    # only once it sends work (bench B6).
    from approvals.tasks import deliver_notification

    return deliver_notification


_S = NotificationDelivery.Status


def deliveries_create(
    *, approval: ApprovalRequest, event: str, group: str = ""
) -> list[NotificationDelivery]:
    """Record and enqueue ``event`` on ``approval`` for every target subscribed to it.

    Idempotent per (request, event, target, group): an event announced twice
    is delivered once. Returns the deliveries created now.
    """
    created: list[NotificationDelivery] = []
    targets = [t for t in configured_targets() if event in t.events]
    if any(t.agents for t in targets):
        # Read only when a target is an agent's own (B2: no query otherwise).
        agent = approval.run.agent
        targets = [t for t in targets if not t.agents or agent in t.agents]
    if not targets:
        # No transaction opened for nothing (B2: two statements per decision).
        return created
    with transaction.atomic():
        for target in targets:
            delivery, new = NotificationDelivery.objects.get_or_create(
                approval_id=approval.pk,
                event=event,
                target=target.name,
                group=group,
                defaults={"kind": target.kind},
            )
            if new:
                created.append(delivery)
                enqueue(_deliver_task(), delivery_pk=delivery.pk)
    return created


def updates_create(*, approval: ApprovalRequest) -> list[NotificationDelivery]:
    """Record and enqueue a rewrite of ``approval``'s chat messages; return the new deliveries.

    One ``updated`` delivery per chat target whose message for ``approval``
    exists (a message still being posted shows the state it finds, and
    :func:`approvals.notifications.chat.chat_send` catches up), unless one is
    already waiting (``queued`` or ``retrying``): each attempt shows the state it
    finds, so one waiting rewrite covers every change before it. Also how an
    action on a decided or expired request refreshes its message.
    """
    targets = {t.name for t in configured_targets() if "updated" in t.events}
    if not targets:
        return []
    posted = set(
        ChatMessage.objects.filter(
            approval_id=approval.pk, target__in=targets
        ).values_list("target", flat=True)
    )
    if not posted:
        return []
    created: list[NotificationDelivery] = []
    with transaction.atomic():
        waiting = set(
            NotificationDelivery.objects.filter(
                approval_id=approval.pk,
                event=NotificationDelivery.Event.UPDATED,
                target__in=posted,
                status__in=(_S.QUEUED, _S.RETRYING),
            ).values_list("target", flat=True)
        )
        for name in sorted(posted - waiting):
            target = target_named(name)
            delivery = NotificationDelivery.objects.create(
                approval_id=approval.pk,
                event=NotificationDelivery.Event.UPDATED,
                target=name,
                kind=target.kind if target else "",
            )
            created.append(delivery)
            enqueue(_deliver_task(), delivery_pk=delivery.pk)
    return created


def retry_delay(attempts: int) -> float:
    """Return the seconds to wait after attempt number ``attempts`` (1-based) failed."""
    base = float(countersign_settings.NOTIFY_RETRY_BACKOFF_SECONDS)
    cap = float(countersign_settings.NOTIFY_RETRY_MAX_DELAY_SECONDS)
    return min(cap, base * 2.0 ** max(0, attempts - 1))


def notification_deliver(*, delivery_pk: int) -> str | None:
    """Make one attempt at delivery ``delivery_pk``; return its status afterwards.

    ``None`` when there was nothing to do: the row is gone, already delivered or
    failed, or another attempt is in flight or not yet due (a duplicate task).
    A failed attempt with attempts left schedules the next one itself.
    """
    now = timezone.now()
    with transaction.atomic():
        delivery = delivery_lock(delivery_pk=delivery_pk)
        if delivery is None or not _due(delivery, now):
            return None
        target = target_named(delivery.target)
        if target is None:
            delivery.last_error = f"target {delivery.target!r} is no longer in COUNTERSIGN['NOTIFICATIONS']"
            delivery_transition(delivery=delivery, to=_S.FAILED, save=False)
            delivery.save()
            return delivery.status
        delivery_transition(delivery=delivery, to=_S.SENDING, save=False)
        delivery.attempts += 1
        delivery.last_attempt_at = now
        delivery.next_attempt_at = None
        delivery.save()
        approval = ApprovalRequest.objects.select_related(
            "thread", "run", "requested_by", "decided_by"
        ).get(pk=delivery.approval_id)
    error = ""
    retry_after: float | None = None
    try:
        if target.kind in CHAT_KINDS:
            chat_send(target=target, approval=approval, event=delivery.event)
        else:
            content = notification_content(
                approval=approval, event=delivery.event, group=delivery.group
            )
            notification_send(
                target=target,
                content=content,
                message_id=f"cs-notification-{delivery.pk}",
                timeout=float(countersign_settings.NOTIFY_TIMEOUT_SECONDS),
            )
    except ChatDeliveryError as failure:
        error, retry_after = str(failure), failure.retry_after
    except DeliveryFailed as failure:
        error = str(failure)
    except Exception as unexpected:
        # A bug or an odd library error must not leave the row "sending" for ever.
        logger.exception("notification delivery %s failed unexpectedly", delivery_pk)
        error = f"unexpected {type(unexpected).__name__}; see the worker log"
    return _attempt_record(
        delivery_pk=delivery_pk, error=error, retry_after=retry_after
    )


def _due(delivery: NotificationDelivery, now: datetime) -> bool:
    """Whether an attempt may start now (not done, not in flight, not early)."""
    if delivery.status in (_S.DELIVERED, _S.FAILED):
        return False
    if delivery.status == _S.SENDING:
        # A worker died mid-attempt (the task was redelivered): try again once
        # the dead attempt's timeout has surely passed.
        stale = timedelta(
            seconds=3 * float(countersign_settings.NOTIFY_TIMEOUT_SECONDS)
        )
        return (
            delivery.last_attempt_at is None or delivery.last_attempt_at < now - stale
        )
    return (
        delivery.next_attempt_at is None
        or delivery.next_attempt_at <= now + timedelta(seconds=1)
    )


def _attempt_record(
    *, delivery_pk: int, error: str, retry_after: float | None = None
) -> str | None:
    """Record the attempt's outcome and schedule the next attempt after a failure.

    The next attempt waits the backoff, or the target's own ``retry_after``
    (seconds, an HTTP 429's ``Retry-After``) when that is longer.
    """
    delay: float | None = None
    with transaction.atomic():
        delivery = delivery_lock(delivery_pk=delivery_pk)
        if delivery is None:
            return None
        if delivery.status == _S.SENDING and delivery.attempts and not error:
            delivery_transition(delivery=delivery, to=_S.DELIVERED, save=False)
            delivery.delivered_at = timezone.now()
        elif error:
            delivery.last_error = error
            final = delivery.attempts >= int(countersign_settings.NOTIFY_MAX_ATTEMPTS)
            target = delivery.target
            metrics.count_on_commit(
                lambda: metrics.NOTIFICATION_FAILURES.labels(
                    target, "true" if final else "false"
                ).inc()
            )
            if final:
                delivery_transition(delivery=delivery, to=_S.FAILED, save=False)
                logger.warning(
                    "notification %s to %s failed after %s attempts: %s",
                    delivery.event,
                    delivery.target,
                    delivery.attempts,
                    error,
                )
            else:
                delay = max(retry_delay(delivery.attempts), retry_after or 0.0)
                delivery_transition(delivery=delivery, to=_S.RETRYING, save=False)
                delivery.next_attempt_at = timezone.now() + timedelta(seconds=delay)
        delivery.save()
        status = delivery.status
    if delay is not None:
        _schedule(delivery_pk=delivery_pk, delay=delay)
    return status


def _schedule(*, delivery_pk: int, delay: float) -> None:
    try:
        enqueue_later(_deliver_task(), countdown=delay, delivery_pk=delivery_pk)
    except OperationalError:
        # The broker is down: the row says when it is due, and the beat task
        # (deliveries_requeue) sends it again.
        logger.warning("broker unreachable; delivery %s left for the beat", delivery_pk)


def deliveries_requeue(*, now: datetime | None = None) -> int:
    """Enqueue again deliveries a lost broker message left behind; return how many.

    A delivery still ``queued`` after ``QUEUED_STALE_SECONDS``, or ``retrying`` past
    its due time by as much, is enqueued again (a duplicate attempt finds it in
    flight or done and does nothing). Run by the beat with the expiry announcements.
    """
    now = now or timezone.now()
    stale = now - timedelta(seconds=float(countersign_settings.QUEUED_STALE_SECONDS))
    lost: list[Any] = list(
        NotificationDelivery.objects.filter(
            status=_S.QUEUED, created_at__lt=stale
        ).values_list("pk", flat=True)
    ) + list(
        NotificationDelivery.objects.filter(
            status=_S.RETRYING, next_attempt_at__lt=stale
        ).values_list("pk", flat=True)
    )
    for pk in lost:
        enqueue(_deliver_task(), delivery_pk=pk)
    return len(lost)
