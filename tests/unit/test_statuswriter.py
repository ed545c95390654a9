"""The status writer leaves a change that moves no condition to the peering's next pass when that pass is due
already (woken while this one ran), at most MAX_DEFERRED times in a row; a transition is always written."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

import pytest

from liqo_peering.clients.cluster import ClusterClient
from liqo_peering.clients.events import EventRecorder
from liqo_peering.engine import statuswriter
from liqo_peering.engine.statuswriter import MAX_DEFERRED, StatusWriter
from liqo_peering.liqo import resources as r
from liqo_peering.metrics import Metrics
from liqo_peering.status import compute as status_compute
from unit.fakes import EventsClient, FakeClusterClient

BODY = {"metadata": {"namespace": "ns", "name": "p", "generation": 1}}
OBS = status_compute.Observation(generation=1, now=datetime(2026, 1, 1, tzinfo=UTC), timeout_seconds=300)


def status(ready: str, message: str) -> dict[str, Any]:
    return {
        "observedGeneration": 1,
        "conditions": [{"type": "Ready", "status": ready, "reason": "Progressing", "message": message}],
    }


def writer(due: list[bool]) -> tuple[StatusWriter, FakeClusterClient]:
    local = FakeClusterClient("consumer")
    local.add(r.LIQOPEERING, {**BODY, "status": status("False", "start")})
    events = EventRecorder(cast(ClusterClient, EventsClient()))
    return StatusWriter(local, events, Metrics(), lambda: OBS.now, lambda ns, name: due[0]), local


def computing(monkeypatch: pytest.MonkeyPatch, new: dict[str, Any], events: list[Any] | None = None) -> None:
    monkeypatch.setattr(statuswriter.status_compute, "compute", lambda old, obs: (new, events or []))


def test_a_message_only_change_waits_for_the_pass_that_is_due(monkeypatch: pytest.MonkeyPatch) -> None:
    due = [True]
    write, local = writer(due)
    old = status("False", "start")
    for n in range(MAX_DEFERRED):
        computing(monkeypatch, status("False", f"step {n}"))
        assert write.write(BODY, old, OBS)["conditions"][0]["message"] == f"step {n}"
        assert local.writes == []
    # Not more than MAX_DEFERRED in a row: this one is written, and the count starts again.
    computing(monkeypatch, status("False", "step last"))
    write.write(BODY, old, OBS)
    assert len(local.writes) == 1
    computing(monkeypatch, status("False", "again"))
    write.write(BODY, old, OBS)
    assert len(local.writes) == 1


def test_no_pass_due_or_a_transition_is_written_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    due = [False]
    write, local = writer(due)
    old = status("False", "start")
    computing(monkeypatch, status("False", "step"))
    write.write(BODY, old, OBS)
    assert len(local.writes) == 1
    due[0] = True
    computing(monkeypatch, status("True", "ready"))  # a condition's status moved
    write.write(BODY, old, OBS)
    assert len(local.writes) == 2
    event = status_compute.EventSpec("Normal", "Ready", "ready")
    computing(monkeypatch, status("False", "other message"), [event])  # an Event to post
    write.write(BODY, old, OBS)
    assert len(local.writes) == 3
    computing(monkeypatch, {**status("False", "start"), "observedGeneration": 2})  # a new generation seen
    write.write(BODY, old, OBS)
    assert len(local.writes) == 4
