"""The ids of the interrupts Countersign issues, ``cs-approval-<pk>`` (IR-02).

A leaf module (no other project imports but ``threads.ids``) so that the approval
snapshot, the REST serializers and :mod:`approvals.interrupts` spell the id the
same way without importing one another.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from threads.ids import RESERVED_PREFIX

if TYPE_CHECKING:
    from approvals.models import ApprovalRequest

#: Prefix of every interrupt id Countersign issues (IR-02): ids a client or a remote
#: agent mints (``toolCallId``, message ids, its own interrupt ids) are never read as ours.
INTERRUPT_ID_PREFIX = f"{RESERVED_PREFIX}approval-"


def interrupt_id(approval: ApprovalRequest) -> str:
    """Return the interrupt id of ``approval``: ``"cs-approval-<pk>"``. Implements IR-02."""
    return f"{INTERRUPT_ID_PREFIX}{approval.pk}"


def interrupt_approval_pk(value: object) -> int | None:
    """Return the approval pk an interrupt id names, or ``None`` when it is not one of ours.

    Only the ``"cs-approval-<digits>"`` form is accepted: a bare ``"12"`` (or any id a
    client or remote agent could mint) names no interrupt. Implements IR-02.
    """
    if not isinstance(value, str) or not value.startswith(INTERRUPT_ID_PREFIX):
        return None
    digits = value[len(INTERRUPT_ID_PREFIX) :]
    if not digits.isascii() or not digits.isdigit() or digits.startswith("0"):
        return None
    return int(digits)
