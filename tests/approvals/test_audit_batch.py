"""The audit chain written in bulk: :func:`approvals.services.audit.audit_batch` (SEC-04, B2)."""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from approvals.models import AuditChainHead, AuditEntry
from approvals.services import audit_verify
from approvals.services.audit import audit_append, audit_batch

pytestmark = pytest.mark.django_db(transaction=True)


def _inserts(queries) -> int:
    return sum(
        1 for q in queries if q["sql"].startswith('INSERT INTO "approvals_auditentry"')
    )


def test_batch_writes_its_entries_in_one_insert_chained_in_order(django_user_model):
    user = django_user_model.objects.create_user(username="ada")
    audit_append(actor=None, action="before", target=user)
    with CaptureQueriesContext(connection) as captured, audit_batch():
        audit_append(actor=user, action="one", target=user)
        audit_append(actor=user, action="two", target=user)
        audit_append(actor=None, action="three", target=user)
        # Nothing is written before the batch ends.
        assert AuditEntry.objects.filter(action="one").count() == 0
    assert _inserts(captured.captured_queries) == 1
    # One head read and one head update for the whole batch.
    head_writes = [
        q for q in captured.captured_queries if "approvals_auditchainhead" in q["sql"]
    ]
    assert len(head_writes) == 2
    entries = list(AuditEntry.objects.order_by("id"))
    assert [e.action for e in entries] == ["before", "one", "two", "three"]
    assert [e.actor_label for e in entries] == ["system", "ada", "ada", "system"]
    assert AuditChainHead.objects.get().last_hash == entries[-1].hash
    assert audit_verify().ok


def test_batch_error_writes_nothing(django_user_model):
    user = django_user_model.objects.create_user(username="ada")

    def failing_service_call() -> None:
        with audit_batch():
            audit_append(actor=user, action="lost", target=user)
            raise RuntimeError("the service call failed")

    with pytest.raises(RuntimeError):
        failing_service_call()
    assert AuditEntry.objects.count() == 0
    audit_append(actor=user, action="after", target=user)
    assert list(AuditEntry.objects.values_list("action", flat=True)) == ["after"]
    assert audit_verify().ok


def test_savepoint_rolled_back_inside_a_batch_drops_only_its_own_entry(
    django_user_model,
):
    user = django_user_model.objects.create_user(username="ada")
    with audit_batch():
        audit_append(actor=user, action="kept-1", target=user)
        try:
            with transaction.atomic():
                audit_append(actor=user, action="dropped", target=user)
                raise RuntimeError("a caught failure inside the batch")
        except RuntimeError:
            pass
        audit_append(actor=user, action="kept-2", target=user)
        with transaction.atomic():
            audit_append(actor=user, action="kept-3", target=user)
        audit_append(actor=user, action="kept-4", target=user)
    actions = list(AuditEntry.objects.order_by("id").values_list("action", flat=True))
    assert actions == ["kept-1", "kept-2", "kept-3", "kept-4"]
    assert AuditChainHead.objects.get().last_hash == (
        AuditEntry.objects.order_by("id").last().hash
    )
    assert audit_verify().ok


def test_batch_inside_a_batch_is_the_outer_one(django_user_model):
    user = django_user_model.objects.create_user(username="ada")
    with CaptureQueriesContext(connection) as captured, audit_batch():
        audit_append(actor=user, action="outer", target=user)
        with audit_batch():
            audit_append(actor=user, action="inner", target=user)
        assert AuditEntry.objects.count() == 0
    assert _inserts(captured.captured_queries) == 1
    assert list(AuditEntry.objects.order_by("id").values_list("action", flat=True)) == [
        "outer",
        "inner",
    ]
    assert audit_verify().ok
