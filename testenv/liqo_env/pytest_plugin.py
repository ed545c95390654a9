"""pytest fixtures: Liqo on the local clusters, and the Liqo stand-in as a subprocess.

- `liqo_clusters` (session): testenv.localk8s's `local_clusters` with Liqo's non-workload objects installed
  (liqo_env.install_liqo), each with its own cluster ID and non-overlapping CIDRs (see LIQO_SETTINGS);
- `liqo_node_clusters` (session): the same on `node_clusters` (clusters with real nodes);
- `liqo_standin` (function): `python -m testenv.standin` against both clusters for the test, faults cleared
  before and after; `liqo_standin.set_faults("provider", resourceslice="Denied")`.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from testenv import kube as k
from testenv.kube import Kube
from testenv.liqo_env import LiqoInstall, install_liqo, read_cluster_id, uninstall_liqo
from testenv.standin import FAULTS_APPLIED, FAULTS_CONFIGMAP, FAULTS_REQUEST
from testenv.wait import wait_for

if TYPE_CHECKING:
    from testenv.localk8s import LocalCluster

LIQO_NAMESPACE = "liqo"
# Per cluster: cluster ID, pod CIDR, external CIDR (non-overlapping, as a real peering needs).
LIQO_SETTINGS = {
    "consumer": ("consumer-cluster-id", "10.100.0.0/16", "10.110.0.0/16"),
    "provider": ("provider-cluster-id", "10.200.0.0/16", "10.210.0.0/16"),
}
# The repository root: `testenv` is imported from there in the stand-in subprocess.
REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass
class LiqoClusters:
    """The two local clusters with Liqo installed. `ids["consumer"]` is the consumer's cluster ID."""

    clusters: dict[str, LocalCluster]
    ids: dict[str, str] = field(default_factory=dict)
    installs: dict[str, LiqoInstall] = field(default_factory=dict)
    namespace: str = LIQO_NAMESPACE

    def __getitem__(self, name: str) -> LocalCluster:
        return self.clusters[name]

    def kube(self, name: str) -> Kube:
        return Kube(self.clusters[name].api_client())

    def install(self, name: str) -> LiqoInstall:
        cluster_id, pod, external = LIQO_SETTINGS[name]
        self.installs[name] = install_liqo(self.clusters[name], cluster_id, pod, external, self.namespace)
        self.ids[name] = cluster_id
        return self.installs[name]

    def uninstall(self, name: str) -> None:
        """The "Liqo missing on one side" fault; ensure_installed() (or the next liqo_standin) puts it back."""
        uninstall_liqo(self.clusters[name], self.namespace)

    def ensure_installed(self) -> None:
        for name in LIQO_SETTINGS:
            if read_cluster_id(self.kube(name), self.namespace) is None:
                self.install(name)


def with_liqo(clusters: dict[str, LocalCluster]) -> LiqoClusters:
    lc = LiqoClusters(clusters=dict(clusters))
    # Both clusters at once: most of an install is waiting on its API server (rendering, CRDs Established).
    with ThreadPoolExecutor(max_workers=len(LIQO_SETTINGS)) as pool:
        list(pool.map(lc.install, LIQO_SETTINGS))
    return lc


@pytest.fixture(scope="session")
def liqo_clusters(local_clusters: dict[str, LocalCluster]) -> LiqoClusters:
    return with_liqo(local_clusters)


@pytest.fixture(scope="session")
def liqo_node_clusters(node_clusters: dict[str, LocalCluster]) -> LiqoClusters:
    return with_liqo(node_clusters)


class StandInProcess:
    """A running `python -m testenv.standin`, with fault knobs (see the testenv.standin docstring)."""

    def __init__(self, lc: LiqoClusters, log_path: Path) -> None:
        self.lc = lc
        self.log_path = log_path
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
        cmd = [
            sys.executable,
            "-m",
            "testenv.standin",
            "--consumer-kubeconfig",
            str(lc["consumer"].kubeconfig),
            "--provider-kubeconfig",
            str(lc["provider"].kubeconfig),
            "--liqo-namespace",
            lc.namespace,
            # A safety net only: watch events wake it, and what is due later (heartbeats, delays) sets its own time.
            "--resync",
            "10",
        ]
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=env)

    def set_faults(self, cluster: str = "both", **knobs: str | float | None) -> None:
        """Set (or with None, clear) fault knobs on "consumer", "provider" or "both".

        Returns once the stand-in has started a pass with these knobs, so no pass that began before them is
        still writing: a paused stand-in writes nothing more, and objects created next meet the knobs.
        """
        names = ("consumer", "provider") if cluster == "both" else (cluster,)
        request = uuid.uuid4().hex
        for name in names:
            kc = self.lc.kube(name)
            cm = kc.get(k.CONFIGMAP, FAULTS_CONFIGMAP, self.lc.namespace)
            data = {key: None if v is None else str(v) for key, v in knobs.items()}
            notes = {FAULTS_REQUEST: request}
            if cm is None:
                body = {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": FAULTS_CONFIGMAP, "namespace": self.lc.namespace, "annotations": notes},
                    "data": {a: b for a, b in data.items() if b is not None},
                }
                kc.create(k.CONFIGMAP, body, self.lc.namespace)
            else:
                patch = {"metadata": {"annotations": notes}, "data": data}
                kc.patch(k.CONFIGMAP, FAULTS_CONFIGMAP, patch, self.lc.namespace)
        for name in names:
            kc = self.lc.kube(name)

            def applied(kc: Kube = kc) -> bool:
                cm = kc.get(k.CONFIGMAP, FAULTS_CONFIGMAP, self.lc.namespace) or {}
                return (cm.get("metadata", {}).get("annotations") or {}).get(FAULTS_APPLIED) == request

            wait_for(f"the stand-in to apply faults {knobs} on {name}", applied, timeout=30, interval=0.05)

    def clear_faults(self) -> None:
        for name in ("consumer", "provider"):
            # Liqo (and its namespace) may be missing in a fault test.
            with contextlib.suppress(k.KubeError):
                self.lc.kube(name).delete(k.CONFIGMAP, FAULTS_CONFIGMAP, self.lc.namespace)

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


@pytest.fixture
def liqo_standin(liqo_clusters: LiqoClusters, tmp_path: Path) -> Iterator[StandInProcess]:
    liqo_clusters.ensure_installed()  # a previous test may have uninstalled Liqo
    proc = StandInProcess(liqo_clusters, tmp_path / "liqo-standin.log")
    proc.clear_faults()
    time.sleep(0.2)
    try:
        yield proc
    finally:
        proc.clear_faults()
        proc.stop()
        sys.stderr.write(f"\n--- liqo-standin log ({proc.log_path}), last lines ---\n")
        sys.stderr.write("\n".join(proc.log_path.read_text(errors="replace").splitlines()[-30:]) + "\n")
