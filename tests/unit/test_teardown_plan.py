"""Unit tests for unpeering (liqo_peering.engine.teardown): the plan's order and the non-blocking passes."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from liqo_peering.engine import teardown
from liqo_peering.errors import ClusterUnreachable
from liqo_peering.health import TrackedPool
from liqo_peering.liqo import certificates, naming, offloading
from liqo_peering.liqo import resources as r
from liqo_peering.liqo.context import ClusterInfo, PeeringContext
from liqo_peering.status.conditions import format_time
from unit.fakes import FakeClusterClient

CONSUMER = ClusterInfo("consumer-id", ("10.100.0.0/16",), "10.110.0.0/16")
PROVIDER = ClusterInfo("provider-id", ("10.200.0.0/16",), "10.210.0.0/16")
C_NS = "liqo-tenant-provider-id"
P_NS = "liqo-tenant-consumer-id"
CTX = PeeringContext("team-a", "to-provider", CONSUMER, PROVIDER, consumer_tenant_ns=C_NS, provider_tenant_ns=P_NS)


def steps(phases: list[list[tuple[str, r.Resource, str, str]]]) -> list[list[tuple[str, str, str, str]]]:
    return [[(side, res.kind, name, ns) for side, res, name, ns in phase] for phase in phases]


NETWORKING_PHASE = [
    ("consumer", "GatewayClient", "provider-id", C_NS),
    ("provider", "GatewayClient", "consumer-id", P_NS),
    ("consumer", "GatewayServer", "provider-id", C_NS),
    ("provider", "GatewayServer", "consumer-id", P_NS),
    ("consumer", "PublicKey", "provider-id", C_NS),
    ("provider", "PublicKey", "consumer-id", P_NS),
    ("consumer", "Configuration", "provider-id", C_NS),
    ("provider", "Configuration", "consumer-id", P_NS),
]
SLICE_AND_NODE = [
    [("consumer", "ResourceSlice", "provider-id", C_NS)],
    [("consumer", "VirtualNode", "provider-id", C_NS)],
]
# The steps that delete nothing and wait for Liqo: the originals of its copies on the provider, and the
# Identity's kubeconfig Secrets.
REPLICAS = ("consumer", "Renew", "*", C_NS)
SECRETS = ("consumer", "Secret", "*", C_NS)
IDENTITY = [("consumer", "Identity", "controlplane-provider-id", C_NS), REPLICAS]
TENANT_AND_NONCES = [
    ("provider", "Tenant", "consumer-id", P_NS),
    ("consumer", "Secret", "liqo-signed-nonce", C_NS),
    ("provider", "Secret", "liqo-nonce", P_NS),
    SECRETS,
]
# Without early_tenant: the Tenant waits for the Identity's Secrets instead.
IDENTITY_LATE = [("consumer", "Identity", "controlplane-provider-id", C_NS), SECRETS]


# -- plan ------------------------------------------------------------------------------------


def test_plan_follows_liqoctl_unpeer_order_with_the_network_last_in_band() -> None:
    assert steps(teardown.plan(CTX, bidirectional=False, local_only=False, in_band=True)) == [
        *SLICE_AND_NODE,
        IDENTITY,
        TENANT_AND_NONCES,
        NETWORKING_PHASE,
    ]


def test_plan_removes_the_network_with_the_identity_out_of_band() -> None:
    """Out of band nothing of the Identity's or the Tenant's removal goes through the tunnel: the network
    goes at once with the Identity, instead of after the Tenant as liqoctl waits to do, and the Tenant does
    not wait for it (the last phase does)."""
    assert steps(teardown.plan(CTX, bidirectional=False, local_only=False, in_band=False)) == [
        *SLICE_AND_NODE,
        IDENTITY + NETWORKING_PHASE,
        TENANT_AND_NONCES + NETWORKING_PHASE,
    ]


def test_plan_gateway_clients_before_servers_before_configurations() -> None:
    kinds = [kind for _, kind, _, _ in NETWORKING_PHASE]
    assert kinds.index("GatewayClient") < kinds.index("GatewayServer") < kinds.index("Configuration")
    assert steps([teardown.networking_objects(CTX)]) == [NETWORKING_PHASE]


def test_run_with_the_server_on_the_consumer_deletes_the_client_on_the_provider_first() -> None:
    """liqoctl's network reset deletes both sides' gateway clients, then both servers, then the Configurations,
    whichever cluster serves: with location Consumer the client is on the provider and the server here."""
    local, remote = FakeClusterClient("consumer"), FakeClusterClient("provider")
    order: list[tuple[str, str]] = []
    for client in (local, remote):
        client.delete = _recording(client, order)  # type: ignore[method-assign]
    labels = {naming.REMOTE_CLUSTER_ID: "x", **CTX.owner}
    local.put(r.GATEWAY_SERVER, "provider-id", C_NS, labels=labels)
    remote.put(r.GATEWAY_CLIENT, "consumer-id", P_NS, labels=labels)
    local.put(r.CONFIGURATION, "provider-id", C_NS, labels=labels)
    remote.put(r.CONFIGURATION, "consumer-id", P_NS, labels=labels)
    assert teardown.run(local, remote, CTX, bidirectional=False, local_only=False) == []
    assert order == [
        ("provider", "gatewayclients"),
        ("consumer", "gatewayservers"),
        ("consumer", "configurations"),
        ("provider", "configurations"),
    ]
    assert local.store == {} and remote.store == {}


def _recording(client: FakeClusterClient, order: list[tuple[str, str]]) -> Any:
    delete = client.delete

    def recorded(res: r.Resource, name: str, namespace: str | None = None, **kwargs: Any) -> Any:
        order.append((client.side, res.plural))
        return delete(res, name, namespace, **kwargs)

    return recorded


@pytest.mark.parametrize("in_band", [True, False])
def test_bidirectional_keeps_networking(in_band: bool) -> None:
    phases = steps(teardown.plan(CTX, bidirectional=True, local_only=False, in_band=in_band))
    assert phases == [*SLICE_AND_NODE, IDENTITY, TENANT_AND_NONCES]
    kinds = {kind for phase in phases for _, kind, _, _ in phase}
    assert kinds.isdisjoint({"GatewayClient", "GatewayServer", "PublicKey", "Configuration"})


def test_local_only_keeps_only_consumer_steps() -> None:
    consumer = [step for step in NETWORKING_PHASE if step[0] == "consumer"]
    assert steps(teardown.plan(CTX, bidirectional=False, local_only=True, in_band=True, early_tenant=False)) == [
        *SLICE_AND_NODE,
        IDENTITY_LATE,
        [("consumer", "Secret", "liqo-signed-nonce", C_NS)],
        consumer,
    ]
    assert steps(teardown.plan(CTX, bidirectional=False, local_only=True, in_band=False, early_tenant=False)) == [
        *SLICE_AND_NODE,
        IDENTITY_LATE + consumer,
        [("consumer", "Secret", "liqo-signed-nonce", C_NS), *consumer],
    ]


def test_local_only_and_bidirectional() -> None:
    phases = steps(teardown.plan(CTX, bidirectional=True, local_only=True, early_tenant=False))
    assert phases == [*SLICE_AND_NODE, IDENTITY_LATE, [("consumer", "Secret", "liqo-signed-nonce", C_NS)]]


def test_without_early_tenant_the_tenant_waits_for_the_identity_secrets() -> None:
    """The reverse direction and force-delete: the Tenant's phase starts once the Identity's Secrets are gone,
    which Liqo releases only after its copies on the provider."""
    assert steps(teardown.plan(CTX, bidirectional=False, local_only=False, early_tenant=False)) == [
        *SLICE_AND_NODE,
        IDENTITY_LATE,
        TENANT_AND_NONCES[:-1],
        NETWORKING_PHASE,
    ]


# -- run -------------------------------------------------------------------------------------


def populate(
    local: FakeClusterClient,
    remote: FakeClusterClient,
    *,
    finalizers: bool = False,
    owner: dict[str, str] | None = None,
) -> None:
    """Every object a peering has; labelled as CTX's (the operator's labels) unless owner says otherwise."""
    labels = CTX.owner if owner is None else owner
    meta: dict[str, Any] = {"labels": labels, **({"finalizers": ["liqo.io/x"]} if finalizers else {})}
    for side, res, name, ns in teardown.networking_objects(CTX):
        (local if side == "consumer" else remote).put(res, name, ns, **meta)
    peer = {naming.REMOTE_CLUSTER_ID: "provider-id"}
    local.put(r.RESOURCE_SLICE, "provider-id", C_NS, **{**meta, "labels": {**labels, **peer}})
    # Liqo creates the VirtualNode: it never carries our labels, only its provider's.
    local.put(r.VIRTUAL_NODE, "provider-id", C_NS, labels=peer, **({"finalizers": ["liqo.io/x"]} if finalizers else {}))
    local.put(r.IDENTITY, naming.identity_name("provider-id"), C_NS, **meta)
    local.put(r.SECRET, naming.SIGNED_NONCE_SECRET, C_NS, labels=labels)
    remote.put(r.TENANT, "consumer-id", P_NS, **meta)
    remote.put(r.SECRET, naming.NONCE_SECRET, P_NS, labels=labels)


@pytest.fixture
def clusters() -> tuple[FakeClusterClient, FakeClusterClient]:
    local, remote = FakeClusterClient("consumer"), FakeClusterClient("provider")
    populate(local, remote)
    return local, remote


def test_run_deletes_everything_in_one_pass_when_deletion_is_immediate(
    clusters: tuple[FakeClusterClient, FakeClusterClient],
) -> None:
    local, remote = clusters
    assert teardown.run(local, remote, CTX, bidirectional=False, local_only=False) == []
    assert local.store == {} and remote.store == {}
    # order: slice, virtual node, identity before the provider's tenant; the nonces with the tenant; in band
    # the network last
    assert [k[0] for k in local.deleted[:4]] == ["resourceslices", "virtualnodes", "identities", "secrets"]
    assert remote.deleted[:2] == [("tenants", P_NS, "consumer-id"), ("secrets", P_NS, "liqo-nonce")]
    assert local.deleted[-1] == ("configurations", C_NS, "provider-id")
    assert remote.deleted[-1] == ("configurations", P_NS, "consumer-id")


def test_run_deletes_the_tenant_with_its_dependents_and_the_identity_in_the_background(
    clusters: tuple[FakeClusterClient, FakeClusterClient],
) -> None:
    """Liqo's RoleBindings owned by the Tenant must be gone before a re-peering's Tenant could adopt them.
    The Identity goes at once: kept in the foreground, Liqo would make its Secret again and again."""
    local, remote = clusters
    teardown.run(local, remote, CTX, bidirectional=False, local_only=False)
    assert remote.deleted_with_dependents == [("tenants", P_NS, "consumer-id")]
    assert local.deleted_with_dependents == []
    assert ("identities", C_NS, naming.identity_name("provider-id")) in local.deleted


def test_run_waits_for_each_phase_to_be_gone() -> None:
    local, remote = FakeClusterClient("consumer"), FakeClusterClient("provider")
    populate(local, remote, finalizers=True)

    left = teardown.run(local, remote, CTX, bidirectional=False, local_only=False)
    assert left == [f"ResourceSlice {C_NS}/provider-id on the consumer"]
    assert local.deleted == [("resourceslices", C_NS, "provider-id")]
    assert remote.deleted == []

    # still terminating: deleted again (idempotent), nothing further touched
    assert teardown.run(local, remote, CTX, bidirectional=False, local_only=False) == left
    assert {k[0] for k in local.deleted} == {"resourceslices"}

    local.finish_deletions()
    left = teardown.run(local, remote, CTX, bidirectional=False, local_only=False)
    assert left == [f"VirtualNode {C_NS}/provider-id on the consumer"]

    seen = [left]
    for _ in range(10):
        local.finish_deletions()
        remote.finish_deletions()
        left = teardown.run(local, remote, CTX, bidirectional=False, local_only=False)
        if not left:
            break
        seen.append(left)
    assert left == []
    assert seen[1] == [f"Identity {C_NS}/controlplane-provider-id on the consumer"]
    assert seen[2] == [f"Tenant {P_NS}/consumer-id on the provider"]
    assert len(seen[3]) == 8 and seen[3][0] == f"GatewayClient {C_NS}/provider-id on the consumer"
    assert local.store == {} and remote.store == {}


def test_run_removes_every_slice_of_the_peering_and_their_virtual_nodes_but_no_one_elses() -> None:
    local, remote = FakeClusterClient("consumer"), FakeClusterClient("provider")
    peer = {naming.REMOTE_CLUSTER_ID: "provider-id"}
    fin = {"finalizers": ["liqo.io/x"]}
    for name, labels in (("cpu", {**peer, **CTX.owner}), ("gpu", {**peer, **CTX.owner}), ("by-liqoctl", peer)):
        local.put(r.RESOURCE_SLICE, name, C_NS, labels=labels, **fin)
        local.put(r.VIRTUAL_NODE, name, C_NS, labels={**peer, naming.RESOURCE_SLICE_NAME: name}, **fin)

    left = teardown.run(local, remote, CTX, bidirectional=False, local_only=True)
    assert left == [f"ResourceSlice {C_NS}/cpu on the consumer", f"ResourceSlice {C_NS}/gpu on the consumer"]
    local.finish_deletions()
    left = teardown.run(local, remote, CTX, bidirectional=False, local_only=True)
    assert left == [f"VirtualNode {C_NS}/cpu on the consumer", f"VirtualNode {C_NS}/gpu on the consumer"]
    local.finish_deletions()
    assert teardown.run(local, remote, CTX, bidirectional=False, local_only=True) == []
    assert {(k[0], k[2]) for k in local.store} == {("resourceslices", "by-liqoctl"), ("virtualnodes", "by-liqoctl")}


def test_run_bidirectional_keeps_networking(clusters: tuple[FakeClusterClient, FakeClusterClient]) -> None:
    local, remote = clusters
    assert teardown.run(local, remote, CTX, bidirectional=True, local_only=False) == []
    networking_kinds = {"GatewayClient", "GatewayServer", "PublicKey", "Configuration"}
    assert local.kinds() == networking_kinds
    assert remote.kinds() == networking_kinds


def test_run_without_remote_only_touches_the_consumer(clusters: tuple[FakeClusterClient, FakeClusterClient]) -> None:
    local, remote = clusters
    assert teardown.run(local, None, CTX, bidirectional=False, local_only=False) == []
    assert local.store == {}
    assert len(remote.store) == 6  # the provider keeps its Tenant, gateways, key, configuration, nonce
    assert remote.deleted == []


def test_run_local_only_leaves_the_provider_alone(clusters: tuple[FakeClusterClient, FakeClusterClient]) -> None:
    local, remote = clusters
    assert teardown.run(local, remote, CTX, bidirectional=False, local_only=True) == []
    assert local.store == {}
    assert remote.deleted == []


def test_run_skips_steps_whose_tenant_namespace_is_unknown(
    clusters: tuple[FakeClusterClient, FakeClusterClient],
) -> None:
    local, remote = clusters
    ctx = PeeringContext("team-a", "to-provider", CONSUMER, PROVIDER, consumer_tenant_ns=C_NS, provider_tenant_ns="")
    assert teardown.run(local, remote, ctx, bidirectional=False, local_only=False) == []
    assert remote.deleted == []
    assert local.store == {}


def test_run_on_nothing_is_done_without_deleting() -> None:
    local, remote = FakeClusterClient("consumer"), FakeClusterClient("provider")
    assert teardown.run(local, remote, CTX, bidirectional=False, local_only=False) == []
    assert local.deleted == [] and remote.deleted == []


# -- remove_networking -----------------------------------------------------------------------


def test_remove_networking_deletes_every_networking_object(
    clusters: tuple[FakeClusterClient, FakeClusterClient],
) -> None:
    local, remote = clusters
    assert teardown.remove_networking(local, remote, CTX, owned_only=False) is False  # deleted some this pass
    assert local.kinds() == {"ResourceSlice", "VirtualNode", "Identity", "Secret"}
    assert remote.kinds() == {"Tenant", "Secret"}
    assert teardown.remove_networking(local, remote, CTX, owned_only=False) is True


def test_remove_networking_owned_only_spares_objects_made_by_others() -> None:
    local, remote = FakeClusterClient("consumer"), FakeClusterClient("provider")
    ours = {"labels": {**CTX.owner, naming.REMOTE_CLUSTER_ID: "provider-id"}}
    foreign = {"labels": {naming.REMOTE_CLUSTER_ID: "provider-id"}}  # e.g. made by liqoctl
    other_peering = {"labels": {**CTX.owner, naming.PEERING_NAME: "someone-else"}}
    local.put(r.GATEWAY_CLIENT, "provider-id", C_NS, **ours)
    local.put(r.CONFIGURATION, "provider-id", C_NS, **foreign)
    local.put(r.PUBLIC_KEY, "provider-id", C_NS, **other_peering)
    remote.put(r.GATEWAY_SERVER, "consumer-id", P_NS, **ours)

    assert teardown.remove_networking(local, remote, CTX, owned_only=True) is False
    assert local.kinds() == {"Configuration", "PublicKey"}
    assert remote.store == {}
    assert teardown.remove_networking(local, remote, CTX, owned_only=True) is True
    assert local.kinds() == {"Configuration", "PublicKey"}


def test_remove_networking_reports_terminating_objects_as_left() -> None:
    local, remote = FakeClusterClient("consumer"), FakeClusterClient("provider")
    local.put(r.GATEWAY_CLIENT, "provider-id", C_NS, finalizers=["liqo.io/gateway"])
    assert teardown.remove_networking(local, remote, CTX, owned_only=False) is False
    assert teardown.remove_networking(local, remote, CTX, owned_only=False) is False
    local.finish_deletions()
    assert teardown.remove_networking(local, remote, CTX, owned_only=False) is True


def test_run_leaves_objects_of_another_peering_alone() -> None:
    """A refused duplicate LiqoPeering targets the same provider: deleting it must not unpeer the other one."""
    local, remote = FakeClusterClient("consumer"), FakeClusterClient("provider")
    populate(local, remote, owner={**CTX.owner, naming.PEERING_NAME: "the-first-one"})
    before = (dict(local.store), dict(remote.store))
    assert teardown.run(local, remote, CTX, bidirectional=False, local_only=False) == []
    assert (local.store, remote.store) == before


def control_plane_secret(cluster: FakeClusterClient, name: str, **meta: Any) -> None:
    """A ControlPlane kubeconfig Secret for the provider, as Liqo labels it."""
    labels = {"liqo.io/identity-type": "ControlPlane", "liqo.io/remote-cluster-id": "provider-id"}
    cluster.put(r.SECRET, name, C_NS, labels=labels, **meta)


@pytest.mark.parametrize(
    ("meta", "why"),
    [
        # Deleted by the collector, held by Liqo's CRD replicator.
        (
            {"finalizers": ["crdreplicator.liqo.io/operator"], "deletionTimestamp": "2026-01-01T00:00:00Z"},
            "Liqo is still releasing it",
        ),
        # The Identity went in the background: the collector has not deleted its Secret yet.
        (
            {"ownerReferences": [{"kind": "Identity", "name": "controlplane-provider-id", "uid": "u1"}]},
            "the Identity's",
        ),
    ],
)
def test_run_waits_for_the_identity_secret_once_the_identity_is_gone(meta: dict[str, Any], why: str) -> None:
    """The end of unpeering (and so any re-peering) waits until that Secret is gone: a new Identity would
    re-use it while it terminates. The Tenant does not wait for it, once Liqo's copies on the provider are
    gone; without early_tenant (the reverse direction, force-delete) it does."""
    local, remote = FakeClusterClient("consumer"), FakeClusterClient("provider")
    populate(local, remote)
    local.store.clear()  # slice, virtual node and Identity gone already
    control_plane_secret(local, "kubeconfig-controlplane-provider-id", **meta)
    left = teardown.run(local, remote, CTX, bidirectional=False, local_only=False)
    assert left == [f"Secret {C_NS}/kubeconfig-controlplane-provider-id on the consumer ({why})"]
    assert remote.deleted[0] == ("tenants", P_NS, "consumer-id")
    local.store.clear()
    assert teardown.run(local, remote, CTX, bidirectional=False, local_only=False) == []

    late = teardown.plan(CTX, bidirectional=False, local_only=False, early_tenant=False)
    assert ("consumer", r.SECRET, teardown.HELD_BY_LIQO, C_NS) in late[2]


def test_the_tenant_waits_for_the_originals_of_liqos_copies_on_the_provider() -> None:
    """crd-replicator deletes its copies on the provider with the Tenant's rights, and keeps its finalizer on
    each original here until the copy is gone: the Tenant goes once no original is left."""
    local, remote = FakeClusterClient("consumer"), FakeClusterClient("provider")
    populate(local, remote)
    local.delete(r.RESOURCE_SLICE, "provider-id", C_NS)
    local.delete(r.VIRTUAL_NODE, "provider-id", C_NS)
    copied = {naming.REPLICATION: "true", naming.REMOTE_ID: "provider-id"}
    local.put(r.RENEW, "controlplane-provider-id", C_NS, labels=copied, finalizers=["crdreplicator.liqo.io/resource"])
    local.put(r.NAMESPACE_MAP, "provider-id-a1b2", C_NS, labels=copied, finalizers=["crdreplicator.liqo.io/resource"])
    # A copy the provider made here (the reverse direction's) is not waited for.
    theirs = {naming.REPLICATION: "false", naming.REMOTE_ID: "consumer-id", naming.REPLICATED: "true"}
    local.put(r.RENEW, "controlplane-consumer-id", C_NS, labels=theirs)
    left = teardown.run(local, remote, CTX, bidirectional=False, local_only=False)
    assert left == [
        f"Renew {C_NS}/controlplane-provider-id on the consumer (Liqo is removing its copy on the provider)",
        f"NamespaceMap {C_NS}/provider-id-a1b2 on the consumer (Liqo is removing its copy on the provider)",
    ]
    assert ("identities", C_NS, "controlplane-provider-id") in local.deleted
    assert ("tenants", P_NS, "consumer-id") not in remote.deleted

    del local.store[("renews", C_NS, "controlplane-provider-id")]
    del local.store[("namespacemaps", C_NS, "provider-id-a1b2")]
    teardown.run(local, remote, CTX, bidirectional=False, local_only=False)
    assert ("tenants", P_NS, "consumer-id") in remote.deleted


def test_a_control_plane_secret_nothing_owns_holds_nothing_up() -> None:
    local, remote = FakeClusterClient("consumer"), FakeClusterClient("provider")
    control_plane_secret(local, "made-by-hand")  # never goes by itself
    assert teardown.run(local, remote, CTX, bidirectional=False, local_only=False) == []


def terminating_tenant(provider: FakeClusterClient, finalizer: str) -> None:
    """The peering's Tenant, deleted and held by ``finalizer``."""
    provider.put(
        r.TENANT,
        "consumer-id",
        P_NS,
        labels=CTX.owner,
        finalizers=[finalizer],
        deletionTimestamp="2026-01-01T00:00:00Z",
    )


def test_a_tenant_held_by_the_garbage_collector_says_so() -> None:
    """Deleted in the foreground, the Tenant waits for the provider's garbage collector (which may lag, e.g.
    after that API server was down): the reason unpeering waits names it, not only the Tenant."""
    local, remote = FakeClusterClient("consumer"), FakeClusterClient("provider")
    terminating_tenant(remote, teardown.FOREGROUND)
    left = teardown.run(local, remote, CTX, bidirectional=False, local_only=False)
    assert left == [
        f"Tenant {P_NS}/consumer-id on the provider (held by finalizer foregroundDeletion: the provider's garbage"
        " collector removes what it owns first)"
    ]
    remote.finish_deletions()
    assert teardown.run(local, remote, CTX, bidirectional=False, local_only=False) == []


def test_a_terminating_tenant_is_not_deleted_again() -> None:
    """Released by the garbage collector and still held by Liqo's own finalizer: a second foreground delete
    would put the collector's finalizer back, and the Tenant would wait a second round for it."""
    local, remote = FakeClusterClient("consumer"), FakeClusterClient("provider")
    terminating_tenant(remote, "liqo.io/tenant")
    left = teardown.run(local, remote, CTX, bidirectional=False, local_only=False)
    assert left == [f"Tenant {P_NS}/consumer-id on the provider"]
    assert ("tenants", P_NS, "consumer-id") not in remote.deleted


def test_run_out_of_band_removes_the_network_before_the_tenant(
    clusters: tuple[FakeClusterClient, FakeClusterClient],
) -> None:
    local, remote = clusters
    order: list[tuple[str, str]] = []
    for client in (local, remote):
        client.delete = _recording(client, order)  # type: ignore[method-assign]
    assert teardown.run(local, remote, CTX, bidirectional=False, local_only=False, in_band=False) == []
    assert local.store == {} and remote.store == {}
    tenant = order.index(("provider", "tenants"))
    assert order.index(("consumer", "identities")) < order.index(("consumer", "gatewayclients")) < tenant
    assert order.index(("provider", "configurations")) < tenant


def test_out_of_band_the_tenant_goes_while_the_network_is_still_going(
    clusters: tuple[FakeClusterClient, FakeClusterClient],
) -> None:
    """The Identity gone, the Tenant is deleted though a Configuration is still terminating (a finalizer of
    Liqo's); unpeering ends only once that is gone too."""
    local, remote = clusters
    held = ["networking.liqo.io/configuration-controller"]
    local.put(r.CONFIGURATION, "provider-id", C_NS, labels=CTX.owner, finalizers=held)
    left = teardown.run(local, remote, CTX, bidirectional=False, local_only=False, in_band=False)
    left = left or teardown.run(local, remote, CTX, bidirectional=False, local_only=False, in_band=False)
    assert ("tenants", P_NS, "consumer-id") in remote.deleted
    assert left == [f"Configuration {C_NS}/provider-id on the consumer"]
    local.finish_deletions()
    assert teardown.run(local, remote, CTX, bidirectional=False, local_only=False, in_band=False) == []


def test_a_phase_reads_its_objects_side_by_side(clusters: tuple[FakeClusterClient, FakeClusterClient]) -> None:
    """Out of band the Identity's phase holds nine objects on two clusters: they are read at once, not one
    round trip after another (every read here waits until all nine have started)."""
    local, remote = clusters
    teardown.run(local, remote, CTX, bidirectional=False, local_only=False)  # gone: each read is a miss now
    together = threading.Barrier(9, timeout=5)
    first: list[str] = []  # the Identity's phase; the Tenant's reads the network again, without waiting

    def get(client: FakeClusterClient) -> Any:
        plain = client.get

        def waiting(
            res: r.Resource, name: str, namespace: str | None = None, carries: str | None = None
        ) -> dict[str, Any] | None:
            if res in (r.IDENTITY, r.GATEWAY_CLIENT, r.GATEWAY_SERVER, r.PUBLIC_KEY, r.CONFIGURATION):
                first.append(name)
                if len(first) <= 9:
                    together.wait()
            return plain(res, name, namespace)

        return waiting

    local.get, remote.get = get(local), get(remote)  # type: ignore[method-assign]
    calls = TrackedPool(16, "calls")
    try:
        left = teardown.run(local, remote, CTX, bidirectional=False, local_only=False, in_band=False, calls=calls)
    finally:
        calls.shutdown()
    assert left == [] and not together.broken


def test_a_failed_read_fails_the_pass_once_the_others_have_ended(
    clusters: tuple[FakeClusterClient, FakeClusterClient],
) -> None:
    local, remote = clusters
    teardown.run(local, remote, CTX, bidirectional=False, local_only=False)
    plain = remote.get

    def failing(
        res: r.Resource, name: str, namespace: str | None = None, carries: str | None = None
    ) -> dict[str, Any] | None:
        if res == r.TENANT:
            raise ClusterUnreachable("provider", "https://provider:6443", "connection refused")
        return plain(res, name, namespace)

    remote.get = failing  # type: ignore[method-assign]
    with pytest.raises(ClusterUnreachable):
        teardown.run(local, remote, CTX, bidirectional=False, local_only=False)


def counting(client: FakeClusterClient) -> list[str]:
    """The kinds the client reads from now on, in order."""
    reads: list[str] = []
    plain = client.get

    def counted(
        res: r.Resource, name: str, namespace: str | None = None, carries: str | None = None
    ) -> dict[str, Any] | None:
        reads.append(res.kind)
        return plain(res, name, namespace)

    client.get = counted  # type: ignore[method-assign]
    return reads


def test_what_a_pass_found_gone_is_not_read_again_in_the_same_unpeering() -> None:
    local, remote = FakeClusterClient("consumer"), FakeClusterClient("provider")
    populate(local, remote, finalizers=True)
    done = teardown.Progress()
    for _ in range(2):  # the slice, then the virtual node, each deleted and then gone
        assert teardown.run(local, remote, CTX, bidirectional=False, local_only=False, done=done)
        local.finish_deletions()
    teardown.run(local, remote, CTX, bidirectional=False, local_only=False, done=done)
    assert {step[1].kind for step in done.settled} == {"ResourceSlice", "VirtualNode", "Renew"}

    reads = counting(local)
    local.finish_deletions()
    remote.finish_deletions()
    teardown.run(local, remote, CTX, bidirectional=False, local_only=False, done=done)
    assert "ResourceSlice" not in reads and "VirtualNode" not in reads
    assert reads.count("Identity") == 1  # gone now: its Secrets are looked at, it is not read again
    reads.clear()
    teardown.run(local, remote, CTX, bidirectional=False, local_only=False, done=done)
    assert "Identity" not in reads


def test_out_of_band_the_network_deleted_with_the_identity_is_read_again_only_where_it_is_waited_for() -> None:
    local, remote = FakeClusterClient("consumer"), FakeClusterClient("provider")
    populate(local, remote, finalizers=True)
    local.delete(r.RESOURCE_SLICE, "provider-id", C_NS)
    local.delete(r.VIRTUAL_NODE, "provider-id", C_NS)
    local.finish_deletions()
    done = teardown.Progress()
    left = teardown.run(local, remote, CTX, bidirectional=False, local_only=False, in_band=False, done=done)
    assert left == [f"Identity {C_NS}/controlplane-provider-id on the consumer"]
    assert ("configurations", C_NS, "provider-id") in local.deleted  # the network went with the Identity

    # The Identity still going: only it is read again, not the network a later phase waits for.
    reads, remote_reads = counting(local), counting(remote)
    teardown.run(local, remote, CTX, bidirectional=False, local_only=False, in_band=False, done=done)
    assert reads == ["Identity"] and remote_reads == []

    # The Identity gone: the Tenant's phase reads (and waits for) the network too.
    local.finish_deletions()
    reads.clear()
    left = teardown.run(local, remote, CTX, bidirectional=False, local_only=False, in_band=False, done=done)
    assert "Configuration" in reads and "Tenant" in remote_reads
    assert f"Tenant {P_NS}/consumer-id on the provider" in left


def test_a_slow_read_in_a_phase_holds_up_no_other_object_of_it() -> None:
    local, remote = FakeClusterClient("consumer"), FakeClusterClient("provider")
    populate(local, remote)
    for res, name, ns in ((r.RESOURCE_SLICE, "provider-id", C_NS), (r.VIRTUAL_NODE, "provider-id", C_NS)):
        local.delete(res, name, ns)
    local.delete(r.IDENTITY, naming.identity_name("provider-id"), C_NS)
    release = threading.Event()
    plain = remote.get

    def slow(
        res: r.Resource, name: str, namespace: str | None = None, carries: str | None = None
    ) -> dict[str, Any] | None:
        if res == r.SECRET:
            assert release.wait(10)  # the nonce's read waits for the Tenant's delete
        return plain(res, name, namespace)

    remote.get = slow  # type: ignore[method-assign]
    plain_delete = remote.delete

    def delete(res: r.Resource, name: str, namespace: str | None = None, **kw: Any) -> dict[str, Any] | None:
        if res == r.TENANT:
            release.set()
        return plain_delete(res, name, namespace, **kw)

    remote.delete = delete  # type: ignore[method-assign]
    assert teardown.run(local, remote, CTX, bidirectional=False, local_only=False, in_band=False) == []
    assert ("tenants", P_NS, "consumer-id") in remote.deleted


def _virtual_kubelet(local: FakeClusterClient, name: str, ready: bool, terminating: bool = False) -> None:
    labels = dict(kv.split("=") for kv in offloading.virtual_kubelet_selector("provider-id", "provider-id").split(","))
    meta: dict[str, Any] = {"name": name, "namespace": C_NS, "labels": labels}
    if terminating:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    status = {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    local.add(r.POD, {"metadata": meta, "status": status})


@pytest.mark.parametrize("restarted_ago", [5.0, certificates.RESTART_GRACE_SECONDS + 5])
def test_a_slice_whose_virtual_kubelet_restarts_for_a_renewal_goes_once_it_runs(restarted_ago: float) -> None:
    """Liqo before v1.2 reads a renewed certificate only when its virtual kubelet starts: the operator restarts
    it. Deleting the slice meanwhile deletes the kubeconfig Secret it starts from, and the virtual node could
    never drain. Only within the restart's grace: one that never comes back holds nothing up for good."""
    local, remote = FakeClusterClient("consumer"), FakeClusterClient("provider")
    populate(local, remote)
    when = format_time(datetime.now(UTC) - timedelta(seconds=restarted_ago))
    local.obj(r.RESOURCE_SLICE, "provider-id", C_NS)["metadata"]["annotations"] = {
        certificates.RESTARTED_ANNOTATION: when
    }
    _virtual_kubelet(local, "vk-old", ready=True, terminating=True)
    _virtual_kubelet(local, "vk-new", ready=False)

    left = teardown.run(local, remote, CTX, bidirectional=False, local_only=False)
    if restarted_ago > certificates.RESTART_GRACE_SECONDS:
        assert ("resourceslices", C_NS, "provider-id") in local.deleted
        return
    assert left == [
        f"ResourceSlice {C_NS}/provider-id on the consumer (its virtual kubelet restarts to read a renewed"
        " certificate: the slice goes once it runs)"
    ]
    assert local.deleted == [] and remote.deleted == []

    local.obj(r.POD, "vk-new", C_NS)["status"]["conditions"][0]["status"] = "True"
    teardown.run(local, remote, CTX, bidirectional=False, local_only=False)
    assert local.deleted[0] == ("resourceslices", C_NS, "provider-id")
