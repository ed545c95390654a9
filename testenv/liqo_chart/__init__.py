"""Liqo as users install it: `helm install liqo` of Liqo's own chart, unchanged, from the Go module of the
chosen version (LIQO_VERSION by default) in the module cache, on local clusters with real nodes
(testenv.localk8s), its images built here (hack/build-liqo-images.sh) and imported into the nodes' containerd.

Only values are set (`chart_values`): the images (names and tags of the local ones, pullPolicy
IfNotPresent), the WireGuard implementation (userspace: the test hosts' kernel need not have a WireGuard module), the
clusters' Pod and Service CIDRs, their cluster IDs and their API servers' addresses. The clusters' API
servers reach Services through node 0 (localk8s `egress`), so Liqo's admission webhook is called as in any
cluster: through its Service.

    pair = LiqoChartPair.start(base_dir)   # two clusters with a node each, images loaded, Liqo installed
    pair = LiqoChartPair.start(base_dir, liqo_images("1.1.2"), version="1.1.2")   # another Liqo version
    pair.wait_available()                  # every Liqo Deployment and DaemonSet available, its webhook answering
    pair = LiqoChartPair.up(base_dir)      # the two at once (stopped again if Liqo never becomes available)
    pair.upgrade("provider", "1.2.0")      # `helm upgrade` Liqo on one side to another version's chart
    pair.stop()
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from testenv import kube as k
from testenv.helm import run_helm
from testenv.kube import Kube
from testenv.liqo_env import chart_dir, liqo_version
from testenv.localk8s import LocalCluster, start_clusters
from testenv.localk8s.images import Image, ImagesMissingError
from testenv.localk8s.network import run as run_in_netns
from testenv.localk8s.tools import REPO_ROOT
from testenv.wait import wait_progressing

NAMESPACE = "liqo"
# wait_available gives Liqo at most this many times its timeout in all, however it progresses.
PROGRESS_LIMIT = 3
RELEASE = "liqo"

# Where the chart's values name each image (<prefix>.name, <prefix>.version).
IMAGE_VALUES = {
    "liqo-controller-manager": "controllerManager.image",
    "crd-replicator": "crdReplicator.image",
    "ipam": "ipam.internal.image",
    "webhook": "webhook.image",
    "proxy": "proxy.image",
    "virtual-kubelet": "virtualKubelet.image",
    "metric-agent": "metricAgent.image",
    "cert-creator": "metricAgent.initContainer.image",
    "telemetry": "telemetry.image",
    "uninstaller": "uninstaller.image",
    "fabric": "networking.fabric.image",
    "gateway": "networking.gatewayTemplates.container.gateway.image",
    "gateway/wireguard": "networking.gatewayTemplates.container.wireguard.image",
    "gateway/geneve": "networking.gatewayTemplates.container.geneve.image",
}
CLUSTERS = ("consumer", "provider")
DEPLOYMENT = k.Res("apps", "v1", "deployments")
DAEMONSET = k.Res("apps", "v1", "daemonsets")


def images_manifest(version: str | None = None) -> Path:
    """Written by hack/build-liqo-images.sh for a Liqo version: {"<image>": {"ref": ..., "archive": ...}}."""
    return REPO_ROOT / ".local" / f"liqo-images-{version or liqo_version()}.json"


def liqo_images(version: str | None = None) -> dict[str, Image]:
    """The images hack/build-liqo-images.sh built for this checkout and a Liqo version (LIQO_VERSION by
    default), by name (as in IMAGE_VALUES)."""
    version = version or liqo_version()
    manifest = images_manifest(version)
    build = f"LIQO_VERSION={version} hack/build-liqo-images.sh"
    if not manifest.is_file():
        raise ImagesMissingError(f"{manifest} is missing; run {build} first")
    entries = json.loads(manifest.read_text())
    images = {name: Image(entry["ref"], Path(entry["archive"])) for name, entry in entries.items()}
    missing = sorted(set(IMAGE_VALUES) - set(images))
    if missing:
        raise ImagesMissingError(f"{manifest} lacks {missing}; run {build} again")
    for image in images.values():
        if not image.archive.is_file():
            raise ImagesMissingError(f"{image.archive} is missing; run {build} again")
    return images


def chart_values(
    cluster: LocalCluster, cluster_id: str, images: dict[str, Image], version: str | None = None
) -> list[str]:
    """The --set values of one cluster's install: images, WireGuard in userspace, CIDRs, cluster ID."""
    values = [
        "pullPolicy=IfNotPresent",
        # The chart has no appVersion: its labels take the tag; each image has its own version below.
        f"tag=v{version or liqo_version()}",
        "networking.gatewayTemplates.wireguard.implementation=userspace",
        f"ipam.podCIDR={cluster.pod_cidr}",
        f"ipam.serviceCIDR={cluster.service_cidr}",
        f"discovery.config.clusterID={cluster_id}",
        # Where the other cluster reaches this one's API server (the kubeconfigs Liqo's Tenant controller
        # issues). Without it Liqo looks for a control-plane Node, and this control plane is no Node:
        # "no ApiServer.Address variable provided and no master node found" (at peering, not at install).
        f"apiServer.address={cluster.server}",
    ]
    for name, prefix in IMAGE_VALUES.items():
        repository, tag = images[name].ref.rsplit(":", 1)
        values += [f"{prefix}.name={repository}", f"{prefix}.version={tag}"]
    return values


def load_images(clusters: list[LocalCluster], images: dict[str, Image]) -> float:
    """Import every image into every node of the clusters, one importer per cluster; the seconds it took."""
    started = time.monotonic()

    def load(cluster: LocalCluster) -> None:
        for image in images.values():
            cluster.load_image(image.archive)

    with ThreadPoolExecutor(max_workers=len(clusters) or 1) as pool:
        for f in [pool.submit(load, c) for c in clusters]:
            f.result()
    return time.monotonic() - started


FOREIGN_CLUSTER = k.Res("core.liqo.io", "v1beta1", "foreignclusters")


def foreign_cluster(cluster_id: str) -> dict[str, Any]:
    """A bare ForeignCluster, which Liqo's fc.mutate.liqo.io webhook (failing closed) labels with its cluster ID."""
    return {
        "apiVersion": "core.liqo.io/v1beta1",
        "kind": "ForeignCluster",
        "metadata": {"name": cluster_id},
        "spec": {"clusterID": cluster_id},
    }


def webhook_answers(kc: Kube) -> bool:
    """Whether the API server gets an answer from Liqo's webhook through its Service: a ForeignCluster created
    as a dry run comes back with the label the webhook adds."""
    try:
        answer = kc.create(FOREIGN_CLUSTER, foreign_cluster("webhook-probe"), dry_run=True)
    except k.KubeError:
        return False
    return bool(((answer.get("metadata") or {}).get("labels") or {}).get("liqo.io/remote-cluster-id"))


@dataclass
class Workload:
    kind: str
    name: str
    desired: int
    available: int
    # Its controller has rolled out its newest spec (after a `helm upgrade`).
    current: bool = True

    @property
    def ok(self) -> bool:
        return self.desired > 0 and self.available == self.desired


def _rolled_out(obj: dict[str, Any], updated: str, want: int) -> bool:
    status = obj.get("status") or {}
    return status.get("observedGeneration") == obj["metadata"].get("generation") and status.get(updated, 0) == want


def workloads(kc: Kube) -> list[Workload]:
    """Liqo's Deployments and DaemonSets in its namespace, with their available replicas."""
    out = []
    for d in kc.list(DEPLOYMENT, NAMESPACE):
        status = d.get("status") or {}
        out.append(
            Workload(
                "Deployment",
                d["metadata"]["name"],
                d["spec"].get("replicas", 1),
                status.get("availableReplicas", 0),
                _rolled_out(d, "updatedReplicas", d["spec"].get("replicas", 1)),
            )
        )
    for ds in kc.list(DAEMONSET, NAMESPACE):
        status = ds.get("status") or {}
        out.append(
            Workload(
                "DaemonSet",
                ds["metadata"]["name"],
                status.get("desiredNumberScheduled", 0),
                status.get("numberAvailable", 0),
                _rolled_out(ds, "updatedNumberScheduled", status.get("desiredNumberScheduled", 0)),
            )
        )
    return out


def pod_report(kc: Kube) -> list[str]:
    """One line per Pod in Liqo's namespace: phase, readiness, each container's state (waiting reason and
    message, last termination), for reports and failure messages."""
    lines = []
    for pod in kc.list(k.POD, NAMESPACE):
        status = pod.get("status") or {}
        ready = any(c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or [])
        parts = [f"{pod['metadata']['name']}: {status.get('phase')} ready={ready}"]
        for c in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
            state = c.get("state") or {}
            (kind, detail), *_ = state.items() or [("unknown", {})]
            desc = f"{c['name']} {kind}"
            if detail.get("reason"):
                desc += f" {detail['reason']}"
            if detail.get("message"):
                desc += f": {detail['message'][:300]}"
            if c.get("restartCount"):
                last = (c.get("lastState") or {}).get("terminated") or {}
                desc += f" (restarts {c['restartCount']}, last exit {last.get('exitCode')} {last.get('reason', '')})"
            parts.append(desc)
        lines.append("; ".join(parts))
    return lines


def logs_tail(kc: Kube, lines: int = 15) -> str:
    """The last lines of the log of every container in Liqo's namespace that is not ready."""
    out = []
    for pod in kc.list(k.POD, NAMESPACE):
        name = pod["metadata"]["name"]
        for c in (pod.get("status") or {}).get("containerStatuses") or []:
            if c.get("ready"):
                continue
            for previous in ("false", "true") if c.get("restartCount") else ("false",):
                path = f"/api/v1/namespaces/{NAMESPACE}/pods/{name}/log?container={c['name']}&previous={previous}"
                try:
                    text = kc.get_text(path)
                except k.KubeError as exc:
                    text = f"(no log: {exc})"
                tail = "\n".join(text.splitlines()[-lines:])
                out.append(f"--- {name}/{c['name']}{' (previous)' if previous == 'true' else ''}\n{tail}")
    return "\n".join(out)


# The table of set_connection_fault's partition, in a node's namespace; set_port_forward's NAT's.
PARTITION_TABLE = "liqo-e2e-partition"
NAT_TABLE = "liqo-e2e-nat"


@dataclass
class LiqoChartPair:
    base_dir: Path
    clusters: dict[str, LocalCluster]
    images: dict[str, Image]
    timings: dict[str, float] = field(default_factory=dict)
    # The Liqo version installed on each side (LIQO_VERSION unless upgraded).
    versions: dict[str, str] = field(default_factory=dict)
    # The refs of the images imported into each side's node.
    loaded: dict[str, set[str]] = field(default_factory=dict)
    # Where the Pods' logs (Liqo's components, gateways, virtual kubelets) are copied on stop.
    keep_logs: Path | None = None
    # No load balancer here: a LiqoPeering exposes the provider's gateway on its node's port.
    peering_networking: dict[str, object] = field(
        default_factory=lambda: {"gatewayServer": {"serviceType": "NodePort"}}
    )
    # The same choice for `liqoctl peer`.
    liqoctl_peer_args: list[str] = field(default_factory=lambda: ["--gw-server-service-type", "NodePort"])
    schedules_pods = True  # kube-scheduler runs

    def __getitem__(self, side: str) -> LocalCluster:
        return self.clusters[side]

    @property
    def ids(self) -> dict[str, str]:
        return {side: self.cluster_id(side) for side in self.clusters}

    @classmethod
    def start(
        cls,
        base_dir: Path,
        images: dict[str, Image] | None = None,
        version: str | None = None,
        signing_duration: str | None = None,
    ) -> LiqoChartPair:
        """Two clusters with one node each, the images in their nodes, Liqo (`version`, LIQO_VERSION by
        default) installed on both (not waited for: see wait_available). `signing_duration`: the lifetime of the
        certificates both clusters' CSR signers issue (Liqo's identities for the other cluster: the provider's
        for the consumer, the consumer's for a bidirectional peering's reverse direction), a year by default."""
        version = version or liqo_version()
        images = images or liqo_images(version)
        started = time.monotonic()
        durations = dict.fromkeys(CLUSTERS, signing_duration) if signing_duration else None
        clusters = start_clusters(list(CLUSTERS), base_dir, nodes=1, egress=True, signing_duration=durations)
        pair = cls(base_dir, clusters, images, versions=dict.fromkeys(CLUSTERS, version))
        pair.loaded = {side: {i.ref for i in images.values()} for side in CLUSTERS}
        try:
            pair.timings["clusters"] = time.monotonic() - started
            pair.timings["images"] = load_images(list(clusters.values()), images)
            pair.install()
        except BaseException:
            pair.stop()
            raise
        return pair

    @classmethod
    def up(
        cls, base_dir: Path, images: dict[str, Image] | None = None, timeout: float = 240, version: str | None = None
    ) -> LiqoChartPair:
        """start, then wait_available; the pair is stopped again if Liqo does not become available."""
        pair = cls.start(base_dir, images, version)
        try:
            pair.wait_available(timeout)
        except BaseException:
            pair.stop()
            raise
        return pair

    def kube(self, side: str) -> Kube:
        return Kube(self.clusters[side].api_client())

    def cluster_id(self, side: str) -> str:
        return f"{side}-chart-id"

    def install(self) -> None:
        started = time.monotonic()

        def install(side: str) -> str:
            return self.helm(side, "install", self.versions[side], self.images)

        with ThreadPoolExecutor(max_workers=len(self.clusters)) as pool:
            for f in [pool.submit(install, side) for side in self.clusters]:
                f.result()
        self.timings["helm install"] = time.monotonic() - started

    def helm(self, side: str, command: str, version: str, images: dict[str, Image]) -> str:
        """`helm install|upgrade` Liqo's chart of `version` on one side, with these images."""
        cluster = self.clusters[side]
        args = [command, RELEASE, str(chart_dir(version)), "--namespace", NAMESPACE, "--create-namespace"]
        for value in chart_values(cluster, self.cluster_id(side), images, version):
            args += ["--set", value]
        return run_helm(*args, kubeconfig=cluster.kubeconfig, timeout=300)

    def load(self, images: dict[str, Image], sides: tuple[str, ...] = CLUSTERS) -> None:
        """Import images into the nodes of these sides (side by side), ahead of an upgrade to them."""
        todo = [side for side in sides if not {i.ref for i in images.values()} <= self.loaded.get(side, set())]
        if todo:
            took = load_images([self.clusters[side] for side in todo], images)
            self.timings["images loaded again"] = self.timings.get("images loaded again", 0.0) + took
        for side in todo:
            self.loaded.setdefault(side, set()).update(i.ref for i in images.values())

    def upgrade(self, side: str, version: str, images: dict[str, Image] | None = None) -> None:
        """`helm upgrade` Liqo on one side to the chart of another version, as Liqo's docs upgrade it (its
        images loaded into the side's node first, unless `load` did); returns once every Liqo workload there
        is available and rolled out.

        Helm does not upgrade a chart's crds/: Liqo's upgrade guide applies the new CRDs first, done here
        too (server-side, as `kubectl apply --server-side`)."""
        images = images or liqo_images(version)
        self.load(images, (side,))
        started = time.monotonic()
        kc = self.kube(side)
        for crd in sorted((chart_dir(version) / "charts" / "liqo-crds" / "crds").glob("*.yaml")):
            for doc in yaml.safe_load_all(crd.read_text()):
                if doc:
                    kc.apply(k.CRD, doc, "liqo-upgrade")
        self.helm(side, "upgrade", version, images)
        self.versions[side] = version
        self.wait_available(sides=(side,))
        self.timings[f"upgrade {side}"] = time.monotonic() - started

    def restart(self, side: str) -> None:
        """`kubectl rollout restart` of every Liqo Deployment and DaemonSet on one side: its controllers start
        afresh, with new informers. Returns at once; wait_available waits for the rollout."""
        kc = self.kube(side)
        stamp = {"kubectl.kubernetes.io/restartedAt": datetime.now(UTC).isoformat(timespec="seconds")}
        patch = {"spec": {"template": {"metadata": {"annotations": stamp}}}}
        for res in (DEPLOYMENT, DAEMONSET):
            for obj in kc.list(res, NAMESPACE):
                kc.patch(res, obj["metadata"]["name"], patch, NAMESPACE)

    def wait_available(self, timeout: float = 240, sides: tuple[str, ...] = ()) -> dict[str, list[Workload]]:
        """Every Liqo Deployment and DaemonSet available on both clusters, and each API server answered by Liqo's
        webhook through its Service; else AssertionError with each Pod's state and the logs of those not ready.

        The wait follows progress, not a fixed deadline: on a loaded machine Liqo's Pods take longer to
        schedule, start and pass their probes. Each change in a workload's or a Pod's state (scheduled,
        started, restarted, ready) gives it `timeout` more, up to PROGRESS_LIMIT times `timeout` in all."""
        started = time.monotonic()
        kcs = {side: self.kube(side) for side in sides or self.clusters}

        def available() -> dict[str, list[Workload]] | None:
            state = {side: workloads(kc) for side, kc in kcs.items()}
            if not all(ws and all(w.ok and w.current for w in ws) for ws in state.values()):
                return None
            # Its webhook's Pod ready is not yet its Service routed on the node the API server dials through.
            return state if all(webhook_answers(kc) for kc in kcs.values()) else None

        try:
            state = wait_progressing(
                "Liqo available", available, lambda: self.report(kcs, logs=False), timeout, PROGRESS_LIMIT, 2
            )
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.report(kcs)}") from None
        self.timings["available"] = time.monotonic() - started
        return state

    def report(self, kcs: dict[str, Kube] | None = None, logs: bool = True) -> str:
        kcs = kcs or {side: self.kube(side) for side in self.clusters}
        out = []
        for side, kc in kcs.items():
            out.append(f"== {side}")
            for w in workloads(kc):
                out.append(f"{w.kind} {w.name}: {w.available}/{w.desired} available")
            out += pod_report(kc)
            if logs:
                out.append(logs_tail(kc))
        return "\n".join(out)

    def set_connection_fault(self, value: str | None, side: str = "consumer") -> None:
        """Any value: `side`'s node drops every UDP datagram to or from the other side's node, so the
        gateways' WireGuard tunnel has no handshake and Liqo's Connections are not Connected: a partition of
        the data plane, where the process tier's stand-in writes the Connections' status itself. None: the
        partition heals (WireGuard retries its handshake by itself)."""
        node = self.clusters[side].node_specs()[0]
        peer = self.clusters["provider" if side == "consumer" else "consumer"].node_specs()[0].ip
        # Deleting a table that does not exist fails: create it (a no-op when present) first.
        rules = f"table inet {PARTITION_TABLE} {{}}\ndelete table inet {PARTITION_TABLE}\n"
        if value is not None:
            chains = "".join(
                f"    chain {hook} {{ type filter hook {hook} priority filter; policy accept;"
                f" ip daddr {peer} meta l4proto udp drop; ip saddr {peer} meta l4proto udp drop; }}\n"
                for hook in ("input", "forward", "output")
            )
            rules += f"table inet {PARTITION_TABLE} {{\n{chains}}}\n"
        run_in_netns(["nft", "-f", "-"], node.netns, stdin=rules)

    def set_port_forward(self, side: str, to: str, ports: tuple[int, int] | None) -> None:
        """A NAT on the path: on `side`'s node, UDP to `to`'s node on ports[0] is sent to its port ports[1]
        instead (DNAT, before kube-proxy's rules at -100, for the node's own and its Pods' packets), counted. None:
        no NAT."""
        node = self.clusters[side].node_specs()[0]
        peer = self.clusters[to].node_specs()[0].ip
        rules = f"table ip {NAT_TABLE} {{}}\ndelete table ip {NAT_TABLE}\n"
        if ports is not None:
            outer, inner = ports
            chains = "".join(
                f"    chain {hook} {{ type nat hook {hook} priority -110; policy accept;"
                f" ip daddr {peer} udp dport {outer} counter dnat to {peer}:{inner}; }}\n"
                for hook in ("prerouting", "output")
            )
            rules += f"table ip {NAT_TABLE} {{\n{chains}}}\n"
        run_in_netns(["nft", "-f", "-"], node.netns, stdin=rules)

    def port_forwarded(self, side: str) -> int:
        """The packets set_port_forward's NAT on `side`'s node has sent on."""
        node = self.clusters[side].node_specs()[0]
        listed = run_in_netns(["nft", "list", "table", "ip", NAT_TABLE], node.netns)
        return sum(int(n) for n in re.findall(r"counter packets (\d+)", listed))

    def virtual_kubelets(self) -> int:
        """The consumer's virtual-kubelet Pods that are Running."""
        pods = self.kube("consumer").list(k.POD, selector="offloading.liqo.io/component=virtual-kubelet")
        return len([p for p in pods if (p.get("status") or {}).get("phase") == "Running"])

    def diagnostics(self) -> list[str]:
        return [f"Liqo's Pod logs are copied to {self.keep_logs} at the end", self.report()]

    def stop(self) -> None:
        if self.keep_logs is not None:
            # Before the clusters stop: LocalCluster.stop removes its workdir, and the Pods' logs are in it.
            for side, cluster in self.clusters.items():
                for node in cluster.node_specs():
                    logs = node.dir / "pod-logs"
                    # A Pod's log may go while it is copied (its Pod deleted): copy what is left.
                    with contextlib.suppress(shutil.Error, OSError):
                        shutil.copytree(logs, self.keep_logs / side / node.name, dirs_exist_ok=True)
        for cluster in self.clusters.values():
            cluster.stop()
