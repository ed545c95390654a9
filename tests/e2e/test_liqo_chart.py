"""Liqo as users install it (testenv.liqo_chart): `helm install liqo` of Liqo's own chart, unchanged, from the
pinned Go module, on two local clusters with a real node each; Liqo's images built here
(hack/build-liqo-images.sh) and loaded into the nodes. Marker `liqochart`.

Only values are set: the images, WireGuard in userspace, the Pod/Service CIDRs and the cluster IDs. Every
Deployment and DaemonSet of the chart must become available on both clusters: the controller manager, CRD
replicator, IPAM, webhook, proxy, metric agent (its cert-creator init container first) and the fabric on
the node. The API server calls Liqo's webhook through its Service (localk8s `egress`).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from testenv import kube as k
from testenv.liqo_chart import (
    DAEMONSET,
    DEPLOYMENT,
    NAMESPACE,
    LiqoChartPair,
    liqo_images,
)
from testenv.localk8s.images import Image
from testenv.localk8s.pytest_plugin import images_or_skip

pytestmark = [pytest.mark.liqochart]

# What the chart deploys with these values (telemetry: a CronJob; gateways and virtual kubelets: per peering).
DEPLOYMENTS = {
    "liqo-controller-manager",
    "liqo-crd-replicator",
    "liqo-ipam",
    "liqo-webhook",
    "liqo-proxy",
    "liqo-metric-agent",
}
DAEMONSETS = {"liqo-fabric"}


@pytest.fixture(scope="module")
def images() -> dict[str, Image]:
    return images_or_skip(liqo_images)


@pytest.fixture(scope="module")
def pair(images: dict[str, Image]) -> Iterator[LiqoChartPair]:
    # Short: a node's unix socket paths must fit 108 bytes.
    base_dir = Path(tempfile.mkdtemp(prefix="lchart-"))
    pair = LiqoChartPair.start(base_dir, images)
    try:
        yield pair
    finally:
        pair.stop()
        shutil.rmtree(base_dir, ignore_errors=True)


def test_every_liqo_workload_is_available_on_both_clusters(pair: LiqoChartPair) -> None:
    state = pair.wait_available(timeout=240)
    print(" ".join(f"{name}: {seconds:.1f}s" for name, seconds in pair.timings.items()))
    print(pair.report(logs=False))
    for side, workloads in state.items():
        deployments = {w.name for w in workloads if w.kind == "Deployment"}
        daemonsets = {w.name for w in workloads if w.kind == "DaemonSet"}
        assert deployments == DEPLOYMENTS, (side, deployments)
        assert daemonsets == DAEMONSETS, (side, daemonsets)
        assert all(w.ok for w in workloads), (side, workloads)


def test_the_pods_run_the_local_images_on_the_node(pair: LiqoChartPair, images: dict[str, Image]) -> None:
    refs = {image.ref for image in images.values()}
    for side in pair.clusters:
        kc = pair.kube(side)
        pods = kc.list(k.POD, NAMESPACE)
        assert pods, side
        for pod in pods:
            assert pod["spec"]["nodeName"] == f"{side}-node-0", pod["metadata"]["name"]
            for c in pod["spec"].get("initContainers", []) + pod["spec"]["containers"]:
                assert c["image"] in refs, (pod["metadata"]["name"], c["image"])
        # The chart's own objects, unchanged: its Deployments carry its labels.
        for d in kc.list(DEPLOYMENT, NAMESPACE) + kc.list(DAEMONSET, NAMESPACE):
            assert d["metadata"]["labels"]["app.kubernetes.io/part-of"] == "liqo"


def test_the_api_server_calls_liqos_webhook_through_its_service(pair: LiqoChartPair) -> None:
    """A ForeignCluster (matched by fc.mutate.liqo.io, failurePolicy Fail) is admitted only if the webhook
    answers, and comes back with the label the webhook adds (pkg/webhooks/foreigncluster); the egress proxy's
    log shows the API server dialling the webhook Service's ClusterIP."""
    cluster = pair.clusters["consumer"]
    kc = pair.kube("consumer")
    service = kc.get(k.Res("", "v1", "services"), "liqo-webhook", NAMESPACE)
    assert service is not None
    cluster_ip = service["spec"]["clusterIP"]
    res = k.Res("core.liqo.io", "v1beta1", "foreignclusters")
    fc = {
        "apiVersion": "core.liqo.io/v1beta1",
        "kind": "ForeignCluster",
        "metadata": {"name": "probe-cluster"},
        "spec": {"clusterID": "probe-cluster"},
    }
    created = kc.create(res, fc)
    try:
        assert created["metadata"]["labels"]["liqo.io/remote-cluster-id"] == "probe-cluster", created["metadata"]
    finally:
        kc.delete(res, "probe-cluster")
    log = cluster.log_path(cluster.node_specs()[0].process("egress")).read_text()
    assert f"CONNECT {cluster_ip}:" in log, log[-2000:]
