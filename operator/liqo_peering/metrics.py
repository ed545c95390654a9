"""Prometheus metrics: fleet totals (peerings by status, time to ready, errors, stage durations) and, per
LiqoPeering and per LiqoPeeringSet, gauges a user can alert on.

The per-object series are built at scrape time from one snapshot per object (a custom collector): a label
that changes (a reason, the stage) replaces its series instead of leaving the old one behind, and a
deleted object's series go with its snapshot. Cardinality is bounded by the number of objects.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from liqo_peering.stages import REVERSE_STAGE_CONDITIONS, STAGE_CONDITIONS

_CONDITION_STAGES = MappingProxyType(
    {cond: stage for stage, cond in (STAGE_CONDITIONS | REVERSE_STAGE_CONDITIONS).items()}
)
BUCKETS = (1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800)
PEERING_LABELS = ("namespace", "name", "remote_cluster_id")
CERTIFICATE_LABELS = ("held_by", "type", "resource_slice")  # one identity of status.certificates
SET_LABELS = ("namespace", "name")
SET_STATES = ("ready", "establishing", "waiting", "error")


def _time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None


def _timestamp(value: str | None) -> float | None:
    parsed = _time(value)
    return parsed.timestamp() if parsed else None


def _seconds(start: str | None, end: str | None) -> float | None:
    begin, finish = _time(start), _time(end)
    if begin is None or finish is None:
        return None
    return max((finish - begin).total_seconds(), 0.0)


def _ready(status: dict[str, Any]) -> dict[str, Any]:
    return next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {})


@dataclass(frozen=True)
class PeeringSnapshot:
    """What the per-peering series say about one LiqoPeering, from its last status."""

    remote_cluster_id: str
    ready: bool
    status: str
    reason: str
    stage: str
    last_transition: float | None
    not_after: float | None
    renew_at: float | None
    deleting_since: float | None
    # status.certificates: each identity's labels (CERTIFICATE_LABELS), expiry and renewal point.
    certificates: tuple[tuple[tuple[str, str, str], float, float], ...] = ()

    @classmethod
    def of(cls, meta: dict[str, Any], status: dict[str, Any]) -> PeeringSnapshot:
        ready = _ready(status)
        credentials = status.get("credentials") or {}
        return cls(
            remote_cluster_id=str(status.get("remoteClusterID") or ""),
            ready=ready.get("status") == "True",
            status=str(status.get("peerStatus") or ""),
            reason=str(ready.get("reason") or ""),
            stage=str(status.get("stage") or ""),
            last_transition=_timestamp(ready.get("lastTransitionTime")),
            not_after=_timestamp(credentials.get("notAfter")),
            renew_at=_timestamp(credentials.get("renewAt")),
            deleting_since=_timestamp(meta.get("deletionTimestamp")),
            certificates=tuple(_certificates(status.get("certificates"))),
        )


def _certificates(entries: Any) -> Iterator[tuple[tuple[str, str, str], float, float]]:
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict):
            continue
        try:
            expiry, renewal = _timestamp(entry.get("notAfter")), _timestamp(entry.get("renewAt"))
        except (AttributeError, ValueError):  # the status subresource is anyone's to write
            continue
        if expiry is not None and renewal is not None:
            which = (
                str(entry.get("heldBy") or ""),
                str(entry.get("type") or ""),
                str(entry.get("resourceSlice") or ""),
            )
            yield which, expiry, renewal


class ObjectCollector(Collector):
    """The per-LiqoPeering and per-LiqoPeeringSet gauges, from the latest snapshot of each."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.peerings: dict[tuple[str, str], PeeringSnapshot] = {}
        self.sets: dict[tuple[str, str], dict[str, Any]] = {}

    def put(self, table: str, key: tuple[str, str], value: Any) -> None:
        with self._lock:
            getattr(self, table)[key] = value

    def drop(self, table: str, key: tuple[str, str]) -> None:
        with self._lock:
            getattr(self, table).pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self.peerings.clear()
            self.sets.clear()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        with self._lock:
            peerings, sets = dict(self.peerings), dict(self.sets)
        yield from _peering_families(peerings)
        yield from _set_families(sets)


def _peering_families(peerings: dict[tuple[str, str], PeeringSnapshot]) -> Iterator[GaugeMetricFamily]:
    def family(name: str, doc: str, extra: tuple[str, ...] = ()) -> GaugeMetricFamily:
        return GaugeMetricFamily(name, doc, labels=[*PEERING_LABELS, *extra])

    ready = family("liqo_peering_ready", "1 when the LiqoPeering's Ready condition is True, else 0")
    info = family(
        "liqo_peering_status_info",
        "Always 1: the LiqoPeering's peerStatus, Ready reason and stage as labels",
        ("status", "reason", "stage"),
    )
    transition = family(
        "liqo_peering_ready_last_transition_timestamp_seconds",
        "When the LiqoPeering's Ready condition last changed (Unix time)",
    )
    expiry = family(
        "liqo_peering_credential_expiration_timestamp_seconds",
        "When the minted provider credential expires (status.credentials.notAfter, Unix time)",
    )
    renewal = family(
        "liqo_peering_credential_renewal_timestamp_seconds",
        "When the operator renews the minted provider credential (status.credentials.renewAt, Unix time)",
    )
    cert_expiry = family(
        "liqo_peering_certificate_expiration_timestamp_seconds",
        "When the certificate of an identity Liqo issued for the peering expires (status.certificates[].notAfter,"
        " Unix time)",
        CERTIFICATE_LABELS,
    )
    cert_renewal = family(
        "liqo_peering_certificate_renewal_timestamp_seconds",
        "When that certificate is due for renewal (status.certificates[].renewAt, Unix time)",
        CERTIFICATE_LABELS,
    )
    deletion = family(
        "liqo_peering_deletion_timestamp_seconds",
        "When deletion of the LiqoPeering was requested, while unpeering has not finished (Unix time)",
    )
    for (namespace, name), snap in sorted(peerings.items()):
        labels = [namespace, name, snap.remote_cluster_id]
        ready.add_metric(labels, 1.0 if snap.ready else 0.0)
        info.add_metric([*labels, snap.status, snap.reason, snap.stage], 1.0)
        for fam, value in (
            (transition, snap.last_transition),
            (expiry, snap.not_after),
            (renewal, snap.renew_at),
            (deletion, snap.deleting_since),
        ):
            if value is not None:
                fam.add_metric(labels, value)
        for which, not_after, renew_at in snap.certificates:
            cert_expiry.add_metric([*labels, *which], not_after)
            cert_renewal.add_metric([*labels, *which], renew_at)
    yield from (ready, info, transition, expiry, renewal, cert_expiry, cert_renewal, deletion)


def _set_families(sets: dict[tuple[str, str], dict[str, Any]]) -> Iterator[GaugeMetricFamily]:
    desired = GaugeMetricFamily(
        "liqo_peering_set_desired", "LiqoPeerings the LiqoPeeringSet's selector asks for", labels=list(SET_LABELS)
    )
    counts = GaugeMetricFamily(
        "liqo_peering_set_peerings",
        "The LiqoPeeringSet's LiqoPeerings by state (ready, establishing, waiting, error)",
        labels=[*SET_LABELS, "state"],
    )
    ready = GaugeMetricFamily(
        "liqo_peering_set_ready", "1 when the LiqoPeeringSet's Ready condition is True, else 0", labels=list(SET_LABELS)
    )
    for (namespace, name), status in sorted(sets.items()):
        desired.add_metric([namespace, name], float(status.get("desired") or 0))
        for state in SET_STATES:
            counts.add_metric([namespace, name, state], float(status.get(state) or 0))
        ready.add_metric([namespace, name], 1.0 if _ready(status).get("status") == "True" else 0.0)
    yield from (desired, counts, ready)


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
        # Standalone replicas are always active; HA replicas start paused until kopf peering resumes them.
        self.active = Gauge(
            "liqo_peering_operator_active",
            "1 while this replica reconciles (kopf peering has not paused it), else 0",
            registry=self.registry,
        )
        # Objects whose passes killed the operator twice in a row, put aside for a backoff (engine/passmarkers.py).
        self.put_aside = Gauge(
            "liqo_peering_put_aside_objects",
            "LiqoPeerings and LiqoPeeringSets whose passes are put aside after the operator died in them, by kind",
            ["kind"],
            registry=self.registry,
        )
        for kind in ("LiqoPeering", "LiqoPeeringSet"):
            self.put_aside.labels(kind=kind).set(0)
        self.objects = ObjectCollector()
        self.registry.register(self.objects)
        self._status: dict[str, str] = {}

    def serve(self, port: int) -> None:
        start_http_server(port, registry=self.registry)

    def observe(self, body: dict[str, Any], old: dict[str, Any], new: dict[str, Any]) -> None:
        meta = body["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        self._status[key] = str(new.get("peerStatus"))
        self._refresh()
        self.track(meta, new)
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

    def track(self, meta: dict[str, Any], status: dict[str, Any]) -> None:
        """Replace the per-peering series of the LiqoPeering ``meta`` names with what ``status`` says."""
        self.objects.put("peerings", (meta["namespace"], meta["name"]), PeeringSnapshot.of(meta, status))

    def forget(self, namespace: str, name: str) -> None:
        self._status.pop(f"{namespace}/{name}", None)
        self._refresh()
        self.objects.drop("peerings", (namespace, name))

    def observe_set(self, meta: dict[str, Any], status: dict[str, Any]) -> None:
        self.objects.put("sets", (meta["namespace"], meta["name"]), dict(status))

    def forget_set(self, namespace: str, name: str) -> None:
        self.objects.drop("sets", (namespace, name))

    def set_put_aside(self, kind: str, count: int) -> None:
        self.put_aside.labels(kind=kind).set(count)

    def set_active(self, active: bool) -> None:
        """This replica starts or stops reconciling (kopf peering). A paused replica exports no per-object
        series: what it last saw goes stale while another replica reconciles, and would raise false alerts."""
        self.active.set(1 if active else 0)
        if not active:
            self.objects.clear()
            self._status.clear()
            self._refresh()

    def _refresh(self) -> None:
        for status in ("no_peers", "establishing", "ready", "error", "timeout"):
            self.peerings.labels(status=status).set(sum(1 for s in self._status.values() if s == status))
