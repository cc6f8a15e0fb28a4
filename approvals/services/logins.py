"""Login lockouts in the audit trail.

django-axes locks a username or a client address out after too many failed
logins (``web.ratelimit``) and sends ``axes.signals.user_locked_out``;
:func:`login_lockout_audit` (connected in ``approvals.apps``) appends one audit
entry per lockout, so the trail shows who was locked out, from where and when.
Implements SEC-04, SEC-07.
"""

from __future__ import annotations

from typing import Any

from axes.models import AccessAttempt
from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from approvals.models import AuditEntry
from approvals.services.audit import audit_append


def login_lockout_audit(
    sender: Any, *, username: str | None, ip_address: str | None, **kwargs: Any
) -> AuditEntry | None:
    """Append the ``login.locked_out`` audit entry of a lockout; return it.

    The entry's target is django-axes' access attempt of that username or
    address (admin: Access attempts, where an administrator unlocks it); its
    ``after`` is ``{"username", "ipAddress"}``. One entry per lockout: the
    attempts refused while it lasts (django-axes signals each) add none. Returns
    ``None`` when nothing was appended.
    """
    attempt = (
        AccessAttempt.objects.filter(Q(username=username) | Q(ip_address=ip_address))
        .order_by("-attempt_time")
        .first()
    )
    if attempt is None:
        return None
    since = timezone.now() - settings.AXES_COOLOFF_TIME
    # A refused attempt of the same username, or from the same address, within
    # the cool-off belongs to a lockout already recorded.
    if AuditEntry.objects.filter(
        Q(after__username=username or "") | Q(after__ipAddress=ip_address or ""),
        action="login.locked_out",
        created_at__gte=since,
    ).exists():
        return None
    return audit_append(
        actor=None,
        action="login.locked_out",
        target=attempt,
        after={"username": username or "", "ipAddress": ip_address or ""},
    )
