"""Markers of the passes in flight, as small local files: an object whose pass killed the operator (an OOM kill,
a hard exit, a native crash) is known after the restart, and put aside instead of killing it again.

Before a pass (reconcile or teardown) of an object starts, its marker says "in flight" with the object's uid
and the operator deaths in a row during its passes so far; when the pass ends, however it ends, the marker goes
and the count with it. A marker found in flight at start is a death of the operator during that object's pass.
Two deaths in a row put the object aside: its passes wait for a backoff (1 min by default, doubling at each
further death up to 30 min), unless its
spec or annotations change. A put-aside object's marker stays (not in flight), so that a restart for another
reason (a rollout) keeps it aside, and records that its status says so: that write is done once per death,
so that a report that itself kills the operator is not tried at each start. One file write per pass, no
fsync: the directory (the chart's emptyDir) outlives the container, not the node, and a marker lost with the
node only forgets a death.

Without a directory (process mode without --pass-markers-dir) nothing is recorded and nothing is put aside.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import structlog

log = structlog.get_logger("liqo_peering.passmarkers")

Key = tuple[str, str, str]  # kind, namespace, name
RECONCILE = "reconcile"
TEARDOWN = "teardown"
FORCED_TEARDOWN = "forced teardown"  # a teardown with the force-delete annotation: this cluster only
PHASES = (RECONCILE, TEARDOWN, FORCED_TEARDOWN)
PUT_ASIDE_AFTER = 2  # deaths in a row; one is an ordinary kill (a rollout, a node drain) and resumes at once
FIRST_BACKOFF = 60.0
MAX_BACKOFF = 1800.0


@dataclass(frozen=True)
class Deaths:
    """The operator died ``count`` times in a row during passes of the object ``uid``; last in a ``phase``.
    ``reported``: the count its status was last written for (put aside)."""

    uid: str
    count: int
    phase: str
    reported: int = 0


def backoff(count: int, first: float = FIRST_BACKOFF) -> float:
    """How long an object put aside after ``count`` deaths in a row waits before its next pass: ``first``, then
    doubling up to MAX_BACKOFF (or ``first`` if longer)."""
    return min(first * 2.0 ** max(count - PUT_ASIDE_AFTER, 0), max(MAX_BACKOFF, first))


def aside_for(deaths: Deaths | None, uid: str, phase: str, elapsed: float, first: float = FIRST_BACKOFF) -> float:
    """How much longer a pass of ``phase`` of object ``uid`` is put aside (0: it runs), ``elapsed`` seconds
    after the deaths were counted. Another object of the same name (another uid) owes nothing. A forced
    teardown is the way out of a put-aside object, so it runs, unless forced teardowns are what killed it."""
    if deaths is None or deaths.count < PUT_ASIDE_AFTER or (deaths.uid and uid and deaths.uid != uid):
        return 0.0
    if phase == FORCED_TEARDOWN and deaths.phase != FORCED_TEARDOWN:
        return 0.0
    return max(backoff(deaths.count, first) - elapsed, 0.0)


def file_name(key: Key) -> str:
    # A namespace is a DNS label and an object's name a DNS subdomain: neither holds "_".
    return "_".join(key)


def parse(text: str) -> tuple[Deaths, bool] | None:
    """A marker's deaths and whether it is in flight; None: not a marker (a partial write)."""
    try:
        data = json.loads(text)
        deaths = Deaths(str(data["uid"]), int(data["deaths"]), str(data["phase"]), int(data.get("reported", 0)))
        return deaths, bool(data["inFlight"])
    except (ValueError, KeyError, TypeError):
        return None


def dump(deaths: Deaths, in_flight: bool) -> str:
    return json.dumps(
        {
            "uid": deaths.uid,
            "deaths": deaths.count,
            "phase": deaths.phase,
            "reported": deaths.reported,
            "inFlight": in_flight,
        }
    )


def recovered(found: Deaths, in_flight: bool) -> Deaths:
    """What a marker found at start says: in flight, the operator died in that pass."""
    return replace(found, count=found.count + 1) if in_flight else found


class PassMarkers:
    """The markers in ``directory`` (None: off). ``on_aside(kind, n)``: ``n`` objects of ``kind`` are put aside;
    ``first_backoff``: how long at first."""

    def __init__(
        self,
        directory: Path | None,
        clock: Callable[[], float] = time.monotonic,
        on_aside: Callable[[str, int], None] = lambda kind, n: None,
        first_backoff: float = FIRST_BACKOFF,
    ) -> None:
        self.directory = directory
        self.first_backoff = first_backoff
        self.clock = clock
        self.on_aside = on_aside
        self._guard = threading.Lock()
        self._deaths: dict[Key, Deaths] = {}
        self._counted: dict[Key, float] = {}  # when the deaths were counted: the backoff runs from then
        self._in_flight: set[Key] = set()
        self._aside: set[Key] = set()

    def recover(self) -> dict[Key, Deaths]:
        """At start: the deaths the markers left, each marker in flight one more; rewritten as not in flight."""
        if self.directory is None:
            return {}
        self.directory.mkdir(parents=True, exist_ok=True)
        now = self.clock()
        for path in sorted(self.directory.iterdir()):
            parts = tuple(path.name.split("_"))
            found = parse(path.read_text(errors="replace")) if len(parts) == 3 and path.is_file() else None
            if found is None:
                continue
            key: Key = (parts[0], parts[1], parts[2])
            deaths = recovered(*found)
            self._deaths[key] = deaths
            self._counted[key] = now
            path.write_text(dump(deaths, in_flight=False))
            if found[1]:
                log.warning(
                    "the operator died during a pass of this object",
                    object=f"{key[0]} {key[1]}/{key[2]}",
                    deaths=deaths.count,
                    phase=deaths.phase,
                )
        return dict(self._deaths)

    def aside(self, key: Key, uid: str, phase: str) -> tuple[Deaths, float] | None:
        """The deaths that put a pass of ``phase`` aside, and for how much longer; None: it may run."""
        with self._guard:
            deaths = self._deaths.get(key)
            left = aside_for(deaths, uid, phase, self.clock() - self._counted.get(key, 0.0), self.first_backoff)
        return (deaths, left) if deaths is not None and left > 0 else None

    def backoff(self, count: int) -> float:
        return backoff(count, self.first_backoff)

    def mark_aside(self, key: Key) -> None:
        """The object's loop found it put aside."""
        with self._guard:
            self._aside.add(key)
        self._count(key[0])

    def to_report(self, key: Key) -> bool:
        """Whether the object's status is to say now that it is put aside: once per death, recorded first."""
        with self._guard:
            deaths = self._deaths.get(key)
            if deaths is None or deaths.reported >= deaths.count:
                return False
            deaths = self._deaths[key] = replace(deaths, reported=deaths.count)
        if self.directory is not None:
            (self.directory / file_name(key)).write_text(dump(deaths, in_flight=False))
        return True

    @contextlib.contextmanager
    def in_flight(self, key: Key, uid: str, phase: str) -> Iterator[None]:
        """A pass of the object: its marker while it runs. However it ends, it ended: the count goes."""
        if self.directory is None:
            yield
            return
        with self._guard:
            known = self._deaths.get(key)
            count = known.count if known is not None and (known.uid == uid or not uid or not known.uid) else 0
            self._in_flight.add(key)
            self._aside.discard(key)
        path = self.directory / file_name(key)
        try:
            path.write_text(dump(Deaths(uid, count, phase), in_flight=True))
        except OSError as exc:  # a marker is a safeguard: without it the pass still runs, unguarded
            log.warning("cannot write the pass marker", path=str(path), error=str(exc))
        try:
            yield
        finally:
            with self._guard:
                self._in_flight.discard(key)
                self._deaths.pop(key, None)
            path.unlink(missing_ok=True)
            self._count(key[0])

    def reset(self, key: Key) -> None:
        """Its spec or annotations changed: a new situation the deaths say nothing about. A pass in flight
        keeps its marker (it was not put aside, and its end drops the count anyway)."""
        with self._guard:
            if key in self._in_flight or key not in self._deaths:
                return
            self._deaths.pop(key, None)
            self._aside.discard(key)
        if self.directory is not None:
            (self.directory / file_name(key)).unlink(missing_ok=True)
        self._count(key[0])

    def forget(self, key: Key) -> None:
        """The object is gone."""
        self.reset(key)

    def _count(self, kind: str) -> None:
        with self._guard:
            n = sum(1 for k in self._aside if k[0] == kind)
        self.on_aside(kind, n)
