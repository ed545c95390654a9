"""bench.passcost and its row: the full passes are made and counted one at a time, and the pass-cost row is
summarized, judged and rendered from its runs."""

from __future__ import annotations

import contextlib
import copy
import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from bench import page, passcost, report
from bench.common import LIQOPEERING
from bench.tracker import Kind, Tracker
from testenv import reliability

DOCS = reliability.REPO / "docs"
KEY = "scale/p1"
PASS_REQUESTS = Counter({"get": 3, "patch": 2})


class FakeConsumer:
    """The consumer and the operator on it: a spec write is answered, at once, by a pass that makes
    PASS_REQUESTS and writes the status of the new generation, which the tracker's watch sees."""

    def __init__(self, tracker: Tracker, kind: Kind) -> None:
        self.tracker, self.kind = tracker, kind
        self.generation = 4
        self.counted: Counter[str] = Counter({"watch": 7})
        self.timeouts: list[str] = []
        self.paused = False
        self.writes_while_paused = 0
        self.observe = True
        self._apply(observed=self.generation)

    def _apply(self, observed: int) -> None:
        obj = {
            "metadata": {"namespace": "scale", "name": "p1", "generation": self.generation},
            "status": {"observedGeneration": observed},
        }
        self.tracker._apply(self.kind, {"type": "MODIFIED", "object": obj})

    def patch(self, res: Any, name: str, body: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        assert (res, name, namespace) == (LIQOPEERING, "p1", "scale")
        self.writes_while_paused += self.paused
        self.timeouts.append(body["spec"]["timeout"])
        self.generation += 1
        self._apply(observed=self.generation - 1)  # the spec write, as the watch sees it
        if self.observe:
            self.counted += PASS_REQUESTS
            self._apply(observed=self.generation)
        return {"metadata": {"generation": self.generation}}

    def count(self) -> Counter[str]:
        return Counter(self.counted)

    @contextlib.contextmanager
    def pause(self) -> Iterator[None]:
        self.paused = True
        try:
            yield
        finally:
            self.paused = False


@pytest.fixture
def consumer(monkeypatch: pytest.MonkeyPatch) -> FakeConsumer:
    for name in ("GAP_SECONDS", "QUIET_SECONDS"):
        monkeypatch.setattr(passcost, name, 0.0)
    monkeypatch.setattr(passcost, "PASS_LIMIT", 0.5)
    kind = Kind("consumer", LIQOPEERING)
    tracker = Tracker({}, [kind])
    tracker.state[kind.key] = {}
    return FakeConsumer(tracker, kind)


def _measure(consumer: FakeConsumer, passes: int) -> list[passcost.FullPass]:
    cpu = iter(x * 0.01 for x in range(100))
    return passcost.measure(
        consumer,  # type: ignore[arg-type]  # the fake answers the one call measure makes
        consumer.tracker,
        "scale",
        "p1",
        passes,
        count=consumer.count,
        cpu=lambda: next(cpu),
        pause=consumer.pause,
    )


def test_each_full_pass_is_a_spec_change_counted_on_its_own(consumer: FakeConsumer) -> None:
    passes = _measure(consumer, 4)
    # Alternately: every write is a new generation, and an even number leaves the spec as it was.
    assert consumer.timeouts == ["31m", "30m", "31m", "30m"]
    assert consumer.writes_while_paused == 4
    assert [p.requests for p in passes] == [dict(PASS_REQUESTS)] * 4  # the informers' watches before: not the pass's
    assert all(p.seconds >= 0 and p.cpu_seconds == pytest.approx(0.01) for p in passes)
    assert passes[0].to_json().keys() == {"seconds", "requests", "cpu_seconds"}


def test_a_pass_that_writes_no_status_fails_the_run(consumer: FakeConsumer) -> None:
    consumer.observe = False
    with pytest.raises(TimeoutError, match="full pass 1"):
        _measure(consumer, 1)


def test_the_others_peer_with_providers_of_their_own() -> None:
    bodies = [passcost.other(i) for i in range(3)]
    assert len({b["metadata"]["name"] for b in bodies}) == 3
    assert len({passcost.remote_id(i) for i in range(500)}) == 500
    assert all(b["apiVersion"] == LIQOPEERING.api_version and "status" not in b for b in bodies)


def _run(others: int, seconds: list[float], requests: list[dict[str, int]]) -> dict[str, Any]:
    passes = [{"seconds": s, "requests": r, "cpu_seconds": 0.03} for s, r in zip(seconds, requests, strict=True)]
    return {"others": others, "full_passes": passes, "at_rest": {"rss_mb": 70.0 + others / 100}}


RUNS = [
    _run(0, [0.2, 0.3, 0.25], [{"get": 4, "patch": 2}, {"get": 4, "patch": 2}, {"get": 5, "patch": 2}]),
    _run(500, [0.3, 0.2, 0.4], [{"get": 4, "patch": 2}, {"get": 4, "patch": 2, "watch": 1}, {"get": 4, "patch": 2}]),
]


def test_the_rows_compare_each_run_with_the_one_without_others() -> None:
    none, full = report.summarize_pass_cost(RUNS)
    assert (none["others"], full["others"], full["passes"]) == (0, 500, 3)
    assert none["requests"] == {"get": 4, "patch": 2} and none["requests_total"] == 6
    assert full["requests"] == {"get": 4, "patch": 2, "watch": 0} and full["list_requests"] == 0
    assert full["requests_vs_none"] == 1.0 and full["time_vs_none"] == pytest.approx(0.3 / 0.25)
    assert full["pass_p50"] == pytest.approx(0.3) and full["cpu_mean"] == pytest.approx(0.03)
    (target,) = report.targets(None, None, pass_cost=[none, full])
    assert target["met"] is True and "500 other LiqoPeerings" in target["target"]


def test_more_requests_with_others_miss_the_target() -> None:
    runs = copy.deepcopy(RUNS)
    for p in runs[1]["full_passes"]:
        p["requests"]["list"] = 1
    (target,) = report.targets(None, None, pass_cost=report.summarize_pass_cost(runs))
    assert target["met"] is False and target["value"] == pytest.approx(7 / 6)


def test_the_page_shows_the_row_from_its_runs() -> None:
    results = json.loads((DOCS / "performance.json").read_text())
    results["pass_cost_runs"] = RUNS
    meta = dict(results["memory_meta"], args="--skip-real --skip-scale --fleet 0 --pass-cost 500")
    results["pass_cost_meta"] = meta
    text = page.render(results)
    assert "## Pass cost: one peering's full reconcile pass" in text
    assert "| 500 | 3 | get 4, patch 2 (6 in all) | 0 | 300 / 390 | 30 | 75 |" in text
    assert "| 0 | 3 | get 4, patch 2 (6 in all) | 0 | 250 / 295 | 30 | 70 |" in text
    assert "- **Pass cost**: a full reconcile pass of one Ready peering makes 6 requests" in text
    assert "requests per full pass with 500 other LiqoPeerings <= with none | 1.00x | yes |" in text
    assert "| pass cost | " in text and '`make bench ARGS="--skip-real --skip-scale --fleet 0 --pass-cost 500"`' in text
    # Without pass-cost runs, no row and no summary line: only the method and the notes name it.
    without = {k: v for k, v in json.loads((DOCS / "performance.json").read_text()).items() if "pass_cost" not in k}
    assert page.render(without).count("Pass cost") == 2
