"""Unit tests for a bidirectional peering (spec.bidirectional): the reverse direction runs the forward stages'
code with the clusters swapped, over the forward direction's network; turning it off and deleting the
peering unpeer in liqoctl unpeer's order. Liqo's part is played by editing the in-memory clusters."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

import pytest

from liqo_peering.engine import reverse, teardown
from liqo_peering.engine.direction import PeeringRun
from liqo_peering.engine.stagerunner import run_stages
from liqo_peering.engine.unpeering import Unpeerer
from liqo_peering.engine.watches import peering_routes
from liqo_peering.errors import PEERING_USER_FIX, ClusterForbidden, Request, ResourceSliceDenied
from liqo_peering.liqo import naming
from liqo_peering.liqo import resources as r
from liqo_peering.stages import REVERSE_STAGES, STAGES, StageResult
from liqo_peering.status.compute import Observation, compute, has_reverse
from unit.fakes import FakeClusterClient
from unit.test_stage_steps import (
    AUTH_PARAMS,
    C_NS,
    CTX,
    NONCE,
    OWNER,
    P_NS,
    SIGNED,
    install_auth_keys,
    labels_of,
    make_run,
    make_spec,
    outcome,
    waiting,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)
BIDI = make_spec(bidirectional=True, reverse={"offloading": {"resources": {"cpu": 2}}})


def fakes(p: PeeringRun) -> tuple[FakeClusterClient, FakeClusterClient]:
    """The forward run's clusters: its consumer and its provider."""
    return cast(FakeClusterClient, p.consumer), cast(FakeClusterClient, p.provider)


# == the reverse run ==================================================================================


def test_the_reverse_context_swaps_the_clusters_and_keeps_each_tenant_namespace_on_its_cluster() -> None:
    back = CTX.reversed()
    assert (back.consumer, back.provider) == (CTX.provider, CTX.consumer)
    # The consumer's tenant namespace (for the provider) is where the reverse direction's provider keeps
    # what it holds for its consumer, and the other way round.
    assert (back.consumer_tenant_ns, back.provider_tenant_ns) == (P_NS, C_NS)
    assert back.owner == CTX.owner  # the same LiqoPeering owns both directions
    assert back.reversed() == CTX


def test_the_reverse_run_swaps_the_clients_and_reads_its_own_offloading() -> None:
    p = make_run(BIDI)
    rev = reverse.run_of(p)
    assert (rev.consumer, rev.provider) == (p.provider, p.consumer)
    assert rev.reverse and not p.reverse
    assert rev.offloading.resources == {"cpu": 2} and p.offloading.resources == {}
    assert (p.offloading_field, rev.offloading_field) == ("spec.offloading", "spec.reverse.offloading")


# == reverse authentication ===========================================================================


def reverse_authentication_to_ready(p: PeeringRun) -> None:
    """Play Liqo's part in the reverse direction: the consumer's nonce, the provider's signature, the
    consumer's Tenant status, the provider's Identity kubeconfig."""
    consumer, provider = fakes(p)
    rev = reverse.run_of(p)
    install_auth_keys(provider)
    reverse.authenticate(rev, in_band=False)
    consumer.obj(r.SECRET, naming.NONCE_SECRET, C_NS)["data"] = {naming.NONCE_FIELD: NONCE}
    reverse.authenticate(rev, in_band=False)
    provider.obj(r.SECRET, naming.SIGNED_NONCE_SECRET, P_NS)["data"] = {
        naming.NONCE_FIELD: NONCE,
        naming.SIGNED_NONCE_FIELD: SIGNED,
    }
    reverse.authenticate(rev, in_band=False)
    consumer.obj(r.TENANT, "provider-id", C_NS)["status"] = {"authParams": AUTH_PARAMS, "tenantNamespace": "liqo-t-p"}
    reverse.authenticate(rev, in_band=False)
    provider.obj(r.IDENTITY, "controlplane-consumer-id", P_NS)["status"] = {
        "kubeconfigSecretRef": {"name": "kubeconfig-controlplane-consumer-id"}
    }


def test_reverse_authentication_puts_each_object_on_the_other_cluster() -> None:
    p = make_run(BIDI)
    consumer, provider = fakes(p)
    rev = reverse.run_of(p)

    # 1. The nonce is the consumer's to make now, for the provider.
    result = reverse.authenticate(rev, in_band=False)
    assert outcome(result) == waiting("reverse-authentication", "WaitingForNonce")
    assert result.message == "waiting for Liqo on the consumer to create the nonce"
    nonce = consumer.obj(r.SECRET, naming.NONCE_SECRET, C_NS)
    assert labels_of(nonce) == {naming.REMOTE_CLUSTER_ID: "provider-id", naming.NONCE_LABEL: "true", **OWNER}
    assert provider.store == {}

    # 2. The provider signs it.
    nonce["data"] = {naming.NONCE_FIELD: NONCE}
    result = reverse.authenticate(rev, in_band=False)
    assert result.message == "waiting for Liqo on the provider to sign the nonce"
    signed = provider.obj(r.SECRET, naming.SIGNED_NONCE_SECRET, P_NS)
    assert labels_of(signed) == {naming.REMOTE_CLUSTER_ID: "consumer-id", naming.SIGNED_NONCE_LABEL: "true", **OWNER}

    # 3. The Tenant, on the consumer, with a CSR signed by the provider's key (read on the provider).
    install_auth_keys(provider)
    signed["data"][naming.SIGNED_NONCE_FIELD] = SIGNED
    result = reverse.authenticate(rev, in_band=False)
    assert outcome(result) == waiting("reverse-authentication", "WaitingForTenant")
    assert result.message == "waiting for Liqo on the consumer to accept the Tenant and issue credentials"
    tenant = consumer.obj(r.TENANT, "provider-id", C_NS)
    assert tenant["spec"]["clusterID"] == "provider-id" and tenant["spec"]["signature"] == SIGNED
    assert "proxyURL" not in tenant["spec"]
    assert labels_of(tenant) == {naming.REMOTE_CLUSTER_ID: "provider-id", **OWNER}

    # 4. The Identity, on the provider, for the consumer.
    tenant["status"] = {"authParams": AUTH_PARAMS, "tenantNamespace": "liqo-t-p"}
    result = reverse.authenticate(rev, in_band=False)
    assert result.message == "waiting for Liqo on the provider to build the consumer's kubeconfig"
    identity = provider.obj(r.IDENTITY, "controlplane-consumer-id", P_NS)
    assert identity["spec"]["clusterID"] == "consumer-id" and identity["spec"]["namespace"] == "liqo-t-p"
    identity["status"] = {"kubeconfigSecretRef": {"name": "kubeconfig-controlplane-consumer-id"}}
    result = reverse.authenticate(rev, in_band=False)
    assert (result.stage, result.state) == ("reverse-authentication", "ready")
    assert result.message == "the provider holds a ControlPlane identity on the consumer"
    # Nothing of the forward direction was made.
    assert r.TENANT.kind not in provider.kinds() and r.IDENTITY.kind not in consumer.kinds()


def test_reverse_authentication_in_band_asks_for_the_consumers_api_server_proxy() -> None:
    p = make_run(make_spec(bidirectional=True, authentication={"inBand": True}))
    result = reverse.authenticate(reverse.run_of(p), in_band=True)
    assert outcome(result) == waiting("reverse-authentication", "WaitingForProxyAddress")
    # The proxy is Liqo's on the consumer; spec.authentication.proxyURL names one in front of the provider.
    assert "IPAM on the consumer" in result.message and "proxyURL" not in result.message


def test_a_right_the_provider_kubeconfig_lacks_names_what_the_reverse_direction_needs() -> None:
    p = make_run(BIDI)
    consumer, provider = fakes(p)
    consumer.add(
        r.SECRET,
        {"metadata": {"name": naming.NONCE_SECRET, "namespace": C_NS}, "data": {naming.NONCE_FIELD: NONCE}},
    )

    def forbidden(*_: Any, **__: Any) -> Any:
        asked = Request(server="https://p", verb="create", resource="secrets", namespace=P_NS)
        raise ClusterForbidden(side="provider", request=asked, server_reason="Forbidden")

    provider.create_if_absent = forbidden  # type: ignore[method-assign]
    with pytest.raises(Exception) as err:
        reverse.authenticate(reverse.run_of(p), in_band=False)
    message = getattr(err.value, "message", "")
    assert getattr(err.value, "reason", "") == "ProviderForbidden"
    assert message.startswith("the provider cluster at https://p does not let the kubeconfig's identity create")
    # Not the peering-user's fix: the reverse direction needs more than it grants.
    assert PEERING_USER_FIX not in message
    assert "Secret liqo/authentication-keys" in message and "spec.bidirectional to false" in message


# == reverse offloading ===============================================================================


def test_reverse_offloading_asks_the_consumer_from_the_provider() -> None:
    p = make_run(BIDI)
    consumer, provider = fakes(p)
    rev = reverse.run_of(p)

    result = reverse.offload(rev)
    assert outcome(result) == waiting("reverse-offloading", "WaitingForResourceSlice")
    assert result.message == "waiting for the consumer to accept the ResourceSlice"
    slice_ = provider.obj(r.RESOURCE_SLICE, "consumer-id", P_NS)
    assert slice_["spec"] == {"class": "default", "providerClusterID": "consumer-id", "resources": {"cpu": "2"}}
    assert labels_of(slice_)[naming.REMOTE_CLUSTER_ID] == "consumer-id"
    assert r.RESOURCE_SLICE.kind not in consumer.kinds()

    slice_["status"] = {
        "conditions": [
            {"type": "Authentication", "status": "Accepted"},
            {
                "type": "Resources",
                "status": "Denied",
                "reason": "ResourceSliceResourcesDenied",
                "message": "ResourceSlice resources denied",
            },
        ]
    }
    with pytest.raises(ResourceSliceDenied) as err:
        reverse.offload(rev)
    assert err.value.message == (
        f"the consumer Denied ResourceSlice {P_NS}/consumer-id on the provider (Resources); Resources Denied"
        " (ResourceSliceResourcesDenied: ResourceSlice resources denied): ask for fewer resources in"
        " spec.reverse.offloading.resources, or free some on the consumer"
    )


# == unpeering ========================================================================================


def populate_both(p: PeeringRun) -> None:
    """Every object of both directions, as the operator labels them (the VirtualNodes are Liqo's)."""
    consumer, provider = fakes(p)
    meta: dict[str, Any] = {"labels": dict(OWNER)}
    for side, res, name, ns in teardown.networking_objects(CTX):
        (consumer if side == "consumer" else provider).put(res, name, ns, **meta)
    for cluster, ns, peer, nonce_kept_by_peer in (
        (consumer, C_NS, "provider-id", provider),
        (provider, P_NS, "consumer-id", consumer),
    ):
        # Both labelled with their provider: the slice as the operator builds it, the VirtualNode by Liqo.
        cluster.put(r.RESOURCE_SLICE, peer, ns, labels={**OWNER, naming.REMOTE_CLUSTER_ID: peer})
        cluster.put(r.VIRTUAL_NODE, peer, ns, labels={naming.REMOTE_CLUSTER_ID: peer})
        cluster.put(r.IDENTITY, naming.identity_name(peer), ns, **meta)
        cluster.put(r.SECRET, naming.SIGNED_NONCE_SECRET, ns, **meta)
        # the Tenant and the nonce for this cluster's consumer side sit on the peer
        peer_ns = P_NS if ns == C_NS else C_NS
        own_id = "consumer-id" if ns == C_NS else "provider-id"
        nonce_kept_by_peer.put(r.TENANT, own_id, peer_ns, **meta)
        nonce_kept_by_peer.put(r.SECRET, naming.NONCE_SECRET, peer_ns, **meta)


def test_unpeering_the_reverse_direction_keeps_the_forward_one_and_the_network() -> None:
    p = make_run(BIDI)
    consumer, provider = fakes(p)
    populate_both(p)
    assert teardown.run(consumer, provider, CTX, bidirectional=True, local_only=False, reverse=True) == []
    networking = {"GatewayClient", "GatewayServer", "PublicKey", "Configuration"}
    # The forward direction is whole: slice, virtual node, identity and signed nonce here, Tenant and nonce there.
    assert consumer.kinds() == networking | {"ResourceSlice", "VirtualNode", "Identity", "Secret"}
    assert provider.kinds() == networking | {"Tenant", "Secret"}
    assert consumer.obj(r.SECRET, naming.SIGNED_NONCE_SECRET, C_NS) and provider.obj(
        r.SECRET, naming.NONCE_SECRET, P_NS
    )
    # In liqoctl unpeer's order, on the reverse direction's consumer (the provider) first.
    assert [k[0] for k in provider.deleted[:3]] == ["resourceslices", "virtualnodes", "identities"]
    assert consumer.deleted[0] == ("tenants", C_NS, "provider-id")
    assert consumer.deleted_with_dependents == [("tenants", C_NS, "provider-id")]
    assert provider.deleted_with_dependents == []  # the Identity goes in the background


def test_unpeering_the_reverse_direction_waits_naming_the_cluster_that_holds_each_object() -> None:
    p = make_run(BIDI)
    consumer, provider = fakes(p)
    populate_both(p)
    provider.obj(r.RESOURCE_SLICE, "consumer-id", P_NS)["metadata"]["finalizers"] = ["liqo.io/x"]
    left = teardown.run(consumer, provider, CTX, bidirectional=True, local_only=False, reverse=True)
    assert left == [f"ResourceSlice {P_NS}/consumer-id on the provider"]
    assert consumer.deleted == []
    assert reverse.remove(p) == reverse.removal(left)
    assert reverse.remove(p)["reverse-authentication"].message == (
        f"spec.bidirectional is false: removing the reverse direction, waiting for ResourceSlice {P_NS}/consumer-id"
        " on the provider to go"
    )


def test_unpeering_the_reverse_direction_locally_spares_the_provider() -> None:
    p = make_run(BIDI)
    consumer, provider = fakes(p)
    populate_both(p)
    assert teardown.run(consumer, provider, CTX, bidirectional=True, local_only=True, reverse=True) == []
    assert provider.deleted == []
    assert consumer.deleted == [("tenants", C_NS, "provider-id"), ("secrets", C_NS, naming.NONCE_SECRET)]


def test_a_reverse_direction_made_by_others_is_left_alone_and_keeps_the_network() -> None:
    p = make_run()
    consumer, provider = fakes(p)
    liqoctl = {"labels": {naming.REMOTE_CLUSTER_ID: "provider-id"}}
    consumer.put(r.TENANT, "provider-id", C_NS, **liqoctl)
    provider.put(r.RESOURCE_SLICE, "consumer-id", P_NS, **liqoctl)
    assert teardown.run(consumer, provider, CTX, bidirectional=True, local_only=False, reverse=True) == []
    assert consumer.deleted == [] and provider.deleted == []
    assert teardown.reverse_peered(consumer, "provider-id")
    assert not teardown.reverse_peered(consumer, "another-id")
    consumer.obj(r.TENANT, "provider-id", C_NS)["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert not teardown.reverse_peered(consumer, "provider-id")  # going: it keeps nothing


def body_of(p: PeeringRun, conditions: list[dict[str, Any]]) -> dict[str, Any]:
    spec = p.spec.model_dump(by_alias=True, exclude_none=True)
    status = {"localClusterID": "consumer-id", "remoteClusterID": "provider-id", "conditions": conditions}
    return {"metadata": {"namespace": "team-a", "name": "to-provider", "generation": 1}, "spec": spec, "status": status}


class Remotes:
    def __init__(self, client: FakeClusterClient) -> None:
        self.client = client

    def get(self, key: Any, kubeconfig: Any) -> FakeClusterClient:
        return self.client


def unpeering_service(p: PeeringRun) -> Unpeerer:
    consumer, provider = fakes(p)
    for cluster, peer, name in ((consumer, "provider-id", C_NS), (provider, "consumer-id", P_NS)):
        labels = {naming.REMOTE_CLUSTER_ID: peer, naming.TENANT_NAMESPACE_LABEL: "true"}
        cluster.add(r.NAMESPACE, {"metadata": {"name": name, "labels": labels}})
    consumer.add(
        r.SECRET, {"metadata": {"name": "provider-kubeconfig", "namespace": "team-a"}, "data": {"kubeconfig": "eA=="}}
    )
    svc = Unpeerer(consumer, cast(Any, None), cast(Any, None), cast(Any, None), remotes=cast(Any, Remotes(provider)))
    svc._teardown_client = lambda *_: provider  # type: ignore[method-assign]
    return svc


@pytest.mark.parametrize("how", ["spec", "status"])
def test_deleting_a_bidirectional_peering_unpeers_the_reverse_direction_then_the_forward_one_with_the_network(
    how: str,
) -> None:
    """liqoctl unpeer's order for a bidirectional peering: one direction keeping the network, then the other,
    no longer bidirectional, with the network. ``how``: bidirectional in the spec, or (turned off while
    its removal had not finished) only in the status."""
    p = make_run(BIDI if how == "spec" else make_spec())
    consumer, provider = fakes(p)
    populate_both(p)
    provider.obj(r.RESOURCE_SLICE, "consumer-id", P_NS)["metadata"]["finalizers"] = ["liqo.io/x"]
    svc = unpeering_service(p)
    conditions = [{"type": "ReverseAuthenticationReady", "status": "False"}] if how == "status" else []
    body = body_of(p, conditions)

    assert svc.unpeer(body).remaining == (f"ResourceSlice {P_NS}/consumer-id on the provider",)
    assert consumer.deleted == []  # the forward direction waits for the reverse one
    provider.finish_deletions()
    assert svc.unpeer(body).remaining == ()
    # The reverse direction went before the forward one, and the network with the forward one's Identity
    # (authentication out of band: nothing of its removal needs the tunnel).
    assert consumer.deleted.index(("tenants", C_NS, "provider-id")) < consumer.deleted.index(
        ("resourceslices", C_NS, "provider-id")
    )
    assert (
        provider.deleted.index(("identities", P_NS, "controlplane-consumer-id"))
        < provider.deleted.index(("gatewayservers", P_NS, "consumer-id"))
        < provider.deleted.index(("tenants", P_NS, "consumer-id"))
    )
    # Nothing of either direction is left: the tenant namespaces (Liqo's) and the kubeconfig Secret stay.
    assert {key for key in consumer.store if key[0] != "namespaces"} == {("secrets", "team-a", "provider-kubeconfig")}
    assert provider.kinds() == {"Namespace"}


def test_deleting_a_one_way_peering_keeps_the_network_of_a_reverse_direction_made_by_liqoctl() -> None:
    p = make_run()
    consumer, provider = fakes(p)
    for side, res, name, ns in teardown.networking_objects(CTX):
        (consumer if side == "consumer" else provider).put(res, name, ns, labels=dict(OWNER))
    consumer.put(r.TENANT, "provider-id", C_NS, labels={naming.REMOTE_CLUSTER_ID: "provider-id"})
    assert unpeering_service(p).unpeer(body_of(p, [])).remaining == ()
    assert consumer.kinds() == {
        "GatewayClient",
        "GatewayServer",
        "PublicKey",
        "Configuration",
        "Tenant",
        "Namespace",
        "Secret",
    }
    assert provider.deleted == []


# == status ===========================================================================================


def observed(stages: dict[str, StageResult], *, bidirectional: bool, error: str | None = None) -> Observation:
    return Observation(
        generation=2,
        now=NOW,
        timeout_seconds=300,
        stages=stages,
        error_reason=error,
        error_message="boom" if error else None,
        local_cluster_id="consumer-id",
        remote_cluster_id="provider-id",
        liqo_checked=frozenset(),
        bidirectional=bidirectional,
    )


FORWARD_READY = {stage: StageResult.ready(stage, f"{stage} established") for stage in STAGES}
BOTH_READY = {**FORWARD_READY, **{stage: StageResult.ready(stage, f"{stage} established") for stage in REVERSE_STAGES}}


def conditions(status: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}


def test_bidirectional_is_ready_only_when_both_directions_are() -> None:
    waiting_back = {
        **FORWARD_READY,
        "reverse-authentication": StageResult.ready("reverse-authentication", "the provider holds an identity"),
        "reverse-offloading": StageResult.waiting("reverse-offloading", "WaitingForVirtualNode", "waiting for it"),
    }
    status, events = compute(None, observed(waiting_back, bidirectional=True))
    got = conditions(status)
    assert got["ReverseAuthenticationReady"] == ("True", "Established")
    assert got["ReverseOffloadingReady"] == ("False", "WaitingForVirtualNode")
    assert got["Ready"] == ("False", "WaitingForVirtualNode") and got["Reconciling"][0] == "True"
    assert status["peerStatus"] == "establishing" and status["stage"] == "reverse-offloading: waiting"
    assert ("Normal", "ReverseAuthenticationReady") in [(e.type, e.reason) for e in events]

    status, events = compute(status, observed(BOTH_READY, bidirectional=True))
    assert conditions(status)["Ready"] == ("True", "PeeringEstablished") and status["stage"] == "ready"
    assert [e.reason for e in events] == ["ReverseOffloadingReady", "PeeringReady"]


def test_a_reverse_stage_not_reached_yet_is_unknown() -> None:
    status, _ = compute(None, observed(FORWARD_READY, bidirectional=True))
    assert conditions(status)["ReverseAuthenticationReady"] == ("Unknown", "NotStarted")
    assert conditions(status)["Ready"][0] == "False"
    assert status["stage"] == "reverse-authentication: not started"


def test_one_way_peerings_show_no_reverse_conditions() -> None:
    status, _ = compute(None, observed(FORWARD_READY, bidirectional=False))
    assert not has_reverse(status)
    assert conditions(status)["Ready"] == ("True", "PeeringEstablished")


def test_turned_off_the_reverse_direction_reconciles_until_removed_then_its_conditions_go() -> None:
    on, _ = compute(None, observed(BOTH_READY, bidirectional=True))
    assert has_reverse(on)
    removing = {
        **FORWARD_READY,
        **reverse.removal(["ResourceSlice liqo-tenant-consumer-id/consumer-id on the provider"]),
    }
    status, _ = compute(on, observed(removing, bidirectional=False))
    got = conditions(status)
    assert got["ReverseAuthenticationReady"] == got["ReverseOffloadingReady"] == ("False", "Unpeering")
    assert got["Ready"] == ("False", "Unpeering") and got["Reconciling"] == ("True", "Progressing")
    assert got["Stalled"][0] == "False"
    # The forward direction's conditions are untouched (their transition times too).
    assert {t: got[t] for t in ("NetworkReady", "AuthenticationReady", "OffloadingReady")} == {
        t: ("True", "Established") for t in ("NetworkReady", "AuthenticationReady", "OffloadingReady")
    }
    assert has_reverse(status)

    # A pass that failed before the reverse stages leaves them as they were.
    failed, _ = compute(status, observed({}, bidirectional=False, error="ProviderUnreachable"))
    assert conditions(failed)["ReverseAuthenticationReady"] == ("False", "Unpeering")

    gone, _ = compute(status, observed({**FORWARD_READY, **reverse.removal([])}, bidirectional=False))
    assert not has_reverse(gone)
    assert conditions(gone)["Ready"] == ("True", "PeeringEstablished")


# == watches ==========================================================================================


def test_the_reverse_directions_objects_wake_the_peering_only_while_it_has_one() -> None:
    consumer, provider = FakeClusterClient("consumer"), FakeClusterClient("provider")
    one_way = peering_routes(consumer, provider, CTX, ("team-a", "provider-kubeconfig"))
    both = peering_routes(consumer, provider, CTX, ("team-a", "provider-kubeconfig"), reverse=True)
    added = [route for route in both if route not in one_way]
    assert len(both) == len(one_way) + len(added)

    def wakes(client: FakeClusterClient, res: r.Resource, name: str, ns: str | None, **labels: str) -> bool:
        obj = {"metadata": {"name": name, "namespace": ns, "labels": labels}}
        return any(x.client is client and x.scope.res == res and x.matches(obj) for x in added)

    # On the provider: what the reverse direction's consumer side holds, in its tenant namespace.
    assert wakes(provider, r.IDENTITY, "controlplane-consumer-id", P_NS)
    assert wakes(provider, r.RESOURCE_SLICE, "consumer-id", P_NS)
    assert wakes(provider, r.VIRTUAL_NODE, "consumer-id", P_NS)
    assert wakes(provider, r.SECRET, naming.SIGNED_NONCE_SECRET, P_NS)
    assert wakes(provider, r.POD, "vk-consumer-id-1", P_NS)
    assert wakes(provider, r.NODE, "consumer-id", None, **{naming.REMOTE_CLUSTER_ID: "consumer-id"})
    assert not wakes(provider, r.NODE, "x", None, **{naming.REMOTE_CLUSTER_ID: "someone-else"})
    assert not wakes(provider, r.RESOURCE_SLICE, "consumer-id", "elsewhere")
    # Here: its nonce and the provider's Tenant.
    assert wakes(consumer, r.SECRET, naming.NONCE_SECRET, C_NS)
    assert wakes(consumer, r.TENANT, "provider-id", C_NS)
    assert not wakes(consumer, r.TENANT, "provider-id", "liqo-tenant-other")
    # Provider informers cover the tenant namespace (and the virtual Nodes, cluster-scoped) only.
    assert {x.scope.namespace for x in added if x.client is provider and x.scope.res != r.NODE} == {P_NS}


# == one pass =========================================================================================


@pytest.fixture
def forward_ready(monkeypatch: pytest.MonkeyPatch) -> None:
    """The forward stages are ready (their passes are tested in test_stage_steps)."""
    from liqo_peering.engine import stagerunner

    for stage in STAGES:
        module = getattr(stagerunner, stage)

        def forward_only(run: PeeringRun, *args: Any, stage: str = stage, real: Any = module.reconcile) -> StageResult:
            return real(run, *args) if run.reverse else StageResult.ready(stage, "ok")

        monkeypatch.setattr(module, "reconcile", forward_only)


def one_pass(p: PeeringRun, removing: bool = False) -> dict[str, StageResult]:
    return run_stages(p, None, removing)


@pytest.mark.usefixtures("forward_ready")
def test_a_bidirectional_pass_runs_the_reverse_stages_after_the_forward_ones() -> None:
    p = make_run(BIDI)
    _, provider = fakes(p)
    results = one_pass(p)
    assert {stage: result.state for stage, result in results.items()} == {
        **{stage: "ready" for stage in STAGES},
        "reverse-authentication": "progressing",  # offloading waits for it, as the forward one does
    }
    reverse_authentication_to_ready(p)
    results = one_pass(p)
    assert results["reverse-authentication"].state == "ready"
    assert outcome(results["reverse-offloading"]) == waiting("reverse-offloading", "WaitingForResourceSlice")
    assert provider.obj(r.RESOURCE_SLICE, "consumer-id", P_NS)


@pytest.mark.usefixtures("forward_ready")
def test_a_one_way_pass_touches_no_reverse_object_unless_one_was_made() -> None:
    p = make_run()
    consumer, provider = fakes(p)
    assert set(one_pass(p)) == set(STAGES)
    assert consumer.writes == [] and provider.writes == []

    populate_both(p)
    results = one_pass(p, removing=True)  # it was bidirectional: the reverse direction goes
    assert {stage: results[stage].state for stage in REVERSE_STAGES} == {s: "disabled" for s in REVERSE_STAGES}
    assert (r.RESOURCE_SLICE.plural, P_NS, "consumer-id") not in provider.store
    assert (r.TENANT.plural, C_NS, "provider-id") not in consumer.store
    assert consumer.obj(r.RESOURCE_SLICE, "provider-id", C_NS)  # the forward direction stays


def test_a_ready_reverse_direction_writes_nothing_on_another_pass() -> None:
    p = make_run(BIDI)
    consumer, provider = fakes(p)
    rev = reverse.run_of(p)
    reverse_authentication_to_ready(p)
    reverse.offload(rev)
    provider.obj(r.RESOURCE_SLICE, "consumer-id", P_NS)["status"] = {
        "conditions": [{"type": "Authentication", "status": "Accepted"}, {"type": "Resources", "status": "Accepted"}]
    }
    provider.add(r.VIRTUAL_NODE, {"metadata": {"name": "consumer-id", "namespace": P_NS}})
    ready = {"conditions": [{"type": "Ready", "status": "True"}]}
    vk = {
        naming.VK_COMPONENT: naming.VK_COMPONENT_VALUE,
        naming.REMOTE_CLUSTER_ID: "consumer-id",
        naming.VIRTUAL_NODE_LABEL: "consumer-id",
    }
    provider.add(r.POD, {"metadata": {"name": "vk-consumer-id-1", "namespace": P_NS, "labels": vk}, "status": ready})
    provider.add(r.NODE, {"metadata": {"name": "consumer-id"}, "status": ready})
    assert (reverse.authenticate(rev, in_band=False).state, reverse.offload(rev).state) == ("ready", "ready")
    before = len(consumer.writes), len(provider.writes)
    assert (reverse.authenticate(rev, in_band=False).state, reverse.offload(rev).state) == ("ready", "ready")
    assert (len(consumer.writes), len(provider.writes)) == before


def test_reverse_stages_are_timed_in_the_stage_duration_metric() -> None:
    from liqo_peering.metrics import Metrics

    metrics = Metrics()
    on, _ = compute(None, observed(BOTH_READY, bidirectional=True))
    body = {"metadata": {"namespace": "team-a", "name": "to-provider", "creationTimestamp": "2026-01-01T00:00:00Z"}}
    metrics.observe(body, {}, on)
    seen = {
        sample.labels["stage"]
        for family in metrics.registry.collect()
        if family.name == "liqo_peering_stage_duration_seconds"
        for sample in family.samples
        if sample.name.endswith("_count")
    }
    assert seen == {*STAGES, *REVERSE_STAGES}


def test_an_unpeering_finds_the_tenant_namespaces_once() -> None:
    """Liqo names them by cluster ID and they go last: later passes do not list namespaces again."""
    p = make_run()
    consumer, provider = fakes(p)
    populate_both(p)
    consumer.obj(r.RESOURCE_SLICE, "provider-id", C_NS)["metadata"]["finalizers"] = ["liqo.io/x"]
    svc = unpeering_service(p)
    listed: list[str] = []
    for cluster in (consumer, provider):
        plain = cluster.find

        def counted(res: r.Resource, *args: Any, _plain: Any = plain, **kwargs: Any) -> list[dict[str, Any]]:
            listed.append(res.kind)
            return _plain(res, *args, **kwargs)

        cluster.find = counted  # type: ignore[method-assign]
    assert svc.unpeer(body_of(p, [])).remaining  # the slice lingers
    assert listed.count("Namespace") == 2
    consumer.finish_deletions()
    svc.unpeer(body_of(p, []))
    assert listed.count("Namespace") == 2


def test_an_unpeering_pass_says_what_is_left_and_what_wakes_the_next_one() -> None:
    """Its value carries the routes of what it deleted and waits for, in both tenant namespaces; the last
    pass leaves nothing and watches nothing."""
    p = make_run()
    consumer, provider = fakes(p)
    populate_both(p)
    consumer.obj(r.RESOURCE_SLICE, "provider-id", C_NS)["metadata"]["finalizers"] = ["liqo.io/x"]
    svc = unpeering_service(p)
    waiting = svc.unpeer(body_of(p, []))
    assert len(waiting.remaining) == 1 and "ResourceSlice" in waiting.remaining[0]
    watched = {(route.client.side, route.scope.res.kind, route.namespace) for route in waiting.routes}
    assert {("consumer", "ResourceSlice", C_NS), ("consumer", "Identity", C_NS)} <= watched
    assert ("provider", "Tenant", P_NS) in watched
    assert waiting.failure is None
    for _ in range(10):
        consumer.finish_deletions()
        provider.finish_deletions()
        done = svc.unpeer(body_of(p, []))
        if not done.remaining:
            break
    assert (done.remaining, done.routes) == ((), ())
