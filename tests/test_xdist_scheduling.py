"""The parallel suite's scheduling (tests/support/xdist_scheduling.py): large chunks early,
the heavy tail shared, and the order that keeps flushes after rolled-back tests."""

import pytest

from tests.support.xdist_scheduling import (
    NO_DATABASE,
    ROLLED_BACK,
    TRANSACTIONAL,
    count_to_send,
    run_order,
)


def test_early_chunks_are_large_for_module_locality():
    # 3,000 pending on 3 workers: a worker that ran dry gets 1/48 of what is left at once.
    assert count_to_send(3000, 3, queued=0, last_duration_s=0.01) == 62


def test_a_worker_with_enough_queued_gets_nothing():
    assert count_to_send(3000, 3, queued=300, last_duration_s=0.01) == 0


def test_a_worker_on_slow_tests_keeps_only_the_next_one():
    assert count_to_send(3000, 3, queued=2, last_duration_s=40.0) == 0
    assert count_to_send(3000, 3, queued=1, last_duration_s=40.0) >= 1


def test_the_tail_goes_out_one_or_two_at_a_time():
    # 60 heavy tests left on 3 workers: xdist's default would hand out up to 10 at once.
    for queued in (0, 1):
        assert count_to_send(60, 3, queued=queued, last_duration_s=30.0) == 2 - queued


def test_never_more_than_is_pending():
    assert count_to_send(1, 3, queued=0, last_duration_s=0.0) == 1
    assert count_to_send(0, 3, queued=0, last_duration_s=0.0) == 0


def test_a_single_worker_is_kept_busy():
    sent = count_to_send(1000, 1, queued=0, last_duration_s=0.0)
    assert 2 <= sent <= 500


@pytest.mark.django_db
def test_a_rolled_back_test_runs_first(request):
    assert run_order(request.node) == ROLLED_BACK


@pytest.mark.django_db(transaction=True)
def test_a_transactional_test_runs_last(request):
    assert run_order(request.node) == TRANSACTIONAL


def test_a_test_without_a_database_runs_between(request):
    assert run_order(request.node) == NO_DATABASE


def test_the_collected_order_follows_the_groups(request):
    orders = [run_order(item) for item in request.session.items]
    assert orders == sorted(orders)
