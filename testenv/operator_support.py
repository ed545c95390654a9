"""Helpers for end-to-end tests: install the CRD, run the operator as a process, drive LiqoPeerings.

The operator runs exactly as users run it: the `liqo-peering-operator run` console script, pointed at
the consumer cluster's kubeconfig. Waits poll the API until a condition holds or a generous deadline
passes; nothing asserts how long things took.
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from testenv import audit
from testenv.crashwatch import ProcessWatch
from testenv.localk8s.ports import free_port
from testenv.reactions import OPERATOR_AGENT
from testenv.wait import wait_for as poll
from testenv.wait import wait_progressing

ROOT = Path(__file__).resolve().parents[1]
CRD_FILE = ROOT / "crds" / "peering.liqo-operator.io_liqopeerings.yaml"
SET_CRD_FILE = ROOT / "crds" / "peering.liqo-operator.io_liqopeeringsets.yaml"
GROUP, VERSION, PLURAL = "peering.liqo-operator.io", "v1alpha1", "liqopeerings"
T = TypeVar("T")
SECRET = "provider-kubeconfig"

if TYPE_CHECKING:
    from testenv.liqo_env.pytest_plugin import LiqoClusters, StandInProcess
    from testenv.localk8s.cluster import LocalCluster

DOWN_SECONDS = 15.0  # the provider's API server stopped this long (docs/reliability.md: "provider outage")
HUNG_SECONDS = 30.0  # the same point: the provider's API server frozen this long


def api_client(kubeconfig: Path | str) -> k8s.ApiClient:
    return k8s_config.new_client_from_config(config_file=str(kubeconfig))


def wait_for(what: str, probe: Callable[[], T | None], timeout: float = 90.0, interval: float = 0.25) -> T:
    """testenv.wait's poll-until-truthy, with the longer default timeout the operator scenarios need."""
    return poll(what, probe, timeout=timeout, interval=interval)


def install_crd(api: k8s.ApiClient) -> None:
    """The operator's CRDs (LiqoPeering, LiqoPeeringSet) from crds/, created or replaced, until Established."""
    ext = k8s.ApiextensionsV1Api(api)
    for path in (CRD_FILE, SET_CRD_FILE):
        crd = yaml.safe_load(path.read_text())
        try:
            current = ext.read_custom_resource_definition(crd["metadata"]["name"])
            crd["metadata"]["resourceVersion"] = current.metadata.resource_version  # type: ignore[union-attr]
            ext.replace_custom_resource_definition(crd["metadata"]["name"], crd)
        except ApiException as exc:
            if exc.status != 404:
                raise
            ext.create_custom_resource_definition(crd)

        def established(name: str = crd["metadata"]["name"]) -> bool:
            got = ext.read_custom_resource_definition(name)
            conditions = got.status.conditions if got.status else None
            return any(c.type == "Established" and c.status == "True" for c in (conditions or []))

        wait_for(f"the CRD {crd['metadata']['name']} to be established", established, timeout=30)


def custom(api: k8s.ApiClient) -> k8s.CustomObjectsApi:
    return k8s.CustomObjectsApi(api)


def get(api: k8s.ApiClient, group: str, plural: str, namespace: str | None, name: str) -> dict[str, Any] | None:
    """A Liqo (v1beta1) object, namespaced or (namespace None) cluster-scoped; None when absent."""
    try:
        if namespace is None:
            return cast(dict[str, Any], custom(api).get_cluster_custom_object(group, "v1beta1", plural, name))
        return cast(dict[str, Any], custom(api).get_namespaced_custom_object(group, "v1beta1", namespace, plural, name))
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def items(api: k8s.ApiClient, group: str, plural: str, namespace: str) -> list[dict[str, Any]]:
    result: Any = custom(api).list_namespaced_custom_object(group, "v1beta1", namespace, plural)
    return list(result["items"])


def tenant_ns(api: k8s.ApiClient, peer_id: str) -> str:
    """The tenant namespace Liqo (or the operator) made for a peer, found by Liqo's labels."""
    found = (
        k8s.CoreV1Api(api)
        .list_namespace(label_selector=f"liqo.io/remote-cluster-id={peer_id},liqo.io/tenant-namespace=true")
        .items
    )
    assert found, f"no tenant namespace for {peer_id}"
    return str(found[0].metadata.name)  # type: ignore[union-attr]


# kopf logs it once its SIGTERM handler is set up: a SIGTERM before it (the interpreter still importing) ends
# the process outright, by Python's default action (exit code -15), and not as a stop does.
STARTED = "Initial authentication has finished"
FAULTS_ENV = "LIQO_PEERING_FAULTS"  # the fault points' directory, read by tests/faultpoints.py
# The operator with fault points at its client calls: a wrapper only the harness runs, never the product.
FAULT_POINTS = ROOT / "tests" / "faultpoints.py"


class OperatorProcess:
    """`liqo-peering-operator run` as a child process, with its log in a file."""

    def __init__(
        self,
        kubeconfig: Path,
        log_dir: Path,
        extra_args: list[str] | None = None,
        faults: bool = False,
        env: dict[str, str] | None = None,
        prefix: Sequence[str] = (),
    ) -> None:
        self.kubeconfig = kubeconfig
        self.env = dict(env or {})  # added to the environment, as a Pod's spec adds variables (a cloud's SDK's)
        # A wrapper the harness runs the operator through, which execs it (a world of its own: testenv.aws).
        self.prefix = list(prefix)
        self.log_path = log_dir / "operator.log"
        self.extra_args = extra_args or []
        self.metrics_port = free_port()
        self.health_port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_at = 0  # the log's size when the current run started
        # Every run is watched: an exit or traceback the test did not ask for fails it (testenv.crashwatch).
        self.watch = ProcessWatch("the operator", self.log_path)
        # With ``faults``: the operator runs through tests/faultpoints.py, and this is where the tests ask it to
        # record its client calls or raise at one (tests/e2e/test_faults.py); None: the operator's own script.
        self.faults_dir: Path | None = None
        if faults:
            self.faults_dir = log_dir / "faults"
            self.faults_dir.mkdir(exist_ok=True)

    def command(self) -> list[str]:
        script = Path(sys.executable).with_name("liqo-peering-operator")
        run = [sys.executable, str(FAULT_POINTS)] if self.faults_dir else [str(script)]
        return [
            *self.prefix,
            *run,
            "run",
            "--kubeconfig",
            str(self.kubeconfig),
            "--log-format",
            "json",
            "--metrics-port",
            str(self.metrics_port),
            "--health-port",
            str(self.health_port),
            *self.extra_args,
        ]

    def start(self) -> OperatorProcess:
        self.started_at = self.log_path.stat().st_size if self.log_path.exists() else 0
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            self.command(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={
                **os.environ,
                "PYTHONUNBUFFERED": "1",
                **({FAULTS_ENV: str(self.faults_dir)} if self.faults_dir else {}),
                **self.env,
            },
        )
        self.watch.started(self.proc)
        return self

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Stop it with `sig`, as the test asks: it must then exit as asked (0 after SIGTERM, within 20 s). One
        that has already exited is left as it is: its exit was not asked for, and the check reports it."""
        if self.proc is None or self.proc.poll() is not None:
            return
        if sig == signal.SIGTERM:
            self.wait_started()
        self.watch.stopping(self.proc, sig)
        os.killpg(self.proc.pid, sig)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.watch.waited_out(self.proc)
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def wait_started(self, timeout: float = 60.0) -> None:
        """Until this run has set up its signal handlers (STARTED in its log) or exited; after `timeout`, on
        regardless (a SIGTERM then ends it outright, which the crash check reports)."""
        proc = self.proc

        def started() -> bool:
            with self.log_path.open("rb") as f:
                f.seek(self.started_at)
                return STARTED.encode() in f.read() or proc is None or proc.poll() is not None

        with contextlib.suppress(AssertionError):
            wait_for("the operator to set up its signal handlers", started, timeout=timeout, interval=0.1)

    def kill(self) -> None:
        """Crash it (SIGKILL): no clean shutdown, as when a node dies. The test asks for this exit."""
        self.stop(signal.SIGKILL)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


class Peerings:
    """LiqoPeering CRUD on the consumer cluster."""

    def __init__(self, api: k8s.ApiClient) -> None:
        self.api = api
        self.custom = k8s.CustomObjectsApi(api)
        self.core = k8s.CoreV1Api(api)

    def secret_finalizers(self, namespace: str, name: str) -> list[str] | None:
        """A Secret's finalizers; None when it is gone."""
        try:
            found = self.core.read_namespaced_secret(name, namespace)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return list((found.metadata and found.metadata.finalizers) or [])

    def make_namespace(self, name: str) -> None:
        try:
            self.core.create_namespace(cast(Any, {"metadata": {"name": name}}))
        except ApiException as exc:
            if exc.status != 409:
                raise

    def put_kubeconfig_secret(self, namespace: str, name: str, kubeconfig: bytes, key: str = "kubeconfig") -> None:
        body: Any = {"metadata": {"name": name}, "data": {key: base64.b64encode(kubeconfig).decode()}}
        try:
            self.core.create_namespaced_secret(namespace, body)
        except ApiException as exc:
            if exc.status != 409:
                raise
            self.core.replace_namespaced_secret(name, namespace, body)

    def create(self, namespace: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "LiqoPeering", "metadata": {"name": name}, "spec": spec}
        return cast(
            dict[str, Any], self.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
        )

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return cast(
                dict[str, Any], self.custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def in_namespace(self, namespace: str) -> list[dict[str, Any]]:
        """Every LiqoPeering in the namespace."""
        result: Any = self.custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)
        return list(result["items"])

    def patch(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        self.custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name, patch)

    def delete(self, namespace: str, name: str) -> None:
        try:
            self.custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
        except ApiException as exc:
            if exc.status != 404:
                raise

    def status(self, namespace: str, name: str) -> dict[str, Any]:
        return dict((self.get(namespace, name) or {}).get("status") or {})

    def condition(self, namespace: str, name: str, type_: str) -> dict[str, Any] | None:
        for cond in self.status(namespace, name).get("conditions") or []:
            if cond.get("type") == type_:
                return dict(cond)
        return None

    def progress(self, namespace: str, name: str) -> Hashable:
        """What changes while a LiqoPeering moves on: each condition's status, reason and message (without its
        numbers, which count time), and whether it is being deleted."""
        obj = self.get(namespace, name)
        if obj is None:
            return None
        conditions = (obj.get("status") or {}).get("conditions") or []
        return bool(obj["metadata"].get("deletionTimestamp")), tuple(
            (c.get("type"), c.get("status"), c.get("reason"), re.sub(r"\d+", "#", str(c.get("message"))))
            for c in conditions
        )

    def wait_status(self, namespace: str, name: str, peer_status: str, timeout: float = 120.0) -> dict[str, Any]:
        """Until its peerStatus is ``peer_status``, for as long as its conditions move on (testenv.wait_progressing):
        ``timeout`` seconds without a change is a verdict."""

        def probe() -> dict[str, Any] | None:
            status = self.status(namespace, name)
            return status if status.get("peerStatus") == peer_status else None

        what = f"LiqoPeering {namespace}/{name} peerStatus={peer_status}"
        try:
            return wait_progressing(what, probe, lambda: self.progress(namespace, name), timeout)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\nstatus now: {self.status(namespace, name)}") from None

    def change_and_wait_ready(
        self, namespace: str, name: str, patch: dict[str, Any], timeout: float = 240.0
    ) -> dict[str, Any]:
        """``patch`` applied, then until the status has observed the generation it made and says ready."""
        self.patch(namespace, name, patch)
        generation = int((self.get(namespace, name) or {})["metadata"]["generation"])

        def probe() -> dict[str, Any] | None:
            status = self.status(namespace, name)
            done = status.get("observedGeneration") == generation and status.get("peerStatus") == "ready"
            return status if done else None

        try:
            return wait_for(f"LiqoPeering {namespace}/{name} ready at generation {generation}", probe, timeout)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\nstatus now: {self.status(namespace, name)}") from None

    def wait_reason(self, namespace: str, name: str, reason: str, timeout: float = 60.0) -> dict[str, Any]:
        def probe() -> dict[str, Any] | None:
            cond = self.condition(namespace, name, "Ready")
            return cond if cond and cond.get("reason") == reason else None

        try:
            return wait_for(f"LiqoPeering {namespace}/{name} Ready reason {reason}", probe, timeout)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\nstatus now: {self.status(namespace, name)}") from None

    def wait_gone(self, namespace: str, name: str, timeout: float = 90.0) -> None:
        """Until it is deleted, for as long as its unpeering moves on (what it says is left changes)."""
        wait_progressing(
            f"LiqoPeering {namespace}/{name} to be deleted",
            lambda: self.get(namespace, name) is None,
            lambda: self.progress(namespace, name),
            timeout,
        )

    def events(self, namespace: str, name: str) -> list[k8s.CoreV1Event]:
        items = self.core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}").items
        return list(items)


@dataclass
class OperatorEnv:
    lc: LiqoClusters
    operator: OperatorProcess
    peerings: Peerings
    provider_api: k8s.ApiClient

    @property
    def consumer_id(self) -> str:
        return self.lc.ids["consumer"]

    @property
    def provider_id(self) -> str:
        return self.lc.ids["provider"]

    def provider_kubeconfig(self) -> bytes:
        return Path(self.lc["provider"].kubeconfig).read_bytes()

    def restart_operator(self) -> None:
        self.operator.stop()
        self.operator.start()


def liqo_objects_left(env: OperatorEnv, c_ns: str, p_ns: str) -> list[str]:
    """A peering's Liqo objects still on either cluster (its tenant namespaces there)."""
    where = [
        (env.peerings.api, "authentication.liqo.io", "resourceslices", c_ns),
        (env.peerings.api, "offloading.liqo.io", "virtualnodes", c_ns),
        (env.peerings.api, "authentication.liqo.io", "identities", c_ns),
        (env.provider_api, "authentication.liqo.io", "tenants", p_ns),
        (env.peerings.api, "networking.liqo.io", "gatewayclients", c_ns),
        (env.provider_api, "networking.liqo.io", "gatewayservers", p_ns),
        (env.peerings.api, "networking.liqo.io", "configurations", c_ns),
        (env.provider_api, "networking.liqo.io", "configurations", p_ns),
    ]
    return [
        f"{plural}/{o['metadata']['name']} in {ns}"
        for api, group, plural, ns in where
        for o in items(api, group, plural, ns)
    ]


@dataclass
class PeeringCase:
    env: OperatorEnv
    namespace: str
    standin: StandInProcess

    @property
    def peerings(self) -> Peerings:
        return self.env.peerings


def provider_down(provider: LocalCluster, peerings: Peerings, namespace: str, name: str) -> float:
    """Kill the provider's kube-apiserver (SIGKILL: down at once, connections refused; a graceful stop drains
    for a minute), check that the LiqoPeering's status says so while it is down (Ready False,
    ProviderUnreachable naming the server, peerStatus error), and start it again after DOWN_SECONDS (the
    harness then restarts the provider's controller manager too, as a control plane's leader-elected one
    restarts after such an outage: see LocalCluster.start_process). Returns how long the status took."""
    stopped = time.monotonic()
    provider.stop_process("kube-apiserver", graceful=False)
    try:
        cond = peerings.wait_reason(namespace, name, "ProviderUnreachable", timeout=DOWN_SECONDS)
        detected = time.monotonic() - stopped
        assert cond["status"] == "False" and provider.server.split("//")[1] in cond["message"], cond
        assert peerings.status(namespace, name)["peerStatus"] == "error"
        time.sleep(max(0.0, DOWN_SECONDS - (time.monotonic() - stopped)))  # the scenario: down this long
    finally:
        provider.start_process("kube-apiserver")
    return detected


# What the operator writes whenever it likes: its status, its Events, kopf's peering objects and leases.
BOOKKEEPING = ("events", "leases", "kopfpeerings", "clusterkopfpeerings", "liqopeerings/status")


def operator_writes(
    audit_log: Path, since: datetime, besides: tuple[str, ...] = BOOKKEEPING
) -> list[tuple[str, str | None, str | None]]:
    """The operator's writes in an API server's audit log received since `since`, as (verb, resource, name),
    but for those to `besides` (resources as testenv.audit spells them)."""
    return [
        (e.verb, e.resource, e.name)
        for e in audit.writes(audit_log, since=since, user_agent_prefix=OPERATOR_AGENT)
        if e.resource not in besides
    ]


@contextlib.contextmanager
def cluster_gone(cluster: LocalCluster) -> Iterator[None]:
    """The cluster as a peer sees one destroyed for good: its kube-apiserver killed (SIGKILL: connections
    refused), every daemon of its nodes stopped (SIGSTOP: containerd, kubelet, kube-proxy, CoreDNS, egress) and
    every process of its Pods frozen (the freezer cgroup of each node's cgroup root: the gateway's WireGuard
    answers nothing). Brought back on leaving (thawed, then the API server started), so that the pair serves
    the next test."""
    from testenv.localk8s.network import cgroup_hierarchies  # the nodes' cgroups, as localk8s made them

    nodes = [f"n{spec.index}-" for spec in cluster.node_specs()]
    daemons = [pid for name, pid in cluster.recorded_pids().items() if any(name.startswith(n) for n in nodes)]
    freezers = []
    for hierarchy in cgroup_hierarchies():
        for spec in cluster.node_specs():
            for knob, frozen, thawed in (("freezer.state", "FROZEN", "THAWED"), ("cgroup.freeze", "1", "0")):
                path = hierarchy / spec.cgroup_root / knob
                if path.exists():
                    freezers.append((path, frozen, thawed))
    cluster.stop_process("kube-apiserver", graceful=False)
    try:
        for path, frozen, _ in freezers:
            path.write_text(frozen)
        for pid in daemons:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
        yield
    finally:
        for path, _, thawed in freezers:
            path.write_text(thawed)
        for pid in daemons:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        cluster.start_process("kube-apiserver")


def provider_hung(
    provider: LocalCluster, peerings: Peerings, namespace: str, name: str, observe: Callable[[], None] = lambda: None
) -> float:
    """Freeze the provider's kube-apiserver (SIGSTOP: the kernel still accepts connections, nothing answers
    them), check that the LiqoPeering's status says so while it lasts (Ready False, ProviderUnreachable naming
    the server, peerStatus error), and thaw it (SIGCONT) after HUNG_SECONDS; observe() is called about once
    a second meanwhile (it must not call the provider). Returns how long the status took."""
    apiserver = provider.recorded_pids()["kube-apiserver"]
    os.kill(apiserver, signal.SIGSTOP)
    frozen = time.monotonic()
    try:
        cond = peerings.wait_reason(namespace, name, "ProviderUnreachable", timeout=HUNG_SECONDS)
        detected = time.monotonic() - frozen
        assert cond["status"] == "False" and provider.server.split("//")[1] in cond["message"], cond
        assert peerings.status(namespace, name)["peerStatus"] == "error"
        while (left := HUNG_SECONDS - (time.monotonic() - frozen)) > 0:  # the scenario: frozen this long
            observe()
            time.sleep(min(1.0, left))
    finally:
        os.kill(apiserver, signal.SIGCONT)
    return detected


@contextlib.contextmanager
def tarpit_kubeconfig(kubeconfig: bytes) -> Iterator[tuple[bytes, str]]:
    """The kubeconfig with its server moved to a tarpit on loopback (the kernel completes the handshake,
    nothing ever reads or answers: a provider that hangs), and that server's host:port."""
    tarpit = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        tarpit.bind(("127.0.0.1", 0))
        tarpit.listen(128)  # never accepted, never answered
        where = f"127.0.0.1:{tarpit.getsockname()[1]}"
        config = yaml.safe_load(kubeconfig)
        config["clusters"][0]["cluster"]["server"] = f"https://{where}"
        yield yaml.safe_dump(config).encode(), where
    finally:
        tarpit.close()


@contextlib.contextmanager
def partitioned(netns: Path, server: str) -> Iterator[None]:
    """The Pods of the node whose network namespace is `netns` cut off from `server` (https://host:port),
    as a network partition does, while nothing else changes: in the node's forward path (Pods' traffic,
    not the node's own), packets to the server are refused with a TCP reset and its packets back dropped.
    Healed on leaving."""
    from testenv.localk8s.network import run  # the nodes' namespaces, as localk8s made them

    host, port = server.split("//", 1)[1].rsplit(":", 1)
    run(
        ["nft", "-f", "-"],
        netns,
        stdin=f"""
table ip e2e-partition {{
    chain forward {{
        type filter hook forward priority filter - 10; policy accept;
        ip daddr {host} tcp dport {port} reject with tcp reset
        ip saddr {host} tcp sport {port} drop
    }}
}}
""",
    )
    try:
        yield
    finally:
        run(["nft", "delete", "table", "ip", "e2e-partition"], netns)
