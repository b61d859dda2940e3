"""operations.txn.parallel.for_each: every item once, results recorded, the first failure raised."""

from __future__ import annotations

import threading
import time

import pytest

from lance_partitioned.operations.txn.parallel import for_each


def test_every_item_runs_once_and_every_result_is_recorded():
    done: dict[int, int] = {}
    for_each(range(1000), lambda i: i * i, 8, on_done=done.__setitem__)
    assert done == {i: i * i for i in range(1000)}


def test_items_run_on_several_threads_at_once():
    """A thread waiting in one item (as Lance does, GIL released) does not hold up the others."""
    barrier = threading.Barrier(4, timeout=10)
    for_each(range(4), lambda _: barrier.wait(), 4)  # deadlocks (BrokenBarrierError) if serial


def test_no_item_starts_after_a_failure_and_the_first_failure_is_raised():
    started: list[int] = []
    lock = threading.Lock()

    def fn(i: int) -> int:
        with lock:
            started.append(i)
        if i == 3:
            raise ValueError("item 3 failed")
        time.sleep(0.001)
        return i

    done: dict[int, int] = {}
    with pytest.raises(ValueError, match="item 3 failed"):
        for_each(range(10_000), fn, 4, on_done=done.__setitem__)
    # the items running when 3 failed finish (at most one per other thread), nothing else starts
    assert 3 in started and len(started) < 100
    assert set(done) == set(started) - {3}


def test_an_on_done_failure_is_raised_too():
    def record(item: int, result: int) -> None:
        raise KeyError(item)

    with pytest.raises(KeyError):
        for_each([1, 2], lambda i: i, 2, on_done=record)
