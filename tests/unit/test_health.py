"""The probes' answers: /livez fails on a stalled event loop or worker pool, /readyz while kopf has not
started or an informer has not synced; both over HTTP as the kubelet asks them."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from liqo_peering.engine.stagerunner import side_by_side
from liqo_peering.health import Health, TrackedPool
from liqo_peering.stages import StageResult


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def pool(clock: Clock) -> Iterator[TrackedPool]:
    pool = TrackedPool(2, "pass", clock=clock)
    yield pool
    pool.shutdown(wait=True, cancel_futures=True)


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_not_live_before_the_event_loop_ticks_then_live(clock: Clock) -> None:
    health = Health(stall_seconds=60, clock=clock)
    assert health.liveness() == ["the event loop has not started"]
    health.tick()
    assert health.liveness() == []


def test_a_stalled_event_loop_fails_liveness(clock: Clock) -> None:
    health = Health(stall_seconds=60, clock=clock)
    health.tick()
    clock.now += 61
    assert health.liveness() == ["the event loop has not run for 61 s"]
    health.tick()
    assert health.liveness() == []


def test_a_stalled_worker_pool_fails_liveness_until_it_finishes_work(clock: Clock, pool: TrackedPool) -> None:
    health = Health(stall_seconds=60, clock=clock)
    health.pools.append(pool)
    release = threading.Event()
    stuck = [pool.submit(release.wait) for _ in range(2)]  # every worker blocked
    waiting = pool.submit(lambda: None)  # queued behind them
    clock.now += 30
    health.tick()
    assert health.liveness() == []  # busy, not yet stalled
    clock.now += 31
    health.tick()
    assert health.liveness() == ["thread pool pass has finished no work for 61 s"]
    release.set()
    for future in [*stuck, waiting]:
        future.result(timeout=10)
    assert health.liveness() == []


def test_an_idle_pool_is_never_stalled(clock: Clock, pool: TrackedPool) -> None:
    pool.submit(lambda: None).result(timeout=10)
    clock.now += 10_000
    assert pool.stalled_for() == 0.0


def test_not_ready_until_kopf_started_and_every_informer_synced(clock: Clock) -> None:
    health = Health(clock=clock)
    unsynced = ["informer secrets in ns has not synced"]
    health.readiness.append(lambda: list(unsynced))
    assert health.readiness_problems() == ["kopf has not started"]
    health.started.set()
    assert health.readiness_problems() == unsynced
    unsynced.clear()
    assert health.readiness_problems() == []


def test_probe_endpoints_answer_over_http(clock: Clock) -> None:
    health = Health(stall_seconds=60, clock=clock)
    server = health.serve(0, host="127.0.0.1")
    port = server.server_address[1]
    try:
        assert get(port, "/livez") == (503, "the event loop has not started\n")
        assert get(port, "/readyz") == (503, "kopf has not started\n")
        health.tick()
        health.started.set()
        assert get(port, "/livez") == (200, "ok\n")
        assert get(port, "/healthz") == (200, "ok\n")
        assert get(port, "/readyz") == (200, "ok\n")
        assert get(port, "/nothing")[0] == 404
    finally:
        server.shutdown()
        server.server_close()


def test_a_stage_stuck_in_the_pool_of_sub_calls_fails_liveness(clock: Clock) -> None:
    """The stages a pass runs side by side (and its reads) run in a tracked pool of their own: one stuck there
    is a stall liveness reports, as a stuck pass is."""
    health = Health(stall_seconds=60, clock=clock)
    calls = TrackedPool(1, "calls", clock=clock)
    health.pools.append(calls)
    started, release = threading.Event(), threading.Event()

    def authentication() -> StageResult:
        started.set()
        release.wait(10)
        return StageResult.ready("authentication", "ok")

    jobs = {"authentication": authentication}
    a_pass = threading.Thread(target=side_by_side, args=(calls, lambda stage, fn: fn(), jobs))
    a_pass.start()
    try:
        assert started.wait(10)
        clock.now += 61
        health.tick()
        assert health.liveness() == ["thread pool calls has finished no work for 61 s"]
    finally:
        release.set()
        a_pass.join(10)
        calls.shutdown(wait=True)
    assert health.liveness() == []
