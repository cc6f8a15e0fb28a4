"""Signed, expiring links to an approval request, carried by every notification.

The token is ``TimestampSigner`` over the request's id (salted, so no other
signed value of the site opens it); the link's view (:mod:`web.ui.approvals`)
verifies it and redirects to the request in the queue, where deciding still
needs a login and the permission. A link only says *which* request: it grants
nothing.
"""

from __future__ import annotations

from datetime import timedelta

from django.core import signing
from django.urls import reverse

from core.conf import countersign_settings

SALT = "countersign.approvals.link"


def approval_link_token(approval_pk: int) -> str:
    """Return the signed token for approval request ``approval_pk`` (timestamped now)."""
    return signing.TimestampSigner(salt=SALT).sign(str(approval_pk))


def approval_link_url(approval_pk: int) -> str:
    """Return the absolute link to approval ``approval_pk``: ``PUBLIC_URL`` + the link view."""
    base = str(countersign_settings.PUBLIC_URL).rstrip("/")
    return base + reverse("approval-link", args=[approval_link_token(approval_pk)])


def approval_link_verify(token: str) -> int:
    """Return the approval id ``token`` names.

    Raises :class:`django.core.signing.SignatureExpired` when it is older than
    ``NOTIFY_LINK_MAX_AGE_SECONDS`` and :class:`django.core.signing.BadSignature`
    when it was not signed by this site (forged, cut or altered).
    """
    value = signing.TimestampSigner(salt=SALT).unsign(
        token,
        max_age=timedelta(
            seconds=float(countersign_settings.NOTIFY_LINK_MAX_AGE_SECONDS)
        ),
    )
    try:
        return int(value)
    except ValueError as error:
        raise signing.BadSignature("the link names no approval request") from error
