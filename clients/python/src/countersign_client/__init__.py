"""Countersign's approval API from Python: a client, ``require_approval`` and framework adapters.

Adapters live in :mod:`countersign_client.adapters` and import their framework
only when used.
"""

from __future__ import annotations

from countersign_client.approval import Approval, require_approval
from countersign_client.client import (
    DECIDED,
    AsyncClient,
    CallState,
    Client,
    Decision,
    default_holder,
)
from countersign_client.errors import (
    Conflict,
    CountersignError,
    Expired,
    InvalidRequest,
    NotAuthorized,
    NotFound,
    OutcomeUnknown,
    Rejected,
    Responded,
)

__all__ = [
    "DECIDED",
    "Approval",
    "AsyncClient",
    "CallState",
    "Client",
    "Conflict",
    "CountersignError",
    "Decision",
    "Expired",
    "InvalidRequest",
    "NotAuthorized",
    "NotFound",
    "OutcomeUnknown",
    "Rejected",
    "Responded",
    "default_holder",
    "require_approval",
]
