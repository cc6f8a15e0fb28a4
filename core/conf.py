"""Countersign's Django-side settings, read lazily with documented defaults.

``settings.COUNTERSIGN`` overrides any key of :data:`DEFAULTS`. Read values through
``countersign_settings.NAME`` at call time, never at import time (STYLE.md 17).
"""

from __future__ import annotations

from typing import Any, Final

from django.conf import settings

DEFAULTS: Final[dict[str, Any]] = {
    # Coalescing of TOOL_CALL_ARGS / TEXT_MESSAGE_CONTENT deltas before they are
    # written: whichever comes first, milliseconds since the first buffered event
    # or bytes of buffered deltas.
    "COALESCE_MS": 50,
    "COALESCE_BYTES": 4096,
    # A streaming worker also flushes as soon as the agent pauses (nothing else
    # waiting to be recorded), at most once per this many milliseconds: a delta
    # reaches sockets within about this long plus one write, while a fast stream
    # still batches by the window above (B1, B4).
    "COALESCE_PAUSE_MS": 10,
    # Show first, persist in batches (B1): a recording worker also sends each
    # event to the thread's sockets that ask for previews (``?preview=1``) at
    # once, before its coalesced row is written; the committed batch confirms
    # it. Readers drop a preview never confirmed at the run's end or after 5 s
    # (the operator UI does). docs/configuration.md.
    "PREVIEW_EVENTS": True,
    # Agent loop limits (LP-06).
    "MAX_ITERATIONS": 10,
    "RUN_DEADLINE_SECONDS": 300.0,
    # Approval requests expire after this many seconds unless the tool sets its own.
    "APPROVAL_TIMEOUT_SECONDS": 24 * 3600,
    # Seconds added to a tool's timeout for its execution lease: a redelivered
    # execution waits this long past the timeout before it treats the first
    # worker as dead (BC32).
    "EXECUTION_LEASE_GRACE_SECONDS": 30.0,
    # Governance: a policy that raises or returns nonsense fails closed
    # to one approval by this Django group (created on first use).
    "POLICY_FAIL_CLOSED_GROUP": "approvers-strict",
    # A claim on an approval request lapses after this many seconds.
    "APPROVAL_CLAIM_SECONDS": 15 * 60,
    # Longest lifetime of a scoped grant ("always allow"), in seconds.
    "GRANT_MAX_SECONDS": 30 * 24 * 3600,
    # Worker pool size for the embedded (no Redis) mode.
    "EMBEDDED_WORKERS": 4,
    # How often a WebSocket consumer re-reads the log when no doorbell rang (s).
    "SOCKET_POLL_SECONDS": 3.0,
    # Keep-alive comment interval on SSE streams (s).
    "SSE_KEEPALIVE_SECONDS": 10.0,
    # A worker executing a run refreshes a Redis heartbeat this often (s); the
    # janitor (orchestration.janitor) ends a ``running`` run with ``worker_lost``
    # once its last refresh is four intervals old (the heartbeat's time to live,
    # three intervals, plus one), or, for a run with no heartbeat key (embedded,
    # no Redis), once it has had no event for RUN_STALE_SECONDS, which must then
    # outlast the longest silent model turn.
    "RUN_HEARTBEAT_SECONDS": 5.0,
    "RUN_STALE_SECONDS": 90.0,
    # The janitor (orchestration.janitor) sweeps every JANITOR_INTERVAL_SECONDS
    # (Celery beat, or the embedded beat); the beat schedule in config/settings.py
    # is built from it. A run or an execution still ``queued`` after
    # QUEUED_STALE_SECONDS is taken for a lost broker message and enqueued again
    # (duplicates are harmless). An execution ``reserved`` past its lease (tool
    # timeout + EXECUTION_LEASE_GRACE_SECONDS) is handed to a worker again, which
    # runs an idempotent tool again or records ``outcome_unknown``. Checked by
    # threads.checks (threads.E030-E032); docs/recovery.md.
    "JANITOR_INTERVAL_SECONDS": 10.0,
    "QUEUED_STALE_SECONDS": 15.0,
    # A continuation run whose worker died (worker_lost) after every result it
    # continues from was recorded is started again, at most RUN_RETRY_ATTEMPTS
    # times per turn, the first after RUN_RETRY_BACKOFF_SECONDS and each next one
    # after twice the previous delay (orchestration.pipeline.run_worker_lost;
    # docs/recovery.md). 0 attempts turns the retry off.
    "RUN_RETRY_ATTEMPTS": 2,
    "RUN_RETRY_BACKOFF_SECONDS": 1.0,
    # Approvals decided in the operator UI (queue, thread page, admin) execute
    # this many seconds later; until then the decision can be undone (the call
    # returns to pending). REST and AG-UI resume decisions are immediate unless
    # they ask for it (``undo: true``). 0 turns undo off.
    "DECISION_UNDO_SECONDS": 5.0,
    # Risk thresholds from policy: {tool name: {numeric argument: limit}}; an
    # argument over its limit makes the request high risk (approvals.selectors).
    "RISK_THRESHOLDS": {},
    # Sweeps that recovered something are kept (admin: Janitor sweeps) this long.
    "JANITOR_SWEEP_RETENTION_SECONDS": 7 * 24 * 3600,
    # Outbound notifications (approvals.notifications; docs/notifications.md): a
    # list of targets, each {"name", "kind": "email"|"webhook"|"apprise",
    # "events": ["requested", "expiring", "decided", "escalated"], and "to" (email),
    # "url" + "secret" (webhook, Standard Webhooks) or "urls" (apprise)}. Checked
    # by approvals.checks (approvals.E101-E106).
    "NOTIFICATIONS": [],
    # A pending request is announced as expiring once, this many seconds before it expires.
    "NOTIFY_EXPIRING_SECONDS": 3600.0,
    # Attempts per delivery, the first retry's delay (doubled each time, at most
    # NOTIFY_RETRY_MAX_DELAY_SECONDS) and one attempt's network timeout.
    "NOTIFY_MAX_ATTEMPTS": 5,
    "NOTIFY_RETRY_BACKOFF_SECONDS": 5.0,
    "NOTIFY_RETRY_MAX_DELAY_SECONDS": 600.0,
    "NOTIFY_TIMEOUT_SECONDS": 10.0,
    # How long the signed link in a notification opens its request.
    "NOTIFY_LINK_MAX_AGE_SECONDS": 7 * 24 * 3600,
    # The audit chain's HMAC keys (approvals.services.audit, docs/audit.md): a dict
    # {key id: secret} or "id:secret,id:secret", the current (signing) key first,
    # older ones kept to verify what they signed. Empty: SECRET_KEY, id "secret-key".
    "AUDIT_KEYS": "",
    # The bearer token Prometheus sends to GET /metrics; empty: the endpoint is off
    # (404). docs/observability.md.
    "METRICS_TOKEN": "",
    # The site's address as people reach it, for links in notifications.
    "PUBLIC_URL": "http://127.0.0.1:8000",
}


class _CountersignSettings:
    """Attribute access to ``settings.COUNTERSIGN`` with :data:`DEFAULTS` as fallback."""

    def __getattr__(self, name: str) -> Any:
        if name not in DEFAULTS:
            raise AttributeError(f"unknown Countersign setting {name!r}")
        return getattr(settings, "COUNTERSIGN", {}).get(name, DEFAULTS[name])


countersign_settings = _CountersignSettings()
