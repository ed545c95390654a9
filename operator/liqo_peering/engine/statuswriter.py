"""The one writer of a LiqoPeering's status: what a reconcile pass observed, and why an unpeering does not
finish; the Events of its transitions and the metrics follow each write.

While Liqo builds a peering its objects change faster than a status is worth writing, and each write is a
request on the consumer. So a stage's progress waits, its Normal Event with it (the pass that writes computes
it again from the status written last): for the next pass when one is due already (woken while this one
ran; at most MAX_DEFERRED in a row), else until INTERVAL seconds after the last write, when the runner
wakes the peering to write it (``hold``). What a user or a GitOps tool acts on never waits: the observed
generation, peerStatus, the Ready and Stalled conditions' status, a Warning, and anything while the peering
is not establishing or a pass reports an error (its message says what to do)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

import structlog

from liqo_peering.clients.cluster import ClusterClient
from liqo_peering.clients.events import EventRecorder
from liqo_peering.liqo import resources as r
from liqo_peering.metrics import Metrics
from liqo_peering.redact import redact
from liqo_peering.status import compute as status_compute

log = structlog.get_logger("liqo_peering")

MAX_DEFERRED = 3
INTERVAL = 0.5  # seconds between a peering's status writes while only its stages' progress changes
KSTATUS = ("Ready", "Stalled")
STATUS_DUE = "status"  # what wakes a peering whose held status is due (``hold``)


class StatusWriter:
    def __init__(
        self,
        local: ClusterClient,
        events: EventRecorder,
        metrics: Metrics,
        now: Callable[[], datetime],
        superseded: Callable[[str, str], bool] | None = None,
        hold: Callable[[str, str, float], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``superseded(namespace, name)``: whether another pass of the peering is due already;
        ``hold(namespace, name, seconds)``: have a pass of the peering wake in that many seconds (None: no
        change waits for time)."""
        self.local = local
        self.events = events
        self.metrics = metrics
        self.now = now
        self.superseded = superseded
        self.hold = hold
        self.clock = clock
        self._deferred: dict[tuple[str, str], int] = {}  # changes left to the next pass, in a row
        self._written: dict[tuple[str, str], float] = {}  # the last write (clock)
        self._asked: set[tuple[str, str]] = set()  # a held change's wake-up is asked for
        self._lock = threading.Lock()

    def write(self, body: dict[str, Any], old: dict[str, Any], obs: status_compute.Observation) -> dict[str, Any]:
        """Compute, write only what changed, emit the transitions' Events; the new status."""
        new, events = status_compute.compute(old, obs)
        meta = body["metadata"]
        key = (meta["namespace"], meta["name"])
        changed = any(old.get(k) != v for k, v in new.items())
        may_wait = (
            new.get("peerStatus") == "establishing"
            and obs.error_reason is None
            and _acted_on(old) == _acted_on(new)
            and not any(e.type == "Warning" for e in events)
        )
        if changed and may_wait and (self._defer(key) or self._held(key)):
            return new  # a later pass writes what it sees, transitions and Events included
        if changed:
            self.local.merge_patch(
                r.LIQOPEERING, meta["name"], meta["namespace"], {"status": new}, subresource="status"
            )
        with self._lock:
            self._deferred.pop(key, None)
            self._asked.discard(key)
            if changed:
                self._written[key] = self.clock()
        for event in events:
            self.events.emit(body, event.type, event.reason, event.message)
            level = log.warning if event.type == "Warning" else log.info
            level(redact(event.message), reason=event.reason)  # the Event is scrubbed too (events.py)
        self.metrics.observe(body, old, new)
        return new

    def _held(self, key: tuple[str, str]) -> bool:
        """Whether the change waits for INTERVAL after the last write; its wake-up asked for once."""
        if self.hold is None:
            return False
        now = self.clock()
        with self._lock:
            last = self._written.get(key)
            if last is None or now >= last + INTERVAL:
                return False
            if key in self._asked:
                return True
            self._asked.add(key)
        self.hold(*key, last + INTERVAL - now)
        return True

    def _defer(self, key: tuple[str, str]) -> bool:
        if self.superseded is None or not self.superseded(*key):
            return False
        with self._lock:
            count = self._deferred.get(key, 0)
            if count >= MAX_DEFERRED:
                return False
            self._deferred[key] = count + 1
        return True

    def forget(self, namespace: str, name: str) -> None:
        with self._lock:
            for kept in (self._deferred, self._written):
                kept.pop((namespace, name), None)
            self._asked.discard((namespace, name))

    def blocked(self, body: dict[str, Any], reason: str, message: str) -> None:
        """Say why deletion is not finishing (e.g. the provider is unreachable)."""
        meta = body["metadata"]
        patch = status_compute.teardown_blocked(
            body.get("status"), reason, message, int(meta.get("generation") or 0), self.now()
        )
        self.local.merge_patch(r.LIQOPEERING, meta["name"], meta["namespace"], {"status": patch}, subresource="status")
        self.metrics.track(meta, {**(body.get("status") or {}), **patch})


def _acted_on(status: dict[str, Any]) -> tuple[str, str, list[tuple[str, str]]]:
    """What a user or a GitOps tool acts on: the observed generation, peerStatus, and whether the peering is
    Ready or Stalled (kstatus)."""
    conditions = status.get("conditions") or []
    kept = sorted((str(c.get("type")), str(c.get("status"))) for c in conditions if c.get("type") in KSTATUS)
    return str(status.get("observedGeneration")), str(status.get("peerStatus")), kept
