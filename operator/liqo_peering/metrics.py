"""Prometheus metrics: peerings by status, time to ready, errors by reason, stage durations."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from liqo_peering.stages import REVERSE_STAGE_CONDITIONS, STAGE_CONDITIONS

_CONDITION_STAGES = {cond: stage for stage, cond in (STAGE_CONDITIONS | REVERSE_STAGE_CONDITIONS).items()}
BUCKETS = (1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800)


def _seconds(start: str | None, end: str | None) -> float | None:
    if not start or not end:
        return None
    parse = lambda v: datetime.fromisoformat(v.replace("Z", "+00:00"))  # noqa: E731
    return max((parse(end) - parse(start)).total_seconds(), 0.0)


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.peerings = Gauge("liqo_peering_peerings", "LiqoPeerings by peerStatus", ["status"], registry=self.registry)
        self.time_to_ready = Histogram(
            "liqo_peering_time_to_ready_seconds",
            "From creation to first Ready",
            buckets=BUCKETS,
            registry=self.registry,
        )
        self.errors = Counter(
            "liqo_peering_reconcile_errors_total",
            "Reconciles that ended in an error, by reason",
            ["reason"],
            registry=self.registry,
        )
        self.stage_duration = Histogram(
            "liqo_peering_stage_duration_seconds",
            "From the start of establishing to each stage being established",
            ["stage"],
            buckets=BUCKETS,
            registry=self.registry,
        )
        self._status: dict[str, str] = {}

    def serve(self, port: int) -> None:
        start_http_server(port, registry=self.registry)

    def observe(self, body: dict[str, Any], old: dict[str, Any], new: dict[str, Any]) -> None:
        meta = body["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        self._status[key] = str(new.get("peerStatus"))
        self._refresh()
        if new.get("peerStatus") == "error":
            reason = next((c["reason"] for c in new.get("conditions", []) if c["type"] == "Ready"), "Unknown")
            self.errors.labels(reason=reason).inc()
        if new.get("readyAt") and not old.get("readyAt"):
            seconds = _seconds(meta.get("creationTimestamp"), new["readyAt"])
            if seconds is not None:
                self.time_to_ready.observe(seconds)
        old_ready = {c["type"] for c in old.get("conditions", []) if c.get("status") == "True"}
        for cond in new.get("conditions", []):
            stage = _CONDITION_STAGES.get(cond["type"])
            if stage and cond["status"] == "True" and cond["type"] not in old_ready and cond["reason"] != "Disabled":
                seconds = _seconds(new.get("startedAt"), cond.get("lastTransitionTime"))
                if seconds is not None:
                    self.stage_duration.labels(stage=stage).observe(seconds)

    def forget(self, namespace: str, name: str) -> None:
        self._status.pop(f"{namespace}/{name}", None)
        self._refresh()

    def _refresh(self) -> None:
        for status in ("no_peers", "establishing", "ready", "error", "timeout"):
            self.peerings.labels(status=status).set(sum(1 for s in self._status.values() if s == status))
