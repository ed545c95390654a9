"""Pass markers: the decision (pure), the store on a real directory across simulated restarts, and the runner
putting aside an object whose passes killed the operator twice in a row while the others go on."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest

from liqo_peering.engine.passmarkers import (
    FORCED_TEARDOWN,
    MAX_BACKOFF,
    RECONCILE,
    TEARDOWN,
    Deaths,
    PassMarkers,
    aside_for,
    backoff,
    dump,
    file_name,
    parse,
    recovered,
)
from liqo_peering.engine.runner import ObjectKey, Runner
from liqo_peering.engine.unpeering import Teardown
from liqo_peering.engine.wakeups import Wakeups
from liqo_peering.engine.watches import Route, WatchHub
from liqo_peering.errors import PassCrashed, PeeringError
from liqo_peering.liqo import naming
from unit import test_boundary as boundary
from unit.fakes import Hub, Stopped

KEY = ObjectKey("LiqoPeering", "ns", "poison")
OTHER = ObjectKey("LiqoPeering", "ns", "fine")
UID = "uid-1"


# -- the decision ----------------------------------------------------------------------------------------
def test_backoff_starts_at_a_minute_and_doubles_up_to_half_an_hour() -> None:
    assert [backoff(n) for n in (2, 3, 4, 5, 6, 7, 20)] == [60, 120, 240, 480, 960, 1800, MAX_BACKOFF]
    assert [backoff(n, first=3600) for n in (2, 3)] == [3600, 3600]  # --put-aside-backoff longer than the cap


@pytest.mark.parametrize(
    ("deaths", "uid", "phase", "elapsed", "left"),
    [
        (None, UID, RECONCILE, 0.0, 0.0),  # never died
        (Deaths(UID, 1, RECONCILE), UID, RECONCILE, 0.0, 0.0),  # one kill: a rollout, resumes at once
        (Deaths(UID, 2, RECONCILE), UID, RECONCILE, 0.0, 60.0),  # twice in a row: put aside
        (Deaths(UID, 2, RECONCILE), UID, RECONCILE, 45.0, 15.0),
        (Deaths(UID, 2, RECONCILE), UID, RECONCILE, 61.0, 0.0),  # backoff over: one more try
        (Deaths(UID, 3, RECONCILE), UID, RECONCILE, 61.0, 59.0),
        (Deaths(UID, 2, RECONCILE), "uid-2", RECONCILE, 0.0, 0.0),  # another object of that name
        (Deaths(UID, 2, RECONCILE), UID, TEARDOWN, 0.0, 60.0),  # a teardown reads the same input
        (Deaths(UID, 2, TEARDOWN), UID, FORCED_TEARDOWN, 0.0, 0.0),  # force-delete: the way out
        (Deaths(UID, 2, FORCED_TEARDOWN), UID, FORCED_TEARDOWN, 0.0, 60.0),  # ... unless it is what kills
    ],
)
def test_what_is_put_aside(deaths: Deaths | None, uid: str, phase: str, elapsed: float, left: float) -> None:
    assert aside_for(deaths, uid, phase, elapsed) == left


def test_a_marker_in_flight_at_start_is_one_more_death() -> None:
    assert recovered(Deaths(UID, 0, RECONCILE), in_flight=True) == Deaths(UID, 1, RECONCILE)
    assert recovered(Deaths(UID, 2, RECONCILE), in_flight=False) == Deaths(UID, 2, RECONCILE)  # a rollout


def test_a_marker_round_trips_and_a_partial_write_is_no_marker() -> None:
    assert parse(dump(Deaths(UID, 3, TEARDOWN), in_flight=True)) == (Deaths(UID, 3, TEARDOWN), True)
    assert parse('{"uid": "x", "dea') is None
    assert parse("[]") is None


# -- the store, restart after restart ----------------------------------------------------------------
class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def started(directory: Path | None, clock: Clock | None = None, aside: dict[str, int] | None = None) -> PassMarkers:
    """The store as the operator makes it at start."""
    counts = aside if aside is not None else {}
    markers = PassMarkers(directory, clock=clock or Clock(), on_aside=counts.__setitem__)
    markers.recover()
    return markers


def die_in_pass(markers: PassMarkers, key: ObjectKey = KEY, phase: str = RECONCILE) -> None:
    """A pass the process dies in: its marker is written, and its end never comes (kept from the collector,
    which would close it)."""
    passes = markers.in_flight(key.marker, UID, phase)
    passes.__enter__()
    _NEVER_ENDED.append(passes)


_NEVER_ENDED: list[Any] = []


def test_a_pass_in_flight_has_a_marker_that_goes_however_the_pass_ends(tmp_path: Path) -> None:
    markers = started(tmp_path)
    with markers.in_flight(KEY.marker, UID, RECONCILE):
        found = parse((tmp_path / file_name(KEY.marker)).read_text())
        assert found == (Deaths(UID, 0, RECONCILE), True)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(RuntimeError), markers.in_flight(KEY.marker, UID, RECONCILE):
        raise RuntimeError("a failed pass is an ended pass")
    assert list(tmp_path.iterdir()) == []


def test_two_deaths_in_a_row_put_the_object_aside_and_a_completed_pass_forgives(tmp_path: Path) -> None:
    die_in_pass(started(tmp_path))
    once = started(tmp_path)  # the restart after the first death: the pass runs again
    assert once.aside(KEY.marker, UID, RECONCILE) is None
    die_in_pass(once)
    clock, counts = Clock(), cast(dict[str, int], {})
    twice = started(tmp_path, clock, counts)
    assert twice.aside(KEY.marker, UID, RECONCILE) == (Deaths(UID, 2, RECONCILE), 60.0)
    assert twice.aside(OTHER.marker, "other", RECONCILE) is None  # the others are not concerned
    twice.mark_aside(KEY.marker)
    assert counts == {"LiqoPeering": 1}
    rollout = started(tmp_path, clock)  # a restart without a death keeps it aside, without another death
    assert rollout.aside(KEY.marker, UID, RECONCILE) == (Deaths(UID, 2, RECONCILE), 60.0)
    clock.now += 60.0
    assert rollout.aside(KEY.marker, UID, RECONCILE) is None  # the backoff is over: one more try
    with rollout.in_flight(KEY.marker, UID, RECONCILE):
        assert parse((tmp_path / file_name(KEY.marker)).read_text()) == (Deaths(UID, 2, RECONCILE), True)
    assert list(tmp_path.iterdir()) == []  # it completed: the count is gone
    assert started(tmp_path).aside(KEY.marker, UID, RECONCILE) is None


def test_the_status_of_a_put_aside_object_is_written_once_per_death(tmp_path: Path) -> None:
    """Recorded before it is written: a report that kills the operator too is not tried at each start."""
    die_in_pass(started(tmp_path))
    die_in_pass(started(tmp_path))
    markers = started(tmp_path)
    assert markers.to_report(KEY.marker) and not markers.to_report(KEY.marker)
    assert not started(tmp_path).to_report(KEY.marker)  # restarted, by a rollout or by the report
    clock = Clock()
    later = started(tmp_path, clock)
    clock.now += 60.0
    die_in_pass(later)  # the backoff is over, the pass is tried, and kills again
    assert started(tmp_path).to_report(KEY.marker)


def test_a_spec_change_resets_the_count(tmp_path: Path) -> None:
    die_in_pass(started(tmp_path))
    die_in_pass(started(tmp_path))
    counts: dict[str, int] = {}
    markers = started(tmp_path, aside=counts)
    markers.mark_aside(KEY.marker)
    markers.reset(KEY.marker)
    assert markers.aside(KEY.marker, UID, RECONCILE) is None
    assert counts == {"LiqoPeering": 0}
    assert list(tmp_path.iterdir()) == []


def test_without_a_directory_nothing_is_written_nor_put_aside(tmp_path: Path) -> None:
    markers = started(None)
    with markers.in_flight(KEY.marker, UID, RECONCILE):
        pass
    assert markers.aside(KEY.marker, UID, RECONCILE) is None


def test_a_marker_that_cannot_be_written_does_not_stop_the_pass(tmp_path: Path) -> None:
    markers = started(tmp_path / "markers")
    (tmp_path / "markers").rmdir()  # gone under the operator
    ran = []
    with markers.in_flight(KEY.marker, UID, RECONCILE):
        ran.append(True)
    assert ran == [True]


def test_files_that_are_not_markers_are_left_alone(tmp_path: Path) -> None:
    (tmp_path / "lost+found").mkdir()
    (tmp_path / "LiqoPeering_ns_half").write_text('{"uid":')
    assert started(tmp_path).recover() == {}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["LiqoPeering_ns_half", "lost+found"]


# -- the runner --------------------------------------------------------------------------------------
@dataclass
class Done:
    gone: bool = False
    transient_error: bool = False


class Kind:
    """A kind whose passes and reports are recorded."""

    kind = "LiqoPeering"
    debounce = 0.0

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.reported: list[PeeringError] = []

    def reconcile(self, key: ObjectKey, woken_by: frozenset[str]) -> Done:
        self.calls.append(f"reconcile {key.name}")
        return Done()

    def report(self, key: ObjectKey, error: PeeringError) -> Done:
        self.reported.append(error)
        return Done()

    def routes(self, key: ObjectKey, outcome: Any) -> list[Route]:
        return []

    def delay(self, outcome: Any, failures: int) -> float:
        return 3600.0

    def restart_backoff(self, woken_by: frozenset[str]) -> bool:
        return False

    def teardown(self, key: ObjectKey, body: dict[str, Any]) -> Teardown:
        self.calls.append(f"teardown {body['metadata']['name']}")
        return Teardown()

    def report_teardown(self, key: ObjectKey, body: dict[str, Any], error: PeeringError) -> Teardown:
        self.reported.append(error)
        return Teardown(failure=error.message)

    def forget(self, key: ObjectKey) -> None:
        pass


def put_aside_runner(tmp_path: Path) -> tuple[Runner, Kind]:
    die_in_pass(started(tmp_path))
    die_in_pass(started(tmp_path))
    kind = Kind()
    return Runner([kind], cast(WatchHub, Hub()), Wakeups(), started(tmp_path)), kind


def body(name: str, force: bool = False) -> dict[str, Any]:
    annotations = {naming.FORCE_DELETE: "true"} if force else {}
    return {"metadata": {"namespace": "ns", "name": name, "uid": UID, "annotations": annotations}}


def test_a_put_aside_object_gets_its_status_written_and_no_pass_until_its_spec_changes(tmp_path: Path) -> None:
    run, kind = put_aside_runner(tmp_path)

    async def until(what: Any) -> None:
        for _ in range(1000):
            if what():
                return
            await asyncio.sleep(0.01)
        raise AssertionError(kind.calls)

    async def scenario() -> None:
        stopped = Stopped()
        loops = [asyncio.create_task(run.run(k, stopped, UID)) for k in (KEY, OTHER)]
        await until(lambda: kind.reported and "reconcile fine" in kind.calls)
        assert kind.calls == ["reconcile fine"]
        run.poke(KEY)  # its spec or an annotation changed
        await until(lambda: "reconcile poison" in kind.calls)
        stopped.event.set()
        for k in (KEY, OTHER):
            run.wakeups.wake(k, "spec")
        await asyncio.wait_for(asyncio.gather(*loops), 10)

    asyncio.run(scenario())
    [error] = kind.reported
    assert isinstance(error, PassCrashed) and (error.deaths, error.phase, error.backoff) == (2, RECONCILE, 60.0)
    assert not error.transient


def test_a_put_aside_object_is_deleted_by_a_forced_teardown_only(tmp_path: Path) -> None:
    run, kind = put_aside_runner(tmp_path)
    assert run.teardown(OTHER, body("fine")) == Teardown()
    assert run.teardown(KEY, body("poison")).failure is not None  # reported by the kind, as a failed teardown
    [error] = kind.reported
    assert isinstance(error, PassCrashed) and error.phase == RECONCILE
    assert kind.calls == ["teardown fine"]
    assert run.teardown(KEY, body("poison", force=True)) == Teardown()
    assert kind.calls == ["teardown fine", "teardown poison"]
    assert list(tmp_path.iterdir()) == []  # forgotten with the object


# -- a real death ------------------------------------------------------------------------------------
DIE_IN_PASS = """
import os, signal, sys
from pathlib import Path
from liqo_peering.engine.passmarkers import PassMarkers, RECONCILE
markers = PassMarkers(Path(sys.argv[1]))
markers.recover()
print(markers.aside(("LiqoPeering", "ns", "poison"), "uid-1", RECONCILE) is not None, flush=True)
with markers.in_flight(("LiqoPeering", "ns", "poison"), "uid-1", RECONCILE):
    os.kill(os.getpid(), signal.SIGKILL)  # as the OOM killer does: no finally runs
"""


def test_a_process_killed_in_a_pass_twice_finds_the_object_put_aside_at_its_next_start(tmp_path: Path) -> None:
    def start() -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", DIE_IN_PASS, str(tmp_path)], capture_output=True, text=True)

    first, second = start(), start()
    # Neither found it put aside (the second found one death: a kill as in a rollout, and resumed).
    for run in (first, second):
        assert (run.returncode, run.stdout.splitlines()[-1]) == (-signal.SIGKILL, "False"), run.stderr
    markers = started(tmp_path)
    assert markers.aside(KEY.marker, UID, RECONCILE) == (Deaths(UID, 2, RECONCILE), 60.0)


def test_the_put_aside_status_is_written_by_the_status_writer_without_a_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the real LiqoPeering status writer: Ready False PassCrashed, a Warning Event, the gauge at 1; and no
    discovery (no pass) meanwhile."""
    svc, local, events = boundary.service(monkeypatch)
    discoveries = boundary.count_discoveries(monkeypatch, svc)
    key = boundary.KEY
    for _ in range(2):
        die_in_pass(started(tmp_path), key)
    markers = PassMarkers(tmp_path, on_aside=svc.metrics.set_put_aside)
    markers.recover()
    run = boundary.peering_runner(svc, events, markers)
    [deaths, _] = markers.aside(key.marker, UID, RECONCILE) or (None, 0)
    assert deaths is not None and not run.put_aside(key, deaths)
    ready = boundary.conditions(local)["Ready"]
    assert (ready["status"], ready["reason"]) == ("False", "PassCrashed") and "2 times in a row" in ready["message"]
    assert ("Warning", "PassCrashed") in [(t, reason) for t, reason, _ in events.sent]
    gauge = svc.metrics.registry.get_sample_value("liqo_peering_put_aside_objects", {"kind": "LiqoPeering"})
    assert gauge == 1.0 and discoveries == []
