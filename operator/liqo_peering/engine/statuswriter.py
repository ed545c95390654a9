"""The one writer of a LiqoPeering's status: what a reconcile pass observed, and why an unpeering does not
finish; the Events of its transitions and the metrics follow each write."""

from __future__ import annotations

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


class StatusWriter:
    def __init__(
        self, local: ClusterClient, events: EventRecorder, metrics: Metrics, now: Callable[[], datetime]
    ) -> None:
        self.local = local
        self.events = events
        self.metrics = metrics
        self.now = now

    def write(self, body: dict[str, Any], old: dict[str, Any], obs: status_compute.Observation) -> dict[str, Any]:
        """Compute, write only what changed, emit the transitions' Events; the new status."""
        new, events = status_compute.compute(old, obs)
        meta = body["metadata"]
        if any(old.get(k) != v for k, v in new.items()):
            self.local.merge_patch(
                r.LIQOPEERING, meta["name"], meta["namespace"], {"status": new}, subresource="status"
            )
        for event in events:
            self.events.emit(body, event.type, event.reason, event.message)
            level = log.warning if event.type == "Warning" else log.info
            level(redact(event.message), reason=event.reason)  # the Event is scrubbed too (events.py)
        self.metrics.observe(body, old, new)
        return new

    def blocked(self, body: dict[str, Any], reason: str, message: str) -> None:
        """Say why deletion is not finishing (e.g. the provider is unreachable)."""
        meta = body["metadata"]
        patch = status_compute.teardown_blocked(
            body.get("status"), reason, message, int(meta.get("generation") or 0), self.now()
        )
        self.local.merge_patch(r.LIQOPEERING, meta["name"], meta["namespace"], {"status": patch}, subresource="status")
        self.metrics.track(meta, {**(body.get("status") or {}), **patch})
