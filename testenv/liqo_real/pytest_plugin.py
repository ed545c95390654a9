"""pytest fixtures: two local clusters running Liqo's real control plane (marker `realliqo`).

- `real_liqo` (session): clusters `rl-consumer` / `rl-provider`, separate from the stand-in clusters,
  each with Liqo's chart applied and its controller manager, CRD replicator, IPAM (and virtual kubelets,
  once Liqo creates them) running as local processes, plus the data-plane stand-in.
- `start_real_liqo_pair(base_dir, prefix, nodes)`: the same, for a test that needs fresh clusters of its own
  (or the demo, with a real node each: tainted NO_LIQO_PODS, since Liqo's Pods are played by processes here).

The binaries come from hack/build-liqo.sh; when one is missing the fixture fails with that fix (it does
not skip: hack/test.sh builds them).
"""

from __future__ import annotations

import atexit
import shutil
import signal
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from testenv import kube as k
from testenv.kube import Kube
from testenv.localk8s import LocalCluster, start_clusters

from . import RUNNABLE, RealLiqo, missing_binaries

# Per side: cluster ID, pod CIDR, external CIDR (non-overlapping, as a real peering needs).
REAL_SETTINGS = {
    "consumer": ("rl-consumer-id", "10.100.0.0/16", "10.110.0.0/16"),
    "provider": ("rl-provider-id", "10.200.0.0/16", "10.210.0.0/16"),
}

# On clusters with nodes: the Pods of Liqo's Deployments run here as processes (testenv.liqo_real.runner),
# so the real nodes are tainted against them; a workload meant for the node (the operator's Pod, in the
# demo) tolerates the taint.
NO_LIQO_PODS = {"key": "liqo-real.testenv/liqo-pods-run-as-processes", "effect": "NoSchedule"}

_live: list[RealLiqoPair] = []
_live_lock = threading.Lock()


@dataclass
class RealLiqoPair:
    """`pair["consumer"]` is the LocalCluster; `pair.liqo["consumer"]` its RealLiqo."""

    base_dir: Path
    clusters: dict[str, LocalCluster]
    liqo: dict[str, RealLiqo] = field(default_factory=dict)
    ids: dict[str, str] = field(default_factory=dict)
    # Where Liqo's component logs are copied on stop (base_dir itself is removed): pytest's basetemp, so a
    # failed CI run can still be read afterwards.
    keep_logs: Path | None = None

    def __getitem__(self, side: str) -> LocalCluster:
        return self.clusters[side]

    def kube(self, side: str) -> Kube:
        return Kube(self.clusters[side].api_client())

    def stop(self) -> None:
        for env in self.liqo.values():
            env.down()
        # Before the clusters stop: LocalCluster.stop removes its workdir, and the logs are in it.
        if self.keep_logs is not None:
            for logs in self.base_dir.glob("*/liqo/logs"):
                shutil.copytree(logs, self.keep_logs / logs.parent.parent.name, dirs_exist_ok=True)
        for cluster in self.clusters.values():
            cluster.stop()
        shutil.rmtree(self.base_dir, ignore_errors=True)
        with _live_lock:
            if self in _live:
                _live.remove(self)


def _stop_all() -> None:
    for pair in list(_live):
        pair.stop()


atexit.register(_stop_all)


def _install_sigterm_handler() -> None:
    """SIGTERM (CI cancelling the job) would kill pytest without finalizers: the Liqo processes and the
    clusters would be left running. Turn it into a normal exit (as testenv.localk8s.pytest_plugin does)."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def handler(signum: int, frame: object) -> None:
        _stop_all()
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)


def start_real_liqo_pair(base_dir: Path, prefix: str = "rl", nodes: int = 0) -> RealLiqoPair:
    _install_sigterm_handler()
    missing = missing_binaries(tuple(sorted(RUNNABLE)))
    if missing:
        pytest.fail(f"Liqo binaries missing: {', '.join(missing)}; run hack/build-liqo.sh", pytrace=False)
    names = {side: f"{prefix}-{side}" for side in REAL_SETTINGS}
    clusters = start_clusters(list(names.values()), base_dir, nodes=nodes)
    pair = RealLiqoPair(base_dir, {side: clusters[name] for side, name in names.items()})
    with _live_lock:
        _live.append(pair)
    try:
        for side in pair.clusters:
            kc = pair.kube(side)
            for node in kc.list(k.NODE):
                taints = (node["spec"].get("taints") or []) + [NO_LIQO_PODS]
                kc.patch(k.NODE, node["metadata"]["name"], {"spec": {"taints": taints}})
        for side, (cluster_id, pod, external) in REAL_SETTINGS.items():
            pair.liqo[side] = RealLiqo(pair.clusters[side], cluster_id, pod, external).up()
            pair.ids[side] = cluster_id
    except BaseException:
        pair.stop()
        raise
    return pair


@pytest.fixture(scope="session")
def real_liqo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealLiqoPair]:
    base = Path(tempfile.mkdtemp(prefix="liqo-real-"))
    pair = start_real_liqo_pair(base)
    pair.keep_logs = tmp_path_factory.mktemp("liqo-logs")
    try:
        yield pair
    finally:
        pair.stop()
