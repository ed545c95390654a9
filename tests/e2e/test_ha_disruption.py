"""The chart's HA under disruption, on a consumer with two real nodes (`two_node_clusters`, tier `nodes`): two
replicas (ha.enabled) spread over the nodes, a LiqoPeering Ready against the Liqo stand-in (the provider is a
control plane on the nodes' LAN), then:

- `kubectl drain` of the node running the acting replica: the standby takes over, the peering stays Ready
  throughout, and the PodDisruptionBudget refuses a second eviction while one replica alone is available;
- `helm upgrade` (a rolling update) hands over to the replicas of the new template, with the peering
  object kept (a release object, not re-created);
- a second kopf-based release (tests/e2e/charts/kopf-neighbour) that ships kopf's CRDs in its own crds/
  and has its own ClusterKopfPeering: both install and work, whichever comes first, and uninstalling either
  leaves the other working.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from testenv import kube as k
from testenv.helm import run_helm
from testenv.leakscan import LeakScan
from testenv.liqo_env.pytest_plugin import LiqoClusters, StandInProcess, with_liqo
from testenv.localk8s import LocalCluster, tool_path
from testenv.localk8s.images import Image
from testenv.operator_release import (
    FULLNAME,
    KOPF_PEERING,
    RELEASE,
    RELEASE_NS,
    Release,
    ha_values,
    standing_by,
)
from testenv.operator_support import SECRET, Peerings, api_client, wait_for
from testenv.sampler import ReadySampler

PEERING_NS = "e2e-ha-disruption"
NAME = "provider"
LIFETIME = 15  # ha.peeringLifetime: a replica's entry in the peering object stays valid this long
NEIGHBOUR_CHART = Path(__file__).parent / "charts" / "kopf-neighbour"
NEIGHBOUR = "neighbour"  # its release, namespace, Deployment and ClusterKopfPeering
NEIGHBOUR_SEEN = "neighbour.example.com/seen-by"
KOPF_CRDS = ("clusterkopfpeerings.kopf.dev", "kopfpeerings.kopf.dev")
PDB = k.Res("policy", "v1", "poddisruptionbudgets")


@dataclass
class Env:
    release: Release
    lc: LiqoClusters
    peerings: Peerings

    def status(self) -> dict[str, Any]:
        return self.peerings.status(PEERING_NS, NAME)

    def reconciled_by(self, timeout: str) -> set[str | None]:
        """The peering's spec changed and reconciled, Ready; the Pods that wrote (Release.reconciled_by)."""
        return self.release.reconciled_by(self.peerings, PEERING_NS, NAME, timeout)

    def leader(self) -> str:
        """The acting replica, once one acts and the other stands by: the live peer of the highest priority."""
        self.release.wait_one_acting(2)
        names = list(self.release.running_pods(2) or {})
        peers = wait_for("both replicas live in the peering object", partial(self.release.live_peers, names))
        return max(names, key=lambda n: peers[n])


@pytest.fixture(scope="module")
def env(
    two_node_clusters: dict[str, LocalCluster],
    node_images: dict[str, Image],
    tmp_path_factory: pytest.TempPathFactory,
    leak_scan: LeakScan,
) -> Iterator[Env]:
    lc = with_liqo(two_node_clusters)
    standin = StandInProcess(lc, tmp_path_factory.mktemp("standin") / "liqo-standin.log")
    peerings = Peerings(api_client(lc["consumer"].kubeconfig))
    peerings.make_namespace(PEERING_NS)
    peerings.put_kubeconfig_secret(PEERING_NS, SECRET, Path(lc["provider"].kubeconfig).read_bytes())
    release = Release(lc["consumer"], node_images["operator"], lc.namespace)
    try:
        yield Env(release, lc, peerings)
    finally:
        release.scan_logs(leak_scan)
        leak_scan.collect({side: api_client(lc[side].kubeconfig) for side in ("consumer", "provider")})
        if peerings.get(PEERING_NS, NAME) is not None and release.pods():
            peerings.delete(PEERING_NS, NAME)
            with_timeout = partial(peerings.wait_gone, PEERING_NS, NAME, timeout=120)
            try:
                with_timeout()
            except AssertionError:
                peerings.patch(PEERING_NS, NAME, {"metadata": {"finalizers": None}})
        for name, namespace in ((RELEASE, RELEASE_NS), (NEIGHBOUR, NEIGHBOUR)):
            run_helm("uninstall", name, "--namespace", namespace, kubeconfig=release.kubeconfig, check=False)
        standin.stop()


def _node_of(env: Env, pod: str) -> str:
    return str((env.release.kc.get(k.POD, pod, RELEASE_NS) or {})["spec"]["nodeName"])


def _cordon(env: Env, node: str, unschedulable: bool) -> None:
    env.release.kc.patch(k.NODE, node, {"spec": {"unschedulable": unschedulable or None}})


def _evict(env: Env, pod: str) -> ApiException | None:
    """The eviction API, as `kubectl drain` calls it: None when the Pod is evicted, the refusal otherwise."""
    body = k8s.V1Eviction(metadata=k8s.V1ObjectMeta(name=pod, namespace=RELEASE_NS))
    try:
        k8s.CoreV1Api(env.peerings.api).create_namespaced_pod_eviction(pod, RELEASE_NS, body)
    except ApiException as exc:
        return exc
    return None


def _budget(env: Env, healthy: int, allowed: int) -> dict[str, Any] | None:
    """The PodDisruptionBudget's status once it counts `healthy` replicas and allows `allowed` evictions."""
    pdb = env.release.kc.get(PDB, FULLNAME, RELEASE_NS) or {}
    status = pdb.get("status") or {}
    current = status.get("observedGeneration", 0) >= pdb.get("metadata", {}).get("generation", 1)
    counts = (status.get("currentHealthy"), status.get("disruptionsAllowed"))
    return status if current and counts == (healthy, allowed) else None


def test_two_replicas_spread_over_the_nodes_and_a_peering_turns_ready(env: Env) -> None:
    release = env.release
    out = release.helm("install", RELEASE, *release.install_args(*ha_values(LIFETIME)), "--create-namespace")
    assert "STATUS: deployed" in out, out
    pods = release.wait_ready(2, "two ready replicas", timeout=180)
    # The chart's soft anti-affinity: one replica per node while both nodes take Pods.
    assert len({p["spec"]["nodeName"] for p in pods}) == 2, [p["spec"]["nodeName"] for p in pods]
    env.leader()
    env.peerings.create(PEERING_NS, NAME, {"remoteKubeconfigSecretRef": {"name": SECRET}, "timeout": "3m"})
    try:
        env.peerings.wait_status(PEERING_NS, NAME, "ready", timeout=180)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{release.diagnosis()}") from None


def test_draining_the_acting_replicas_node_keeps_the_peering_ready(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    release = env.release
    active = env.leader()
    (standby,) = set(release.running_pods(2) or {}) - {active}
    drained, other = _node_of(env, active), _node_of(env, standby)
    assert drained != other
    kubectl = [str(tool_path("kubectl")), "--kubeconfig", str(release.kubeconfig)]
    with ReadySampler(env.status, "the peering (handovers must never show through it)"):
        started = time.monotonic()
        # As an administrator drains a node: cordon, then the eviction API for each Pod, which the
        # PodDisruptionBudget allows here (two replicas available).
        drain = subprocess.run(
            [*kubectl, "drain", drained, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=180s"],
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert drain.returncode == 0, f"{drain.stdout}\n{drain.stderr}\n{release.diagnosis()}"
        assert f"pod/{active} evicted" in drain.stdout, drain.stdout
        drained_in = time.monotonic() - started
        # The standby acts (kopf withdrew the evicted replica's entry on SIGTERM), the replacement runs on the
        # other node and stands by: it started later, so it ranks below the former standby.
        wait_for(f"{standby} to act", lambda: not standing_by(release.pod_log(standby)), timeout=60, interval=0.2)
        took_over = time.monotonic() - started
        pods = release.wait_ready(2, "two ready replicas again", timeout=180)
        assert {p["spec"]["nodeName"] for p in pods} == {other}, "the cordoned node took a replica"
        assert env.leader() == standby
        assert env.reconciled_by("4m") == {standby}

        # The budget: with both nodes cordoned (say, a cluster upgrade), one eviction is allowed, and the second
        # is refused while the evicted replica's replacement cannot run: one replica alone is available.
        (replacement,) = {p["metadata"]["name"] for p in pods} - {standby}
        _cordon(env, other, True)
        try:
            wait_for("the budget to allow one eviction of two", partial(_budget, env, 2, 1), timeout=60)
            assert _evict(env, replacement) is None
            refused = _evict(env, standby)
            assert refused is not None and refused.status == 429, refused
            assert "disruption budget" in str(refused.body), refused.body
            wait_for("the budget to count one replica and allow none", partial(_budget, env, 1, 0), timeout=60)
            assert env.reconciled_by("5m") == {standby}  # the one replica left acts on
        finally:
            _cordon(env, other, False)
            _cordon(env, drained, False)
        release.wait_ready(2, "two ready replicas after the uncordon", timeout=180)
        assert env.leader() == standby
    with capsys.disabled():
        print(
            f"\nBENCH HA drain: kubectl drain of the acting replica's node {drained_in:.1f}s,"
            f" standby acting {took_over:.1f}s"
        )


def test_a_rolling_upgrade_hands_over_to_the_new_replicas_and_keeps_the_peering_object(env: Env) -> None:
    release = env.release
    peering_uid = (release.kc.get(KOPF_PEERING, FULLNAME) or {})["metadata"]["uid"]
    before = set(release.running_pods(2) or {})
    with ReadySampler(env.status, "the peering (handovers must never show through it)"):
        release.helm("upgrade", RELEASE, *release.install_args(*ha_values(LIFETIME), "logLevel=debug"))
        pods = release.wait_ready(2, "two ready replicas of the new template", timeout=240)
        names = {p["metadata"]["name"] for p in pods}
        assert not names & before and all("--log-level=debug" in p["spec"]["containers"][0]["args"] for p in pods)
        leader = env.leader()
        assert env.reconciled_by("6m") == {leader}
    # The peering object is the release's, updated in place: the replicas' entries lived through the upgrade.
    peering = release.kc.get(KOPF_PEERING, FULLNAME) or {}
    assert peering["metadata"]["uid"] == peering_uid, "the upgrade re-created the peering object"
    manifest = release.helm("get", "manifest", RELEASE, "--namespace", RELEASE_NS)
    assert "kind: ClusterKopfPeering" in manifest and "ClusterKopfPeering" not in release.helm(
        "get", "hooks", RELEASE, "--namespace", RELEASE_NS
    )


def _neighbour(env: Env, *args: str) -> str:
    repository, tag = env.release.image.ref.rsplit(":", 1)
    sets = ["--set", f"image.repository={repository}", "--set", f"image.tag={tag}"]
    return run_helm(
        *args, NEIGHBOUR, str(NEIGHBOUR_CHART), "--namespace", NEIGHBOUR, *sets, kubeconfig=env.release.kubeconfig
    )


def _neighbour_works(env: Env) -> None:
    """The neighbour marks a new ConfigMap of its label with its Pod's name: it runs and its peering let it act."""
    kc = env.release.kc
    name = f"watched-{uuid.uuid4().hex[:6]}"
    labels = {"neighbour.example.com/watch": "yes"}
    kc.create(k.CONFIGMAP, {"metadata": {"name": name, "namespace": PEERING_NS, "labels": labels}}, PEERING_NS)

    def seen() -> str | None:
        cm = kc.get(k.CONFIGMAP, name, PEERING_NS) or {}
        return str((cm["metadata"].get("annotations") or {}).get(NEIGHBOUR_SEEN) or "") or None

    by = wait_for("the neighbour to mark a ConfigMap", seen, timeout=90)
    pods = kc.list(k.POD, NEIGHBOUR, f"app={NEIGHBOUR}")
    assert by in {p["metadata"]["name"] for p in pods}, by


def _kopf_crd_uids(env: Env) -> dict[str, str]:
    return {name: (env.release.kc.get(k.CRD, name) or {})["metadata"]["uid"] for name in KOPF_CRDS}


def test_beside_a_second_kopf_release_both_work_and_either_uninstalls_alone(env: Env) -> None:
    release, kc = env.release, env.release.kc
    crds = _kopf_crd_uids(env)
    # The neighbour ships the same CRDs in its crds/: Helm finds them and leaves them as they are.
    out = _neighbour(env, "install", "--create-namespace", "--wait", "--timeout", "3m")
    assert "STATUS: deployed" in out, out
    assert _kopf_crd_uids(env) == crds
    _neighbour_works(env)
    assert env.reconciled_by("7m") == {env.leader()}
    assert kc.get(KOPF_PEERING, NEIGHBOUR) is not None and kc.get(KOPF_PEERING, FULLNAME) is not None

    # The neighbour goes: the CRDs and our peering object stay, and our replicas act on.
    run_helm("uninstall", NEIGHBOUR, "--namespace", NEIGHBOUR, "--wait", kubeconfig=release.kubeconfig)
    assert kc.get(KOPF_PEERING, NEIGHBOUR) is None and _kopf_crd_uids(env) == crds
    assert env.reconciled_by("8m") == {env.leader()}

    # Back again, and now ours goes (unpeered first, so that no finalizer outlives the operator): the CRDs and
    # the neighbour's peering object stay, and the neighbour acts on.
    _neighbour(env, "install", "--wait", "--timeout", "3m")
    _neighbour_works(env)
    env.peerings.delete(PEERING_NS, NAME)
    env.peerings.wait_gone(PEERING_NS, NAME, timeout=120)
    release.helm("uninstall", RELEASE, "--namespace", RELEASE_NS, "--wait")
    assert kc.get(KOPF_PEERING, FULLNAME) is None, "the release's peering object outlived it"
    assert kc.get(KOPF_PEERING, NEIGHBOUR) is not None and _kopf_crd_uids(env) == crds
    _neighbour_works(env)

    # The other way round, on a cluster without kopf's CRDs: the neighbour's crds/ makes them, ours skips its
    # own, and our replicas coordinate through them (one acts, one stands by).
    run_helm("uninstall", NEIGHBOUR, "--namespace", NEIGHBOUR, "--wait", kubeconfig=release.kubeconfig)
    for crd in KOPF_CRDS:
        kc.delete(k.CRD, crd)
    wait_for("kopf's CRDs gone", lambda: not any(kc.get(k.CRD, crd) for crd in KOPF_CRDS), timeout=60)
    _neighbour(env, "install", "--wait", "--timeout", "3m")
    theirs = _kopf_crd_uids(env)
    release.helm("install", RELEASE, *release.install_args(*ha_values(LIFETIME)))
    assert _kopf_crd_uids(env) == theirs
    env.leader()
    _neighbour_works(env)
