"""The operator as users run it: the project's Helm chart installed on a cluster with a real node
(testenv.localk8s), its image (`make images`) loaded into the node; its Pods, their logs, and with two
replicas (kopf peering) which one acts and what a signal to it does (Handover).

Shared by the chart's Pods against the Liqo stand-in (tests/e2e/test_operator_pod.py) and against Liqo's own
chart (tests/e2e/test_real_liqo_ha.py).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Hashable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cached_property, partial
from pathlib import Path
from typing import Any

from testenv import audit
from testenv import kube as k
from testenv.crashwatch import pod_watch
from testenv.helm import CHART, run_helm
from testenv.kube import Kube, KubeError
from testenv.leakscan import LeakScan
from testenv.localk8s import LocalCluster
from testenv.localk8s.images import Image, ctr_binary
from testenv.operator_support import Peerings, wait_for
from testenv.sampler import is_ready
from testenv.wait import wait_progressing

RELEASE = "lpo"
RELEASE_NS = "lpo-system"
FULLNAME = f"{RELEASE}-liqo-peering-operator"
KOPF_PEERING = k.Res("kopf.dev", "v1", "clusterkopfpeerings", namespaced=False)
SELECTOR = f"app.kubernetes.io/instance={RELEASE},app.kubernetes.io/name=liqo-peering-operator"
OPERATOR_AGENT = "liqo-peering-operator"  # the user agent of the operator's requests
PEERING_OBJECTS = ("clusterkopfpeerings", "kopfpeerings")  # kopf's peering objects (resource names)
RESUMED = "Resuming operations after the pause"
PAUSED = "Pausing operations in favour of"


def ha_values(lifetime: int) -> list[str]:
    """Two replicas coordinating through kopf peering, each entry valid `lifetime` seconds (chart values)."""
    return ["ha.enabled=true", "replicaCount=2", f"ha.peeringLifetime={lifetime}"]


@dataclass
class Release:
    """The chart's release RELEASE in RELEASE_NS on `cluster` (the consumer), running `image`."""

    cluster: LocalCluster
    image: Image
    liqo_namespace: str

    def __post_init__(self) -> None:
        # Its Pods are watched: a restart or termination the test did not cause fails it (testenv.crashwatch).
        self.watch = pod_watch(
            f"release {RELEASE} on {self.cluster.name}",
            partial(self.kc.list, k.POD, RELEASE_NS, SELECTOR),
            lambda name, previous: self.pod_log(name, missing="", previous=previous),
        )

    def reconciled_by(self, peerings: Peerings, namespace: str, name: str, timeout: str) -> set[str | None]:
        """Change the peering's spec (its timeout) and wait until the operator has reconciled it, Ready; the
        Pods that wrote since the change (once the status write that showed it is in the audit log)."""
        since = datetime.now(UTC)
        peerings.patch(namespace, name, {"spec": {"timeout": timeout}})

        def observed() -> bool:
            peering = peerings.get(namespace, name) or {}
            status = peering.get("status") or {}
            return status.get("observedGeneration") == peering["metadata"]["generation"] and is_ready(status)

        wait_for(f"the operator to reconcile the spec change (timeout {timeout})", observed, timeout=90)
        writes = audit.writes_through(
            self.cluster.audit_log, since, audit.status_of("liqopeerings", name), OPERATOR_AGENT
        )
        return {w.pod_name for w in writes}

    @property
    def kubeconfig(self) -> Path:
        return Path(self.cluster.kubeconfig)

    @cached_property
    def kc(self) -> Kube:
        return Kube(self.cluster.api_client())

    def helm(self, *args: str) -> str:
        try:
            return run_helm(*args, kubeconfig=self.kubeconfig)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.diagnosis()}") from None

    def install_args(self, *sets: str, wait: bool = True) -> list[str]:
        """`helm install|upgrade RELEASE` arguments after the release's name; with `wait`, helm waits until the
        Pods are ready."""
        repository, tag = self.image.ref.rsplit(":", 1)
        values = [
            f"image.repository={repository}",
            f"image.tag={tag}",
            # Loaded into the node by `make images`: there is no registry to pull from.
            "image.pullPolicy=Never",
            f"liqoNamespace={self.liqo_namespace}",
            *sets,
        ]
        args = [str(CHART), "--namespace", RELEASE_NS, *(["--wait", "--timeout", "4m"] if wait else [])]
        for value in values:
            args += ["--set", value]
        return args

    def pods(self) -> list[dict[str, Any]]:
        """The operator's Pods that are not being deleted."""
        pods = self.kc.list(k.POD, RELEASE_NS, SELECTOR)
        return [p for p in pods if not p["metadata"].get("deletionTimestamp")]

    def ready_pods(self, count: int) -> list[dict[str, Any]] | None:
        """`count` ready Pods once the Deployment's rollout is complete, as `kubectl rollout status` judges it,
        and the Pods it replaced are gone: `helm upgrade --wait` may return with a Pod of the replaced template
        still running beside the new ones, and a Pod being deleted runs until its container stops."""
        deployment = self.kc.get(k.DEPLOYMENT, FULLNAME, RELEASE_NS) or {}
        meta, status = deployment.get("metadata") or {}, deployment.get("status") or {}
        settled = status.get("observedGeneration", 0) >= meta.get("generation", 1) and all(
            status.get(field) == count for field in ("replicas", "updatedReplicas", "availableReplicas")
        )
        pods = self.kc.list(k.POD, RELEASE_NS, SELECTOR)
        ready = [p for p in pods if pod_ready(p) and not p["metadata"].get("deletionTimestamp")]
        templates = {(p["metadata"].get("labels") or {}).get("pod-template-hash") for p in pods}
        return ready if settled and len(ready) == count == len(pods) and len(templates) == 1 else None

    def progress(self) -> Hashable:
        """What changes while the operator's Pods come up: each Pod's phase, and each container's state, reason,
        readiness and restarts (a Pod scheduled, its image pulled, started, restarted, ready)."""
        out = []
        for pod in self.kc.list(k.POD, RELEASE_NS, SELECTOR):
            status = pod.get("status") or {}
            containers = tuple(
                (c["name"], _state(c), c.get("ready"), c.get("restartCount"))
                for c in status.get("containerStatuses") or []
            )
            out.append((pod["metadata"]["name"], status.get("phase"), containers))
        return tuple(sorted(out, key=str))

    def wait_ready(self, count: int, what: str, timeout: float) -> list[dict[str, Any]]:
        """ready_pods(count), waited for as long as the Pods make progress (testenv.wait_progressing)."""
        return wait_progressing(what, lambda: self.ready_pods(count), self.progress, timeout)

    def running_pods(self, count: int) -> dict[str, dict[str, Any]] | None:
        """The operator's Pods by name once there are `count`, each with its container running (ready or not)."""
        pods = {p["metadata"]["name"]: p for p in self.pods()}
        states = [
            ((p.get("status") or {}).get("containerStatuses") or [{}])[0].get("state") or {} for p in pods.values()
        ]
        return pods if len(pods) == count and all("running" in state for state in states) else None

    def successor(self, old: dict[str, Any]) -> dict[str, Any]:
        """The one ready operator Pod, once it is another than `old`."""
        (pod,) = wait_for(
            f"a ready operator Pod other than {old['metadata']['name']}",
            lambda: [p for p in self.ready_pods(1) or [] if p["metadata"]["uid"] != old["metadata"]["uid"]],
            timeout=180,
        )
        return pod

    def pod_log(self, name: str, missing: str | None = None, previous: bool = False) -> str:
        """The log of the Pod's current container (a restarted one's starts empty), or with `previous` of the one
        before it; `missing` if there is none (a container waiting to start), else KubeError."""
        query = "?previous=true" if previous else ""
        try:
            return self.kc.get_text(f"/api/v1/namespaces/{RELEASE_NS}/pods/{name}/log{query}")
        except KubeError:
            if missing is None:
                raise
            return missing

    def scan_logs(self, leak_scan: LeakScan) -> None:
        """Every operator Pod's whole log, and its previous container's (one killed and restarted), for the run's
        leak scan (tests/e2e/test_zz_no_leaks.py)."""
        for pod in self.kc.list(k.POD, RELEASE_NS, SELECTOR):
            name = pod["metadata"]["name"]
            for previous in (False, True):
                log = self.pod_log(name, missing="", previous=previous)  # not started, gone, or never restarted
                leak_scan.add_text(f"operator Pod {name} log{' (previous)' if previous else ''}", log)

    def operator_logs(self) -> str:
        return "\n".join(
            f"--- {p['metadata']['name']}\n" + self.pod_log(p["metadata"]["name"])[-4000:] for p in self.pods()
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

    def container_pid(self, container_id: str) -> int:
        """The host PID of a container's main process, from the node's containerd (the node is a host process)."""
        (spec,) = self.cluster.node_specs()
        cid = container_id.removeprefix("containerd://")
        ctr = [ctr_binary(), "--address", str(spec.socket), "--namespace", "k8s.io"]
        tasks = subprocess.run([*ctr, "tasks", "ls"], capture_output=True, text=True, check=True).stdout
        (pid,) = [line.split()[1] for line in tasks.splitlines() if line.startswith(cid)]
        return int(pid)

    def peering_entries(self) -> dict[str, dict[str, Any]]:
        """The chart's ClusterKopfPeering's entries: {replica: {priority, lifetime, lastseen}}."""
        peering = self.kc.get(KOPF_PEERING, FULLNAME) or {}
        return {name: entry for name, entry in (peering.get("status") or {}).items() if entry}

    def live_peers(self, names: list[str]) -> dict[str, int] | None:
        """{replica: priority} from the chart's ClusterKopfPeering once every one of `names` is a live peer."""
        now = datetime.now(UTC)
        live = {
            name: int(peer["priority"])
            for name, peer in self.peering_entries().items()
            if datetime.fromisoformat(peer["lastseen"]) + timedelta(seconds=int(peer["lifetime"])) > now
        }
        return live if set(names) <= set(live) else None

    def wait_one_acting(self, count: int) -> None:
        """Until the `count` replicas have sorted themselves out: the live peer of the highest priority in the
        peering object has resumed, every other one stands by."""

        def settled() -> bool:
            names = list(self.running_pods(count) or {})
            peers = self.live_peers(names) if names else None
            if not peers:
                return False
            top = max(names, key=lambda n: peers[n])
            logs = {n: self.pod_log(n) for n in names}
            return not standing_by(logs[top]) and all(standing_by(logs[n]) for n in names if n != top)

        wait_for("one replica to act and the others to stand by", settled, timeout=90)


def pod_ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def log_times(log: str, text: str) -> list[datetime]:
    """When the JSON log lines holding `text` were written (the operator's structlog timestamp)."""
    return [datetime.fromisoformat(json.loads(line)["timestamp"]) for line in log.splitlines() if text in line]


def standing_by(log: str) -> bool:
    """Whether a replica's kopf log ends paused: its last peering verdict was to pause, or it has never resumed
    (with a peering name kopf starts paused, and says so only when it resumes)."""
    return log.rfind(PAUSED) >= log.rfind(RESUMED)


class Handover:
    """One handover of a two-replica release: the active replica (the live peer of the highest priority in the
    kopf peering object) gets a signal; what follows is observed in the replicas' logs, the peering object, the
    Pods and the consumer's audit log."""

    def __init__(self, release: Release, lifetime: int) -> None:
        self.release, self.lifetime = release, lifetime
        self.pods = wait_for("two running replicas", partial(release.running_pods, 2))
        self.priorities = wait_for("both replicas live in the peering object", partial(release.live_peers, list(self)))
        entries = release.peering_entries()
        assert {int(entries[n]["lifetime"]) for n in self} == {lifetime}, entries  # the chart's flag reached kopf
        self.active = max(self, key=lambda n: self.priorities[n])
        (self.standby,) = set(self) - {self.active}
        (self.container,) = self.pods[self.active]["status"]["containerStatuses"]
        self.pid = release.container_pid(self.container["containerID"])
        cmdline = Path(f"/proc/{self.pid}/cmdline").read_bytes().split(b"\0")
        assert any(a.endswith(b"liqo-peering-operator") for a in cmdline), cmdline  # the operator, nothing else
        log = release.pod_log(self.standby)
        self.resumed_before, self.paused_before = log.count(RESUMED), log.count(PAUSED)
        self.since: datetime | None = None  # the first signal: writes after it are checked
        self.signalled = datetime.now(UTC)
        # What happened, seconds after the last signal, by the time its own record says: the log line of a
        # replica's resuming, the first keep-alive's `lastseen` (the host's clock, as the node's processes').
        self.seen: dict[str, float] = {}

    def __iter__(self) -> Iterator[str]:
        return iter(self.pods)

    def signal(self, sig: signal.Signals) -> None:
        entry = self.release.peering_entries().get(self.active)
        self.signalled = datetime.now(UTC)
        if self.since is None:  # the first signal
            self.since = self.signalled
            # How old the replica's entry is: it expires, and a standby waiting for it resumes, a lifetime
            # after its `lastseen`.
            self.entry_age = (
                (self.signalled - datetime.fromisoformat(entry["lastseen"])).total_seconds() if entry else 0
            )
        if sig not in (signal.SIGSTOP, signal.SIGCONT):  # the container ends, and the kubelet restarts it
            self.release.watch.expect_restart(self.active)
        os.kill(self.pid, sig)

    def observe(self) -> None:
        def after(when: datetime) -> float:
            return (when - self.signalled).total_seconds()

        entry = self.release.peering_entries().get(self.active)
        if "announced" not in self.seen and entry and int(entry["priority"]) != self.priorities[self.active]:
            # The restarted container's first keep-alive (a new priority: its start time) or a later one: at most this.
            self.seen["announced"] = after(datetime.fromisoformat(entry["lastseen"]))
        if "standby" not in self.seen:
            resumed = log_times(self.release.pod_log(self.standby), RESUMED)[self.resumed_before :]
            self.seen.update({"standby": after(resumed[0])} if resumed else {})
        # Once restarted, the Pod's log is the new container's: the killed one's lines are not in it.
        if "restarted replica" not in self.seen and self.restarts() > self.container["restartCount"]:
            resumed = log_times(self.release.pod_log(self.active, missing=""), RESUMED)
            self.seen.update({"restarted replica": after(resumed[0])} if resumed else {})

    def restarted_container(self) -> dict[str, Any]:
        """The status of the signalled Pod's container: AssertionError if the Pod was replaced."""
        pod = self.release.kc.get(k.POD, self.active, RELEASE_NS) or {}
        if pod.get("metadata", {}).get("uid") != self.pods[self.active]["metadata"]["uid"]:
            raise AssertionError(f"{self.active} was replaced, not restarted in place")
        statuses = (pod.get("status") or {}).get("containerStatuses") or []
        return dict(statuses[0]) if statuses else {}

    def restarts(self) -> int:
        status = self.restarted_container()
        running = status and "running" in status["state"]
        return int(status["restartCount"]) if running else int(self.container["restartCount"])

    def wait_taken_over(self) -> None:
        def acting() -> bool:
            self.observe()
            return "standby" in self.seen or "restarted replica" in self.seen

        wait_for("a replica to act again", acting, timeout=self.lifetime + 60, interval=0.2)
        self.taker = "standby" if "standby" in self.seen else "restarted replica"
        self.handover = self.seen[self.taker]

    def acting(self, restarted: bool) -> dict[str, tuple[datetime, datetime | None]]:
        """When each replica acted since the first signal, by its own log, as (from, until or None): the standby
        from its resuming until it paused again; the signalled one, if `restarted`, from its new container's
        resuming, and not before the standby paused again if the standby had taken over."""
        release, active, standby = self.release, self.active, self.standby
        windows: dict[str, tuple[datetime, datetime | None]] = {}
        log = release.pod_log(standby)
        resumed = log_times(log, RESUMED)[self.resumed_before :]
        if resumed:
            again = [t for t in log_times(log, PAUSED)[self.paused_before :] if t >= resumed[0]]
            windows[standby] = (resumed[0], again[0] if again else None)
        back = log_times(release.pod_log(active), RESUMED)[-1:] if restarted else []
        if back:
            if standby not in windows:
                windows[active] = (back[0], None)
            elif (until := windows[standby][1]) is not None:
                windows[active] = (max(back[0], until), None)
        return windows

    def assert_writes_while_acting(self, restarted: bool, elsewhere: Path | None = None) -> None:
        """Since the first signal, each replica wrote on the consumer only while it acted (`acting`): never two
        at once (the operator's writes and kopf's, its keep-alives in the peering object aside). A write the
        signalled container sent before it died may reach the API server after the signal: writes of its Pod
        received before the new container started are the old one's. `elsewhere`: the audit log of a cluster
        where the replicas write without their Pod's identity (the provider, with the kubeconfig of a Secret):
        there, every write of the operator falls while one replica acted, or before the first of them resumed
        (the signalled one's last requests, on their way when it died)."""
        release, active = self.release, self.active
        assert self.since is not None
        windows = self.acting(restarted)

        def within(received: datetime, window: tuple[datetime, datetime | None] | None) -> bool:
            return window is not None and window[0] <= received and (window[1] is None or received < window[1])

        started = self.since
        if restarted:
            running = self.restarted_container()["state"]["running"]
            started = datetime.fromisoformat(running["startedAt"])  # whole seconds: rounded down
        for w in audit.writes(release.cluster.audit_log, self.since):
            if w.pod_name not in self.pods or w.resource in PEERING_OBJECTS:
                continue  # another's; or kopf's keep-alives in the peering object, which every replica writes
            if w.pod_name == active and restarted and w.received < started:
                continue  # the killed container's, on its way when it died
            window = windows.get(w.pod_name or "")
            assert within(w.received, window), f"{w.pod_name} wrote while it did not act ({window}): {w}"
        if elsewhere is not None:
            first = min((w[0] for w in windows.values()), default=None)
            for w in audit.writes(elsewhere, self.since, user_agent_prefix=OPERATOR_AGENT):
                inside = (first is not None and w.received < first) or any(
                    within(w.received, v) for v in windows.values()
                )
                assert inside, f"a write while no replica acted ({windows}): {w}"

    def wait_restarted(self, elsewhere: Path | None = None) -> str:
        """The kubelet restarts the signalled container in the same Pod and it announces itself; whoever
        outranks then acts, and each replica wrote only while it acted (on `elsewhere` too, see
        assert_writes_while_acting). The replica that acts, by name."""
        release, active, standby = self.release, self.active, self.standby

        def restarted() -> bool:
            self.observe()
            return "announced" in self.seen and self.restarts() == self.container["restartCount"] + 1

        wait_for(f"the kubelet to restart {active}'s container", restarted, timeout=120, interval=0.2)
        peers = wait_for("both replicas live in the peering object", partial(release.live_peers, list(self)))
        leader = max(self, key=lambda n: peers[n])
        # Whoever outranks acts: the restarted container took a new priority, its new start time, below the
        # standby's on one node's clock. A standby that had resumed would pause again were the restarted one to
        # outrank it; one that outranks it resumes (if it has not yet).
        if leader == active:
            wait_for(f"{active} to act", lambda: RESUMED in release.pod_log(active), timeout=60)
            if "standby" in self.seen:
                wait_for(
                    f"{standby} to stand by again", lambda: release.pod_log(standby).count(PAUSED) > self.paused_before
                )
        else:
            wait_for(f"{standby} to act", lambda: release.pod_log(standby).count(RESUMED) > self.resumed_before)
        self.assert_writes_while_acting(restarted=True, elsewhere=elsewhere)
        return leader


def _state(container: dict[str, Any]) -> tuple[tuple[str, str | None], ...]:
    return tuple((kind, (detail or {}).get("reason")) for kind, detail in (container.get("state") or {}).items())
