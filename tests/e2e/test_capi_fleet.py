"""A LiqoPeeringSet over Cluster API Clusters (spec.source: Cluster), end to end: one consumer (the session's,
the operator as a process with the chart's rights, clusterAPI.enabled among them) and two light providers
with the Liqo stand-in, as in test_peeringset.py.

Cluster API's own Cluster CRD (cluster.x-k8s.io, at CLUSTER_API_VERSION of hack/versions.env) is installed on
the consumer; its controllers do not run: the test writes what they would, a Cluster's status.phase and its
kubeconfig Secret `<cluster>-kubeconfig` (type cluster.x-k8s.io/secret, key value, owned by the Cluster).
The tests run in order on one module-wide setup. The first runs the Cluster API guide's commands as written
(docs/guides/cluster-api.md: the chart's value, the Clusters' label, the example set): a Cluster still
provisioning is reported and not peered with while a provisioned one is. Then: it is peered with once
provisioned; a kubeconfig rotated to another identity, the old one revoked, under the live peering; a deleted
Cluster unpeers (the garbage collector deletes its kubeconfig Secret after); the deleted set leaves nothing
on any cluster.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import doc_blocks
from e2e.test_peeringset import LIQOPEERING, LIQOPEERINGSET, Fleet, _start_standins, assert_peered, condition
from testenv import audit, chart_rbac
from testenv import kube as k
from testenv.kube import Kube
from testenv.leakscan import LeakScan
from testenv.lightk8s import install_liqo_on_providers, render_provider_chart, start_light_providers
from testenv.localk8s import tool_path
from testenv.operator_support import OperatorEnv, wait_for
from testenv.reactions import OPERATOR_AGENT
from testenv.rotation import admin_service_account, token_kubeconfig
from testenv.spawned import Spawned
from testenv.upstream import cluster_api_crd

# The guide's namespace, Clusters and set (examples/cluster-api-fleet.yaml).
NS = "fleet"
SET = "workload"
CLUSTERS = ("workload-1", "workload-2")
LABEL = "liqo-fleet"
CLUSTER = k.Res("cluster.x-k8s.io", "v1beta2", "clusters")
CRD = k.Res("apiextensions.k8s.io", "v1", "customresourcedefinitions")
# What Cluster API writes for each workload cluster: the Secret's type, its label, its key.
SECRET_TYPE = "cluster.x-k8s.io/secret"
CLUSTER_NAME_LABEL = "cluster.x-k8s.io/cluster-name"
IN_USE = "peering.liqo-operator.io/kubeconfig-in-use"
Status = dict[str, Any]


@dataclass
class Capi:
    fleet: Fleet  # consumer, providers and their cluster IDs by Cluster name
    admin: dict[str, bytes]  # each provider's admin kubeconfig (a client certificate)
    audit_logs: dict[str, Path]
    # The providers' ServiceAccounts whose tokens the kubeconfigs hold, by account name: closing one deletes
    # the account, which revokes its token.
    accounts: dict[str, contextlib.ExitStack] = field(default_factory=dict)
    users: dict[str, str] = field(default_factory=dict)  # Cluster name -> the identity its kubeconfig holds

    def token_kubeconfig(self, name: str, account: str) -> bytes:
        """A kubeconfig for Cluster ``name`` with the token of a new cluster-admin ServiceAccount ``account``
        there, which lives until it is revoked (or the module's end)."""
        stack = self.accounts[account] = contextlib.ExitStack()
        user, token = stack.enter_context(admin_service_account(self.fleet.providers[name].api, account))
        self.users[name] = user
        return token_kubeconfig(self.admin[name], token)

    def revoke(self, account: str) -> None:
        self.accounts.pop(account).close()


@pytest.fixture(scope="module")
def capi(operator_env: OperatorEnv, tmp_path_factory: pytest.TempPathFactory, leak_scan: LeakScan) -> Iterator[Capi]:
    work = tmp_path_factory.mktemp("capi")
    consumer = Kube.from_kubeconfig(str(operator_env.lc["consumer"].kubeconfig))
    crd = cluster_api_crd()
    consumer.create(CRD, crd)
    providers = start_light_providers(2, work / "providers", garbage_collector=True)
    standins: Spawned | None = None
    try:
        wait_for("Cluster API's Cluster CRD to be served", lambda: _established(consumer, crd["metadata"]["name"]))
        ids = {c.name: f"capi-{c.name}-id" for c in providers.clusters}
        install_liqo_on_providers(providers.clusters, ids, render_provider_chart())
        standins = _start_standins(operator_env, providers, ids, work)
        named = dict(zip(CLUSTERS, providers.clusters, strict=True))  # each Cluster's provider
        consumer.apply(k.NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}, "e2e")
        capi = Capi(
            Fleet(
                str(operator_env.lc["consumer"].kubeconfig),
                consumer,
                operator_env.consumer_id,
                {name: Kube(c.api_client()) for name, c in named.items()},
                {name: ids[c.name] for name, c in named.items()},
                0.0,
                0.0,
            ),
            {name: c.kubeconfig.read_bytes() for name, c in named.items()},
            {name: c.audit_log for name, c in named.items()},
        )
        yield capi
        _clean_up(consumer)
        for account in list(capi.accounts):
            capi.revoke(account)
    finally:
        leak_scan.collect(
            {"consumer": operator_env.peerings.api} | {c.name: c.api_client() for c in providers.clusters}
        )
        _clean_up(consumer)
        consumer.delete(CRD, crd["metadata"]["name"])
        if standins is not None:
            standins.stop()
            sys.stderr.write(f"\n--- capi stand-in log: {standins.log_path}\n")
        providers.stop()


def _established(kube: Kube, name: str) -> bool:
    conditions = ((kube.get(CRD, name) or {}).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)


def _clean_up(consumer: Kube) -> None:
    """Whatever a failed test left: unpeered while the providers still answer, finalizers released if not."""
    for res in (LIQOPEERINGSET, LIQOPEERING):
        for obj in consumer.list(res, NS):
            consumer.delete(res, obj["metadata"]["name"], NS)
    try:
        wait_for(f"the LiqoPeerings in {NS} to go", lambda: not consumer.list(LIQOPEERING, NS), timeout=90)
    finally:
        for res in (LIQOPEERINGSET, LIQOPEERING, k.SECRET):
            for obj in consumer.list(res, NS):
                if obj["metadata"].get("finalizers"):
                    consumer.patch(res, obj["metadata"]["name"], {"metadata": {"finalizers": None}}, NS)
        for cluster in consumer.list(CLUSTER, NS):
            consumer.delete(CLUSTER, cluster["metadata"]["name"], NS)
        consumer.delete(k.NAMESPACE, NS)


# -- what Cluster API writes ---------------------------------------------------------------------------


def add_cluster(capi: Capi, name: str, kubeconfig: bytes) -> None:
    """A Cluster and its kubeconfig Secret, owned by it, as Cluster API makes them; no phase yet."""
    host, port = capi.fleet.providers[name].server.removeprefix("https://").rsplit(":", 1)
    body = {
        "apiVersion": CLUSTER.api_version,
        "kind": "Cluster",
        "metadata": {"name": name},
        "spec": {"controlPlaneEndpoint": {"host": host, "port": int(port)}},
    }
    uid = capi.fleet.consumer.create(CLUSTER, body, NS)["metadata"]["uid"]
    owner = {"apiVersion": CLUSTER.api_version, "kind": "Cluster", "name": name, "uid": uid}
    secret = {
        "metadata": {"name": f"{name}-kubeconfig", "labels": {CLUSTER_NAME_LABEL: name}, "ownerReferences": [owner]},
        "type": SECRET_TYPE,
        "data": {"value": k.b64(kubeconfig)},
    }
    capi.fleet.consumer.create(k.SECRET, secret, NS)


# The guide's blocks, in its order.
GUIDE = (
    doc_blocks.block("docs/guides/cluster-api.md", "helm upgrade liqo-peering-operator "),
    doc_blocks.block("docs/guides/cluster-api.md", "kubectl -n fleet label cluster "),
    doc_blocks.block("docs/guides/cluster-api.md", "kubectl apply -f examples/cluster-api-fleet.yaml"),
)


def run_guide(capi: Capi, block: doc_blocks.Block) -> None:
    """One of the guide's blocks as written, against the consumer, with the suite's release."""
    values = {"release": chart_rbac.RELEASE, "release_namespace": chart_rbac.NAMESPACE}
    path = os.pathsep.join([str(Path(tool_path(t)).parent) for t in ("kubectl", "helm")] + ["/usr/bin", "/bin"])
    out = doc_blocks.shell(block, values, {"PATH": path, "KUBECONFIG": capi.fleet.kubeconfig, "HOME": str(Path.home())})
    print(f"ran {block.page}:{block.line}: {block.first}\n{out[-1500:]}")


def set_phase(capi: Capi, name: str, phase: str) -> None:
    capi.fleet.consumer.patch(CLUSTER, name, {"status": {"phase": phase}}, NS, sub="status")


def rewrite_kubeconfig(capi: Capi, name: str, kubeconfig: bytes) -> None:
    """As Cluster API rewrites a kubeconfig whose credential it rotates."""
    capi.fleet.consumer.patch(k.SECRET, f"{name}-kubeconfig", {"data": {"value": k.b64(kubeconfig)}}, NS)


def children(capi: Capi) -> dict[str, Status]:
    return {c["metadata"]["name"]: c for c in capi.fleet.consumer.list(LIQOPEERING, NS)}


def set_status(capi: Capi) -> Status:
    return dict((capi.fleet.consumer.get(LIQOPEERINGSET, SET, NS) or {}).get("status") or {})


def wait_set(capi: Capi, what: str, check: Callable[[Status], bool], timeout: float = 120) -> Status:
    try:
        return wait_for(what, lambda: (lambda s: s if check(s) else None)(set_status(capi)), timeout=timeout)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\nset status: {set_status(capi)}") from None


def ready_count(ready: int, unavailable: int) -> Callable[[Status], bool]:
    def check(status: Status) -> bool:
        return (status.get("ready"), status.get("unavailable"), status.get("error")) == (ready, unavailable, 0)

    return check


# -- the scenario ---------------------------------------------------------------------------------------


def test_a_cluster_still_provisioning_is_reported_while_a_provisioned_one_is_peered_with(capi: Capi) -> None:
    p1, p2 = sorted(capi.fleet.providers)
    add_cluster(capi, p1, capi.token_kubeconfig(p1, "capi-first"))
    add_cluster(capi, p2, capi.admin[p2])
    set_phase(capi, p1, "Provisioned")
    set_phase(capi, p2, "Provisioning")
    for block in GUIDE:
        run_guide(capi, block)
    status = wait_set(capi, f"{p1} Ready, {p2} not provisioned", ready_count(1, 1))
    ready = condition(status, "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "ProvidersUnavailable")
    assert f"Cluster {p2}: phase Provisioning, not Provisioned" in ready["message"]
    assert condition(status, "Stalled")["status"] == "False"
    lines = {line["cluster"]: line for line in status["peerings"]}
    assert lines[p2] == {"name": f"{SET}-{p2}", "secret": f"{p2}-kubeconfig", "cluster": p2, "reason": "NotProvisioned"}
    assert lines[p1]["peerStatus"] == "ready" and lines[p1]["remoteClusterID"] == capi.fleet.ids[p1]
    assert sorted(children(capi)) == [f"{SET}-{p1}"]
    kid = children(capi)[f"{SET}-{p1}"]
    assert kid["spec"]["remoteKubeconfigSecretRef"] == {"name": f"{p1}-kubeconfig", "key": "value"}
    secret = capi.fleet.consumer.get(k.SECRET, f"{p1}-kubeconfig", NS) or {}
    assert secret["metadata"]["finalizers"] == [IN_USE]  # kept for the unpeering when Cluster API deletes it
    assert_peered(capi.fleet, [p1], [p2])


def test_a_cluster_is_peered_with_once_provisioned(capi: Capi) -> None:
    p1, p2 = sorted(capi.fleet.providers)
    set_phase(capi, p2, "Provisioned")
    status = wait_set(capi, "both Clusters Ready", ready_count(2, 0))
    assert (condition(status, "Ready")["status"], condition(status, "Ready")["reason"]) == ("True", "AllReady")
    assert_peered(capi.fleet, [p1, p2], [])


def test_a_rotated_kubeconfig_is_used_under_the_live_peering_once_the_old_identity_is_revoked(capi: Capi) -> None:
    p1, _ = sorted(capi.fleet.providers)
    first = capi.users[p1]
    rewrite_kubeconfig(capi, p1, capi.token_kubeconfig(p1, "capi-second"))
    # The operator takes the new kubeconfig once its informer has the Secret's change: a pass that began before
    # writes with the old one still. Provoked until a write comes from the new identity.
    wait_for(
        f"the operator to write on {p1} as {capi.users[p1]}",
        lambda: written_by(capi, p1) == {capi.users[p1]},
        timeout=90,
        interval=1,
    )
    capi.revoke("capi-first")  # its token is refused from now on
    writers = written_by(capi, p1)
    assert writers == {capi.users[p1]} and first not in writers, writers
    status = wait_set(capi, "both Clusters Ready after the rotation", ready_count(2, 0))
    assert condition(status, "Ready")["status"] == "True"
    assert_peered(capi.fleet, sorted(capi.fleet.providers), [])


def written_by(capi: Capi, name: str) -> set[str]:
    """Who wrote the Configuration on provider ``name`` that provoke_a_write had the operator restore."""
    since = datetime.now(UTC)
    provoke_a_write(capi, name)
    found = audit.writes_through(
        capi.audit_logs[name], since, lambda e: e.resource == "configurations", user_agent_prefix=OPERATOR_AGENT
    )
    return {e.username for e in found if e.resource == "configurations"}


def provoke_a_write(capi: Capi, name: str) -> None:
    """Make the operator write on provider ``name``: drop one of its labels from the consumer's Configuration
    there, and wait until it has put it back."""
    kube = capi.fleet.providers[name]
    found = kube.list(k.NAMESPACE, selector=f"liqo.io/remote-cluster-id={capi.fleet.consumer_id}")
    (tenant,) = [ns["metadata"]["name"] for ns in found if ns["metadata"]["labels"].get("liqo.io/tenant-namespace")]
    (conf,) = kube.list(k.CONFIGURATION, tenant)
    label = next(key for key in conf["metadata"]["labels"] if key.startswith("peering.liqo-operator.io/"))
    kube.patch(k.CONFIGURATION, conf["metadata"]["name"], {"metadata": {"labels": {label: None}}}, tenant)

    def restored() -> bool:
        (conf,) = kube.list(k.CONFIGURATION, tenant)
        return label in conf["metadata"]["labels"]

    wait_for(f"the operator to put label {label} back on {name}'s Configuration", restored, timeout=60)


def test_a_deleted_cluster_is_unpeered_and_its_kubeconfig_released(capi: Capi) -> None:
    p1, p2 = sorted(capi.fleet.providers)
    capi.fleet.consumer.delete(CLUSTER, p2, NS)
    wait_for(f"{SET}-{p2} to go", lambda: f"{SET}-{p2}" not in children(capi))
    assert_peered(capi.fleet, [p1], [p2])
    # Its Secret, owned by the deleted Cluster, went with it once the unpeering no longer needed it.
    wait_for(f"Secret {p2}-kubeconfig to go", lambda: capi.fleet.consumer.get(k.SECRET, f"{p2}-kubeconfig", NS) is None)
    wait_set(capi, f"{p1} alone, Ready", lambda s: ready_count(1, 0)(s) and s.get("desired") == 1)


def test_deleting_the_set_unpeers_leaving_nothing(capi: Capi) -> None:
    p1, p2 = sorted(capi.fleet.providers)
    capi.fleet.consumer.delete(LIQOPEERINGSET, SET, NS)
    wait_for("the set to go", lambda: capi.fleet.consumer.get(LIQOPEERINGSET, SET, NS) is None)
    assert children(capi) == {}
    assert_peered(capi.fleet, [], [p1, p2])
    secret = capi.fleet.consumer.get(k.SECRET, f"{p1}-kubeconfig", NS) or {}
    assert not secret["metadata"].get("finalizers")  # released: Cluster API may delete it
