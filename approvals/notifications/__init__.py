"""Outbound notifications: email, signed webhooks and apprise URLs, sent after commit.

The workflow announces what happens to a request with the signals of
:mod:`approvals.signals`; :mod:`.receivers` turns each into one
:class:`~approvals.models.NotificationDelivery` per configured target
(``COUNTERSIGN["NOTIFICATIONS"]``, :mod:`.targets`) and enqueues one task per
delivery (:mod:`.delivery`), on a Celery worker or the embedded pool. Each
attempt sends one message (:mod:`.channels`) with a signed, expiring link to the
request (:mod:`.links`); a failure is retried with exponential backoff and
recorded on the row, so a broken target shows in the admin and never delays or
loses the decision. Misconfiguration is reported by :mod:`approvals.checks`.
"""
