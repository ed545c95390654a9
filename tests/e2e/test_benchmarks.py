"""Benchmarks: they print numbers against the targets and assert only that the work happened.

Targets: the ForeignCluster mirror follows Liqo within a second; a peering is
ready as soon as Liqo's side is (the stand-in answers at once here, so this is the operator's own cost).
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import pytest
from kubernetes import client as k8s

from testenv.operator_support import SECRET, PeeringCase, wait_for

pytestmark = pytest.mark.standin  # beside main, on a stand-in pair of its own

NAME = "bench"


def _report(capsys: pytest.CaptureFixture[str], title: str, samples: list[float], target: str) -> None:
    with capsys.disabled():
        print(
            f"\nBENCH {title}: n={len(samples)} min={min(samples):.3f}s median={statistics.median(samples):.3f}s"
            f" max={max(samples):.3f}s (target: {target})"
        )


def test_bench_time_to_ready_and_foreign_cluster_mirror_latency(
    case: PeeringCase, capsys: pytest.CaptureFixture[str]
) -> None:
    env, ns = case.env, case.namespace
    started = time.monotonic()
    case.peerings.create(ns, NAME, {"remoteKubeconfigSecretRef": {"name": SECRET}})
    case.peerings.wait_status(ns, NAME, "ready", timeout=180)
    _report(capsys, "create -> ready (stand-in answers immediately)", [time.monotonic() - started], "no target")

    # Only our writes change the ForeignCluster once the stand-in has applied the pause.
    case.standin.set_faults("consumer", paused="true")
    fcs = k8s.CustomObjectsApi(env.peerings.api)
    latencies = []
    for i in range(5):
        fc: Any = fcs.get_cluster_custom_object("core.liqo.io", "v1beta1", "foreignclusters", env.provider_id)
        marker = f"bench-{i}"
        fc["status"]["modules"]["authentication"]["conditions"] = [
            {
                "type": "AuthIdentityControlPlaneStatus",
                "status": "Ready",
                "reason": "IdentityReady",
                "message": marker,
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ]
        sent = time.monotonic()
        fcs.replace_cluster_custom_object_status("core.liqo.io", "v1beta1", "foreignclusters", env.provider_id, fc)

        mirrored: list[Any] = [None]

        def seen(marker: str = marker, mirrored: list[Any] = mirrored) -> bool:
            module = case.peerings.status(ns, NAME).get("foreignCluster", {}).get("modules", {})
            mirrored[0] = (module.get("authentication", {}).get("conditions") or [{}])[0].get("message")
            return bool(mirrored[0] == marker)

        try:
            wait_for(f"the mirror to show {marker}", seen, timeout=30, interval=0.02)
        except AssertionError as e:  # say which side lags: the ForeignCluster or the mirror
            live: Any = fcs.get_cluster_custom_object("core.liqo.io", "v1beta1", "foreignclusters", env.provider_id)
            held = (live["status"]["modules"]["authentication"].get("conditions") or [{}])[0].get("message")
            raise AssertionError(f"{e}; the ForeignCluster holds {held!r}, the mirror {mirrored[0]!r}") from None
        latencies.append(time.monotonic() - sent)
    case.standin.set_faults("consumer", paused=None)
    _report(capsys, "ForeignCluster change -> LiqoPeering mirror", latencies, "< 1s")
    assert len(latencies) == 5
