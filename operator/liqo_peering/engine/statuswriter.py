"""The one writer of a LiqoPeering's status: what a reconcile pass observed, and why an unpeering does not
finish; the Events of its transitions and the metrics follow each write.

A pass whose peering was woken again while it ran (``superseded``) leaves a change that moves no condition to
the next pass, which follows at once and writes what it sees then: while Liqo builds a peering, its objects
change faster than a status is worth writing. No transition waits (a condition's status or reason, the
observed generation, an Event), nor more than MAX_DEFERRED changes in a row."""

from __future__ import annotations

import threading
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


class StatusWriter:
    def __init__(
        self,
        local: ClusterClient,
        events: EventRecorder,
        metrics: Metrics,
        now: Callable[[], datetime],
        superseded: Callable[[str, str], bool] | None = None,
    ) -> None:
        """``superseded(namespace, name)``: whether another pass of the peering is due already."""
        self.local = local
        self.events = events
        self.metrics = metrics
        self.now = now
        self.superseded = superseded
        self._deferred: dict[tuple[str, str], int] = {}  # changes left to the next pass, in a row
        self._lock = threading.Lock()

    def write(self, body: dict[str, Any], old: dict[str, Any], obs: status_compute.Observation) -> dict[str, Any]:
        """Compute, write only what changed, emit the transitions' Events; the new status."""
        new, events = status_compute.compute(old, obs)
        meta = body["metadata"]
        key = (meta["namespace"], meta["name"])
        changed = any(old.get(k) != v for k, v in new.items())
        if changed and not events and self._defer(key, old, new):
            return new  # the next pass writes what it sees, transitions and Events included
        if changed:
            self.local.merge_patch(
                r.LIQOPEERING, meta["name"], meta["namespace"], {"status": new}, subresource="status"
            )
        with self._lock:
            self._deferred.pop(key, None)
        for event in events:
            self.events.emit(body, event.type, event.reason, event.message)
            level = log.warning if event.type == "Warning" else log.info
            level(redact(event.message), reason=event.reason)  # the Event is scrubbed too (events.py)
        self.metrics.observe(body, old, new)
        return new

    def _defer(self, key: tuple[str, str], old: dict[str, Any], new: dict[str, Any]) -> bool:
        if self.superseded is None or not _same_conditions(old, new) or not self.superseded(*key):
            return False
        with self._lock:
            count = self._deferred.get(key, 0)
            if count >= MAX_DEFERRED:
                return False
            self._deferred[key] = count + 1
        return True

    def forget(self, namespace: str, name: str) -> None:
        with self._lock:
            self._deferred.pop((namespace, name), None)

    def blocked(self, body: dict[str, Any], reason: str, message: str) -> None:
        """Say why deletion is not finishing (e.g. the provider is unreachable)."""
        meta = body["metadata"]
        patch = status_compute.teardown_blocked(
            body.get("status"), reason, message, int(meta.get("generation") or 0), self.now()
        )
        self.local.merge_patch(r.LIQOPEERING, meta["name"], meta["namespace"], {"status": patch}, subresource="status")
        self.metrics.track(meta, {**(body.get("status") or {}), **patch})


def _same_conditions(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """The same observed generation, and every condition with the same status and reason: messages and the
    other fields may differ."""

    def shape(status: dict[str, Any]) -> tuple[str, list[tuple[str, str, str]]]:
        conditions = status.get("conditions") or []
        kept = sorted((str(c.get("type")), str(c.get("status")), str(c.get("reason"))) for c in conditions)
        return str(status.get("observedGeneration")), kept

    return shape(old) == shape(new)
