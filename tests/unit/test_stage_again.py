"""A stage job that waits runs again when the peering is woken while networking still runs in the same pass
(engine/stagerunner.py), through the runner's wake-ups (engine/wakeups.py)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any, cast

import pytest

from liqo_peering.engine.stagerunner import MAX_RUNS, side_by_side
from liqo_peering.engine.wakeups import Wakeups
from liqo_peering.health import TrackedPool
from liqo_peering.stages import StageResult

KEY = ("LiqoPeering", "default", "provider")
BOUND = 10.0  # a test's own deadline for an event that must come; never reached when the code is right


def plain(stage: str, fn: Callable[[], StageResult]) -> StageResult:
    return fn()


class Wakes:
    """The runner's wake-ups on an event loop of their own thread, as the watch hub calls them."""

    def __init__(self) -> None:
        self.wakeups = Wakeups()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self._open(), self.loop).result(BOUND)

    async def _open(self) -> None:
        self.wakeups.open(KEY)

    def wake(self, cause: str) -> None:
        self.wakeups(KEY, cause)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(BOUND)
        self.loop.close()


@pytest.fixture
def wakes() -> Iterator[Wakes]:
    found = Wakes()
    yield found
    found.close()


def run(wakes: Wakes, auth: Callable[[], StageResult], net: Callable[[], StageResult]) -> dict[str, StageResult]:
    pool = TrackedPool(2, "calls")
    try:
        listen = partial(wakes.wakeups.listening, KEY)
        return side_by_side(pool, plain, {"authentication": auth}, main=("networking", net), listen=listen)
    finally:
        pool.shutdown()


def test_a_waiting_job_woken_while_networking_runs_runs_again_in_the_same_pass(wakes: Wakes) -> None:
    """The nonce is filled while networking still writes: authentication signs it in this pass, and the
    pass still owes the next one that wake-up."""
    nonce: dict[str, str] = {}
    first_done, signed = threading.Event(), threading.Event()

    def auth() -> StageResult:
        if "nonce" not in nonce:
            first_done.set()
            return StageResult.waiting("authentication", "WaitingForNonce", "no nonce")
        signed.set()
        return StageResult.waiting("authentication", "WaitingForSignedNonce", "signing")

    def net() -> StageResult:
        assert first_done.wait(BOUND)
        nonce["nonce"] = "n"
        wakes.wake("Secret provider/liqo-nonce")
        assert signed.wait(BOUND)  # authentication ran again before networking ended
        return StageResult.waiting("networking", "WaitingForConfiguration", "configurations")

    results = run(wakes, auth, net)
    assert results["authentication"].reason == "WaitingForSignedNonce"
    assert wakes.wakeups.due(KEY)  # the next pass is still due


def test_without_a_wake_up_a_waiting_job_runs_once_and_the_pass_ends_with_networking(wakes: Wakes) -> None:
    runs: list[int] = []

    def auth() -> StageResult:
        runs.append(1)
        return StageResult.waiting("authentication", "WaitingForNonce", "no nonce")

    def net() -> StageResult:
        return StageResult.ready("networking", "connected")

    results = run(wakes, auth, net)
    assert runs == [1] and results["networking"].state == "ready"
    assert not wakes.wakeups._listeners  # nothing listens once the pass ended


def test_a_job_runs_at_most_max_runs_times_however_often_it_is_woken(wakes: Wakes) -> None:
    runs: list[int] = []
    capped = threading.Event()

    def auth() -> StageResult:
        runs.append(1)
        if len(runs) == MAX_RUNS:
            capped.set()
        return StageResult.waiting("authentication", "WaitingForNonce", "no nonce")

    def net() -> StageResult:
        while not capped.is_set():
            wakes.wake("Secret provider/liqo-nonce")
            capped.wait(0.01)
        for _ in range(5):
            wakes.wake("Secret provider/liqo-nonce")
        return StageResult.ready("networking", "connected")

    run(wakes, auth, net)
    assert len(runs) == MAX_RUNS


def test_a_job_that_is_ready_or_failed_is_not_run_again(wakes: Wakes) -> None:
    runs: list[str] = []
    ran = threading.Event()

    def auth() -> StageResult:
        runs.append("auth")
        ran.set()
        return StageResult.ready("authentication", "ok")

    def net() -> StageResult:
        assert ran.wait(BOUND)
        wakes.wake("Tenant provider/x")
        return StageResult.ready("networking", "connected")

    run(wakes, auth, net)
    assert runs == ["auth"]


def test_without_a_pool_the_job_runs_once_before_networking_and_never_waits(wakes: Wakes) -> None:
    """A job run on the pass's own thread (no pool of sub-calls) runs before networking: waiting for a
    wake-up there would hold the pass for nothing."""
    order: list[str] = []

    def auth() -> StageResult:
        order.append("auth")
        return StageResult.waiting("authentication", "WaitingForNonce", "no nonce")

    def net() -> StageResult:
        order.append("net")
        wakes.wake("Secret provider/liqo-nonce")
        return StageResult.ready("networking", "connected")

    listen = partial(wakes.wakeups.listening, KEY)
    side_by_side(None, plain, {"authentication": auth}, main=("networking", net), listen=listen)
    assert order == ["auth", "net"]


def test_a_listener_hears_only_its_objects_wake_ups_and_only_while_it_listens() -> None:
    wakeups = Wakeups()
    other = ("LiqoPeering", "default", "other")
    with wakeups.listening(KEY) as listener:
        wakeups.wake(other, "Secret x")
        assert not listener.event.is_set()
        wakeups.wake(KEY, "Secret provider/liqo-nonce")
        assert listener.event.is_set() and listener.causes == ["Secret provider/liqo-nonce"]
    wakeups.wake(KEY, "Tenant y")
    assert listener.causes == ["Secret provider/liqo-nonce"]
    assert cast(dict[Any, Any], wakeups._listeners) == {}
