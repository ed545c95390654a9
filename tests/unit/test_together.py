"""engine.together: a pass's independent calls side by side, in the pool of sub-calls."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from liqo_peering.engine.together import start, together
from liqo_peering.health import TrackedPool


@pytest.fixture
def pool() -> Iterator[TrackedPool]:
    calls = TrackedPool(4, "calls")
    yield calls
    calls.shutdown()


def test_results_come_in_the_calls_order_and_the_calls_run_at_once(pool: TrackedPool) -> None:
    started = threading.Barrier(3, timeout=5)

    def call(value: int) -> int:
        started.wait()  # each waits for the other two: one after another, none would return
        return value

    assert together(pool, lambda: call(1), lambda: call(2), lambda: call(3)) == [1, 2, 3]


def test_the_first_failure_in_order_is_raised_once_every_call_has_ended(pool: TrackedPool) -> None:
    ended: list[str] = []

    def slow() -> None:
        time.sleep(0.2)
        ended.append("slow")

    def fails(what: str) -> None:
        raise RuntimeError(what)

    with pytest.raises(RuntimeError, match="first"):
        together(pool, lambda: fails("first"), slow, lambda: fails("second"))
    assert ended == ["slow"]


def test_nothing_to_do(pool: TrackedPool) -> None:
    assert together(pool) == []


def test_without_a_pool_the_calls_run_one_after_another_on_this_thread() -> None:
    here = threading.get_ident()
    assert together(None, threading.get_ident, threading.get_ident) == [here, here]
    failed = start(None, lambda: 1 // 0)
    assert failed.done() and isinstance(failed.exception(), ZeroDivisionError)


def test_a_call_in_the_pool_runs_what_it_starts_on_its_own_thread() -> None:
    """The pool's only thread, busy with the call, would never take what the call waits for: no deadlock."""
    single = TrackedPool(1, "calls")
    try:
        outer = single.submit(lambda: (threading.get_ident(), together(single, threading.get_ident)))
        thread, [inner] = outer.result(timeout=5)
    finally:
        single.shutdown()
    assert inner == thread
    assert not single.in_worker()  # this thread is none of the pool's
