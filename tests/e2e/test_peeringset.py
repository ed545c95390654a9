"""LiqoPeeringSet end to end: one consumer (the session's, with the operator as a process) peering with a
fleet of three light providers (API servers sharing one etcd, each with a garbage collector; Liqo played by
testenv.standin.fleet), through kubeconfig Secrets picked by label.

The tests run in order on one module-wide setup, each starting from the state the previous one left:
label two Secrets (two peerings Ready), a third (added), a fourth pointing at a provider already peered
(DuplicatePeering, no second peering), a LiqoPeering's own edit (overwritten), unlabel one (unpeered,
removed), change the template's resources (every ResourceSlice follows), delete a selected Secret (its
peering unpeers first), delete the set with Delete (all unpeered), then with Orphan (all remain). After
each step every provider holds exactly the Liqo objects of its peering, or none: nothing missing,
duplicated or left over, on any cluster.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from testenv import kube as k
from testenv.kube import Kube
from testenv.leakscan import LeakScan
from testenv.lightk8s import LightProviders, install_liqo_on_providers, render_provider_chart, start_light_providers
from testenv.localk8s import tool_path
from testenv.operator_support import OperatorEnv, wait_for
from testenv.spawned import Spawned

NS = "e2e-peeringset"
SET = "fleet"
SELECTOR_LABEL = "liqo-fleet"
LIQOPEERING = k.Res("peering.liqo-operator.io", "v1alpha1", "liqopeerings")
LIQOPEERINGSET = k.Res("peering.liqo-operator.io", "v1alpha1", "liqopeeringsets")
SET_LABEL = "peering.liqo-operator.io/set"
# Put by the operator on a Secret while a LiqoPeering uses it, so that its unpeering can read it.
IN_USE = "peering.liqo-operator.io/kubeconfig-in-use"
REPO = Path(__file__).resolve().parents[2]
# A peering's objects, by kind, on each side (its tenant namespace there), with the stand-in as Liqo.
CONSUMER_KINDS = (k.CONFIGURATION, k.GATEWAYCLIENT, k.PUBLICKEY, k.IDENTITY, k.RESOURCESLICE, k.VIRTUALNODE)
PROVIDER_KINDS = (k.CONFIGURATION, k.GATEWAYSERVER, k.PUBLICKEY, k.TENANT)
Capsys = pytest.CaptureFixture[str]


@dataclass
class Fleet:
    kubeconfig: str  # the consumer's (admin)
    consumer: Kube
    consumer_id: str
    providers: dict[str, Kube]  # secret name -> the provider it points at
    ids: dict[str, str]  # secret name -> provider cluster ID
    started: float
    setup_seconds: float

    def lap(self, capsys: Capsys, what: str) -> None:
        """A BENCH line: how long this step took (printed, never asserted)."""
        now = time.monotonic()
        with capsys.disabled():
            print(f"\nBENCH LiqoPeeringSet e2e: {what}: {now - self.started:.1f}s")
        self.started = now


@pytest.fixture(scope="module")
def fleet(operator_env: OperatorEnv, tmp_path_factory: pytest.TempPathFactory, leak_scan: LeakScan) -> Iterator[Fleet]:
    work = tmp_path_factory.mktemp("fleet")
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=1) as pool:
        rendering = pool.submit(render_provider_chart)  # helm takes seconds: while the API servers start
        providers = start_light_providers(3, work / "providers", garbage_collector=True)
    standins: Spawned | None = None
    consumer = Kube.from_kubeconfig(str(operator_env.lc["consumer"].kubeconfig))
    try:
        ids = {c.name: f"fleet-{c.name}-id" for c in providers.clusters}
        install_liqo_on_providers(providers.clusters, ids, rendering.result())
        standins = _start_standins(operator_env, providers, ids, work)
        consumer.apply(k.NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}, "e2e")
        secrets = {f"s-{c.name}": c for c in providers.clusters} | {"s-p1-again": providers.clusters[0]}
        for name, cluster in secrets.items():
            body = {
                "metadata": {"name": name, "namespace": NS},
                "data": {"kubeconfig": k.b64(cluster.kubeconfig.read_bytes())},
            }
            consumer.create(k.SECRET, body, NS)
        yield Fleet(
            str(operator_env.lc["consumer"].kubeconfig),
            consumer,
            operator_env.consumer_id,
            {name: Kube(c.api_client()) for name, c in secrets.items()},
            {name: ids[c.name] for name, c in secrets.items()},
            time.monotonic(),
            time.monotonic() - started,
        )
    finally:
        leak_scan.collect(
            {"consumer": operator_env.peerings.api} | {c.name: c.api_client() for c in providers.clusters}
        )
        _clean_up(consumer)
        if standins is not None:
            standins.stop()
            sys.stderr.write(f"\n--- fleet stand-in log: {standins.log_path}\n")
        providers.stop()


def _start_standins(env: OperatorEnv, providers: LightProviders, ids: dict[str, str], work: Path) -> Spawned:
    argv = [
        sys.executable,
        "-m",
        "testenv.standin.fleet",
        "--consumer-kubeconfig",
        str(env.lc["consumer"].kubeconfig),
        "--consumer-id",
        env.consumer_id,
        "--ca-dir",
        str(providers.clusters[0].pki.dir),
        "--resync",
        "5",
    ]
    for cluster in providers.clusters:
        argv += ["--provider", f"{cluster.kubeconfig}={ids[cluster.name]}"]
    pythonpath = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    return Spawned("fleet-standins", argv, work / "standins.log", {**os.environ, "PYTHONPATH": pythonpath})


def _clean_up(consumer: Kube) -> None:
    """Whatever a failed test left: the sets and peerings unpeered (finalizers released if they hang)."""
    for res in (LIQOPEERINGSET, LIQOPEERING):
        for obj in consumer.list(res, NS):
            if res is LIQOPEERINGSET:
                consumer.patch(res, obj["metadata"]["name"], {"spec": {"deletionPolicy": "Delete"}}, NS)
            consumer.delete(res, obj["metadata"]["name"], NS)

        def gone(res: k.Res = res) -> bool:
            return not consumer.list(res, NS)

        try:
            wait_for(f"{res.plural} in {NS} to go", gone, timeout=90)
        except AssertionError:
            for obj in consumer.list(res, NS):
                consumer.patch(res, obj["metadata"]["name"], {"metadata": {"finalizers": None}}, NS)
    for secret in consumer.list(k.SECRET, NS):
        if secret["metadata"].get("finalizers"):
            consumer.patch(k.SECRET, secret["metadata"]["name"], {"metadata": {"finalizers": None}}, NS)
    consumer.delete(k.NAMESPACE, NS)


# -- helpers -------------------------------------------------------------------------------------------


def label(fleet: Fleet, *secrets: str, on: bool = True) -> None:
    for name in secrets:
        fleet.consumer.patch(k.SECRET, name, {"metadata": {"labels": {SELECTOR_LABEL: "yes" if on else None}}}, NS)


def set_status(fleet: Fleet) -> dict[str, Any]:
    return dict((fleet.consumer.get(LIQOPEERINGSET, SET, NS) or {}).get("status") or {})


def condition(status: dict[str, Any], type_: str) -> dict[str, Any]:
    return next((c for c in status.get("conditions") or [] if c["type"] == type_), {})


def wait_set(fleet: Fleet, what: str, check: Callable[[dict[str, Any]], bool], timeout: float = 120) -> dict[str, Any]:
    try:
        return wait_for(what, lambda: (lambda s: s if check(s) else None)(set_status(fleet)), timeout=timeout)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\nset status: {set_status(fleet)}") from None


def all_ready(desired: int) -> Callable[[dict[str, Any]], bool]:
    def check(status: dict[str, Any]) -> bool:
        return (
            status.get("desired") == desired
            and status.get("ready") == desired
            and condition(status, "Ready").get("status") == "True"
            and len(status.get("peerings") or []) == desired
        )

    return check


def children(fleet: Fleet) -> dict[str, dict[str, Any]]:
    return {c["metadata"]["name"]: c for c in fleet.consumer.list(LIQOPEERING, NS)}


def _tenant_ns(kc: Kube, peer_id: str) -> str | None:
    found = kc.list(k.NAMESPACE, selector=f"liqo.io/remote-cluster-id={peer_id},liqo.io/tenant-namespace=true")
    return found[0]["metadata"]["name"] if found else None


def liqo_objects(fleet: Fleet, secret: str) -> dict[str, int]:
    """The Liqo objects of the peering through ``secret``: in the consumer's tenant namespace for its provider,
    and in the provider's for the consumer, by side and kind."""
    provider, provider_id = fleet.providers[secret], fleet.ids[secret]
    out: dict[str, int] = {}
    for side, kc, peer_id, kinds in (
        ("consumer", fleet.consumer, provider_id, CONSUMER_KINDS),
        ("provider", provider, fleet.consumer_id, PROVIDER_KINDS),
    ):
        ns = _tenant_ns(kc, peer_id)
        for res in kinds:
            out[f"{side} {res.plural}"] = len(kc.list(res, ns)) if ns else 0
    return out


ONE_PEERING = {f"consumer {r.plural}": 1 for r in CONSUMER_KINDS} | {f"provider {r.plural}": 1 for r in PROVIDER_KINDS}
NO_PEERING = dict.fromkeys(ONE_PEERING, 0)


def assert_peered(fleet: Fleet, peered: list[str], unpeered: list[str]) -> None:
    """Each provider holds exactly one peering's Liqo objects (nothing missing or duplicated), or, once
    unpeered, none (nothing left over); and the consumer holds one ResourceSlice per peered provider."""
    for secret in peered:
        assert liqo_objects(fleet, secret) == ONE_PEERING, secret
    for secret in unpeered:

        def unpeered_with(secret: str = secret) -> bool:
            return liqo_objects(fleet, secret) == NO_PEERING

        wait_for(f"the peering through {secret} to be unpeered", unpeered_with)
    slices = fleet.consumer.list(k.RESOURCESLICE, selector="liqo.io/remote-cluster-id")
    fleet_ids = set(fleet.ids.values())
    ours = sorted(s["metadata"]["labels"]["liqo.io/remote-cluster-id"] for s in slices)
    ours = [i for i in ours if i in fleet_ids]
    assert ours == sorted({fleet.ids[s] for s in peered}), ours


# -- the scenario ---------------------------------------------------------------------------------------


def test_two_labelled_secrets_give_two_ready_peerings(fleet: Fleet, capsys: Capsys) -> None:
    with capsys.disabled():
        print(f"\nBENCH LiqoPeeringSet e2e: 3 light providers, Liqo, stand-ins up: {fleet.setup_seconds:.1f}s")
    fleet.started = time.monotonic()
    label(fleet, "s-p1", "s-p2")
    body = {
        "apiVersion": LIQOPEERINGSET.api_version,
        "kind": "LiqoPeeringSet",
        "metadata": {"name": SET},
        "spec": {
            "selector": {"matchLabels": {SELECTOR_LABEL: "yes"}},
            "template": {"timeout": "2m", "offloading": {"resources": {"cpu": "1"}}},
        },
    }
    created = time.monotonic()
    fleet.consumer.create(LIQOPEERINGSET, body, NS)
    wait_for("the set's two LiqoPeerings", lambda: len(children(fleet)) == 2, interval=0.05)
    with capsys.disabled():
        print(
            f"\nBENCH LiqoPeeringSet e2e: set created -> its 2 LiqoPeerings created: {time.monotonic() - created:.2f}s"
        )
    status = wait_set(fleet, "two peerings Ready", all_ready(2))
    fleet.lap(capsys, "Secrets labelled, set created -> 2 peerings Ready")
    owner = fleet.consumer.get(LIQOPEERINGSET, SET, NS) or {}
    assert status["observedGeneration"] == owner["metadata"]["generation"]
    assert (status["establishing"], status["waiting"], status["error"]) == (0, 0, 0)
    kids = children(fleet)
    assert sorted(kids) == ["fleet-s-p1", "fleet-s-p2"]
    for name, line in ((line["name"], line) for line in status["peerings"]):
        kid = kids[name]
        assert kid["metadata"]["labels"][SET_LABEL] == SET
        (ref,) = kid["metadata"]["ownerReferences"]
        assert (ref["kind"], ref["uid"], ref["controller"]) == ("LiqoPeeringSet", owner["metadata"]["uid"], True)
        assert line["peerStatus"] == "ready" and line["reason"] == "PeeringEstablished"
        assert line["remoteClusterID"] == fleet.ids[line["secret"]] == kid["status"]["remoteClusterID"]
    secret = fleet.consumer.get(k.SECRET, "s-p1", NS) or {}
    assert secret["metadata"]["finalizers"] == [IN_USE]
    assert_peered(fleet, ["s-p1", "s-p2"], ["s-p3"])


def test_a_third_labelled_secret_is_added(fleet: Fleet, capsys: Capsys) -> None:
    label(fleet, "s-p3")
    wait_set(fleet, "three peerings Ready", all_ready(3))
    fleet.lap(capsys, "third Secret labelled -> Ready")
    assert_peered(fleet, ["s-p1", "s-p2", "s-p3"], [])
    # What `kubectl get` shows, through the CRD's printer columns.
    out = subprocess.run(
        [str(tool_path("kubectl")), "--kubeconfig", fleet.kubeconfig, "-n", NS, "get", "lps,lp"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    with capsys.disabled():
        print("\n" + out)
    header, row = out.splitlines()[:2]
    assert header.split()[:7] == ["NAME", "DESIRED", "READY", "ESTABLISHING", "ERROR", "ALL", "READY"]
    assert row.split()[1:6] == ["3", "3", "0", "0", "True"]


def test_a_second_secret_to_the_same_provider_is_a_duplicate_not_another_peering(
    fleet: Fleet, capsys: pytest.CaptureFixture[str]
) -> None:
    label(fleet, "s-p1-again")
    status = wait_set(fleet, "the duplicate reported", lambda s: s.get("error") == 1 and s.get("ready") == 3)
    line = next(line for line in status["peerings"] if line["secret"] == "s-p1-again")
    assert line["reason"] == "DuplicatePeering" and line["peerStatus"] == "error"
    stalled = condition(status, "Stalled")
    assert stalled["status"] == "True" and "DuplicatePeering" in stalled["message"]
    assert condition(status, "Ready")["status"] == "False"
    assert_peered(fleet, ["s-p1", "s-p2", "s-p3"], [])  # still one peering's objects on p1
    label(fleet, "s-p1-again", on=False)
    wait_set(fleet, "the duplicate gone", all_ready(3))
    fleet.lap(capsys, "duplicate reported, then removed")


def test_a_peerings_own_edit_is_overwritten_and_the_set_says_so(
    fleet: Fleet, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet.consumer.patch(LIQOPEERING, "fleet-s-p2", {"spec": {"timeout": "7m"}}, NS)
    status = wait_set(
        fleet,
        "the edit overwritten",
        lambda s: any(line.get("overwrittenAt") for line in s.get("peerings") or []) and all_ready(3)(s),
    )
    assert (fleet.consumer.get(LIQOPEERING, "fleet-s-p2", NS) or {})["spec"]["timeout"] == "2m"
    assert [line["name"] for line in status["peerings"] if line.get("overwrittenAt")] == ["fleet-s-p2"]
    events = fleet.consumer.list(k.Res("", "v1", "events"), NS)
    assert any(e["reason"] == "Overwritten" and e["involvedObject"]["kind"] == "LiqoPeeringSet" for e in events)
    fleet.lap(capsys, "a peering's edit overwritten")


def test_an_unlabelled_secret_is_unpeered_and_its_peering_removed(
    fleet: Fleet, capsys: pytest.CaptureFixture[str]
) -> None:
    label(fleet, "s-p1", on=False)
    wait_set(fleet, "two peerings left", all_ready(2))
    assert sorted(children(fleet)) == ["fleet-s-p2", "fleet-s-p3"]
    assert_peered(fleet, ["s-p2", "s-p3"], ["s-p1"])
    secret = fleet.consumer.get(k.SECRET, "s-p1", NS) or {}
    assert not secret["metadata"].get("finalizers")  # released once its peering was gone
    fleet.lap(capsys, "Secret unlabelled -> unpeered, removed")


def test_a_template_change_reaches_every_resource_slice(fleet: Fleet, capsys: Capsys) -> None:
    patch = {"spec": {"template": {"offloading": {"resources": {"cpu": "3", "memory": "2Gi"}}}}}
    fleet.consumer.patch(LIQOPEERINGSET, SET, patch, NS)

    def followed() -> bool:
        for secret in ("s-p2", "s-p3"):
            ns = _tenant_ns(fleet.consumer, fleet.ids[secret])
            slices = fleet.consumer.list(k.RESOURCESLICE, ns)
            if [s["spec"].get("resources") for s in slices] != [{"cpu": "3", "memory": "2Gi"}]:
                return False
        return True

    wait_for("every ResourceSlice to follow the template", followed, timeout=90)
    generation = (fleet.consumer.get(LIQOPEERINGSET, SET, NS) or {})["metadata"]["generation"]
    wait_set(
        fleet, "Ready at the new generation", lambda s: s.get("observedGeneration") == generation and all_ready(2)(s)
    )
    assert all(c["spec"]["offloading"]["resources"] == {"cpu": "3", "memory": "2Gi"} for c in children(fleet).values())
    fleet.lap(capsys, "template resources changed -> every ResourceSlice")


def test_a_deleted_secret_is_unpeered_before_it_goes(fleet: Fleet, capsys: Capsys) -> None:
    """The kubeconfig protection keeps the Secret until its LiqoPeering has unpeered with it: were it gone
    first, that unpeering could not reach the provider and the LiqoPeering would stay, Terminating."""
    fleet.consumer.delete(k.SECRET, "s-p3", NS)
    wait_for("Secret s-p3 to go once unpeered", lambda: fleet.consumer.get(k.SECRET, "s-p3", NS) is None)
    # The Secret is let go when the unpeering is over, just before the LiqoPeering's own finalizer.
    wait_for("LiqoPeering fleet-s-p3 to go", lambda: "fleet-s-p3" not in children(fleet), timeout=30)
    assert_peered(fleet, ["s-p2"], ["s-p3"])
    wait_set(fleet, "one peering left", all_ready(1))
    fleet.lap(capsys, "selected Secret deleted -> unpeered, then gone")


def test_deleting_the_set_with_delete_unpeers_them_all(fleet: Fleet, capsys: Capsys) -> None:
    label(fleet, "s-p1")
    wait_set(fleet, "two peerings Ready again", all_ready(2))
    fleet.lap(capsys, "Secret labelled again -> Ready")
    fleet.consumer.delete(LIQOPEERINGSET, SET, NS)
    wait_for("the set to go", lambda: fleet.consumer.get(LIQOPEERINGSET, SET, NS) is None, timeout=120)
    assert children(fleet) == {}
    assert_peered(fleet, [], ["s-p1", "s-p2", "s-p3"])
    assert not any(s["metadata"].get("finalizers") for s in fleet.consumer.list(k.SECRET, NS))
    fleet.lap(capsys, "set deleted (Delete) -> all unpeered")


def test_deleting_the_set_with_orphan_leaves_them_all(fleet: Fleet, capsys: Capsys) -> None:
    body = {
        "apiVersion": LIQOPEERINGSET.api_version,
        "kind": "LiqoPeeringSet",
        "metadata": {"name": SET},
        "spec": {"selector": {"matchLabels": {SELECTOR_LABEL: "yes"}}, "deletionPolicy": "Orphan"},
    }
    fleet.consumer.create(LIQOPEERINGSET, body, NS)
    wait_set(fleet, "two peerings Ready", all_ready(2))
    fleet.lap(capsys, "set with Orphan -> Ready")
    before = {name: c["metadata"]["uid"] for name, c in children(fleet).items()}
    fleet.consumer.delete(LIQOPEERINGSET, SET, NS)
    wait_for("the set to go", lambda: fleet.consumer.get(LIQOPEERINGSET, SET, NS) is None, timeout=60)
    kids = children(fleet)
    assert {name: c["metadata"]["uid"] for name, c in kids.items()} == before
    for kid in kids.values():
        assert not kid["metadata"].get("ownerReferences") and not kid["metadata"].get("deletionTimestamp")
        assert kid["status"]["peerStatus"] == "ready"
    in_use = {s["metadata"]["name"] for s in fleet.consumer.list(k.SECRET, NS) if s["metadata"].get("finalizers")}
    assert in_use == {"s-p1", "s-p2"}  # the orphans still use them
    assert_peered(fleet, ["s-p1", "s-p2"], ["s-p3"])
    # No owner reference left: the garbage collector, which has seen the set go by now, leaves them.
    assert set(children(fleet)) == set(before)
    for name in before:
        fleet.consumer.delete(LIQOPEERING, name, NS)
    wait_for("the orphans to unpeer and go", lambda: not children(fleet), timeout=120)
    assert_peered(fleet, [], ["s-p1", "s-p2", "s-p3"])
    assert not any(s["metadata"].get("finalizers") for s in fleet.consumer.list(k.SECRET, NS))
    fleet.lap(capsys, "set deleted (Orphan) -> all remain; then deleted by hand")
