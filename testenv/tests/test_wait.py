"""testenv.wait.wait_progressing: progress extends the wait, up to its limit; no progress is a verdict."""

from __future__ import annotations

import itertools

import pytest

from testenv.wait import wait_progressing


def test_progress_extends_the_wait_beyond_its_timeout() -> None:
    ticks = itertools.count()
    done = 0

    def probe() -> bool:
        nonlocal done
        done += 1
        return done > 8  # about 0.8 s: past the 0.3 s timeout, each step a change

    assert wait_progressing("steps", probe, lambda: next(ticks), timeout=0.3, limit=10, interval=0.1)


def test_no_progress_gives_up_saying_what_it_saw_last() -> None:
    with pytest.raises(AssertionError, match=r"gave up waiting for the Pod .* without progress.*'Pending'"):
        wait_progressing("the Pod", lambda: None, lambda: "Pending", timeout=0.3, interval=0.05)


def test_endless_progress_stops_at_the_limit() -> None:
    ticks = itertools.count()
    with pytest.raises(AssertionError, match=r"or 1s in all"):
        wait_progressing("a flapping thing", lambda: None, lambda: next(ticks), timeout=0.25, limit=4, interval=0.05)
