"""Liqo's real control plane on local clusters (testenv.localk8s): binaries built by hack/build-liqo.sh.

    env = RealLiqo(cluster, "consumer-id", pod_cidr="10.100.0.0/16", external_cidr="10.110.0.0/16").up()
    ...
    env.down()

`up()` renders Liqo's Helm chart for the cluster and applies it except for the workloads that cannot run
here (install.py), then starts:

- a ComponentRunner (runner.py): Liqo's liqo-controller-manager, crd-replicator, ipam and webhook from the
  chart's Deployments, and every `vk-<name>` virtual-kubelet Deployment Liqo creates, as local processes
  with the arguments and environment their Pods get (generic mapping, one small documented table);
- an AdmissionStandIn (admission.py): the real webhook's VirtualNode mutation, delivered after creation
  (the API server cannot reach the webhook here);
- a DataPlaneStandIn (dataplane.py): gateway pods Ready, the gateway server's LoadBalancer address and the
  `Connection` objects the gateway pods would create (WireGuard cannot run here).

What is real: ForeignClusters, nonces and their signatures, Tenants/Identities (certificates issued
through real CSRs signed by kube-controller-manager), gateway objects/keys/Deployments/Services,
ResourceSlice acceptance, quotas, VirtualNodes, the virtual Node, namespace offloading and pod reflection.
What is stood in: the gateway pods (dataplane.py), the scheduler (tests bind pods themselves), the
API server's calls to the webhook (admission.py: only the VirtualNode mutation, after creation; no
validation), the fabric and the API server proxy.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from testenv import kube as k
from testenv.kube import Kube

from .admission import AdmissionStandIn, webhook_paths
from .binaries import LIQO_BINARIES, LiqoBinaryMissingError, liqo_binary, missing_binaries
from .dataplane import DataPlaneStandIn
from .install import ChartValues, apply_chart, render
from .runner import RUNNABLE, ComponentRunner

if TYPE_CHECKING:
    from testenv.localk8s import LocalCluster

__all__ = [
    "LIQO_BINARIES",
    "RUNNABLE",
    "AdmissionStandIn",
    "ComponentRunner",
    "DataPlaneStandIn",
    "LiqoBinaryMissingError",
    "RealLiqo",
    "liqo_binary",
    "missing_binaries",
]


@dataclass
class RealLiqo:
    """Liqo (real control plane + data-plane stand-in) on one local cluster."""

    cluster: LocalCluster
    cluster_id: str
    pod_cidr: str
    external_cidr: str
    namespace: str = "liqo"
    runner: ComponentRunner | None = field(default=None, init=False)
    dataplane: DataPlaneStandIn | None = field(default=None, init=False)
    admission: AdmissionStandIn | None = field(default=None, init=False)

    @property
    def kube(self) -> Kube:
        return Kube(self.cluster.api_client())

    def values(self) -> ChartValues:
        return ChartValues(
            cluster_id=self.cluster_id,
            pod_cidr=self.pod_cidr,
            external_cidr=self.external_cidr,
            service_cidr=self.cluster.service_cidr,
            api_server=self.cluster.server,
            namespace=self.namespace,
        )

    def up(self, timeout: float = 120) -> RealLiqo:
        for name in RUNNABLE:
            liqo_binary(name)  # fail fast with the fix when a binary is missing
        kc = self.kube
        docs = render(self.values())
        apply_chart(kc, docs, self.namespace, RUNNABLE)
        workdir = Path(self.cluster.workdir) / "liqo"
        self.runner = ComponentRunner(
            self.cluster.name, Kube(self.cluster.api_client()), self.cluster.kubeconfig, workdir
        )
        self.runner.start()
        self.admission = AdmissionStandIn(
            self.cluster.name, Kube(self.cluster.api_client()), self.runner, webhook_paths(docs)
        ).start()
        self.dataplane = DataPlaneStandIn(self.cluster.name, Kube(self.cluster.api_client()), self.namespace).start()
        self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float) -> None:
        """Liqo is usable: its Deployments are available, the Networks have a status, the keys exist."""
        kc = self.kube
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            deps = kc.list(k.DEPLOYMENT, self.namespace)
            not_ready = [d["metadata"]["name"] for d in deps if not (d.get("status") or {}).get("availableReplicas")]
            nets = [
                n["metadata"]["name"] for n in kc.list(k.NETWORK, self.namespace) if not n.get("status", {}).get("cidr")
            ]
            keys = kc.get(k.SECRET, "authentication-keys", self.namespace) is not None
            if deps and not not_ready and not nets and keys:
                return
            last = f"deployments not available: {not_ready}; networks without status: {nets}; keys: {keys}"
            time.sleep(0.5)
        runner = self.runner.describe() if self.runner else ""
        raise TimeoutError(f"{self.cluster.name}: Liqo not ready after {timeout}s: {last}\n{runner}")

    def down(self) -> None:
        if self.admission:
            self.admission.stop()
        if self.dataplane:
            self.dataplane.stop()
        if self.runner:
            self.runner.stop()

    def log(self, binary: str) -> str:
        """Concatenated logs of every process of that binary (for failure messages)."""
        if not self.runner:
            return ""
        out = []
        for p in self.runner.processes(binary):
            out.append(f"--- {p.log_path}\n" + p.log_path.read_text(errors="replace")[-6000:])
        return "\n".join(out)
