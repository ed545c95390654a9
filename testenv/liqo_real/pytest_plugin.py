"""pytest fixtures: two local clusters running Liqo for real (marker `realliqo`).

- `real_liqo` (session): the pair the realliqo suite and the liqochart tests share, a `LiqoInstall`
  (testenv.liqo_install): by default Liqo's own chart on clusters with a real node each
  (testenv.liqo_chart); with LIQO_INSTALL=processes, clusters `rl-consumer` / `rl-provider` with Liqo's
  chart objects applied and its controller manager, CRD replicator, IPAM (and virtual kubelets, once Liqo
  creates them) running as local processes, plus the data-plane stand-in.
- `start_real_liqo_pair(base_dir, prefix, nodes)`: the process pair, for a test or a benchmark that needs
  fresh clusters of its own (with nodes: tainted NO_LIQO_PODS, since Liqo's Pods are played by processes).

The binaries come from hack/build-liqo.sh, the chart's images from hack/build-liqo-images.sh; when one is
missing the fixture fails with that fix (it does not skip in CI: hack/test.sh builds them).
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
from testenv.liqo_chart import LiqoChartPair, liqo_images
from testenv.liqo_install import LiqoInstall, install_kind
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

_live: list[LiqoInstall] = []
_live_lock = threading.Lock()


@dataclass
class RealLiqoPair:
    """`pair["consumer"]` is the LocalCluster; `pair.liqo["consumer"]` its RealLiqo."""

    base_dir: Path
    clusters: dict[str, LocalCluster]
    liqo: dict[str, RealLiqo] = field(default_factory=dict)
    ids: dict[str, str] = field(default_factory=dict)
    # Where Liqo's component logs are copied on stop (base_dir itself is removed): pytest's basetemp, so a
    # failed run can still be read afterwards.
    keep_logs: Path | None = None

    def __getitem__(self, side: str) -> LocalCluster:
        return self.clusters[side]

    # What a LiqoPeering's spec.networking needs on this installation: nothing (the data-plane stand-in
    # gives the gateway server's LoadBalancer Service an address).
    peering_networking: dict[str, object] = field(default_factory=dict)
    liqoctl_peer_args: list[str] = field(default_factory=list)  # the same choice for `liqoctl peer`
    # kube-scheduler runs only on clusters with nodes: without, the tests bind Pods themselves.
    schedules_pods = False

    def kube(self, side: str) -> Kube:
        return Kube(self.clusters[side].api_client())

    def set_connection_fault(self, value: str | None) -> None:
        """The data-plane stand-in writes this status value on every Connection (None: Connected)."""
        for env in self.liqo.values():
            assert env.dataplane is not None
            env.dataplane.set_fault(value)

    def virtual_kubelets(self) -> int:
        """The consumer's virtual kubelets that run (processes here)."""
        runner = self.liqo["consumer"].runner
        return len([p for p in runner.processes("virtual-kubelet") if p.alive()]) if runner else 0

    def diagnostics(self) -> list[str]:
        out = [f"Liqo's logs are copied to {self.keep_logs} at the end"]
        for side, env in self.liqo.items():
            if env.runner:
                out.append(f"[{side}] {env.runner.describe()}")
                out.extend(f"[{side}] runner error: {e}" for e in env.runner.errors[-5:])
            if env.dataplane:
                out.extend(f"[{side}] data plane error: {e}" for e in env.dataplane.errors[-5:])
        return out

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


def start_chart_pair(base_dir: Path, version: str | None = None, signing_duration: str | None = None) -> LiqoChartPair:
    """Liqo's chart (of `version`, LIQO_VERSION by default) on two clusters with a node each, every Liqo
    workload available; `signing_duration`: their CSR signers' certificate lifetime."""
    _install_sigterm_handler()
    pair = LiqoChartPair.start(base_dir, liqo_images(version), version, signing_duration)
    with _live_lock:
        _live.append(pair)  # before the wait: a SIGTERM meanwhile stops it too
    try:
        pair.wait_available()
    except BaseException:
        pair.stop()
        raise
    return pair


@pytest.fixture(scope="session")
def real_liqo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiqoInstall]:
    """The pair the realliqo suite (and the liqochart tests) share: Liqo's chart, or with
    LIQO_INSTALL=processes its controllers as processes (testenv.liqo_install)."""
    # Short: a node's unix socket paths must fit 108 bytes.
    base = Path(tempfile.mkdtemp(prefix="liqo-real-"))
    pair: LiqoInstall = start_chart_pair(base) if install_kind() == "chart" else start_real_liqo_pair(base)
    pair.keep_logs = tmp_path_factory.mktemp("liqo-logs")
    try:
        yield pair
    finally:
        pair.stop()
        shutil.rmtree(base, ignore_errors=True)
