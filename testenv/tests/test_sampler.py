"""testenv.sampler.ReadySampler fails closed."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from testenv.sampler import ReadySampler, is_ready

READY = {"conditions": [{"type": "Ready", "status": "True", "reason": "Ready"}]}
WAITING = {"conditions": [{"type": "Ready", "status": "False", "reason": "Reconciling", "message": "networking"}]}


def reads(*answers: dict[str, Any] | Exception) -> tuple[Any, threading.Event]:
    """A status reader giving these answers, then the last one forever; the event is set once the last was given."""
    given = threading.Event()
    left = list(answers)

    def read() -> dict[str, Any]:
        if len(left) > 1:
            answer = left.pop(0)
        else:
            answer = left[0]
            given.set()
        if isinstance(answer, Exception):
            raise answer
        return answer

    return read, given


def test_ready_throughout_passes() -> None:
    read, given = reads(READY, READY)
    with ReadySampler(read) as sampler:
        given.wait(5)
    assert sampler.samples and not sampler.failures()


def test_a_sample_not_ready_fails_with_the_reason() -> None:
    read, given = reads(READY, WAITING, READY)
    expected = r"1 of \d+ samples:\n  \+[\d.]+s Ready False \(Reconciling\): networking"
    with pytest.raises(AssertionError, match=expected), ReadySampler(read):
        given.wait(5)


def test_an_error_while_reading_is_a_failed_sample_and_sampling_goes_on() -> None:
    read, given = reads(RuntimeError("API down"), READY)
    sampler = ReadySampler(read)
    with pytest.raises(AssertionError, match=r"status not read: RuntimeError\('API down'\)") as failed, sampler:
        given.wait(5)
    assert "1 of" in str(failed.value) and len(sampler.samples) >= 2


def test_an_error_in_the_block_is_not_hidden_by_the_check() -> None:
    read, _ = reads(WAITING)
    with pytest.raises(KeyError), ReadySampler(read):
        raise KeyError("the block's own failure")


def test_is_ready_reads_the_ready_condition() -> None:
    assert is_ready(READY) and not is_ready(WAITING) and not is_ready({})
