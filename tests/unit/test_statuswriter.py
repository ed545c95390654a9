"""The status writer leaves a change to the peering's next pass when that pass is due already (woken while this
one ran), at most MAX_DEFERRED times in a row; what a user or a GitOps tool acts on is always written."""

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


def status(ready: str, message: str, reason: str = "Progressing", stage: str = "False") -> dict[str, Any]:
    return {
        "observedGeneration": 1,
        "peerStatus": "ready" if ready == "True" else "establishing",
        "conditions": [
            {"type": "Ready", "status": ready, "reason": reason, "message": message},
            {"type": "NetworkReady", "status": stage, "reason": reason, "message": message},
        ],
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


def test_a_stage_that_moved_waits_for_the_pass_that_is_due_its_event_with_it(monkeypatch: pytest.MonkeyPatch) -> None:
    due = [True]
    write, local = writer(due)
    old = status("False", "start")
    event = status_compute.EventSpec("Normal", "NetworkReady", "the tunnel is up")
    computing(monkeypatch, status("False", "next", reason="WaitingForVirtualNode", stage="True"), [event])
    write.write(BODY, old, OBS)
    assert local.writes == [] and cast(EventsClient, write.events.client).events == []


def test_no_pass_due_or_what_users_act_on_is_written_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    due = [False]
    write, local = writer(due)
    old = status("False", "start")
    computing(monkeypatch, status("False", "step"))
    write.write(BODY, old, OBS)
    assert len(local.writes) == 1
    due[0] = True
    computing(monkeypatch, status("True", "ready"))  # Ready, and peerStatus with it
    write.write(BODY, old, OBS)
    assert len(local.writes) == 2
    warning = status_compute.EventSpec("Warning", "GatewayUnreachable", "open udp://198.18.0.20:30392")
    computing(monkeypatch, status("False", "other message"), [warning])  # a Warning to post
    write.write(BODY, old, OBS)
    assert len(local.writes) == 3
    computing(monkeypatch, {**status("False", "start"), "observedGeneration": 2})  # a new generation seen
    write.write(BODY, old, OBS)
    assert len(local.writes) == 4
    failing = {**status("False", "start"), "peerStatus": "error"}
    computing(monkeypatch, {**failing, "conditions": status("False", "another error's message")["conditions"]})
    write.write(BODY, failing, OBS)  # an error's message: at once, though its reason stays
    assert len(local.writes) == 5
    stalled = status("False", "start")
    stalled["conditions"].append({"type": "Stalled", "status": "True", "reason": "Timeout", "message": "late"})
    computing(monkeypatch, stalled)  # Stalled
    write.write(BODY, old, OBS)
    assert len(local.writes) == 6


def test_progress_within_the_interval_after_a_write_is_held_and_its_wake_up_asked_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    local = FakeClusterClient("consumer")
    local.add(r.LIQOPEERING, {**BODY, "status": status("False", "start")})
    events = EventRecorder(cast(ClusterClient, EventsClient()))
    clock, asked = [100.0], []
    write = StatusWriter(
        local,
        events,
        Metrics(),
        lambda: OBS.now,
        hold=lambda ns, name, delay: asked.append((ns, name, round(delay, 3))),
        clock=lambda: clock[0],
    )
    old = status("False", "start")
    computing(monkeypatch, status("False", "first"))
    write.write(BODY, old, OBS)
    assert len(local.writes) == 1 and asked == []  # nothing written lately: at once
    clock[0] += 0.1
    computing(monkeypatch, status("False", "second"))
    write.write(BODY, old, OBS)
    clock[0] += 0.1
    computing(monkeypatch, status("False", "third"))
    write.write(BODY, old, OBS)
    assert len(local.writes) == 1 and asked == [("ns", "p", round(statuswriter.INTERVAL - 0.1, 3))]
    computing(monkeypatch, status("True", "ready"))  # what users act on: at once
    write.write(BODY, old, OBS)
    assert len(local.writes) == 2
    clock[0] += 0.1
    computing(monkeypatch, status("False", "fourth"))
    write.write(BODY, old, OBS)  # held again, a new wake-up asked
    assert len(local.writes) == 2 and len(asked) == 2
    clock[0] += statuswriter.INTERVAL  # the pass that wake-up starts writes it
    write.write(BODY, old, OBS)
    assert len(local.writes) == 3
