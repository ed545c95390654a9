"""Liqo as users install it (testenv.liqo_chart): `helm install liqo` of Liqo's own chart, unchanged, from the
pinned Go module, on two local clusters with a real node each; Liqo's images built here
(hack/build-liqo-images.sh) and loaded into the nodes. Marker `liqochart`.

Only values are set: the images, WireGuard in userspace, the Pod/Service CIDRs and the cluster IDs. Every
Deployment and DaemonSet of the chart must become available on both clusters: the controller manager, CRD
replicator, IPAM, webhook, proxy, metric agent (its cert-creator init container first) and the fabric on
the node. The API server calls Liqo's webhook through its Service (localk8s `egress`).

Then the operator peers the pair: its LiqoPeering becomes Ready with Liqo's real gateways
(WireGuard in userspace, Connections `Connected` both ways), here with the gateway server and its Service on the
consumer and the client on the provider (spec.networking.gatewayServer.location: Consumer; the real-Liqo suite
peers with the server on the provider, the default), a Deployment in an offloaded namespace is put
on the virtual node by kube-scheduler and runs on the provider's node. The provider's node then drops the
tunnel's packets (GatewayUnreachable, naming the endpoint the provider dials, then Ready once let through);
the consumer's Liqo reaches the provider through an authenticating proxy with its own CA
(spec.authentication.apiServer); and deleting the LiqoPeering unpeers both sides. These tests share one
peering and run in this order, after the install tests. Last, a new peering whose gateway server is behind a
NAT that maps another port to the server's NodePort, which the client dials through
spec.networking.gatewayClient.
"""

from __future__ import annotations

import base64
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import common_metadata
import pytest
import yaml

from testenv import chart_rbac, liqo_info
from testenv import kube as k
from testenv.frontproxy import AuthenticatingProxy
from testenv.kube import Kube
from testenv.liqo_chart import (
    DAEMONSET,
    DEPLOYMENT,
    FOREIGN_CLUSTER,
    NAMESPACE,
    LiqoChartPair,
    foreign_cluster,
    liqo_images,
    pod_report,
)
from testenv.liqo_install import install_kind
from testenv.localk8s.images import Image
from testenv.offload import offload_a_pod, ready
from testenv.operator_support import SECRET, OperatorProcess, Peerings, api_client, install_crd, wait_for

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
    return liqo_images()


@pytest.fixture(scope="module")
def pair(images: dict[str, Image], request: pytest.FixtureRequest) -> Iterator[LiqoChartPair]:
    """The realliqo suite's pair when that is Liqo's chart (the default), else one of this module's own."""
    if install_kind() == "chart":
        yield request.getfixturevalue("real_liqo")
        return
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
    created = kc.create(FOREIGN_CLUSTER, foreign_cluster("probe-cluster"))
    try:
        assert created["metadata"]["labels"]["liqo.io/remote-cluster-id"] == "probe-cluster", created["metadata"]
    finally:
        kc.delete(FOREIGN_CLUSTER, "probe-cluster")
    log = cluster.log_path(cluster.node_specs()[0].process("egress")).read_text()
    assert f"CONNECT {cluster_ip}:" in log, log[-2000:]


# --- the operator peers the pair -----------------------------------------------------------------------------
PEERING_NS = "chart-peering"
NAME = "provider"
OFFLOADED_NS = "chart-offloaded"
GATEWAY_SELECTOR = "networking.liqo.io/component=gateway"


@dataclass
class ChartPeering:
    pair: LiqoChartPair
    operator: OperatorProcess
    peerings: Peerings
    created: float  # time.monotonic() when the LiqoPeering was created

    @property
    def consumer(self) -> Kube:
        return self.pair.kube("consumer")

    @property
    def provider(self) -> Kube:
        return self.pair.kube("provider")

    def tenant_namespace(self, side: str) -> str:
        """Liqo's tenant namespace on `side` for the other cluster."""
        other = "provider" if side == "consumer" else "consumer"
        selector = f"liqo.io/remote-cluster-id={self.pair.cluster_id(other)},liqo.io/tenant-namespace=true"
        found = self.pair.kube(side).list(k.NAMESPACE, selector=selector)
        assert found, f"no tenant namespace on the {side}"
        return str(found[0]["metadata"]["name"])

    def diagnostics(self) -> str:
        """The LiqoPeering's status, the tail of the operator's log and every Liqo Pod's state and log."""
        tail = "\n".join(self.operator.log().splitlines()[-20:])
        status = self.peerings.status(PEERING_NS, NAME)
        return (
            f"LiqoPeering status: {status}\n--- operator log ({self.operator.log_path}):\n{tail}\n{self.pair.report()}"
        )


@pytest.fixture(scope="module")
def peering(pair: LiqoChartPair, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChartPeering]:
    """The operator running as a process against the consumer (as the ServiceAccount of the chart installed
    there), and one LiqoPeering (NodePort gateway server on the consumer) created; not waited for. Whatever
    is left of it is unpeered at the end."""
    consumer_api = api_client(pair.clusters["consumer"].kubeconfig)
    install_crd(consumer_api)
    chart = chart_rbac.install(pair.clusters["consumer"].kubeconfig, NAMESPACE)
    operator = chart.operator(tmp_path_factory.mktemp("chart-operator"))
    operator.start()
    peerings = Peerings(consumer_api)
    try:
        peerings.make_namespace(PEERING_NS)
        # The admin kubeconfig of the provider: its server is the API server's LAN address (198.18.x.1),
        # which the consumer's Pods and node reach too.
        peerings.put_kubeconfig_secret(PEERING_NS, SECRET, Path(pair.clusters["provider"].kubeconfig).read_bytes())
        spec = {
            "remoteKubeconfigSecretRef": {"name": SECRET},
            "timeout": "3m",
            # The gateway server on the consumer, as liqoctl peer --gw-server-service-location Consumer puts it;
            # no load balancer here: it is exposed on the consumer's node's port.
            "networking": {"gatewayServer": {"location": "Consumer", "serviceType": "NodePort"}},
            "commonMetadata": common_metadata.SPEC,
            "deletion": {"deleteTenantNamespaces": True},
        }
        peerings.create(PEERING_NS, NAME, spec)
        yield ChartPeering(pair, operator, peerings, time.monotonic())
    finally:
        try:
            peerings.delete(PEERING_NS, NAME)
            peerings.wait_gone(PEERING_NS, NAME, timeout=180)
        finally:
            operator.stop()
            sys.stderr.write(f"\n--- operator log: {operator.log_path}\n")
            chart.uninstall()  # the pair may be the realliqo suite's, whose modules install it again


def test_a_liqo_peering_becomes_ready_with_real_gateways(
    peering: ChartPeering, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        status = peering.peerings.wait_status(PEERING_NS, NAME, "ready", timeout=420)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{peering.diagnostics()}") from None
    took = time.monotonic() - peering.created
    with capsys.disabled():
        print(f"\nBENCH Liqo's chart, real gateways: LiqoPeering create -> Ready: {took:.1f}s")
    consumer_id, provider_id = peering.pair.cluster_id("consumer"), peering.pair.cluster_id("provider")
    assert status["localClusterID"] == consumer_id and status["remoteClusterID"] == provider_id
    conds = {c["type"]: c["status"] for c in status["conditions"]}
    for cond_type in ("Ready", "NetworkReady", "AuthenticationReady", "OffloadingReady"):
        assert conds[cond_type] == "True", status["conditions"]

    # The gateways: Liqo's own Pods (gateway, wireguard, geneve containers) Running on each cluster's node,
    # the server and its NodePort Service on the consumer (location Consumer), the client on the provider.
    gateways = {"consumer": (k.GATEWAYSERVER, k.GATEWAYCLIENT), "provider": (k.GATEWAYCLIENT, k.GATEWAYSERVER)}
    for side, (kind, other) in gateways.items():
        kc, ns = peering.pair.kube(side), peering.tenant_namespace(side)
        assert len(kc.list(kind, ns)) == 1, (side, kind.plural)
        assert kc.list(other, ns) == [], (side, other.plural)
        # Liqo names the server's Service as its Deployment, gw-<the other cluster's ID>.
        peer = provider_id if side == "consumer" else consumer_id
        service = kc.get(k.SERVICE, f"gw-{peer}", ns)
        if side == "consumer":
            assert service is not None and service["spec"]["type"] == "NodePort", service
        else:
            assert service is None, service
        pods = kc.list(k.POD, ns, selector=GATEWAY_SELECTOR)
        assert len(pods) == 1, (side, [p["metadata"]["name"] for p in pods])
        pod = pods[0]
        assert pod["spec"]["nodeName"] == f"{side}-node-0", pod["metadata"]["name"]
        assert pod["status"]["phase"] == "Running" and ready(pod), pod_report(kc)
        containers = {c["name"]: c for c in pod["status"]["containerStatuses"]}
        assert set(containers) == {"gateway", "wireguard", "geneve"}, containers.keys()
        assert all(c["ready"] for c in containers.values()), containers

    # The Connections, written by Liqo's gateways once WireGuard (userspace) completed a handshake.
    def connected() -> dict[str, str] | None:
        found = {}
        for side in ("consumer", "provider"):
            conns = peering.pair.kube(side).list(k.CONNECTION, peering.tenant_namespace(side))
            found[side] = ",".join(str((c.get("status") or {}).get("value")) for c in conns)
        return found if set(found.values()) == {"Connected"} else None

    wait_for("the Connections on both sides to be Connected", connected, timeout=60)
    # The status says which cluster serves and what the client on the provider dials, as Liqo's objects do.
    shown = liqo_info.from_status(peering.peerings.status(PEERING_NS, NAME))
    assert shown["gateway"]["server"] == "Consumer", shown
    assert shown == liqo_info.from_liqo(
        api_client(peering.pair.clusters["consumer"].kubeconfig),
        api_client(peering.pair.clusters["provider"].kubeconfig),
        consumer_id,
        provider_id,
    )

    # The virtual Node, registered by Liqo's virtual kubelet (a Pod on the consumer's node).
    node = peering.consumer.get(k.NODE, provider_id)
    assert node is not None and node["metadata"]["labels"]["liqo.io/type"] == "virtual-node"
    assert ready(node), node["status"]["conditions"]
    vk = peering.consumer.list(
        k.POD, peering.tenant_namespace("consumer"), selector=f"liqo.io/virtual-node={provider_id}"
    )
    assert [p["spec"]["nodeName"] for p in vk] == ["consumer-node-0"]

    # spec.commonMetadata: on everything the peering made on both clusters; a change reaches each in place.
    apis = {side: api_client(peering.pair.clusters[side].kubeconfig) for side in ("consumer", "provider")}
    checked = common_metadata.check_then_change(apis, peering.peerings, PEERING_NS, NAME, location="Consumer")
    print(f"commonMetadata followed on {len(checked)} objects: {checked}")
    peering.peerings.wait_status(PEERING_NS, NAME, "ready", timeout=120)


def test_a_deployment_is_offloaded_to_the_providers_node(peering: ChartPeering) -> None:
    """A Deployment in a namespace offloaded with podOffloadingStrategy Remote runs on the provider's node
    (testenv.offload)."""
    provider_id = peering.pair.cluster_id("provider")
    offload_a_pod(peering.consumer, peering.provider, provider_id, OFFLOADED_NS, peering.diagnostics)


def dialed(peering: ChartPeering) -> str | None:
    """The endpoint the gateway client (on the provider) dials, as the status names it (None: no client, as
    while the gateways are made again)."""
    clients = peering.provider.list(k.GATEWAYCLIENT, peering.tenant_namespace("provider"))
    if len(clients) != 1:
        return None
    endpoint = clients[0]["spec"]["endpoint"]
    return f"udp://{endpoint['addresses'][0]}:{endpoint['port']}"


def connected_both_ways(peering: ChartPeering) -> bool:
    states = [
        (c.get("status") or {}).get("value")
        for side in ("consumer", "provider")
        for c in peering.pair.kube(side).list(k.CONNECTION, peering.tenant_namespace(side))
    ]
    return len(states) == 2 and set(states) == {"Connected"}


def test_a_tunnel_dropped_on_the_providers_node_names_what_to_open_then_ready(peering: ChartPeering) -> None:
    """The provider's node, where the gateway client runs here, drops the tunnel's UDP: Liqo's Connections turn
    Error and the peering says GatewayUnreachable, naming the endpoint the provider dials; without the rule, the
    tunnel comes back by itself and the peering is Ready."""
    endpoint = dialed(peering)
    assert endpoint is not None
    peering.pair.set_connection_fault("Drop", side="provider")
    try:
        cond = peering.peerings.wait_reason(PEERING_NS, NAME, "GatewayUnreachable", timeout=120)
        assert f"Open {endpoint} from the provider's gateway to the consumer" in cond["message"], cond
        assert "replicas ready" in cond["message"], cond
    finally:
        peering.pair.set_connection_fault(None, side="provider")
    peering.peerings.wait_status(PEERING_NS, NAME, "ready", timeout=180)


def test_through_an_authenticating_proxy_with_its_own_ca(
    peering: ChartPeering, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """spec.authentication.apiServer: the provider's API server behind nginx, which serves with a CA of its own
    and passes the client certificate's user on (testenv.frontproxy). The consumer's ControlPlane Identity and
    the kubeconfig Liqo builds from it name the proxy, Liqo's requests as the consumer go through it and are
    answered, the status shows the address, and the peering stays Ready. Set back, the Identity names the
    published address again."""
    consumer_id = peering.pair.cluster_id("consumer")
    provider_id = peering.pair.cluster_id("provider")
    proxy = AuthenticatingProxy(peering.pair.clusters["provider"], tmp_path_factory.mktemp("proxy")).start()
    identity_name = f"controlplane-{provider_id}"
    c_ns = peering.tenant_namespace("consumer")
    published = peering.consumer.get(k.IDENTITY, identity_name, c_ns)
    assert published is not None
    try:
        ca = base64.b64encode(proxy.ca_pem).decode()
        given = {"apiServer": {"address": proxy.address, "certificateAuthorityData": ca}}
        peering.peerings.patch(PEERING_NS, NAME, {"spec": {"authentication": given}})

        def kubeconfig_names_the_proxy() -> bool:
            identity = peering.consumer.get(k.IDENTITY, identity_name, c_ns) or {}
            params = identity.get("spec", {}).get("authParams", {})
            secret_name = (identity.get("status") or {}).get("kubeconfigSecretRef", {}).get("name")
            secret = peering.consumer.get(k.SECRET, secret_name, c_ns) if secret_name else None
            kubeconfig = yaml.safe_load(base64.b64decode((secret or {}).get("data", {}).get("kubeconfig", "")) or "{}")
            clusters = (kubeconfig or {}).get("clusters") or [{}]
            return (
                params.get("apiServer") == proxy.address
                and params.get("ca") == ca
                and (clusters[0].get("cluster", {}).get("server") == proxy.address)
            )

        wait_for("the Identity's kubeconfig to name the proxy", kubeconfig_names_the_proxy, timeout=60)
        # Liqo's own checks of the provider's API server, and its CRD replicator, as the consumer, answered.
        wait_for(
            "Liqo's requests as the consumer through the proxy, answered",
            lambda: any(user == consumer_id and status < 400 for user, status in proxy.users()),
            timeout=120,
        )
        assert {user for user, _ in proxy.users()} == {consumer_id}, proxy.users()[:20]
        status = peering.peerings.wait_status(PEERING_NS, NAME, "ready", timeout=120)
        assert status["apiServer"]["address"] == proxy.address, status["apiServer"]
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{peering.diagnostics()}") from None
    finally:
        peering.peerings.patch(PEERING_NS, NAME, {"spec": {"authentication": {"apiServer": None}}})
        wait_for(
            "the Identity to name the published address again",
            lambda: (
                (peering.consumer.get(k.IDENTITY, identity_name, c_ns) or {}).get("spec", {}).get("authParams")
                == published["spec"]["authParams"]
            ),
            timeout=60,
        )
        proxy.stop()


def test_deleting_the_liqo_peering_unpeers_both_sides(peering: ChartPeering) -> None:
    consumer, provider = peering.consumer, peering.provider
    c_ns, p_ns = peering.tenant_namespace("consumer"), peering.tenant_namespace("provider")
    started = time.monotonic()
    peering.peerings.delete(PEERING_NS, NAME)
    try:
        peering.peerings.wait_gone(PEERING_NS, NAME, timeout=180)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{peering.diagnostics()}") from None
    print(f"LiqoPeering delete -> gone: {time.monotonic() - started:.1f}s")
    gateways = [k.GATEWAYSERVER, k.GATEWAYCLIENT, k.CONNECTION]
    left = {
        "consumer": (consumer, c_ns, [*gateways, k.IDENTITY, k.RESOURCESLICE, k.VIRTUALNODE]),
        "provider": (provider, p_ns, [*gateways, k.TENANT, k.RESOURCESLICE]),
    }

    def remaining() -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for side, (kc, ns, kinds) in left.items():
            names = [f"{r.plural}/{o['metadata']['name']}" for r in kinds for o in kc.list(r, ns)]
            # The gateway Pods and the virtual kubelet's go with their Deployments, the server's Service with it.
            names += [f"pods/{p['metadata']['name']}" for p in kc.list(k.POD, ns)]
            names += [
                f"services/{s['metadata']['name']}"
                for s in kc.list(k.SERVICE, ns)
                if s["metadata"]["name"].startswith("gw-")
            ]
            if side == "consumer":
                names += [
                    f"nodes/{n['metadata']['name']}" for n in kc.list(k.NODE, selector="liqo.io/type=virtual-node")
                ]
            if names:
                out[side] = names
        return out

    try:
        wait_for("nothing of the peering left on either side", lambda: not remaining(), timeout=120)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\nleft: {remaining()}") from None
    # spec.deletion.deleteTenantNamespaces: the tenant namespaces went too, once Liqo's objects were gone.
    assert consumer.get(k.NAMESPACE, c_ns) is None, c_ns
    assert provider.get(k.NAMESPACE, p_ns) is None, p_ns


# A port the NAT takes and the gateway server's NodePort behind it, fixed so that the client may dial the first.
NAT_PORT, SERVER_NODE_PORT = 40321, 31821


def test_behind_a_nat_the_client_dials_gateway_client_address_and_port(peering: ChartPeering) -> None:
    """A new peering whose gateway server sits behind a NAT: UDP to the consumer's node on NAT_PORT is sent to
    the server's NodePort, which is not the port the server publishes. With spec.networking.gatewayClient's
    address and port the client dials the NAT's port, its packets go through the NAT, and the peering is
    Ready; it then unpeers."""
    consumer_node = peering.pair.clusters["consumer"].node_specs()[0].ip
    peering.pair.set_port_forward("provider", "consumer", (NAT_PORT, SERVER_NODE_PORT))
    spec = {
        "remoteKubeconfigSecretRef": {"name": SECRET},
        "timeout": "3m",
        "networking": {
            "gatewayServer": {"location": "Consumer", "serviceType": "NodePort", "nodePort": SERVER_NODE_PORT},
            "gatewayClient": {"address": consumer_node, "port": NAT_PORT},
        },
        "deletion": {"deleteTenantNamespaces": True},
    }
    try:
        peering.peerings.create(PEERING_NS, NAME, spec)
        peering.peerings.wait_status(PEERING_NS, NAME, "ready", timeout=420)
        assert dialed(peering) == f"udp://{consumer_node}:{NAT_PORT}"
        assert connected_both_ways(peering)
        assert peering.pair.port_forwarded("provider") > 0
        peering.peerings.delete(PEERING_NS, NAME)
        peering.peerings.wait_gone(PEERING_NS, NAME, timeout=180)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{peering.diagnostics()}") from None
    finally:
        peering.pair.set_port_forward("provider", "consumer", None)
