"""Data-plane stand-in: what Liqo's gateway pods and a LoadBalancer implementation would do, nothing more.

Liqo's gateway pods need WireGuard, network namespaces and a kubelet, none of which exist here. Per
cluster, this stand-in:

- marks the Pods of every gateway Deployment (the Deployments Liqo's WgGatewayServer/WgGatewayClient
  controllers create; recognised by the `gateway` container's `--mode`/`--gateway-uid` flags) Running
  and Ready with a pod IP (a kubelet's job), so the Deployment becomes Available, and labels each
  `networking.liqo.io/active=true` as the gateway's leader election does (Liqo's gateway templates put it on
  the Pod from v1.1.0; v1.0.3's do not, and its WgGatewayServer controller needs exactly one such Pod,
  pkg/gateway/label.go ForgeActiveGatewayPodLabels);
- gives the gateway server's LoadBalancer Service an ingress address, 127.0.0.1 (a cloud LB's job);
- creates the `Connection` the gateway pod creates (pkg/gateway/tunnel/wireguard/k8s.go EnsureConnection:
  name gw-<gateway>, label liqo.io/remote-cluster-id, owner = the GatewayServer/GatewayClient, spec.type and
  spec.gatewayRef) with status Connecting, then Connected once the gateway's pod is ready and the peer's
  PublicKey is present in the namespace (WireGuard needs it to handshake).

Fault knob: ConfigMap `liqo-dataplane-faults` in the Liqo namespace, key `connection`: `Never` (no
Connection is created: a tunnel that never comes up), `Connecting` or `Error` (that status, kept).
Everything else (keys, gateway Deployments and Services, WgGateway* objects, statuses of GatewayServer /
GatewayClient, ForeignCluster conditions) is written by Liqo's own controller manager.
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime

from testenv import kube as k
from testenv.kube import Kube, KubeError, Obj

from .loop import SyncLoop

FAULTS_CONFIGMAP = "liqo-dataplane-faults"
REMOTE = "liqo.io/remote-cluster-id"
ACTIVE = "networking.liqo.io/active"  # pkg/gateway/concurrent/label.go ActiveGatewayKey
GROUP_VERSION = "networking.liqo.io/v1beta1"
SERVICE = k.Res("", "v1", "services")
LB_ADDRESS = "127.0.0.1"


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def gateway_flags(dep: Obj) -> dict[str, str] | None:
    """The gateway container's --name/--namespace/--remote-cluster-id/--gateway-uid/--mode, or None."""
    for c in dep.get("spec", {}).get("template", {}).get("spec", {}).get("containers") or []:
        flags = dict(a[2:].split("=", 1) for a in c.get("args") or [] if a.startswith("--") and "=" in a)
        if c.get("name") == "gateway" and flags.get("mode") in ("server", "client") and "gateway-uid" in flags:
            return flags
    return None


class DataPlaneStandIn(SyncLoop):
    """One cluster's data plane, reconciled in a thread when what it reads changes (every `interval` seconds
    too, as a safety net)."""

    def __init__(self, name: str, kc: Kube, liqo_namespace: str = "liqo", interval: float = 5.0) -> None:
        super().__init__(name, interval)
        self.kc = kc
        self.liqo_namespace = liqo_namespace

    def watched(self) -> list[tuple[Kube, k.Res, str | None]]:
        kinds = (k.DEPLOYMENT, k.POD, SERVICE, k.CONNECTION, k.PUBLICKEY, k.CONFIGMAP)
        return [(self.kc, res, None) for res in kinds]

    def fault(self) -> str | None:
        cm = self.kc.get(k.CONFIGMAP, FAULTS_CONFIGMAP, self.liqo_namespace)
        return ((cm or {}).get("data") or {}).get("connection")

    def set_fault(self, value: str | None) -> None:
        """Set (or with None, clear) the `connection` fault."""
        if value is None:
            with contextlib.suppress(KubeError):
                self.kc.delete(k.CONFIGMAP, FAULTS_CONFIGMAP, self.liqo_namespace)
            return
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": FAULTS_CONFIGMAP, "namespace": self.liqo_namespace},
            "data": {"connection": value},
        }
        self.kc.apply(k.CONFIGMAP, body, "liqo-dataplane", self.liqo_namespace)

    # --- one pass --------------------------------------------------------------------------------------
    def sync(self) -> None:
        fault = self.fault()
        for dep in self.kc.list(k.DEPLOYMENT):
            flags = gateway_flags(dep)
            if flags is None or dep["metadata"].get("deletionTimestamp"):
                continue
            ns = dep["metadata"]["namespace"]
            ready = self._pods_ready(dep)
            if flags["mode"] == "server":
                self._service_address(ns, dep["metadata"]["name"])
            self._connection(ns, flags, ready, fault)

    def _pods_ready(self, dep: Obj) -> bool:
        ns = dep["metadata"]["namespace"]
        sel = ",".join(f"{a}={b}" for a, b in (dep["spec"]["selector"].get("matchLabels") or {}).items())
        any_ready = False
        for pod in self.kc.list(k.POD, ns, sel):
            if pod["metadata"].get("deletionTimestamp"):
                continue
            if (pod["metadata"].get("labels") or {}).get(ACTIVE) != "true":
                self.kc.patch(k.POD, pod["metadata"]["name"], {"metadata": {"labels": {ACTIVE: "true"}}}, ns)
            conds = (pod.get("status") or {}).get("conditions") or []
            if any(c["type"] == "Ready" and c["status"] == "True" for c in conds):
                any_ready = True
                continue
            t = _now()
            status = {
                "phase": "Running",
                "hostIP": "127.0.0.1",
                "podIP": "127.0.0.1",
                "podIPs": [{"ip": "127.0.0.1"}],
                "startTime": t,
                "conditions": [
                    {"type": c, "status": "True", "lastTransitionTime": t}
                    for c in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
                ],
            }
            self.kc.patch(k.POD, pod["metadata"]["name"], {"status": status}, ns, sub="status")
            any_ready = True
        return any_ready

    def _service_address(self, ns: str, name: str) -> None:
        svc = self.kc.get(SERVICE, name, ns)
        if not svc or (svc.get("spec") or {}).get("type") != "LoadBalancer":
            return
        if ((svc.get("status") or {}).get("loadBalancer") or {}).get("ingress"):
            return
        self.kc.patch(SERVICE, name, {"status": {"loadBalancer": {"ingress": [{"ip": LB_ADDRESS}]}}}, ns, sub="status")

    def _connection(self, ns: str, flags: dict[str, str], ready: bool, fault: str | None) -> None:
        gw_name, remote = flags["name"], flags.get("remote-cluster-id", "")
        conn_name = f"gw-{gw_name}"
        existing = self.kc.get(k.CONNECTION, conn_name, ns)
        if fault == "Never" or not ready:
            return
        server = flags["mode"] == "server"
        if existing is None:
            owner_kind = "GatewayServer" if server else "GatewayClient"
            body = {
                "apiVersion": GROUP_VERSION,
                "kind": "Connection",
                "metadata": {
                    "name": conn_name,
                    "namespace": ns,
                    "labels": {REMOTE: remote},
                    "ownerReferences": [
                        {"apiVersion": GROUP_VERSION, "kind": owner_kind, "name": gw_name, "uid": flags["gateway-uid"]}
                    ],
                },
                "spec": {
                    "type": "Server" if server else "Client",
                    "gatewayRef": {
                        "apiVersion": GROUP_VERSION,
                        "kind": "WgGatewayServer" if server else "WgGatewayClient",
                        "name": gw_name,
                        "namespace": ns,
                        "uid": flags["gateway-uid"],
                    },
                },
            }
            try:
                existing = self.kc.create(k.CONNECTION, body, ns)
            except KubeError as e:
                if e.status != 409:
                    raise
                existing = self.kc.get(k.CONNECTION, conn_name, ns)
                if existing is None:
                    return
        peer_key = any(labels_of(p).get(REMOTE) == remote for p in self.kc.list(k.PUBLICKEY, ns))
        value = fault if fault in ("Connecting", "Error") else ("Connected" if peer_key else "Connecting")
        if (existing.get("status") or {}).get("value") != value:
            status = {"value": value, "latency": {"value": "1ms", "timestamp": _now()}}
            self.kc.patch(k.CONNECTION, conn_name, {"status": status}, ns, sub="status")


def labels_of(obj: Obj) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})
