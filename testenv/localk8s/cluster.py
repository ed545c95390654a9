"""A real Kubernetes control plane (etcd, kube-apiserver, kube-controller-manager) as local processes,
and optionally real nodes.

Without nodes (the default) no Pod ever runs, but everything the API server and the controllers do (RBAC,
namespaces, garbage collection, service accounts and their tokens, CSR signing) is real, on 127.0.0.1.
With nodes (`nodes=1`), the cluster also runs kube-scheduler, and each node (testenv.localk8s.node) is a
network namespace on a LAN of the session's (testenv.localk8s.network) running containerd, a kubelet,
kube-proxy and, on the first node, CoreDNS; the API server then listens on the host's LAN address, where
the nodes (and Pods) reach it.
"""

from __future__ import annotations

import base64
import contextlib
import ipaddress
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import kubernetes.client
import yaml
from kubernetes.client.exceptions import ApiException

from testenv import audit
from testenv import kube as k
from testenv.kube import Kube
from testenv.wait import answers_ok

from . import network, node, pki
from .images import pause_image
from .network import Lan, ensure_inotify_instances
from .node import Node, NodeSpec
from .ports import free_port, is_listening
from .tools import kubernetes_versions, tool_path

STATE_FILE = "cluster.json"
PROCESSES = ("kube-controller-manager", "kube-apiserver", "etcd")
NODE_BINARIES = ("kube-scheduler", "kubelet", "kube-proxy", "coredns")
# The name in the front proxy's client certificate, the one the API server lets set X-Remote-User.
FRONT_PROXY_CLIENT = "front-proxy-client"
EGRESS = Path(__file__).with_name("egress.py")
SA_ISSUER = "https://kubernetes.default.svc.cluster.local"
POLL_INTERVAL = 0.2
STOP_TIMEOUT_SECONDS = 10.0
# kube-controller-manager's --leader-elect-renew-deadline (its default): a leader-elected one that cannot renew
# its lease this long gives up leadership and exits ("leaderelection lost"), and is started again.
KCM_RENEW_DEADLINE_SECONDS = 10.0
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$")


class ClusterStartError(RuntimeError):
    pass


class _PortConflict(ClusterStartError):
    """A process lost the race for a port we picked; retried with fresh ports."""


def _log(msg: str) -> None:
    print(f"localk8s: {msg}", file=sys.stderr, flush=True)


def kubeconfig_dict(
    cluster_name: str, server: str, ca_pem: bytes, user: str, cert_pem: bytes, key_pem: bytes
) -> dict[str, Any]:
    """A self-contained kubeconfig: everything embedded, so it can be copied anywhere."""

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster_name, "cluster": {"server": server, "certificate-authority-data": b64(ca_pem)}}],
        "users": [{"name": user, "user": {"client-certificate-data": b64(cert_pem), "client-key-data": b64(key_pem)}}],
        "contexts": [{"name": cluster_name, "context": {"cluster": cluster_name, "user": user}}],
        "current-context": cluster_name,
    }


def _write_private(path: Path, data: str) -> None:
    path.write_text(data)
    path.chmod(0o600)


def _pid_alive(pid: int) -> bool:
    """True if pid is running (zombies count as dead: they hold no ports or files)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    # The state follows the parenthesised command name, which may itself contain spaces.
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _pid_is_ours(pid: int, workdir: Path) -> bool:
    """Guards against pid reuse: each of our processes has the workdir in its command line."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return f"{workdir}/".encode() in cmdline


class LocalCluster:
    """One control plane (and its nodes). Construct, then start(); or load() one that a previous process
    started. With nodes, `lan` is the session's LAN and `index` this cluster's place on it."""

    def __init__(
        self,
        name: str,
        workdir: Path,
        service_cidr: str = "10.96.0.0/16",
        nodes: int = 0,
        lan: Lan | None = None,
        index: int = 0,
        pod_cidr: str = "10.244.0.0/16",
        egress: bool = False,
        kubernetes_version: str | None = None,
        signing_duration: str | None = None,
    ) -> None:
        if not _NAME.match(name):
            raise ValueError(f"cluster name {name!r} must be a short DNS label")
        if nodes and lan is None:
            raise ValueError("a cluster with nodes needs a LAN (start_clusters makes one)")
        self.name = name
        self.workdir = workdir.resolve()
        self.service_cidr = service_cidr
        self.nodes = nodes
        self.lan = lan
        self.index = index
        self.pod_cidr = pod_cidr
        # With nodes: the API server dials into the cluster (webhooks, aggregated APIs, kubelets) through
        # an egress proxy in node 0's network namespace (egress.py), so Services are reachable from it.
        self.egress = egress and nodes > 0
        # The Kubernetes release its control plane runs (hack/versions.env: KUBERNETES_VERSION by default,
        # KUBERNETES_FLOOR_VERSION for the oldest supported one); None is the default.
        self.kubernetes_version = kubernetes_version
        # kube-controller-manager's --cluster-signing-duration (such as "4m"): the lifetime of the certificates
        # its CSR signer issues, a year by default; short, it shows what happens when they expire.
        self.signing_duration = signing_duration
        self._init_paths()
        self._allocate_ports()

    def _init_paths(self) -> None:
        self.kubeconfig = self.workdir / "admin.kubeconfig"
        self.ca_cert = self.workdir / "pki" / "ca.crt"
        self.ca_key = self.workdir / "pki" / "ca.key"
        self.audit_log = self.workdir / "audit.log"
        self.egress_socket = self.workdir / "egress.sock"
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self._argv: dict[str, list[str]] = {}  # how each process was started, for restart()
        self._stopped: dict[str, float] = {}  # when stop_process stopped it (time.monotonic())

    def __repr__(self) -> str:
        return f"LocalCluster(name={self.name!r}, server={self.server!r}, workdir={str(self.workdir)!r})"

    @property
    def host(self) -> str:
        """Where the API server listens: loopback, or on a LAN (with nodes, or beside a cluster with nodes) the
        host's address there, where Pods reach it."""
        return self.lan.host_ip if self.lan is not None else "127.0.0.1"

    def _allocate_ports(self) -> None:
        self.etcd_client_port = free_port()
        self.etcd_peer_port = free_port()
        self.apiserver_port = free_port()
        self.server = f"https://{self.host}:{self.apiserver_port}"

    def node_specs(self) -> list[NodeSpec]:
        if self.lan is None:
            return []
        return [
            NodeSpec(self.name, self.index, i, self.lan, self.server, self.pod_cidr, self.service_cidr, self.workdir)
            for i in range(self.nodes)
        ]

    def processes(self) -> list[str]:
        """Every process this cluster runs, by the name of its pid and log files."""
        names = list(PROCESSES)
        if self.nodes:
            names.append("kube-scheduler")
        names += [spec.process(d) for spec in self.node_specs() for d in spec.daemons]
        if self.egress:
            names.append(self.node_specs()[0].process("egress"))
        return names

    # ---- paths -------------------------------------------------------------------------------

    @property
    def pki_dir(self) -> Path:
        return self.workdir / "pki"

    @property
    def front_proxy_cert(self) -> Path:
        return self.pki_dir / "front-proxy-client.crt"

    @property
    def front_proxy_key(self) -> Path:
        return self.pki_dir / "front-proxy-client.key"

    @property
    def log_dir(self) -> Path:
        return self.workdir / "logs"

    @property
    def pid_dir(self) -> Path:
        return self.workdir / "pids"

    def log_path(self, process: str) -> Path:
        return self.log_dir / f"{process}.log"

    # ---- state shared with other processes (the CLI's `down`, `up` reuse) -------------------

    def _save_state(self) -> None:
        state = {
            "name": self.name,
            "service_cidr": self.service_cidr,
            "server": self.server,
            "etcd_client_port": self.etcd_client_port,
            "etcd_peer_port": self.etcd_peer_port,
            "apiserver_port": self.apiserver_port,
            "nodes": self.nodes,
            "lan": self.lan.to_json() if self.lan is not None else None,
            "index": self.index,
            "pod_cidr": self.pod_cidr,
            "egress": self.egress,
            "kubernetes_version": self.kubernetes_version,
        }
        (self.workdir / STATE_FILE).write_text(json.dumps(state, indent=2) + "\n")

    @classmethod
    def load(cls, workdir: Path) -> LocalCluster:
        state = json.loads((workdir / STATE_FILE).read_text())
        cluster = cls.__new__(cls)
        cluster.name = state["name"]
        cluster.workdir = workdir.resolve()
        cluster.service_cidr = state["service_cidr"]
        cluster.nodes = state.get("nodes", 0)
        cluster.lan = Lan.from_json(state["lan"]) if state.get("lan") else None
        cluster.index = state.get("index", 0)
        cluster.pod_cidr = state.get("pod_cidr", "10.244.0.0/16")
        cluster.egress = state.get("egress", False)
        cluster.kubernetes_version = state.get("kubernetes_version")
        cluster._init_paths()
        cluster.etcd_client_port = state["etcd_client_port"]
        cluster.etcd_peer_port = state["etcd_peer_port"]
        cluster.apiserver_port = state["apiserver_port"]
        cluster.server = state["server"]
        return cluster

    def recorded_pids(self) -> dict[str, int]:
        pids: dict[str, int] = {}
        for f in sorted(self.pid_dir.glob("*.pid")):
            pids[f.stem] = int(f.read_text().strip())
        return pids

    def is_running(self) -> bool:
        pids = self.recorded_pids()
        return set(pids) == set(self.processes()) and all(
            _pid_alive(p) and _pid_is_ours(p, self.workdir) for p in pids.values()
        )

    # ---- clients -----------------------------------------------------------------------------

    def api_client(self) -> kubernetes.client.ApiClient:
        """Admin (system:masters) client."""
        cfg = kubernetes.client.Configuration(
            host=self.server,
            ssl_ca_cert=str(self.ca_cert),
            cert_file=str(self.pki_dir / "admin.crt"),
            key_file=str(self.pki_dir / "admin.key"),
        )
        return kubernetes.client.ApiClient(cfg)

    def user_kubeconfig(self, user: str, groups: Sequence[str] = ()) -> Path:
        """Kubeconfig with a client cert for `user` in `groups`; RBAC grants it nothing by default."""
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", user)
        path = self.workdir / "users" / f"{safe}.kubeconfig"
        path.parent.mkdir(exist_ok=True)
        return self.component_kubeconfig(path, user, groups)

    def component_kubeconfig(self, path: Path, user: str, groups: Sequence[str] = ()) -> Path:
        """A self-contained kubeconfig at `path` authenticating as `user` (in `groups`) by client cert."""
        ca = pki.load_ca(self.ca_cert, self.ca_key)
        cert = pki.new_client_cert(ca, user, groups)
        cfg = kubeconfig_dict(self.name, self.server, pki.cert_pem(ca.cert), user, cert.cert_pem, cert.key_pem)
        _write_private(path, yaml.safe_dump(cfg, sort_keys=False))
        return path

    def load_image(self, archive: Path) -> None:
        """Import a docker-archive into every node's containerd (a no-op without nodes)."""
        for spec in self.node_specs():
            Node(self, spec).load_image(archive)

    # ---- lifecycle ---------------------------------------------------------------------------

    def start(self, timeout: float = 120.0) -> None:
        """Start etcd, kube-apiserver and kube-controller-manager and wait until usable.

        Ready means: /readyz is ok and the `default` ServiceAccount exists in `default`, which
        proves the controller manager's token and service-account controllers are running.
        """
        # Fail fast, before touching anything.
        versions = kubernetes_versions(self.kubernetes_version)
        binaries = {p: tool_path(p, versions) for p in PROCESSES + (NODE_BINARIES if self.nodes else ())}
        deadline = time.monotonic() + timeout
        if self.workdir.exists():
            self.stop(keep_lan=True)
        for attempt in range(3):
            self.workdir.mkdir(parents=True)
            for d in (self.pki_dir, self.log_dir, self.pid_dir):
                d.mkdir()
            try:
                self._write_pki()
                self._save_state()
                self._start_processes(binaries, deadline)
                return
            except _PortConflict as e:
                _log(f"{self.name}: {e}; retrying with new ports (attempt {attempt + 1})")
                self.stop(keep_lan=True)
                self._allocate_ports()
            except BaseException:
                self.stop(keep_lan=True)
                raise
        raise ClusterStartError(f"{self.name}: could not get free ports after 3 attempts")

    def _write_pki(self) -> None:
        ca = pki.new_ca(f"localk8s-{self.name}-ca")
        ca.write(self.ca_cert, self.ca_key)
        service_ip = str(next(ipaddress.ip_network(self.service_cidr).hosts()))
        serving = pki.new_serving_cert(
            ca,
            "kube-apiserver",
            dns_names=[
                "localhost",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
            ],
            ips=sorted({"127.0.0.1", self.host, service_ip}),
        )
        serving.write(self.pki_dir / "apiserver.crt", self.pki_dir / "apiserver.key")
        if self.nodes:
            # How the API server authenticates to kubelets (logs, exec, port-forward).
            kubelet_client = pki.new_client_cert(ca, "kube-apiserver-kubelet-client", ["system:masters"])
            kubelet_client.write(self.pki_dir / "kubelet-client.crt", self.pki_dir / "kubelet-client.key")
        ca_pem = pki.cert_pem(ca.cert)

        admin = pki.new_client_cert(ca, "localk8s-admin", ["system:masters"])
        admin.write(self.pki_dir / "admin.crt", self.pki_dir / "admin.key")
        _write_private(
            self.kubeconfig,
            yaml.safe_dump(
                kubeconfig_dict(self.name, self.server, ca_pem, "admin", admin.cert_pem, admin.key_pem),
                sort_keys=False,
            ),
        )
        # The bootstrap RBAC policy binds these exact user names to their roles.
        self.component_kubeconfig(self.workdir / "kube-controller-manager.kubeconfig", "system:kube-controller-manager")
        if self.nodes:
            self.component_kubeconfig(self.workdir / "kube-scheduler.kubeconfig", "system:kube-scheduler")
        # The front proxy's CA and client certificate, as kubeadm makes them: an authenticating proxy in front
        # of the API server (testenv.frontproxy) passes the user on in X-Remote-User and X-Remote-Group.
        front_ca = pki.new_ca(f"localk8s-{self.name}-front-proxy-ca")
        (self.pki_dir / "front-proxy-ca.crt").write_bytes(pki.cert_pem(front_ca.cert))
        front = pki.new_client_cert(front_ca, FRONT_PROXY_CLIENT)
        front.write(self.front_proxy_cert, self.front_proxy_key)
        sa_key = pki.new_key()
        _write_private(self.pki_dir / "sa.key", pki.key_pem(sa_key).decode())
        (self.pki_dir / "sa.pub").write_bytes(pki.public_key_pem(sa_key))

    def _audit_flags(self) -> list[str]:
        """Every write into audit.log as a JSON line (testenv.audit reads them back)."""
        policy = audit.write_policy(self.workdir / "audit-policy.yaml")
        return [
            f"--audit-policy-file={policy}",
            f"--audit-log-path={self.audit_log}",
            "--audit-log-format=json",
            # Written before the response completes, so a test sees its own writes at once.
            "--audit-log-mode=blocking",
            # No rotation during a session: 0 would mean the 100 MB default. No backups are compressed.
            "--audit-log-maxsize=1000000",
            "--audit-log-compress=false",
        ]

    def _spawn(self, process: str, argv: list[str]) -> None:
        with open(self.log_path(process), "ab") as log:
            # New session: Ctrl-C in the caller's terminal does not reach it, `up` can return
            # while it keeps running, and stop() can signal the whole process group.
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                start_new_session=True,
            )
        self._procs[process] = proc
        self._argv[process] = argv
        (self.pid_dir / f"{process}.pid").write_text(f"{proc.pid}\n")

    def restart(self, process: str, timeout: float = 120.0) -> None:
        """Stop one control-plane process (SIGTERM: a graceful shutdown, as a rolling restart does) and
        start it again as it was started; return once the API server is ready again."""
        self.stop_process(process)
        self.start_process(process, timeout)

    def stop_process(self, process: str, graceful: bool = True) -> None:
        """Stop one control-plane process, gracefully (SIGTERM, then SIGKILL after 60 s: an API server drains
        its requests and ends its watches first, in a few seconds) or at once (SIGKILL: a crash);
        start_process brings it back."""
        proc = self._procs[process]
        if graceful:
            proc.terminate()
        else:
            proc.kill()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        self._stopped[process] = time.monotonic()

    def start_process(self, process: str, timeout: float = 120.0) -> None:
        """Start a stopped control-plane process as it was started; return once the API server is ready.

        An API server down longer than KCM_RENEW_DEADLINE_SECONDS restarts kube-controller-manager too, as a
        control plane does: its controller manager, leader-elected by default, exits once it cannot renew its
        lease, and starts again. This one runs without election (see _start_processes), so it would live
        through the outage with every informer (the garbage collector's among them) in client-go's reflector
        backoff, which after 30 s of failures waits 30 to 60 s between attempts and resets only after two
        minutes without one: its garbage collector then saw a deletion only up to a minute after the API
        server was back (a Tenant deleted in the foreground by unpeering waited that long)."""
        down = time.monotonic() - self._stopped.pop(process, time.monotonic())
        started = datetime.now(UTC)
        self._spawn(process, self._argv[process])
        deadline = time.monotonic() + timeout
        admin = self.api_client()
        try:
            self._wait(
                f"kube-apiserver /readyz after restarting {process}", deadline, [process], lambda: _readyz(Kube(admin))
            )
        finally:
            admin.close()
        if process == "kube-apiserver":
            audit.note_restart(self.workdir, started, datetime.now(UTC))
        manager = "kube-controller-manager"
        if process == "kube-apiserver" and down > KCM_RENEW_DEADLINE_SECONDS and manager in self._procs:
            self.stop_process(manager, graceful=False)  # it exits at once when it loses leadership
            self._stopped.pop(manager, None)
            self._spawn(manager, self._argv[manager])

    def _check_alive(self, process: str) -> None:
        proc = self._procs[process]
        if proc.poll() is None:
            return
        tail = self.log_path(process).read_text(errors="replace")[-3000:]
        msg = f"{self.name}: {process} exited with code {proc.returncode}; log tail:\n{tail}"
        if "address already in use" in tail:
            raise _PortConflict(f"{process} could not bind its port")
        raise ClusterStartError(msg)

    def _wait(self, what: str, deadline: float, processes: Sequence[str], check: Callable[[], bool]) -> None:
        while True:
            for p in processes:
                self._check_alive(p)
            if check():
                return
            if time.monotonic() > deadline:
                logs = ", ".join(str(self.log_path(p)) for p in processes)
                raise ClusterStartError(f"{self.name}: timed out waiting for {what} (logs: {logs})")
            time.sleep(POLL_INTERVAL)

    def _start_processes(self, binaries: dict[str, Path], deadline: float) -> None:
        etcd_url = f"http://127.0.0.1:{self.etcd_client_port}"
        peer_url = f"http://127.0.0.1:{self.etcd_peer_port}"
        # Unique per start: if another session's etcd grabbed our port first, its health check
        # would pass and our API server would share its storage; the member name tells them apart.
        member = f"{self.name}-{secrets.token_hex(4)}"
        self._spawn(
            "etcd",
            [
                str(binaries["etcd"]),
                f"--name={member}",
                f"--data-dir={self.workdir / 'etcd'}",
                f"--listen-client-urls={etcd_url}",
                f"--advertise-client-urls={etcd_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster={member}={peer_url}",
                "--initial-cluster-state=new",
                # Throwaway data: skipping fsync makes etcd (and so the API server) much faster.
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
        )
        self._wait("etcd /health", deadline, ["etcd"], lambda: _etcd_healthy(etcd_url, member))

        pki_dir = self.pki_dir
        self._spawn(
            "kube-apiserver",
            [
                str(binaries["kube-apiserver"]),
                f"--etcd-servers={etcd_url}",
                f"--bind-address={self.host}",
                f"--advertise-address={self.host}",
                *self._node_flags(),
                f"--secure-port={self.apiserver_port}",
                f"--cert-dir={pki_dir}",
                f"--tls-cert-file={pki_dir / 'apiserver.crt'}",
                f"--tls-private-key-file={pki_dir / 'apiserver.key'}",
                f"--client-ca-file={self.ca_cert}",
                "--authorization-mode=Node,RBAC",
                f"--requestheader-client-ca-file={pki_dir / 'front-proxy-ca.crt'}",
                f"--requestheader-allowed-names={FRONT_PROXY_CLIENT}",
                "--requestheader-username-headers=X-Remote-User",
                "--requestheader-group-headers=X-Remote-Group",
                "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                f"--service-account-issuer={SA_ISSUER}",
                f"--service-account-key-file={pki_dir / 'sa.pub'}",
                f"--service-account-signing-key-file={pki_dir / 'sa.key'}",
                f"--service-cluster-ip-range={self.service_cidr}",
                "--allow-privileged=true",
                "--profiling=false",
                # A graceful stop ends the open watches within this grace, as managed control planes
                # configure it; without it the API server waits out its 60 s shutdown timeout on the
                # controller manager's and the clients' watch streams (measured: 60.1 s, with it 1.2 s).
                "--shutdown-watch-termination-grace-period=5s",
                *self._audit_flags(),
                "--v=1",
            ],
        )
        admin = self.api_client()
        try:
            self._wait("kube-apiserver /readyz", deadline, ["etcd", "kube-apiserver"], lambda: _readyz(Kube(admin)))
            # Started only now: it gives up if the API server is not healthy within seconds,
            # and it needs the bootstrap RBAC roles that /readyz waits for.
            kcm_kubeconfig = self.workdir / "kube-controller-manager.kubeconfig"
            self._spawn(
                "kube-controller-manager",
                [
                    str(binaries["kube-controller-manager"]),
                    f"--kubeconfig={kcm_kubeconfig}",
                    f"--authentication-kubeconfig={kcm_kubeconfig}",
                    f"--authorization-kubeconfig={kcm_kubeconfig}",
                    "--bind-address=127.0.0.1",
                    # 0 = no serving endpoint: nothing scrapes it, and one port less to race for.
                    "--secure-port=0",
                    "--controllers=*",
                    f"--cluster-name={self.name}",
                    # The cluster CA signs CSRs, so certificates issued for signer
                    # kubernetes.io/kube-apiserver-client authenticate against this API server.
                    f"--cluster-signing-cert-file={self.ca_cert}",
                    f"--cluster-signing-key-file={self.ca_key}",
                    *([f"--cluster-signing-duration={self.signing_duration}"] if self.signing_duration else []),
                    f"--root-ca-file={self.ca_cert}",
                    f"--service-account-private-key-file={pki_dir / 'sa.key'}",
                    "--use-service-account-credentials=true",
                    f"--service-cluster-ip-range={self.service_cidr}",
                    # One instance per cluster: skipping the election saves its initial wait.
                    "--leader-elect=false",
                    "--v=1",
                ],
            )
            self._wait(
                "the default ServiceAccount",
                deadline,
                PROCESSES,
                lambda: _default_service_account_exists(admin),
            )
            if self.nodes:
                self._start_nodes(binaries, deadline, Kube(admin))
        finally:
            admin.close()

    def _node_flags(self) -> list[str]:
        if not self.nodes:
            # The `kubernetes` Service cannot get a loopback endpoint (Endpoints validation
            # rejects 127.0.0.0/8) and there are no pods to use it anyway.
            return ["--endpoint-reconciler-type=none"]
        pki_dir = self.pki_dir
        egress = []
        if self.egress:
            config = {
                "apiVersion": "apiserver.k8s.io/v1beta1",
                "kind": "EgressSelectorConfiguration",
                "egressSelections": [
                    {
                        "name": "cluster",
                        "connection": {
                            "proxyProtocol": "HTTPConnect",
                            "transport": {"uds": {"udsName": str(self.egress_socket)}},
                        },
                    }
                ],
            }
            path = self.workdir / "egress-selector.yaml"
            path.write_text(yaml.safe_dump(config, sort_keys=False))
            egress = [f"--egress-selector-config-file={path}"]
        return [
            *egress,
            f"--kubelet-client-certificate={pki_dir / 'kubelet-client.crt'}",
            f"--kubelet-client-key={pki_dir / 'kubelet-client.key'}",
            f"--kubelet-certificate-authority={self.ca_cert}",
            # Node names resolve nowhere; their InternalIP is on the LAN.
            "--kubelet-preferred-address-types=InternalIP",
            "--enable-admission-plugins=NodeRestriction",
        ]

    def _start_nodes(self, binaries: dict[str, Path], deadline: float, kc: Kube) -> None:
        """kube-scheduler, CoreDNS's RBAC and Service, then the nodes; returns when every Node is Ready,
        kube-proxy has programmed each node and CoreDNS answers."""
        scheduler_kubeconfig = self.workdir / "kube-scheduler.kubeconfig"
        self._spawn(
            "kube-scheduler",
            [
                str(binaries["kube-scheduler"]),
                f"--kubeconfig={scheduler_kubeconfig}",
                "--secure-port=0",
                "--leader-elect=false",
                "--v=1",
            ],
        )
        specs = self.node_specs()
        for res, obj in [*node.coredns_rbac(), *node.kube_dns(specs[0])]:
            kc.apply(res, obj, "localk8s", obj["metadata"].get("namespace"))
        for spec in specs:
            Node(self, spec).start(binaries, deadline)
        daemons = [spec.process(d) for spec in specs for d in spec.daemons]
        if self.egress:
            process = specs[0].process("egress")
            argv = [sys.executable, str(EGRESS), str(self.egress_socket)]
            self._spawn(process, network.in_netns(specs[0].netns, argv))
            daemons.append(process)
            self._wait("the egress proxy", deadline, daemons, self.egress_socket.exists)
        for spec in specs:
            self._wait(f"Node {spec.name} to be Ready", deadline, daemons, partial(_node_ready, kc, spec.name))
            healthz = partial(answers_ok, f"http://{spec.ip}:10256/healthz")
            self._wait(f"kube-proxy on {spec.name}", deadline, daemons, healthz)
        self._wait("CoreDNS", deadline, daemons, lambda: answers_ok(f"http://{specs[0].ip}:8181/ready"))

    def stop(self, keep_lan: bool = False) -> None:
        """Kill the processes (recorded pids, so it works from another process), remove what the nodes made
        on the host, and remove workdir; the LAN goes with the last cluster on it, unless `keep_lan`."""
        # SIGKILL, not SIGTERM: the data is thrown away, and a graceful API server shutdown
        # costs seconds per cluster for nothing.
        pids = {p: pid for p, pid in self.recorded_pids().items() if _pid_is_ours(pid, self.workdir)}
        for pid in pids.values():
            _signal_group(pid, signal.SIGKILL)
        deadline = time.monotonic() + STOP_TIMEOUT_SECONDS
        for process, pid in pids.items():
            if not _wait_exit(pid, self._procs.get(process), deadline):
                raise RuntimeError(f"{self.name}: {process} (pid {pid}) survived SIGKILL")
        self._procs.clear()
        for spec in self.node_specs():
            node.cleanup(spec)
        audit.before_removal(self.workdir, self.audit_log)
        shutil.rmtree(self.workdir, ignore_errors=True)
        siblings = self.workdir.parent.iterdir() if self.workdir.parent.is_dir() else iter(())
        if self.lan is not None and not keep_lan and not any((d / STATE_FILE).exists() for d in siblings):
            self.lan.remove()

    def ports(self) -> list[int]:
        return [self.etcd_client_port, self.etcd_peer_port, self.apiserver_port]

    def ports_free(self) -> bool:
        return not any(is_listening(p) for p in self.ports())


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, sig)  # pgid == pid thanks to start_new_session


def _wait_exit(pid: int, proc: subprocess.Popen[bytes] | None, deadline: float) -> bool:
    while time.monotonic() < deadline:
        # Our own child must be reaped, or it lingers as a zombie.
        if proc is not None and proc.poll() is not None:
            return True
        if proc is None and not _pid_alive(pid):
            return True
        time.sleep(0.05)
    return False


def _etcd_healthy(url: str, member: str) -> bool:
    """etcd at url is healthy and is our own single member (not another session's etcd)."""
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as resp:
            if json.load(resp).get("health") != "true":
                return False
        # The grpc-gateway JSON endpoint; POST with an empty request body.
        request = urllib.request.Request(f"{url}/v3/cluster/member/list", data=b"{}", method="POST")
        with urllib.request.urlopen(request, timeout=2) as resp:
            members = json.load(resp).get("members", [])
    except (OSError, ValueError, urllib.error.URLError):
        return False
    if [m.get("name") for m in members] != [member]:
        raise _PortConflict(f"etcd on {url} is not ours (members: {members})")
    return True


def _readyz(kc: Kube) -> bool:
    try:
        kc.get_text("/readyz", timeout=2)
        return True
    except Exception:
        # Connection refused/reset while it starts, or 500 until every post-start hook is done.
        return False


def _node_ready(kc: Kube, name: str) -> bool:
    found = kc.get(k.NODE, name)
    conditions = ((found or {}).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _default_service_account_exists(client: kubernetes.client.ApiClient) -> bool:
    try:
        kubernetes.client.CoreV1Api(client).read_namespaced_service_account("default", "default", _request_timeout=2)
        return True
    except ApiException as e:
        if e.status == 404:
            return False
        raise
    except OSError:
        return False


def start_clusters(
    names: list[str],
    base_dir: Path,
    timeout: float | None = None,
    nodes: int | Mapping[str, int] = 0,
    egress: bool = False,
    kubernetes_version: str | None = None,
    signing_duration: Mapping[str, str] | None = None,
) -> dict[str, LocalCluster]:
    """Start one cluster per name, in parallel, under base_dir/<name>; all or none come up. With `nodes`,
    each gets that many nodes, or as many as `nodes[name]` says (0 for a name it leaves out), all on one LAN
    of their own, where every cluster's API server listens, nodes or not (default timeout: 120 s, 300 s with
    nodes); with `egress` too, their API servers reach Services and Pods through node 0 (egress.py).
    `kubernetes_version` picks the control plane's release (default: hack/versions.env KUBERNETES_VERSION;
    only the versions there are built). `signing_duration`: the lifetime of what a cluster's CSR signer issues, by
    name (a year for a name it leaves out)."""
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate cluster names: {names}")
    counts = {name: nodes.get(name, 0) if isinstance(nodes, Mapping) else nodes for name in names}
    base_dir.mkdir(parents=True, exist_ok=True)
    lan = None
    if any(counts.values()):
        ensure_inotify_instances()
        pause_image()  # built once here, not by each cluster's thread at the same time
        lan = Lan.acquire()
    # Distinct service and Pod ranges, so that objects copied between clusters never alias by accident.
    clusters = {
        name: LocalCluster(
            name,
            base_dir / name,
            service_cidr=f"10.{96 + i}.0.0/16",
            nodes=counts[name],
            lan=lan,
            index=i,
            pod_cidr=f"10.{244 + i}.0.0/16",
            egress=egress,
            kubernetes_version=kubernetes_version,
            signing_duration=(signing_duration or {}).get(name),
        )
        for i, name in enumerate(names)
    }
    started = time.monotonic()
    try:
        with ThreadPoolExecutor(max_workers=len(clusters) or 1) as pool:
            futures = [pool.submit(c.start, timeout or (300.0 if lan else 120.0)) for c in clusters.values()]
            for f in futures:
                f.result()  # re-raises the first failure
    except BaseException:
        for c in clusters.values():
            c.stop()
        if lan is not None:
            lan.remove()
        raise
    _log(f"{', '.join(names)} up in {time.monotonic() - started:.1f}s")
    return clusters
