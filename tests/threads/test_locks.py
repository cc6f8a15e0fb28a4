"""What a transaction locked is remembered for that transaction only (B2)."""

from __future__ import annotations

import pytest
from django.db import transaction

from threads.locks import (
    thread_lock,
    thread_seq_advance,
    thread_seq_lock,
    transaction_memo_get,
    transaction_memo_set,
)
from threads.models import Thread
from threads.services import thread_create

# Real commits: the memo's lifetime is the transaction's, which a test wrapped in
# one would stretch.
pytestmark = pytest.mark.django_db(transaction=True)


def test_a_memo_ends_with_its_transaction():
    with transaction.atomic():
        transaction_memo_set("key", 1)
        assert transaction_memo_get("key") == 1
    assert transaction_memo_get("key") is None
    with transaction.atomic():
        assert transaction_memo_get("key") is None


def _set_then_roll_back(value: int) -> None:
    with transaction.atomic():
        transaction_memo_set("key", value)
        raise RuntimeError("rolled back")


def test_a_memo_set_in_a_rolled_back_savepoint_is_forgotten():
    with transaction.atomic():
        transaction_memo_set("key", 1)
        with pytest.raises(RuntimeError):
            _set_then_roll_back(2)
        # Not 2 (rolled back), and not a guess at 1: the caller reads the row again.
        assert transaction_memo_get("key") is None
        transaction_memo_set("key", 3)
        with transaction.atomic():
            assert transaction_memo_get("key") == 3


def test_a_locked_threads_next_seq_follows_its_appends_without_reading_it_again(
    user, django_assert_num_queries
):
    thread = thread_create(owner=user, title="seq")
    with transaction.atomic():
        first = thread_lock(thread_pk=thread.pk).next_seq
        with django_assert_num_queries(1):  # the UPDATE only
            assert thread_seq_lock(thread_pk=thread.pk) == first
            thread_seq_advance(thread_pk=thread.pk, next_seq=first + 2)
            assert thread_seq_lock(thread_pk=thread.pk) == first + 2
    assert Thread.objects.get(pk=thread.pk).next_seq == first + 2
    with (
        transaction.atomic(),
        django_assert_num_queries(1),
    ):  # a new transaction reads it
        assert thread_seq_lock(thread_pk=thread.pk) == first + 2
