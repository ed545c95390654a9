"""Local clusters with real nodes: Pods run under the kubelet, Services go through kube-proxy, names resolve
through CoreDNS, Pods reach the other cluster across the LAN, the two clusters share nothing, and `down`
leaves nothing behind on the host."""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from testenv import kube as k
from testenv.kube import Kube
from testenv.localk8s import LocalCluster
from testenv.localk8s.images import Image
from testenv.localk8s.network import NETWORK, cgroup_hierarchies, in_netns, mounts_under
from testenv.localk8s.node import NodeSpec, processes_mentioning
from testenv.localk8s.pods import logs, python_pod, run_to_completion, wait_running

NAMESPACE = "nodes-e2e"
REPO = Path(__file__).resolve().parents[3]

SERVER = """
import http.server, socket
class Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = f"hello from {socket.gethostname()}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
http.server.HTTPServer(("", 8080), Hello).serve_forever()
"""


@pytest.fixture(scope="module")
def kubes(node_clusters: dict[str, LocalCluster]) -> Iterator[dict[str, Kube]]:
    kubes = {name: Kube(c.api_client()) for name, c in node_clusters.items()}
    for kc in kubes.values():
        kc.apply(k.NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}, "test")
    yield kubes
    for kc in kubes.values():
        kc.delete(k.NAMESPACE, NAMESPACE)


def python(images: dict[str, Image]) -> str:
    return images["python-base"].ref


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def spec_of(cluster: LocalCluster) -> NodeSpec:
    (spec,) = cluster.node_specs()
    return spec


def test_each_cluster_has_a_ready_node_on_the_lan(
    node_clusters: dict[str, LocalCluster], kubes: dict[str, Kube]
) -> None:
    lans = set()
    for name, cluster in node_clusters.items():
        # Real nodes only: an earlier test's virtual node may still be on its way out.
        (node,) = kubes[name].list(k.NODE, selector="liqo.io/type!=virtual-node")
        spec = spec_of(cluster)
        assert node["metadata"]["name"] == spec.name
        conditions = {c["type"]: c["status"] for c in node["status"]["conditions"]}
        assert conditions["Ready"] == "True", conditions
        (internal,) = [a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP"]
        assert ipaddress.ip_address(internal) in NETWORK
        assert node["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://")
        assert node["status"]["nodeInfo"]["kubeletVersion"] == "v1.35.0"
        # The API server listens where the node reaches it: the host's address on the same LAN.
        assert cluster.server.startswith(f"https://{cluster.host}:")
        assert ipaddress.ip_address(cluster.host) in ipaddress.ip_network(f"{internal}/24", strict=False)
        lans.add(cluster.lan)
    assert len(lans) == 1, "both clusters' nodes are on one LAN"


def test_a_pod_runs_as_the_kubelet_is_told(
    node_clusters: dict[str, LocalCluster], kubes: dict[str, Kube], node_images: dict[str, Image]
) -> None:
    kc, spec = kubes["consumer"], spec_of(node_clusters["consumer"])
    script = """
import os
try:
    open("/probe", "w")
except OSError as e:
    print("root filesystem:", e.strerror)
print("uid", os.getuid())
"""
    log = run_to_completion(kc, NAMESPACE, python_pod(unique("restricted"), python(node_images), script))
    # The kubelet (through runc) enforced the security context: not root, and a read-only root filesystem.
    assert "root filesystem: Read-only file system" in log and "uid 65532" in log, log

    name = unique("web")
    kc.create(k.POD, python_pod(name, python(node_images), SERVER, restart="Always"), NAMESPACE)
    pod = wait_running(kc, NAMESPACE, name)
    assert pod["spec"]["nodeName"] == spec.name
    assert ipaddress.ip_address(pod["status"]["podIP"]) in ipaddress.ip_network(spec.pod_subnet)
    (status,) = pod["status"]["containerStatuses"]
    assert status["containerID"].startswith("containerd://") and status["ready"] is True


def test_services_go_through_kube_proxy_and_names_through_coredns(
    node_clusters: dict[str, LocalCluster], kubes: dict[str, Kube], node_images: dict[str, Image]
) -> None:
    kc, cluster = kubes["consumer"], node_clusters["consumer"]
    web = unique("web")
    kc.create(k.POD, python_pod(web, python(node_images), SERVER, labels={"app": web}, restart="Always"), NAMESPACE)
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": web},
        "spec": {"selector": {"app": web}, "ports": [{"port": 80, "targetPort": 8080}]},
    }
    cluster_ip = kc.create(k.SERVICE, service, NAMESPACE)["spec"]["clusterIP"]
    wait_running(kc, NAMESPACE, web)
    # Retried inside the Pod for a while: the EndpointSlice and kube-proxy's rules follow the Pod's readiness.
    client = f"""
import json, socket, time, urllib.request
out = {{}}
for _ in range(60):
    try:
        out["short"] = socket.gethostbyname("{web}")
        out["fqdn"] = socket.gethostbyname("{web}.{NAMESPACE}.svc.cluster.local")
        out["kubernetes"] = socket.gethostbyname("kubernetes.default.svc.cluster.local")
        out["by_name"] = urllib.request.urlopen("http://{web}", timeout=5).read().decode()
        out["by_ip"] = urllib.request.urlopen("http://{cluster_ip}", timeout=5).read().decode()
        break
    except OSError as e:
        out["error"] = repr(e)
        time.sleep(1)
print(json.dumps(out))
"""
    log = run_to_completion(kc, NAMESPACE, python_pod(unique("client"), python(node_images), client))
    out = json.loads(log.strip().splitlines()[-1])
    assert out["short"] == out["fqdn"] == cluster_ip, out
    assert out["kubernetes"] == str(next(ipaddress.ip_network(cluster.service_cidr).hosts())), out
    assert out["by_name"] == out["by_ip"] == f"hello from {web}", out
    # The path was kube-proxy's: its nftables table in the node's namespace holds the Service's address.
    table = subprocess.run(
        in_netns(spec_of(cluster).netns, ["nft", "list", "table", "ip", "kube-proxy"]),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert cluster_ip in table


def test_pods_reach_the_other_clusters_api_server_across_the_lan(
    node_clusters: dict[str, LocalCluster], kubes: dict[str, Kube], node_images: dict[str, Image]
) -> None:
    provider = node_clusters["provider"]
    script = f"""
import json, ssl, urllib.request
context = ssl.create_default_context()
context.check_hostname = False
context.verify_mode = ssl.CERT_NONE
print(json.load(urllib.request.urlopen("{provider.server}/version", context=context, timeout=10))["gitVersion"])
"""
    log = run_to_completion(kubes["consumer"], NAMESPACE, python_pod(unique("lan"), python(node_images), script))
    assert log.strip() == "v1.35.0", log


def test_the_two_clusters_share_no_runtime_cgroup_bridge_or_nftables(node_clusters: dict[str, LocalCluster]) -> None:
    specs = [spec_of(c) for c in node_clusters.values()]
    assert len({s.socket for s in specs}) == len({s.cgroup_root for s in specs}) == 2
    assert len({os.stat(s.netns).st_ino for s in specs}) == 2, "each node has its own network namespace"
    networks = [ipaddress.ip_network(s.pod_subnet) for s in specs]
    assert not networks[0].overlaps(networks[1])
    for spec, cluster in zip(specs, node_clusters.values(), strict=True):
        # One containerd per node, with its own socket, root and state.
        pids = cluster.recorded_pids()
        cmdline = Path(f"/proc/{pids[spec.process('containerd')]}/cmdline").read_bytes().split(b"\0")
        config = Path(cmdline[cmdline.index(b"--config") + 1].decode()).read_text()
        assert str(spec.socket) in config and f'root = "{spec.dir}' in config
        # Its cgroup root exists in every hierarchy, and holds only its own Pods.
        for hierarchy in cgroup_hierarchies():
            if hierarchy.name != "unified":
                assert (hierarchy / spec.cgroup_root).is_dir(), hierarchy
        # cni0 and the nftables tables are the namespace's own: only this cluster's Services are there.
        ruleset = subprocess.run(in_netns(spec.netns, ["nft", "list", "ruleset"]), capture_output=True, text=True)
        assert cluster.service_cidr.split("/")[0].rsplit(".", 2)[0] + "." in ruleset.stdout
        for other in node_clusters.values():
            if other is not cluster:
                dns_ip = str(ipaddress.ip_network(other.service_cidr).network_address + 10)
                assert dns_ip not in ruleset.stdout
        links = subprocess.run(in_netns(spec.netns, ["ip", "-o", "link"]), capture_output=True, text=True).stdout
        assert " eth0@" in links, links
        if cluster.name == "consumer":  # the bridge plugin makes cni0 with the node's first Pod
            assert " cni0:" in links, links
    assert not Path("/sys/class/net/cni0").exists(), "no CNI bridge on the host itself"


def test_down_leaves_nothing_behind(node_images: dict[str, Image]) -> None:
    """`make clusters-down` (the CLI's `down`) after a Pod ran: no process, namespace, link, cgroup, mount,
    shim socket or log link of the node is left on the host."""
    # Short: the kubelet's unix sockets live under it (pytest's tmp_path is too long for them).
    tmp_path = Path(tempfile.mkdtemp(prefix="lk8s-down-"))
    base = tmp_path / "clusters"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cli = [sys.executable, "-m", "testenv.localk8s"]
    subprocess.run([*cli, "up", "--dir", str(base), "--nodes", "1", "solo"], check=True, env=env, timeout=360)
    cluster = LocalCluster.load(base / "solo")
    spec = spec_of(cluster)
    kc = Kube.from_kubeconfig(str(base / "solo.kubeconfig"))
    try:
        cluster.load_image(node_images["python-base"].archive)
        name = unique("sleeper")
        kc.create(k.POD, python_pod(name, python(node_images), "import time; time.sleep(3600)"), "default")
        wait_running(kc, "default", name)
        assert logs(kc, "default", name) == ""
        assert mounts_under(base), "the node has mounts while it runs"
    finally:
        subprocess.run([*cli, "down", "--dir", str(base)], check=True, env=env, timeout=120)

    assert not base.exists()
    assert not mounts_under(tmp_path)
    assert not processes_mentioning(base), "processes left"
    assert cluster.lan is not None
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout
    assert f" {cluster.lan.bridge}:" not in links and f" {cluster.lan.veth(spec.ip)}@" not in links, links
    for hierarchy in cgroup_hierarchies():
        assert not (hierarchy / spec.cgroup_root).exists(), hierarchy
    containers = Path("/var/log/containers")
    if containers.is_dir():
        assert not [p for p in containers.iterdir() if p.is_symlink() and str(base) in os.readlink(p)]
    tmp_path.rmdir()
