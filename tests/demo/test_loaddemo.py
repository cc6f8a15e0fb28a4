"""``manage.py loaddemo``: the demo thread, and ``--reset`` of the refund ledger."""

from __future__ import annotations

from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import call_command

from demo.ledger import ledger_reset
from demo.models import Refund
from tests.helpers.executors import use_embedded
from threads.models import ToolCall

pytestmark = pytest.mark.django_db(transaction=True)


def _refund(key: str, order_id: str = "A-1001") -> Refund:
    return Refund.objects.create(
        idempotency_key=key, order_id=order_id, amount=Decimal("25.00"), reason="r"
    )


def test_loaddemo_reset_empties_the_ledger_then_records_the_demo(
    settings, django_user_model
):
    """--reset deletes every refund, then the demo call awaits approval as usual."""
    use_embedded(settings)
    django_user_model.objects.create_superuser(username="admin", password="pw-a-123")
    _refund("k1")
    _refund("k2", order_id="B-2002")
    out = StringIO()

    call_command("loaddemo", "--reset", stdout=out)

    assert Refund.objects.count() == 0
    assert "2 refunds deleted" in out.getvalue()
    call = ToolCall.objects.get(name="refund_order")
    assert call.state == ToolCall.State.AWAITING_APPROVAL


def test_loaddemo_without_reset_keeps_the_ledger(settings, django_user_model):
    """Without --reset the refunds already made stay."""
    use_embedded(settings)
    django_user_model.objects.create_superuser(username="admin", password="pw-a-123")
    _refund("k1")

    call_command("loaddemo", stdout=StringIO())

    assert list(Refund.objects.values_list("idempotency_key", flat=True)) == ["k1"]


def test_ledger_reset_of_one_order_keeps_the_others():
    """ledger_reset(order_id=...) deletes that order's refunds only."""
    _refund("k1")
    _refund("k2", order_id="B-2002")

    assert ledger_reset(order_id="A-1001") == 1

    assert list(Refund.objects.values_list("order_id", flat=True)) == ["B-2002"]
