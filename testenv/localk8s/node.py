"""A node of a local cluster: its own network namespace on the cluster's LAN, its own containerd (root,
state, socket, runc root), a kubelet, kube-proxy in nftables mode, and (on node 0) CoreDNS as a process.

Nothing is shared with another node: each has its cgroup root (/localk8s/<lan>-<cluster>-<n> in every
hierarchy), its CNI bridge (`cni0` in its own namespace) and IPAM state, and its nftables tables (the
namespace's own). Pods get addresses from the node's /24 of the cluster's pod CIDR; traffic from Pods to
the LAN is masqueraded behind the node's address, as a home router would, so the host needs no routes.

The layout under the cluster's workdir (short: the containerd socket path must fit a unix socket's 108
bytes):  n<i>/{netns, containerd.sock, containerd.toml, containerd/, runc/, cni/, kubelet/, pod-logs/, ...}
"""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from testenv import kube as k
from testenv.kube import Obj

from . import network, pki
from .images import Image, ctr_binary, pause_image
from .network import Lan, NetworkError

if TYPE_CHECKING:
    from .cluster import LocalCluster

CLUSTER_DOMAIN = "cluster.local"
CNI_BIN_DIR = "/usr/lib/cni"  # Debian's containernetworking-plugins
CONTAINER_LOGS = Path("/var/log/containers")  # the kubelet's symlinks to Pod logs; fixed in the kubelet
SHIM_SOCKETS = Path("/run/containerd/s")  # containerd 1.6's shim sockets; fixed in containerd
# The daemons of node 0 (the others run no CoreDNS).
DAEMONS = ("containerd", "kubelet", "kube-proxy", "coredns")


@dataclass(frozen=True)
class NodeSpec:
    """What a node needs to know about its cluster."""

    cluster: str
    cluster_index: int
    index: int
    lan: Lan
    server: str
    pod_cidr: str  # the cluster's; the node takes its index-th /24
    service_cidr: str
    workdir: Path  # the cluster's

    @property
    def name(self) -> str:
        return f"{self.cluster}-node-{self.index}"

    @property
    def ip(self) -> str:
        return self.lan.node_ip(self.cluster_index, self.index)

    @property
    def pod_subnet(self) -> str:
        return str(list(ipaddress.ip_network(self.pod_cidr).subnets(new_prefix=24))[self.index])

    @property
    def dns_ip(self) -> str:
        return cluster_dns_ip(self.service_cidr)

    @property
    def dir(self) -> Path:
        return self.workdir / f"n{self.index}"

    @property
    def netns(self) -> Path:
        return self.dir / "netns"

    @property
    def socket(self) -> Path:
        return self.dir / "containerd.sock"

    @property
    def cgroup_root(self) -> str:
        return f"localk8s/{self.lan.bridge}-{self.cluster}-{self.index}"

    @property
    def daemons(self) -> tuple[str, ...]:
        return DAEMONS if self.index == 0 else DAEMONS[:-1]

    def process(self, daemon: str) -> str:
        """The name its pid and log files carry in the cluster's pids/ and logs/."""
        return f"n{self.index}-{daemon}"


def cluster_dns_ip(service_cidr: str) -> str:
    """The kube-dns Service's address: the tenth of the service range, as kubeadm picks it."""
    return str(ipaddress.ip_network(service_cidr).network_address + 10)


class Node:
    """Started by its LocalCluster, whose process bookkeeping (pids/, logs/) and credentials it uses."""

    def __init__(self, cluster: LocalCluster, spec: NodeSpec) -> None:
        self.cluster = cluster
        self.spec = spec

    def _spawn(self, daemon: str, argv: list[str]) -> None:
        self.cluster._spawn(self.spec.process(daemon), network.in_netns(self.spec.netns, argv))

    # ---- start ------------------------------------------------------------------------------------------

    def start(self, binaries: dict[str, Path], deadline: float) -> None:
        """Namespace, cgroups, containerd (with the pause image imported), kubelet, kube-proxy and, on node
        0, CoreDNS. Returns once containerd answers; the cluster waits for the Node to be Ready."""
        s = self.spec
        # The kubelet's longest socket path (pod-resources/<random>) must fit a unix socket's 108 bytes.
        if len(str(s.dir / "kubelet" / "pod-resources" / "1234567890")) >= 108:
            raise ValueError(f"{s.dir}: too long a path for the node's unix sockets; use a shorter directory")
        s.dir.mkdir()
        network.create_netns(s.netns)
        network.connect(s.lan, s.netns, s.ip)
        # Routing between cni0 and eth0, and bridged Pod-to-Pod traffic through the nftables hooks, so that
        # kube-proxy's DNAT is undone for replies from a backend on the same bridge.
        network.set_sysctls(s.netns, {"net.ipv4.ip_forward": "1", "net.bridge.bridge-nf-call-iptables": "1"})
        self._masquerade()
        network.make_cgroup_root(s.cgroup_root)
        self._write_certs()
        pause = pause_image()
        self._start_containerd(pause, deadline)
        self.load_image(pause.archive)
        self._start_kubelet(binaries["kubelet"])
        self._start_kube_proxy(binaries["kube-proxy"])
        if s.index == 0:
            self._start_coredns(binaries["coredns"])

    def _masquerade(self) -> None:
        """Pods' traffic leaving the node takes the node's address (the LAN has no routes to Pods)."""
        s = self.spec
        rules = f"""
table ip localk8s-node {{
    chain postrouting {{
        type nat hook postrouting priority srcnat; policy accept;
        oifname "eth0" ip saddr {s.pod_cidr} ip daddr != {s.pod_cidr} masquerade
    }}
}}
"""
        network.run(["nft", "-f", "-"], s.netns, stdin=rules)

    def _write_certs(self) -> None:
        s = self.spec
        # The kubelet's identity: the Node authorizer and NodeRestriction key on system:node:<name>.
        self.cluster.component_kubeconfig(s.dir / "kubelet.kubeconfig", f"system:node:{s.name}", ["system:nodes"])
        ca = pki.load_ca(self.cluster.ca_cert, self.cluster.ca_key)
        pki.new_serving_cert(ca, s.name, [s.name], [s.ip]).write(s.dir / "kubelet.crt", s.dir / "kubelet.key")
        # The bootstrap RBAC policy binds system:node-proxier to this user name.
        self.cluster.component_kubeconfig(s.dir / "kube-proxy.kubeconfig", "system:kube-proxy")
        if s.index == 0:
            self.cluster.component_kubeconfig(s.dir / "coredns.kubeconfig", COREDNS_USER)

    def _start_containerd(self, pause: Image, deadline: float) -> None:
        s = self.spec
        d = s.dir
        (d / "cni").mkdir()
        (d / "certs.d").mkdir()
        conflist = {
            "cniVersion": "1.0.0",
            "name": "localk8s",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": "cni0",
                    "isGateway": True,
                    "hairpinMode": True,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": s.pod_subnet}]],
                        "routes": [{"dst": "0.0.0.0/0"}],
                        "dataDir": str(d / "cni-ipam"),
                    },
                }
            ],
        }
        (d / "cni" / "10-localk8s.conflist").write_text(json.dumps(conflist, indent=2))
        cri = '"io.containerd.grpc.v1.cri"'
        config = f"""version = 2
root = "{d / "containerd" / "root"}"
state = "{d / "containerd" / "state"}"
# Snapshotters this host cannot use, and tracing: their start-up errors would only be noise.
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "{s.socket}"

[ttrpc]
  address = "{s.socket}.ttrpc"

[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = "{d / "containerd" / "opt"}"

  [plugins.{cri}]
    sandbox_image = "{pause.ref}"
    # Even root may not lower oom_score_adj in some VMs and containers; without this every sandbox fails with
    # "runc create failed: ... can't get final child's PID from pipe: EOF".
    restrict_oom_score_adj = true
    # Pods' network namespaces under this node's state, not /var/run/netns shared with the host.
    netns_mounts_under_state_dir = true
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"

    # Registry hosts as a user's nodes configure them (certs.d/<host>/hosts.toml: the CA to trust); the
    # harness's registry writes its entry there (registry.py).
    [plugins.{cri}.registry]
      config_path = "{d / "certs.d"}"

    [plugins.{cri}.cni]
      bin_dir = "{CNI_BIN_DIR}"
      conf_dir = "{d / "cni"}"

    [plugins.{cri}.containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"

      [plugins.{cri}.containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"

        [plugins.{cri}.containerd.runtimes.runc.options]
          Root = "{d / "runc"}"
          SystemdCgroup = false
"""
        (d / "containerd.toml").write_text(config)
        self._spawn("containerd", ["containerd", "--config", str(d / "containerd.toml")])
        self.cluster._wait(f"{s.name}'s containerd", deadline, [s.process("containerd")], self._containerd_up)

    def _containerd_up(self) -> bool:
        if not self.spec.socket.exists():
            return False
        probe = subprocess.run(self._ctr("version"), capture_output=True, check=False, timeout=10)
        return probe.returncode == 0

    def _ctr(self, *args: str) -> list[str]:
        return [ctr_binary(), "--address", str(self.spec.socket), "--namespace", "k8s.io", *args]

    def load_image(self, archive: Path) -> None:
        """Import a docker-archive into this node's containerd, where the kubelet finds it (the image is
        then present: Pods use imagePullPolicy IfNotPresent or Never)."""
        proc = subprocess.run(
            self._ctr("images", "import", str(archive)), capture_output=True, text=True, check=False, timeout=300
        )
        if proc.returncode != 0:
            raise NetworkError(f"{self.spec.name}: importing {archive} failed: {proc.stderr.strip()}")

    def _start_kubelet(self, kubelet: Path) -> None:
        s = self.spec
        d = s.dir
        (d / "resolv.conf").write_text("")  # Pods resolve through cluster DNS only; the host's stays out
        config = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            # Kubelet 1.35 refuses to run on cgroup v1 unless told to, and a host may have only v1
            # hierarchies (plus an empty unified one): failCgroupV1 false is what lets it start there.
            "failCgroupV1": False,
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": f"/{s.cgroup_root}",
            "address": s.ip,
            "port": 10250,
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": True},
                "x509": {"clientCAFile": str(s.workdir / "pki" / "ca.crt")},
            },
            "authorization": {"mode": "Webhook"},
            "tlsCertFile": str(d / "kubelet.crt"),
            "tlsPrivateKeyFile": str(d / "kubelet.key"),
            "clusterDomain": CLUSTER_DOMAIN,
            "clusterDNS": [s.dns_ip],
            "resolvConf": str(d / "resolv.conf"),
            "containerRuntimeEndpoint": f"unix://{s.socket}",
            "podLogsDir": str(d / "pod-logs"),
            "failSwapOn": False,
            # The disk is the host's: evict only when it is really full, and never collect the
            # imported images (there is no registry to pull them again from).
            "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "serializeImagePulls": False,
        }
        (d / "kubelet.yaml").write_text(yaml.safe_dump(config))
        argv = [
            str(kubelet),
            f"--config={d / 'kubelet.yaml'}",
            f"--kubeconfig={d / 'kubelet.kubeconfig'}",
            f"--root-dir={d / 'kubelet'}",
            f"--cert-dir={d / 'kubelet-pki'}",
            f"--hostname-override={s.name}",
            f"--node-ip={s.ip}",
            "--v=1",
        ]
        self._spawn("kubelet", argv)

    def _start_kube_proxy(self, kube_proxy: Path) -> None:
        s = self.spec
        config = {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "mode": "nftables",
            "clientConnection": {"kubeconfig": str(s.dir / "kube-proxy.kubeconfig")},
            "hostnameOverride": s.name,
            "clusterCIDR": s.pod_cidr,
            "detectLocalMode": "ClusterCIDR",
            # On the node's address: the cluster waits for it from the host (200 once the rules are in).
            "healthzBindAddress": f"{s.ip}:10256",
            "metricsBindAddress": "127.0.0.1:10249",
            # 0 leaves the kernel's conntrack limits and timeouts alone: they are the host's, not the node's.
            "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
        }
        (s.dir / "kube-proxy.yaml").write_text(yaml.safe_dump(config))
        argv = [str(kube_proxy), f"--config={s.dir / 'kube-proxy.yaml'}", "--v=1"]
        self._spawn("kube-proxy", argv)

    def _start_coredns(self, coredns: Path) -> None:
        s = self.spec
        corefile = f""".:53 {{
    errors
    health {s.ip}:8080
    ready {s.ip}:8181
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{
        kubeconfig {s.dir / "coredns.kubeconfig"} {s.cluster}
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }}
    cache 30
    loadbalance
}}
"""
        # No `forward`: names outside the cluster get no answer, and no query leaves the LAN.
        (s.dir / "Corefile").write_text(corefile)
        argv = [str(coredns), "-conf", str(s.dir / "Corefile")]
        self._spawn("coredns", argv)


def cleanup(spec: NodeSpec) -> None:
    """Remove everything a node made, once its daemons are dead (also from another process): containerd's
    shims and the containers they ran, mounts, the namespace (and with it the veth pair, cni0 and the
    node's nftables tables), cgroups, and what the kubelet and containerd leave outside our directories."""
    if spec.dir.is_dir():
        _kill_shims(spec.dir)
    network.remove_cgroup_root(spec.cgroup_root)
    if spec.dir.is_dir():
        _remove_shim_sockets(spec)
        _remove_log_links(spec.dir)
        network.unmount_all(spec.dir)
    # The veth's host end goes with the namespace (asynchronously); delete it here too, should anything
    # still hold the namespace.
    with contextlib.suppress(NetworkError):
        network.run(["ip", "link", "del", spec.lan.veth(spec.ip)])


def processes_mentioning(directory: Path, also: bytes = b"") -> list[int]:
    """Pids whose command line names a path under `directory` (and contains `also`)."""
    marker = f"{directory}/".encode()
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if marker in cmdline and also in cmdline:
            found.append(int(proc.name))
    return found


def _kill_shims(node_dir: Path) -> None:
    """containerd's shims outlive it (each in a session of its own); they carry our socket path."""
    for pid in processes_mentioning(node_dir, b"containerd-shim"):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while processes_mentioning(node_dir, b"containerd-shim") and time.monotonic() < deadline:
        time.sleep(0.05)


def _remove_shim_sockets(spec: NodeSpec) -> None:
    """A shim's socket is /run/containerd/s/<sha256(containerd address/namespace/task id)>; a killed shim
    leaves it behind. Our tasks are the directories in this containerd's task state."""
    tasks = spec.dir / "containerd" / "state" / "io.containerd.runtime.v2.task"
    if not tasks.is_dir():
        return
    for namespace in tasks.iterdir():
        for task in namespace.iterdir():
            digest = hashlib.sha256(f"{spec.socket}/{namespace.name}/{task.name}".encode()).hexdigest()
            (SHIM_SOCKETS / digest).unlink(missing_ok=True)


def _remove_log_links(node_dir: Path) -> None:
    """The kubelet links each container's log into /var/log/containers; a killed kubelet leaves them."""
    if not CONTAINER_LOGS.is_dir():
        return
    for link in CONTAINER_LOGS.iterdir():
        if link.is_symlink() and os.readlink(link).startswith(f"{node_dir}/"):
            link.unlink(missing_ok=True)


# The user CoreDNS reads Services and EndpointSlices as (bound to COREDNS_CLUSTER_ROLE by the cluster).
COREDNS_USER = "localk8s:coredns"


def coredns_rbac() -> list[tuple[k.Res, Obj]]:
    """What CoreDNS's kubernetes plugin lists and watches, as in its own deployment manifests."""
    list_watch = ["list", "watch"]
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "localk8s:coredns"},
        "rules": [
            {"apiGroups": [""], "resources": ["endpoints", "services", "pods", "namespaces"], "verbs": list_watch},
            {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": list_watch},
        ],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "localk8s:coredns"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "localk8s:coredns"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": COREDNS_USER}],
    }
    return [(k.CLUSTERROLE, role), (k.CLUSTERROLEBINDING, binding)]


def kube_dns(spec: NodeSpec) -> list[tuple[k.Res, Obj]]:
    """Service kube-system/kube-dns (no selector: CoreDNS is a process) and its EndpointSlice, pointing at
    CoreDNS on node 0's address. Pods reach it through kube-proxy like any other Service."""
    ports = [{"name": "dns", "port": 53, "protocol": "UDP"}, {"name": "dns-tcp", "port": 53, "protocol": "TCP"}]
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "kube-dns", "namespace": "kube-system", "labels": {"k8s-app": "kube-dns"}},
        "spec": {"clusterIP": spec.dns_ip, "ports": [{**p, "targetPort": 53} for p in ports]},
    }
    slice_ = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": "kube-dns-localk8s",
            "namespace": "kube-system",
            "labels": {
                "kubernetes.io/service-name": "kube-dns",
                # Not the EndpointSlice controller's: it leaves this one alone.
                "endpointslice.kubernetes.io/managed-by": "localk8s",
            },
        },
        "addressType": "IPv4",
        "endpoints": [{"addresses": [spec.ip], "conditions": {"ready": True}, "nodeName": spec.name}],
        "ports": ports,
    }
    return [(k.SERVICE, service), (k.ENDPOINTSLICE, slice_)]
