"""Liqo's Helm chart, rendered for a local cluster and applied except for what cannot run here.

Rendered with `helm template` from the pinned Liqo module (liqo_env.chart_dir / helm_binary) with the
values a local cluster needs (cluster ID, CIDRs, `apiServer.address` = the loopback API server).
Applied: the CRDs, every non-workload object liqo_env keeps (RBAC, cluster-ID ConfigMap, gateway
templates, Networks, VkOptionsTemplate), the Services and Secrets (EXTRA_KINDS), and the Deployments
whose container runs a Liqo binary that testenv/liqo_real runs as a local process (see runner.RUNNABLE).
Unlike liqo_env.install_liqo, nothing is written on Liqo's behalf: Network statuses come from Liqo's
network controller and IPAM, Secret `authentication-keys` from the controller manager.

Left out: the proxy and metric-agent Deployments, the fabric DaemonSet, Jobs/CronJobs, the webhook
configurations (the API server cannot reach the webhook: its Service has no routable address here and
Endpoints refuse loopback IPs, so with failurePolicy Fail every matching request would fail; admission.py
delivers the one mutation the control plane cannot do without), the metric agent's APIService,
StorageClass, RuntimeClass, OpenShift SCCs, FirewallConfigurations.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass

import yaml

from testenv.kube import Kube, Obj
from testenv.liqo_env import KEEP_KINDS, apply_crds, apply_rendered, chart_dir, helm_binary

from .binaries import liqo_version

MANAGER = "liqo-real"
# Beyond liqo_env.KEEP_KINDS: Services are inert without kube-proxy, but the controller manager reads them
# (it refuses to start without the liqo-proxy Service: "unable to enforce the API server proxy IP
# remapping: no proxy service found").
# The chart's only Secret is liqo-webhook-certs, which the webhook fills at start-up.
EXTRA_KINDS = frozenset({"Service", "Secret"})


@dataclass(frozen=True)
class ChartValues:
    cluster_id: str
    pod_cidr: str
    external_cidr: str
    service_cidr: str
    api_server: str  # https://127.0.0.1:<port>
    namespace: str = "liqo"

    def sets(self) -> list[str]:
        return [
            f"tag=v{liqo_version()}",
            f"discovery.config.clusterID={self.cluster_id}",
            f"ipam.podCIDR={self.pod_cidr}",
            f"ipam.serviceCIDR={self.service_cidr}",
            f"ipam.externalCIDR={self.external_cidr}",
            # What the tenant controller puts in the kubeconfigs it issues (--api-server-address-override).
            f"apiServer.address={self.api_server}",
            "telemetry.enabled=false",
        ]


def render(values: ChartValues) -> list[Obj]:
    """`helm template` Liqo's chart with these values; every rendered object, CRDs included."""
    cmd = [str(helm_binary()), "template", "liqo", str(chart_dir()), "--namespace", values.namespace, "--include-crds"]
    for v in values.sets():
        cmd += ["--set", v]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return [d for d in yaml.safe_load_all(out) if isinstance(d, dict) and d.get("kind")]


def container_binary(workload: Obj) -> str | None:
    """Basename of the (single) container's command of a Deployment, e.g. "liqo-controller-manager"."""
    containers = workload.get("spec", {}).get("template", {}).get("spec", {}).get("containers") or []
    if len(containers) != 1 or not containers[0].get("command"):
        return None
    return str(containers[0]["command"][0]).rsplit("/", 1)[-1]


def apply_chart(kc: Kube, docs: list[Obj], namespace: str, runnable: frozenset[str]) -> list[Obj]:
    """Apply the rendered chart except the workloads that do not run here; returns the applied Deployments."""
    plurals = apply_crds(kc, docs, namespace)
    deployments = []
    for obj in docs:
        kind = obj["kind"]
        if kind == "Deployment":
            if container_binary(obj) not in runnable:
                continue
            deployments.append(obj)
        elif kind not in KEEP_KINDS and kind not in EXTRA_KINDS:
            continue
        apply_rendered(kc, obj, plurals, namespace, MANAGER)
    return deployments
