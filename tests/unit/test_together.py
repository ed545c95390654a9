"""engine.together: a pass's independent reads side by side."""

from __future__ import annotations

import threading
import time

import pytest

from liqo_peering.engine.together import together


def test_results_come_in_the_calls_order_and_the_calls_run_at_once() -> None:
    started = threading.Barrier(3, timeout=5)

    def call(value: int) -> int:
        started.wait()  # each waits for the other two: one after another, none would return
        return value

    assert together(lambda: call(1), lambda: call(2), lambda: call(3)) == [1, 2, 3]


def test_the_first_failure_in_order_is_raised_once_every_call_has_ended() -> None:
    ended: list[str] = []

    def slow() -> None:
        time.sleep(0.2)
        ended.append("slow")

    def fails(what: str) -> None:
        raise RuntimeError(what)

    with pytest.raises(RuntimeError, match="first"):
        together(lambda: fails("first"), slow, lambda: fails("second"))
    assert ended == ["slow"]


def test_nothing_to_do() -> None:
    assert together() == []
