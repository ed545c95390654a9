"""The per-LiqoPeering and per-LiqoPeeringSet series: what each says, that they follow the status, and that
a deleted object's series go."""

from __future__ import annotations

import logging
from typing import Any

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from liqo_peering.metrics import Metrics

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples(metrics: Metrics) -> Samples:
    text = generate_latest(metrics.registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def named(all_samples: Samples, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {labels: value for (n, labels), value in all_samples.items() if n == name}


def _body(name: str, **meta: Any) -> dict[str, Any]:
    return {"metadata": {"namespace": "ns", "name": name, "creationTimestamp": "2026-01-01T00:00:00Z", **meta}}


def _status(ready: bool, reason: str, stage: str, **extra: Any) -> dict[str, Any]:
    cond = {"type": "Ready", "status": str(ready), "reason": reason, "lastTransitionTime": "2026-01-01T00:01:40Z"}
    return {
        "peerStatus": "ready" if ready else "establishing",
        "remoteClusterID": "remote-1",
        "stage": stage,
        "conditions": [cond],
        **extra,
    }


KEY = (("name", "a"), ("namespace", "ns"), ("remote_cluster_id", "remote-1"))


def test_a_peering_exports_ready_reason_stage_and_its_last_transition() -> None:
    metrics = Metrics()
    metrics.observe(_body("a"), {}, _status(False, "Establishing", "networking: waiting"))
    found = samples(metrics)
    assert named(found, "liqo_peering_ready") == {KEY: 0.0}
    assert named(found, "liqo_peering_status_info") == {
        (
            *KEY[:2],
            ("reason", "Establishing"),
            KEY[2],
            ("stage", "networking: waiting"),
            ("status", "establishing"),
        ): 1.0
    }
    assert named(found, "liqo_peering_ready_last_transition_timestamp_seconds") == {KEY: 1767225700.0}
    assert named(found, "liqo_peering_credential_expiration_timestamp_seconds") == {}

    # A change of reason and stage replaces the series: one per peering, never the old one left behind.
    metrics.observe(_body("a"), {}, _status(True, "Established", "ready"))
    found = samples(metrics)
    assert named(found, "liqo_peering_ready") == {KEY: 1.0}
    (info,) = named(found, "liqo_peering_status_info")
    assert dict(info)["stage"] == "ready" and dict(info)["reason"] == "Established"


def test_a_minted_credential_exports_its_expiry_and_renewal_times() -> None:
    metrics = Metrics()
    credentials = {"notAfter": "2026-02-01T00:00:00Z", "renewAt": "2026-01-25T00:00:00Z", "user": "u"}
    metrics.observe(_body("a"), {}, _status(True, "Established", "ready", credentials=credentials))
    found = samples(metrics)
    assert named(found, "liqo_peering_credential_expiration_timestamp_seconds") == {KEY: 1769904000.0}
    assert named(found, "liqo_peering_credential_renewal_timestamp_seconds") == {KEY: 1769299200.0}


def test_blocked_unpeering_exports_the_stage_and_the_deletion_time() -> None:
    metrics = Metrics()
    body = _body("a", deletionTimestamp="2026-01-01T01:00:00Z")
    metrics.track(body["metadata"], {**_status(False, "ProviderUnreachable", "unpeering: error")})
    found = samples(metrics)
    assert named(found, "liqo_peering_deletion_timestamp_seconds") == {KEY: 1767229200.0}
    (info,) = named(found, "liqo_peering_status_info")
    assert dict(info)["stage"] == "unpeering: error"


def test_a_deleted_peerings_series_go() -> None:
    metrics = Metrics()
    metrics.observe(_body("a"), {}, _status(True, "Established", "ready"))
    metrics.observe(_body("b"), {}, _status(False, "Establishing", "networking: waiting"))
    metrics.forget("ns", "a")
    found = samples(metrics)
    assert {dict(labels)["name"] for labels in named(found, "liqo_peering_ready")} == {"b"}
    assert all(dict(labels).get("name") != "a" for _, labels in found)


def test_a_peering_set_exports_its_counts_and_they_go_with_it() -> None:
    metrics = Metrics()
    status = {
        "desired": 3,
        "ready": 1,
        "establishing": 1,
        "waiting": 0,
        "error": 1,
        "conditions": [{"type": "Ready", "status": "False", "reason": "Failed"}],
    }
    metrics.observe_set({"namespace": "ns", "name": "fleet"}, status)
    found = samples(metrics)
    ids = (("name", "fleet"), ("namespace", "ns"))
    assert named(found, "liqo_peering_set_desired") == {ids: 3.0}
    assert named(found, "liqo_peering_set_ready") == {ids: 0.0}
    assert named(found, "liqo_peering_set_peerings") == {
        (*ids, ("state", "ready")): 1.0,
        (*ids, ("state", "establishing")): 1.0,
        (*ids, ("state", "waiting")): 0.0,
        (*ids, ("state", "error")): 1.0,
    }
    metrics.forget_set("ns", "fleet")
    assert named(samples(metrics), "liqo_peering_set_peerings") == {}


def test_a_paused_replica_exports_no_per_peering_series() -> None:
    metrics = Metrics()
    metrics.set_active(True)
    metrics.observe(_body("a"), {}, _status(True, "Established", "ready"))
    metrics.set_active(False)
    found = samples(metrics)
    assert named(found, "liqo_peering_ready") == {}
    assert named(found, "liqo_peering_operator_active") == {(): 0.0}
    assert named(found, "liqo_peering_peerings")[(("status", "ready"),)] == 0.0


def test_kopf_peerings_pause_and_resume_set_the_active_gauge() -> None:
    """kopf says it pauses or resumes a replica only in its log: cli.PeeringPauses follows those lines."""
    from liqo_peering.cli import KOPF_PEERING_LOGGER, PeeringPauses

    metrics = Metrics()
    metrics.set_active(False)  # a replica with kopf peering starts paused
    logger = logging.getLogger(KOPF_PEERING_LOGGER)
    handler = PeeringPauses(metrics)
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        active = lambda: named(samples(metrics), "liqo_peering_operator_active")[()]  # noqa: E731
        logger.info("Resuming operations after the pause. Conflicting operators with the same priority are gone.")
        assert active() == 1.0
        logger.info("Pausing operations in favour of [Peer(identity='op-1', priority=7)].")
        assert active() == 0.0
        logger.info("Resuming operations after the pause. Conflicting operators with the same priority are gone.")
        logger.warning("Pausing all operators, including self: [...]")
        assert active() == 0.0
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
