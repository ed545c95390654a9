"""The operator as users run it in a cluster: a Pod of the Helm chart's Deployment on a real node.

Two local clusters with one real node each (testenv.localk8s, `node_clusters`), Liqo's objects on both and
the Liqo stand-in as a process against both (as in the other suites). The image is the one `make images`
built from the Dockerfile, loaded into the nodes' containerd. `helm install` runs the chart: the operator
reads in-cluster config (the `kubernetes` Service, through kube-proxy), acts with the chart's
ServiceAccount and RBAC, the kubelet runs its probes and enforces its securityContext, and its metrics are
scraped through the chart's Service from another Pod. The provider's kubeconfig in the Secret points at
the provider's API server on the LAN, where the Pod reaches it.

The tests run in order, on one release: install, Ready, metrics, upgrade, a killed Pod, two replicas (the
active one's Pod deleted, its container SIGKILLed, its process frozen), uninstall (once keeping the CRD,
once not).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from liqo_peering.api.crdgen import CRD_NAME
from testenv import audit
from testenv import kube as k
from testenv.helm import CHART, run_helm
from testenv.kube import Kube, KubeError
from testenv.leakscan import LeakScan
from testenv.liqo_env.pytest_plugin import LiqoClusters, StandInProcess
from testenv.localk8s.images import Image, ctr_binary
from testenv.localk8s.pods import python_pod, run_to_completion
from testenv.operator_support import SECRET, Peerings, api_client, tenant_ns, wait_for

RELEASE = "lpo"
RELEASE_NS = "lpo-system"
FULLNAME = f"{RELEASE}-liqo-peering-operator"
PEERING_NS = "e2e-operator-pod"
NAME = "provider"
KOPF_PEERING = k.Res("kopf.dev", "v1", "clusterkopfpeerings", namespaced=False)
SELECTOR = f"app.kubernetes.io/instance={RELEASE},app.kubernetes.io/name=liqo-peering-operator"
LIFETIME = 15  # ha.peeringLifetime of the two-replica release: seconds a replica's peering entry stays valid
RESUMED = "Resuming operations after the pause"
PAUSED = "Pausing operations in favour of"

# What the operator makes for one peering, per cluster: (resource, plural group, in the tenant namespace).
CONSUMER_OBJECTS = [
    ("networking.liqo.io", "configurations"),
    ("networking.liqo.io", "gatewayclients"),
    ("networking.liqo.io", "publickeies"),
    ("authentication.liqo.io", "identities"),
    ("authentication.liqo.io", "resourceslices"),
    ("offloading.liqo.io", "virtualnodes"),
]
PROVIDER_OBJECTS = [
    ("networking.liqo.io", "configurations"),
    ("networking.liqo.io", "gatewayservers"),
    ("networking.liqo.io", "publickeies"),
    ("authentication.liqo.io", "tenants"),
]


@dataclass
class Suite:
    lc: LiqoClusters
    standin: StandInProcess
    kc: Kube
    peerings: Peerings
    image: Image  # the operator's
    python: Image  # the base image, for the Pods that look at the cluster from inside
    # When the suite began: the consumer's audit log holds writes of other operator Pods before it (the
    # session's node clusters are shared with test_flux_helmrelease.py).
    started: datetime

    @property
    def kubeconfig(self) -> Path:
        return self.lc["consumer"].kubeconfig

    def helm(self, *args: str) -> str:
        try:
            return run_helm(*args, kubeconfig=self.kubeconfig)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.diagnosis()}") from None

    def install_args(self, *sets: str) -> list[str]:
        repository, tag = self.image.ref.rsplit(":", 1)
        values = [
            f"image.repository={repository}",
            f"image.tag={tag}",
            # Loaded into the node by `make images`: there is no registry to pull from.
            "image.pullPolicy=Never",
            f"liqoNamespace={self.lc.namespace}",
            *sets,
        ]
        args = [str(CHART), "--namespace", RELEASE_NS, "--wait", "--timeout", "4m"]
        for value in values:
            args += ["--set", value]
        return args

    def pods(self) -> list[dict[str, Any]]:
        """The operator's Pods that are not being deleted."""
        pods = self.kc.list(k.POD, RELEASE_NS, SELECTOR)
        return [p for p in pods if not p["metadata"].get("deletionTimestamp")]

    def ready_pods(self, count: int) -> list[dict[str, Any]] | None:
        pods = self.pods()
        ready = [p for p in pods if _ready(p)]
        return ready if len(ready) == count == len(pods) else None

    def status(self) -> dict[str, Any]:
        return self.peerings.status(PEERING_NS, NAME)

    def successor(self, old: dict[str, Any]) -> dict[str, Any]:
        """The one ready operator Pod, once it is another than `old`."""
        (pod,) = wait_for(
            f"a ready operator Pod other than {old['metadata']['name']}",
            lambda: [p for p in self.ready_pods(1) or [] if p["metadata"]["uid"] != old["metadata"]["uid"]],
            timeout=180,
        )
        return pod

    def change_and_reconcile(self, timeout: str) -> None:
        """Change the peering's spec (its timeout) and wait until the operator has reconciled it, Ready."""
        self.peerings.patch(PEERING_NS, NAME, {"spec": {"timeout": timeout}})

        def observed() -> bool:
            peering = self.peerings.get(PEERING_NS, NAME) or {}
            status = peering.get("status") or {}
            return status.get("observedGeneration") == peering["metadata"]["generation"] and _is_ready(status)

        wait_for(f"the operator to reconcile the spec change (timeout {timeout})", observed, timeout=90)

    def pod_log(self, name: str, missing: str | None = None) -> str:
        """The log of the Pod's current container (a restarted one's starts empty); `missing` if there is
        none yet (a container waiting to start), else KubeError."""
        try:
            return self.kc.get_text(f"/api/v1/namespaces/{RELEASE_NS}/pods/{name}/log")
        except KubeError:
            if missing is None:
                raise
            return missing

    def operator_logs(self) -> str:
        return "\n".join(
            f"--- {p['metadata']['name']}\n"
            + self.kc.get_text(f"/api/v1/namespaces/{RELEASE_NS}/pods/{p['metadata']['name']}/log")[-4000:]
            for p in self.pods()
        )

    def diagnosis(self) -> str:
        """The operator Pods' states and the release namespace's events, for a failure message."""
        lines = []
        for pod in self.kc.list(k.POD, RELEASE_NS):
            statuses = (pod.get("status") or {}).get("containerStatuses") or []
            lines.append(f"pod {pod['metadata']['name']}: {json.dumps([s.get('state') for s in statuses])}")
        for event in self.kc.list(k.Res("", "v1", "events"), RELEASE_NS):
            lines.append(f"event {event['involvedObject']['name']}: {event.get('reason')}: {event.get('message')}")
        try:
            lines.append(self.operator_logs())
        except k.KubeError as exc:
            lines.append(f"(no logs: {exc})")
        return "\n".join(lines)


def _ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _is_ready(status: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or [])


@pytest.fixture(scope="module")
def suite(
    liqo_node_clusters: LiqoClusters, node_images: dict[str, Image], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Suite]:
    lc = liqo_node_clusters
    standin = StandInProcess(lc, tmp_path_factory.mktemp("standin") / "liqo-standin.log")
    kc = lc.kube("consumer")
    peerings = Peerings(api_client(lc["consumer"].kubeconfig))
    peerings.make_namespace(PEERING_NS)
    # The provider's admin kubeconfig: its server is the provider's API server on the LAN.
    peerings.put_kubeconfig_secret(PEERING_NS, SECRET, Path(lc["provider"].kubeconfig).read_bytes())
    try:
        yield Suite(lc, standin, kc, peerings, node_images["operator"], node_images["python-base"], datetime.now(UTC))
    finally:
        standin.stop()


@pytest.fixture(autouse=True)
def scanned(suite: Suite, leak_scan: LeakScan) -> Iterator[None]:
    """After each test, while its Pods still exist: their whole logs, and the clusters' Secrets, Events and
    statuses, for the run's leak scan (tests/e2e/test_zz_no_leaks.py)."""
    yield
    for pod in suite.kc.list(k.POD, RELEASE_NS, SELECTOR):
        name = pod["metadata"]["name"]
        try:
            log = suite.kc.get_text(f"/api/v1/namespaces/{RELEASE_NS}/pods/{name}/log")
        except KubeError:
            continue  # not started, or already gone
        leak_scan.add_text(f"operator Pod {name} log", log)
    leak_scan.collect({side: api_client(suite.lc[side].kubeconfig) for side in ("consumer", "provider")})


def test_helm_install_runs_the_operator_as_a_pod(suite: Suite) -> None:
    out = suite.helm("install", RELEASE, *suite.install_args(), "--create-namespace")
    assert "STATUS: deployed" in out, out
    (pod,) = wait_for("the operator Pod to be ready (its readiness probe)", lambda: suite.ready_pods(1), timeout=60)
    spec = pod["spec"]
    assert spec["serviceAccountName"] == FULLNAME and spec["nodeName"] == "consumer-node-0"
    (container,) = spec["containers"]
    assert container["image"] == suite.image.ref
    assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"
    (status,) = pod["status"]["containerStatuses"]
    assert status["ready"] and status["restartCount"] == 0

    # The kubelet enforced the chart's securityContext: the operator's process, as the kernel sees it.
    process = _container_process(suite, status["containerID"])
    fields = dict(line.split(":\t", 1) for line in process["status"].splitlines() if ":\t" in line)
    assert fields["Uid"].split()[:2] == ["65532", "65532"] and fields["Gid"].split()[:2] == ["65532", "65532"]
    assert int(fields["CapEff"], 16) == 0 and int(fields["CapBnd"], 16) == 0, fields
    assert fields["NoNewPrivs"] == "1" and fields["Seccomp"] == "2", fields  # 2: a filter (RuntimeDefault)
    root = next(line for line in process["mountinfo"].splitlines() if line.split()[4] == "/")
    assert "ro" in root.split()[5].split(","), root


def _container_process(suite: Suite, container_id: str) -> dict[str, str]:
    """/proc of the container's main process on the node, found through the node's containerd."""
    pid = _container_pid(suite, container_id)
    return {name: Path(f"/proc/{pid}/{name}").read_text() for name in ("status", "mountinfo")}


def test_a_peering_turns_ready(suite: Suite) -> None:
    suite.peerings.create(PEERING_NS, NAME, {"remoteKubeconfigSecretRef": {"name": SECRET}, "timeout": "3m"})
    try:
        status = suite.peerings.wait_status(PEERING_NS, NAME, "ready", timeout=180)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{suite.operator_logs()}") from None
    assert status["localClusterID"] == suite.lc.ids["consumer"]
    assert status["remoteClusterID"] == suite.lc.ids["provider"]
    # Every write came from the operator's Pod, as the chart's ServiceAccount (a token bound to the Pod).
    writes = audit.writes(suite.lc["consumer"].audit_log, suite.started, user_agent_prefix="liqo-peering-operator")
    assert writes and {w.username for w in writes} == {f"system:serviceaccount:{RELEASE_NS}:{FULLNAME}"}
    assert {w.pod_name for w in writes} == {suite.pods()[0]["metadata"]["name"]}


def test_metrics_scraped_through_the_service(suite: Suite) -> None:
    url = f"http://{FULLNAME}-metrics.{RELEASE_NS}.svc.cluster.local:8080/metrics"
    script = f"""
import time, urllib.request
for _ in range(30):
    try:
        print(urllib.request.urlopen("{url}", timeout=5).read().decode())
        break
    except OSError as e:
        print("retry:", e)
        time.sleep(1)
"""
    pod = python_pod(f"scrape-{uuid.uuid4().hex[:6]}", suite.python.ref, script)
    metrics = run_to_completion(suite.kc, PEERING_NS, pod)
    assert 'liqo_peering_peerings{status="ready"} 1.0' in metrics, metrics[-3000:]
    assert "liqo_peering_time_to_ready_seconds_count 1.0" in metrics, metrics[-3000:]


def test_helm_upgrade_rolls_the_pod_and_the_peering_stays_ready(suite: Suite) -> None:
    (before,) = suite.pods()
    samples: list[bool] = []
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            samples.append(_is_ready(suite.status()))
            time.sleep(0.5)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        suite.helm("upgrade", RELEASE, *suite.install_args("logLevel=debug"))
        after = suite.successor(before)
        # The new Pod has taken over: it is the one that reconciles the peering now.
        suite.change_and_reconcile("4m")
    finally:
        done.set()
        sampler.join()
    assert "--log-level=debug" in after["spec"]["containers"][0]["args"]
    assert samples and all(samples), f"the peering left Ready during the upgrade ({samples.count(False)} samples)"


def test_a_killed_pod_is_replaced_and_nothing_is_duplicated(suite: Suite) -> None:
    (victim,) = suite.pods()
    since = datetime.now(UTC)
    k8s.CoreV1Api(suite.peerings.api).delete_namespaced_pod(
        victim["metadata"]["name"], RELEASE_NS, grace_period_seconds=0
    )
    replacement = suite.successor(victim)
    suite.change_and_reconcile("5m")
    _assert_one_of_each(suite)
    # The replacement resumed: it created nothing, it only brought what existed up to date.
    writes = audit.writes(suite.lc["consumer"].audit_log, since, user_agent_prefix="liqo-peering-operator")
    assert {w.pod_name for w in writes} <= {replacement["metadata"]["name"]}
    assert not [w for w in writes if w.verb == "create" and w.resource != "events"], writes


def _assert_one_of_each(suite: Suite) -> None:
    """Exactly one of each Liqo object the peering needs, on both clusters: nothing duplicated or missing."""
    consumer_ns = tenant_ns(suite.peerings.api, suite.lc.ids["provider"])
    provider_api = api_client(suite.lc["provider"].kubeconfig)
    provider_ns = tenant_ns(provider_api, suite.lc.ids["consumer"])
    for api, namespace, kinds in (
        (suite.peerings.api, consumer_ns, CONSUMER_OBJECTS),
        (provider_api, provider_ns, PROVIDER_OBJECTS),
    ):
        custom = k8s.CustomObjectsApi(api)
        for group, plural in kinds:
            found: Any = custom.list_namespaced_custom_object(group, "v1beta1", namespace, plural)
            names = [i["metadata"]["name"] for i in found["items"]]
            assert len(names) == 1, f"{plural} in {namespace}: {names}"


def test_with_two_replicas_exactly_one_acts(suite: Suite, capsys: pytest.CaptureFixture[str]) -> None:
    # A short peering lifetime (the chart's default is 30 s) keeps the SIGKILL handover test below short.
    suite.helm(
        "upgrade", RELEASE, *suite.install_args("ha.enabled=true", "replicaCount=2", f"ha.peeringLifetime={LIFETIME}")
    )
    pods = wait_for("two ready replicas", lambda: suite.ready_pods(2), timeout=180)
    names = [p["metadata"]["name"] for p in pods]

    def paused() -> list[str] | None:
        # kopf peering: the replica with the lower priority pauses in favour of the other.
        logs = {n: suite.kc.get_text(f"/api/v1/namespaces/{RELEASE_NS}/pods/{n}/log") for n in names}
        waiting = [n for n, log in logs.items() if PAUSED in log]
        return waiting if len(waiting) == 1 else None

    (standby,) = wait_for("one replica to stand by", paused, timeout=60)
    since = datetime.now(UTC)
    suite.change_and_reconcile("6m")
    writes = audit.writes(suite.lc["consumer"].audit_log, since, user_agent_prefix="liqo-peering-operator")
    writers = {w.pod_name for w in writes}
    assert len(writers) == 1 and standby not in writers, json.dumps(sorted(map(str, writers)))

    # Handover (issue "Survives", point 5): the active replica's Pod is deleted, as a drain or a rollout
    # does (SIGTERM: kopf withdraws it from the peering object on its way out). The standby resumes, and
    # once the Deployment's replacement has joined, the next change is reconciled by one Pod alone, never
    # the deleted one.
    (active,) = writers
    assert active is not None
    deleted = time.monotonic()
    k8s.CoreV1Api(suite.peerings.api).delete_namespaced_pod(active, RELEASE_NS)
    wait_for(
        f"the standby {standby} to resume",
        lambda: not _standing_by(suite.kc.get_text(f"/api/v1/namespaces/{RELEASE_NS}/pods/{standby}/log")),
        timeout=120,
        interval=0.2,
    )
    handover = time.monotonic() - deleted
    pods = wait_for("two ready replicas again", lambda: suite.ready_pods(2), timeout=180)
    names = [p["metadata"]["name"] for p in pods]
    assert active not in names and standby in names, names
    # Which of the two acts is kopf peering's verdict: the live peer of the highest priority in the peering
    # object. (A replica that starts behind a higher one pauses without logging it, so logs cannot tell.)
    peers = wait_for("both replicas in the kopf peering object", partial(_live_peers, suite, names), timeout=120)
    leader = max(names, key=lambda n: peers[n])
    if leader != standby:  # the replacement outranks it: the former standby pauses again (and says so)
        wait_for(
            f"{standby} to stand by again",
            lambda: _standing_by(suite.kc.get_text(f"/api/v1/namespaces/{RELEASE_NS}/pods/{standby}/log")),
            timeout=60,
        )
    since = datetime.now(UTC)
    suite.change_and_reconcile("7m")
    writes = audit.writes(suite.lc["consumer"].audit_log, since, user_agent_prefix="liqo-peering-operator")
    writers = {w.pod_name for w in writes}
    assert writers == {leader}, json.dumps({"writers": sorted(map(str, writers)), "priorities": peers})
    with capsys.disabled():
        print(f"\nBENCH HA handover: active Pod deleted -> standby resumed: {handover:.1f}s")


def test_a_sigkilled_active_replica_is_taken_over_and_restarted(
    suite: Suite, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue "Survives", point 5: the active replica dies without a word (SIGKILL: kopf cannot withdraw it from
    the peering object). A replica acts again once its entry expires (the peering lifetime) or once the
    kubelet's restart of its container announces itself under the same identity (the Pod's name) with a new
    priority, whichever comes first; the container restarts in the same Pod; one replica alone acts."""
    h = Handover(suite)
    h.signal(signal.SIGKILL)
    h.wait_taken_over()
    h.wait_restarted_and_settled("8m")
    with capsys.disabled():
        print(
            f"\nBENCH HA handover after SIGKILL: {h.handover:.1f}s (peering lifetime {LIFETIME} s; taken over by the"
            f" {h.taker}; the restarted container announced itself after {h.seen['announced']:.1f}s)"
        )


def test_a_frozen_active_replica_is_taken_over_when_its_peering_entry_expires(
    suite: Suite, capsys: pytest.CaptureFixture[str]
) -> None:
    """The active replica stops without a word and does not come back (a lost node; here SIGSTOP: no keep-alive,
    no withdrawal, no restart): the standby takes over when the replica's peering entry expires, within the
    peering lifetime, and only the standby writes, once it has resumed. Then SIGKILL, so that it never resumes
    (it would act beside the standby); its restart is the SIGKILL test's subject, not waited for here (a second
    restart of a container within minutes waits out the kubelet's 10 s back-off)."""
    h = Handover(suite)
    h.signal(signal.SIGSTOP)
    try:
        h.wait_taken_over()
        assert h.taker == "standby" and "announced" not in h.seen, h.seen  # the entry's expiry alone ended it
        h.assert_writes_while_acting(restarted=False)
    finally:
        h.signal(signal.SIGKILL)
    with capsys.disabled():
        print(
            f"\nBENCH HA handover after the active replica froze (SIGSTOP, as on a lost node): {h.handover:.1f}s"
            f" (peering lifetime {LIFETIME} s; its entry was {h.entry_age:.1f}s old when it froze, so it expired"
            f" {LIFETIME - h.entry_age:.1f}s after)"
        )


class Handover:
    """One handover of the two-replica release: the active replica (the live peer of the highest priority in the
    kopf peering object) gets a signal; what follows is observed in the replicas' logs, the peering object, the
    Pods and the audit log."""

    def __init__(self, suite: Suite) -> None:
        self.suite = suite
        self.pods = wait_for("two running replicas", partial(_running_pods, suite, 2))
        self.priorities = wait_for("both replicas live in the peering object", partial(_live_peers, suite, list(self)))
        entries = _peering_entries(suite)
        assert {int(entries[n]["lifetime"]) for n in self} == {LIFETIME}, entries  # the chart's flag reached kopf
        self.active = max(self, key=lambda n: self.priorities[n])
        (self.standby,) = set(self) - {self.active}
        (self.container,) = self.pods[self.active]["status"]["containerStatuses"]
        self.pid = _container_pid(suite, self.container["containerID"])
        cmdline = Path(f"/proc/{self.pid}/cmdline").read_bytes().split(b"\0")
        assert any(a.endswith(b"liqo-peering-operator") for a in cmdline), cmdline  # the operator, nothing else
        log = suite.pod_log(self.standby)
        self.resumed_before, self.paused_before = log.count(RESUMED), log.count(PAUSED)
        self.since: datetime | None = None  # the first signal: writes after it are checked
        self.signalled = datetime.now(UTC)
        # What happened, seconds after the last signal, by the time its own record says: the log line of a
        # replica's resuming, the first keep-alive's `lastseen` (the host's clock, as the node's processes').
        self.seen: dict[str, float] = {}

    def __iter__(self) -> Iterator[str]:
        return iter(self.pods)

    def signal(self, sig: signal.Signals) -> None:
        entry = _peering_entries(self.suite).get(self.active)
        self.signalled = datetime.now(UTC)
        if self.since is None:  # the first signal
            self.since = self.signalled
            # How old the replica's entry is: it expires, and a standby waiting for it resumes, a lifetime
            # after its `lastseen`.
            self.entry_age = (
                (self.signalled - datetime.fromisoformat(entry["lastseen"])).total_seconds() if entry else 0
            )
        os.kill(self.pid, sig)

    def observe(self) -> None:
        def after(when: datetime) -> float:
            return (when - self.signalled).total_seconds()

        entry = _peering_entries(self.suite).get(self.active)
        if "announced" not in self.seen and entry and int(entry["priority"]) != self.priorities[self.active]:
            # The restarted container's first keep-alive (a new random priority) or a later one: at most this.
            self.seen["announced"] = after(datetime.fromisoformat(entry["lastseen"]))
        if "standby" not in self.seen:
            resumed = _log_times(self.suite.pod_log(self.standby), RESUMED)[self.resumed_before :]
            self.seen.update({"standby": after(resumed[0])} if resumed else {})
        # Once restarted, the Pod's log is the new container's: the killed one's lines are not in it.
        if "restarted replica" not in self.seen and self.restarts() > self.container["restartCount"]:
            resumed = _log_times(self.suite.pod_log(self.active, missing=""), RESUMED)
            self.seen.update({"restarted replica": after(resumed[0])} if resumed else {})

    def restarts(self) -> int:
        pod = self.suite.kc.get(k.POD, self.active, RELEASE_NS) or {}
        if pod.get("metadata", {}).get("uid") != self.pods[self.active]["metadata"]["uid"]:
            raise AssertionError(f"{self.active} was replaced, not restarted in place")
        statuses = (pod.get("status") or {}).get("containerStatuses") or []
        running = statuses and "running" in statuses[0]["state"]
        return int(statuses[0]["restartCount"]) if running else int(self.container["restartCount"])

    def wait_taken_over(self) -> None:
        def acting() -> bool:
            self.observe()
            return "standby" in self.seen or "restarted replica" in self.seen

        wait_for("a replica to act again", acting, timeout=LIFETIME + 60, interval=0.2)
        self.taker = "standby" if "standby" in self.seen else "restarted replica"
        self.handover = self.seen[self.taker]

    def assert_writes_while_acting(self, restarted: bool) -> None:
        """By their own logs, since the first signal: the standby wrote nothing before it resumed; the signalled
        replica nothing at all unless `restarted`, and then not before its new container resumed, nor while the
        standby still acted (before it paused again)."""
        suite, active, standby = self.suite, self.active, self.standby
        assert self.since is not None
        writes = audit.writes(suite.lc["consumer"].audit_log, self.since, user_agent_prefix="liqo-peering-operator")
        resumed = {
            active: _log_times(suite.pod_log(active), RESUMED)[-1:] if restarted else [],
            standby: _log_times(suite.pod_log(standby), RESUMED)[self.resumed_before :],
        }
        paused_again = _log_times(suite.pod_log(standby), PAUSED)[self.paused_before :]
        for w in writes:
            began = resumed.get(w.pod_name or "")
            assert began and w.received >= began[0], f"{w.pod_name} wrote while standing by: {w}"
            if w.pod_name == active and "standby" in self.seen:
                assert paused_again and w.received >= paused_again[0], f"{active} wrote while {standby} acted: {w}"

    def wait_restarted_and_settled(self, timeout: str) -> None:
        """The kubelet restarts the signalled container in the same Pod and it announces itself; then each
        replica wrote only while it acted, one replica alone reconciles a change of the spec's `timeout`, and
        nothing was made twice on either cluster."""
        suite, active, standby = self.suite, self.active, self.standby

        def restarted() -> bool:
            self.observe()
            return "announced" in self.seen and self.restarts() == self.container["restartCount"] + 1

        wait_for(f"the kubelet to restart {active}'s container", restarted, timeout=120, interval=0.2)
        peers = wait_for("both replicas live in the peering object", partial(_live_peers, suite, list(self)))
        leader = max(self, key=lambda n: peers[n])
        # Whoever outranks acts: the restarted container drew a new priority. A standby that had resumed pauses
        # again when the restarted one outranks it; one that outranks it resumes (if it has not yet).
        if leader == active:
            wait_for(f"{active} to act", lambda: RESUMED in suite.pod_log(active), timeout=60)
            if "standby" in self.seen:
                wait_for(
                    f"{standby} to stand by again", lambda: suite.pod_log(standby).count(PAUSED) > self.paused_before
                )
        else:
            wait_for(f"{standby} to act", lambda: suite.pod_log(standby).count(RESUMED) > self.resumed_before)

        self.assert_writes_while_acting(restarted=True)
        since = datetime.now(UTC)
        suite.change_and_reconcile(timeout)
        writes = audit.writes(suite.lc["consumer"].audit_log, since, user_agent_prefix="liqo-peering-operator")
        writers = {w.pod_name for w in writes}
        assert writers == {leader}, json.dumps({"writers": sorted(map(str, writers)), "priorities": peers})
        _assert_one_of_each(suite)


def _container_pid(suite: Suite, container_id: str) -> int:
    """The host PID of a container's main process, from the node's containerd (the node is a host process)."""
    (spec,) = suite.lc["consumer"].node_specs()
    cid = container_id.removeprefix("containerd://")
    ctr = [ctr_binary(), "--address", str(spec.socket), "--namespace", "k8s.io"]
    tasks = subprocess.run([*ctr, "tasks", "ls"], capture_output=True, text=True, check=True).stdout
    (pid,) = [line.split()[1] for line in tasks.splitlines() if line.startswith(cid)]
    return int(pid)


def _running_pods(suite: Suite, count: int) -> dict[str, dict[str, Any]] | None:
    """The operator's Pods by name once there are `count`, each with its container running (ready or not)."""
    pods = {p["metadata"]["name"]: p for p in suite.pods()}
    states = [((p.get("status") or {}).get("containerStatuses") or [{}])[0].get("state") or {} for p in pods.values()]
    return pods if len(pods) == count and all("running" in state for state in states) else None


def _log_times(log: str, text: str) -> list[datetime]:
    """When the JSON log lines holding `text` were written (the operator's structlog timestamp)."""
    return [datetime.fromisoformat(json.loads(line)["timestamp"]) for line in log.splitlines() if text in line]


def _peering_entries(suite: Suite) -> dict[str, dict[str, Any]]:
    """The chart's ClusterKopfPeering's entries: {replica: {priority, lifetime, lastseen}}."""
    peering = suite.kc.get(KOPF_PEERING, FULLNAME) or {}
    return {name: entry for name, entry in (peering.get("status") or {}).items() if entry}


def _live_peers(suite: Suite, names: list[str]) -> dict[str, int] | None:
    """{replica: priority} from the chart's ClusterKopfPeering once every one of `names` is a live peer."""
    peering = suite.kc.get(KOPF_PEERING, FULLNAME) or {}
    now = datetime.now(UTC)
    live = {
        name: int(peer["priority"])
        for name, peer in (peering.get("status") or {}).items()
        if datetime.fromisoformat(peer["lastseen"]) + timedelta(seconds=int(peer["lifetime"])) > now
    }
    return live if set(names) <= set(live) else None


def _standing_by(log: str) -> bool:
    """Whether a replica's kopf log ends paused: its last peering verdict was to pause."""
    return log.rfind(PAUSED) > log.rfind(RESUMED)


def test_helm_uninstall_honours_crds_keep(suite: Suite) -> None:
    ext = k8s.ApiextensionsV1Api(suite.peerings.api)
    # crds.keep=true (the default): the CRD, and the LiqoPeering with it, outlive the release.
    suite.helm("uninstall", RELEASE, "--namespace", RELEASE_NS, "--wait")
    wait_for("the operator Pods to be gone", lambda: not suite.kc.list(k.POD, RELEASE_NS, SELECTOR), timeout=120)
    assert ext.read_custom_resource_definition(CRD_NAME).metadata.name == CRD_NAME  # type: ignore[union-attr]
    assert suite.peerings.get(PEERING_NS, NAME) is not None

    # Installed again (the release adopts the CRD it kept), now with crds.keep=false. The peering is
    # unpeered first, so that no finalizer outlives the operator; then uninstalling removes the CRD.
    suite.helm("install", RELEASE, *suite.install_args("crds.keep=false"))
    wait_for("the operator Pod to be ready", lambda: suite.ready_pods(1), timeout=180)
    suite.peerings.delete(PEERING_NS, NAME)
    suite.peerings.wait_gone(PEERING_NS, NAME, timeout=120)
    suite.helm("uninstall", RELEASE, "--namespace", RELEASE_NS, "--wait")

    def crd_gone() -> bool:
        return CRD_NAME not in {c.metadata.name for c in ext.list_custom_resource_definition().items}  # type: ignore[union-attr]

    wait_for("the CRD to be deleted with the release", crd_gone, timeout=60)
