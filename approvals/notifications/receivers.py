"""Subscribes outbound notifications to the approval signals (connected in ``AppConfig.ready``).

The delivery code is imported on first use: it reaches the services (and
agentcore), which the web process must not load while it starts (B6).
"""

from __future__ import annotations

from typing import Any

from django.dispatch import receiver

from approvals.models import ApprovalRequest
from approvals.signals import (
    approval_changed,
    approval_decided,
    approval_escalated,
    approval_expiring,
    approval_outcome,
    approval_requested,
)


def deliveries_create(
    *, approval: ApprovalRequest, event: str, group: str = ""
) -> None:
    """Record and enqueue ``event``'s deliveries (:func:`.delivery.deliveries_create`)."""
    from approvals.notifications.delivery import deliveries_create as create

    create(approval=approval, event=event, group=group)


@receiver(approval_requested, sender=ApprovalRequest, dispatch_uid="notify.requested")
def on_requested(approval: ApprovalRequest, **kwargs: Any) -> None:
    """Notify the targets subscribed to ``requested``."""
    deliveries_create(approval=approval, event="requested")


@receiver(approval_decided, sender=ApprovalRequest, dispatch_uid="notify.decided")
def on_decided(approval: ApprovalRequest, **kwargs: Any) -> None:
    """Notify the targets subscribed to ``decided``."""
    deliveries_create(approval=approval, event="decided")


@receiver(approval_expiring, sender=ApprovalRequest, dispatch_uid="notify.expiring")
def on_expiring(approval: ApprovalRequest, **kwargs: Any) -> None:
    """Notify the targets subscribed to ``expiring``."""
    deliveries_create(approval=approval, event="expiring")


@receiver(approval_escalated, sender=ApprovalRequest, dispatch_uid="notify.escalated")
def on_escalated(approval: ApprovalRequest, group: Any = "", **kwargs: Any) -> None:
    """Notify the targets subscribed to ``escalated``, naming the group."""
    deliveries_create(
        approval=approval, event="escalated", group=str(getattr(group, "name", group))
    )


@receiver(approval_changed, sender=ApprovalRequest, dispatch_uid="notify.changed")
def on_changed(approval: ApprovalRequest, **kwargs: Any) -> None:
    """Rewrite the request's chat messages (:func:`.delivery.updates_create`)."""
    from approvals.notifications.delivery import updates_create

    updates_create(approval=approval)


@receiver(approval_outcome, sender=ApprovalRequest, dispatch_uid="notify.outcome")
def on_outcome(approval: ApprovalRequest, outcome: str = "", **kwargs: Any) -> None:
    """Notify the targets subscribed to ``outcome``: ``executed``, ``failed`` or ``expired``."""
    deliveries_create(approval=approval, event=outcome)
