"""Unit tests for the engine's step planning: each stage's non-blocking pass decides the next step.

Every test drives a stage pass by pass against two in-memory clusters (``FakeClusterClient``), plays
Liqo's part by editing the stored objects between passes, and asserts both the StageResult and the
objects the pass wrote.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from cryptography.x509.oid import NameOID

from liqo_peering.api.model import LiqoPeeringSpec
from liqo_peering.clients import dns
from liqo_peering.engine import authentication, detail, discovery, networking, offloading
from liqo_peering.engine.direction import PeeringRun
from liqo_peering.errors import (
    GatewayUnreachable,
    LiqoNotInstalled,
    LiqoNotReady,
    LiqoVersionUnsupported,
    ResourceSliceDenied,
    SecretKeyMissing,
    SecretNotFound,
)
from liqo_peering.liqo import naming, versions
from liqo_peering.liqo import resources as r
from liqo_peering.liqo.context import ClusterInfo, PeeringContext
from liqo_peering.liqo.offloading import DEFAULT_CLASS_DISABLED
from liqo_peering.stages import StageResult
from unit.fakes import FakeClusterClient

CONSUMER = ClusterInfo("consumer-id", ("10.100.0.0/16",), "10.110.0.0/16")
PROVIDER = ClusterInfo("provider-id", ("10.200.0.0/16", "10.201.0.0/16"), "10.210.0.0/16")
C_NS = "liqo-tenant-provider-id"  # on the consumer, for the provider
P_NS = "liqo-tenant-consumer-id"  # on the provider, for the consumer
CTX = PeeringContext("team-a", "to-provider", CONSUMER, PROVIDER, consumer_tenant_ns=C_NS, provider_tenant_ns=P_NS)
OWNER = CTX.owner


def make_spec(**overrides: Any) -> LiqoPeeringSpec:
    return LiqoPeeringSpec.model_validate({"remoteKubeconfigSecretRef": {"name": "provider-kubeconfig"}, **overrides})


def make_run(spec: LiqoPeeringSpec | None = None, ctx: PeeringContext = CTX) -> PeeringRun:
    return PeeringRun(spec or make_spec(), FakeClusterClient("consumer"), FakeClusterClient("provider"), ctx)


def fakes(p: PeeringRun) -> tuple[FakeClusterClient, FakeClusterClient]:
    assert isinstance(p.consumer, FakeClusterClient) and isinstance(p.provider, FakeClusterClient)
    return p.consumer, p.provider


def waiting(stage: str, reason: str) -> tuple[str, str, str]:
    return (stage, "progressing", reason)


def outcome(result: StageResult) -> tuple[str, str, str]:
    return (result.stage, result.state, result.reason)


def labels_of(obj: dict[str, Any]) -> dict[str, str]:
    return dict(obj["metadata"].get("labels") or {})


def written(client: FakeClusterClient, since: int = 0) -> list[tuple[str, str, str | None, str]]:
    """The write log from index ``since``, as (verb, plural, namespace, name)."""
    return [(verb, *key) for verb, key in client.writes[since:]]


# == networking =======================================================================================


def accept_configuration(client: FakeClusterClient, name: str, namespace: str) -> None:
    """Liqo v1.2+: NetworkCIDRsConfigured=True for the Configuration's current generation."""
    conf = client.obj(r.CONFIGURATION, name, namespace)
    conf["status"] = {
        "conditions": [
            {
                "type": "NetworkCIDRsConfigured",
                "status": "True",
                "observedGeneration": conf["metadata"]["generation"],
            }
        ]
    }


def install_templates(p: PeeringRun) -> None:
    local, remote = fakes(p)
    remote.put(r.WG_SERVER_TEMPLATE, naming.SERVER_TEMPLATE, "liqo")
    local.put(r.WG_CLIENT_TEMPLATE, naming.CLIENT_TEMPLATE, "liqo")


def configurations_accepted(p: PeeringRun) -> tuple[FakeClusterClient, FakeClusterClient]:
    """Liqo's templates in place and both Configurations made and accepted: the gateways come next."""
    local, remote = fakes(p)
    install_templates(p)
    networking.reconcile(p)
    accept_configuration(local, "provider-id", C_NS)
    accept_configuration(remote, "consumer-id", P_NS)
    return local, remote


def deployment(client: FakeClusterClient, gateway: str, namespace: str, ready: int) -> None:
    client.add(
        r.DEPLOYMENT,
        {"metadata": {"name": f"gw-{gateway}", "namespace": namespace}, "status": {"readyReplicas": ready}},
    )


def gateway_keys(client: FakeClusterClient, res: r.Resource, name: str, namespace: str, key: str) -> None:
    """Liqo generates the gateway's key Secret and points status.secretRef at it."""
    client.obj(res, name, namespace).setdefault("status", {})["secretRef"] = {"name": f"gw-{name}"}
    client.add(
        r.SECRET,
        {
            "metadata": {"name": f"gw-{name}", "namespace": namespace},
            "data": {"privateKey": "cHJpdg==", "publicKey": key},
        },
    )


def connection(client: FakeClusterClient, peer: str, namespace: str, value: str) -> None:
    client.add(
        r.CONNECTION,
        {
            "metadata": {"name": f"conn-{peer}", "namespace": namespace, "labels": {naming.REMOTE_CLUSTER_ID: peer}},
            "status": {"value": value},
        },
    )


SERVER_ENDPOINT = {"addresses": ["192.0.2.10"], "port": 30123, "protocol": "UDP"}
SERVER_KEY = base64.b64encode(b"server-public-key-32-bytes-long!").decode()
CLIENT_KEY = base64.b64encode(b"client-public-key-32-bytes-long!").decode()


def networking_to_ready(p: PeeringRun) -> None:
    """Play Liqo's part for every networking step until the stage is ready."""
    local, remote = configurations_accepted(p)
    networking.reconcile(p)
    remote.obj(r.GATEWAY_SERVER, "consumer-id", P_NS)["status"] = {"endpoint": dict(SERVER_ENDPOINT)}
    deployment(remote, "consumer-id", P_NS, ready=1)
    networking.reconcile(p)
    deployment(local, "provider-id", C_NS, ready=1)
    gateway_keys(remote, r.GATEWAY_SERVER, "consumer-id", P_NS, SERVER_KEY)
    gateway_keys(local, r.GATEWAY_CLIENT, "provider-id", C_NS, CLIENT_KEY)
    networking.reconcile(p)
    connection(local, "provider-id", C_NS, "Connected")
    connection(remote, "consumer-id", P_NS, "Connected")
    assert networking.reconcile(p).state == "ready"


def test_networking_first_pass_creates_both_configurations_and_the_server_and_waits() -> None:
    p = make_run()
    local, remote = fakes(p)
    install_templates(p)

    result = networking.reconcile(p)

    assert outcome(result) == waiting("networking", "WaitingForConfiguration")
    assert "consumer and provider" in result.message
    # Each side describes the OTHER cluster, named after it, in its tenant namespace.
    on_consumer = local.obj(r.CONFIGURATION, "provider-id", C_NS)
    assert on_consumer["spec"] == {"remote": {"cidr": {"pod": list(PROVIDER.pod_cidrs), "external": ["10.210.0.0/16"]}}}
    assert labels_of(on_consumer) == {naming.REMOTE_CLUSTER_ID: "provider-id", **OWNER}
    on_provider = remote.obj(r.CONFIGURATION, "consumer-id", P_NS)
    assert on_provider["spec"] == {"remote": {"cidr": {"pod": ["10.100.0.0/16"], "external": ["10.110.0.0/16"]}}}
    assert labels_of(on_provider) == {naming.REMOTE_CLUSTER_ID: "consumer-id", **OWNER}
    # The server is made first (its Pod starting is the longest wait); the client waits for the Configurations.
    assert local.kinds() == {"Configuration", "WgGatewayClientTemplate"}
    assert remote.kinds() == {"Configuration", "GatewayServer", "WgGatewayServerTemplate"}
    assert [key[0] for _, key in remote.writes] == ["gatewayservers", "configurations"]


def test_networking_waits_for_each_side_and_for_the_current_generation() -> None:
    p = make_run(make_spec(skipValidation=True))
    local, remote = fakes(p)
    networking.reconcile(p)

    accept_configuration(local, "provider-id", C_NS)
    result = networking.reconcile(p)
    assert outcome(result) == waiting("networking", "WaitingForConfiguration")
    assert "on the provider" in result.message and "consumer" not in result.message

    # A condition for an older generation does not count.
    conf = remote.obj(r.CONFIGURATION, "consumer-id", P_NS)
    conf["status"] = {"conditions": [{"type": "NetworkCIDRsConfigured", "status": "True", "observedGeneration": 0}]}
    assert outcome(networking.reconcile(p)) == waiting("networking", "WaitingForConfiguration")
    conf["status"]["conditions"][0]["status"] = "False"
    conf["status"]["conditions"][0]["observedGeneration"] = 1
    assert outcome(networking.reconcile(p)) == waiting("networking", "WaitingForConfiguration")
    assert remote.kinds() == {"Configuration", "GatewayServer"} and local.kinds() == {"Configuration"}


def test_networking_accepts_liqo_v1_1_configuration_status() -> None:
    p = make_run(make_spec(skipValidation=True))
    local, remote = fakes(p)
    networking.reconcile(p)
    local.obj(r.CONFIGURATION, "provider-id", C_NS)["status"] = {"remote": {"cidr": {"pod": ["10.71.0.0/16"]}}}
    remote.obj(r.CONFIGURATION, "consumer-id", P_NS)["status"] = {"remote": {"cidr": {"pod": ["10.72.0.0/16"]}}}
    # The pod CIDR alone is not enough: Liqo up to v1.1 fills in the external one after it.
    assert outcome(networking.reconcile(p)) == waiting("networking", "WaitingForConfiguration")
    for conf in (local.obj(r.CONFIGURATION, "provider-id", C_NS), remote.obj(r.CONFIGURATION, "consumer-id", P_NS)):
        conf["status"]["remote"]["cidr"]["external"] = ["10.73.0.0/16"]
    assert outcome(networking.reconcile(p)) == waiting("networking", "WaitingForGatewayServer")


def test_networking_changed_cidrs_bump_the_generation_and_wait_again() -> None:
    p = make_run(make_spec(skipValidation=True))
    local, remote = fakes(p)
    networking.reconcile(p)
    accept_configuration(local, "provider-id", C_NS)
    accept_configuration(remote, "consumer-id", P_NS)
    assert outcome(networking.reconcile(p)) == waiting("networking", "WaitingForGatewayServer")

    moved = ClusterInfo("provider-id", ("10.99.0.0/16",), "10.210.0.0/16")
    p.ctx = PeeringContext("team-a", "to-provider", CONSUMER, moved, consumer_tenant_ns=C_NS, provider_tenant_ns=P_NS)
    result = networking.reconcile(p)

    assert outcome(result) == waiting("networking", "WaitingForConfiguration")
    conf = local.obj(r.CONFIGURATION, "provider-id", C_NS)
    assert conf["metadata"]["generation"] == 2
    assert conf["spec"]["remote"]["cidr"]["pod"] == ["10.99.0.0/16"]
    assert "on the consumer" in result.message


def test_networking_missing_templates_raise_liqo_not_ready_unless_validation_is_skipped() -> None:
    p = make_run()
    local, remote = fakes(p)

    with pytest.raises(LiqoNotReady, match=r"WgGatewayServerTemplate liqo/wireguard-server .* provider") as err:
        networking.reconcile(p)
    assert "spec.skipValidation" in err.value.message
    remote.put(r.WG_SERVER_TEMPLATE, naming.SERVER_TEMPLATE, "liqo")
    with pytest.raises(LiqoNotReady, match=r"WgGatewayClientTemplate liqo/wireguard-client .* consumer"):
        networking.reconcile(p)
    assert r.GATEWAY_SERVER.kind not in remote.kinds()

    assert local.kinds() == set()  # the templates are checked before anything is made
    p.spec = make_spec(skipValidation=True)
    assert outcome(networking.reconcile(p)) == waiting("networking", "WaitingForConfiguration")
    accept_configuration(local, "provider-id", C_NS)
    accept_configuration(remote, "consumer-id", P_NS)
    assert outcome(networking.reconcile(p)) == waiting("networking", "WaitingForGatewayServer")
    # Once both gateways exist, the templates are no longer checked (liqoctl peer checks them once, before
    # making them): the client's is still missing, and no pass says so.
    p.spec = make_spec()
    assert local.get(r.WG_CLIENT_TEMPLATE, naming.CLIENT_TEMPLATE, "liqo") is None
    local.put(r.GATEWAY_CLIENT, "provider-id", C_NS)
    assert r.GATEWAY_SERVER.kind in remote.kinds()  # made by the pass that skipped validation
    networking.reconcile(p)


def test_networking_gateway_server_then_client_then_keys_then_connection() -> None:
    p = make_run()
    local, remote = configurations_accepted(p)

    # The server on the provider, named after the consumer, with liqoctl's defaults.
    assert outcome(networking.reconcile(p)) == waiting("networking", "WaitingForGatewayServer")
    server = remote.obj(r.GATEWAY_SERVER, "consumer-id", P_NS)
    assert server["spec"] == {
        "mtu": 1340,
        "endpoint": {"port": 51840, "serviceType": "LoadBalancer"},
        "serverTemplateRef": {
            "apiVersion": "networking.liqo.io/v1beta1",
            "kind": "WgGatewayServerTemplate",
            "name": "wireguard-server",
            "namespace": "liqo",
        },
    }
    assert labels_of(server) == {naming.REMOTE_CLUSTER_ID: "consumer-id", **OWNER}
    assert r.GATEWAY_CLIENT.kind not in local.kinds()

    # A ready Deployment is not enough: the server needs an address. Its Deployment the pass does not read.
    deployment(remote, "consumer-id", P_NS, ready=1)
    for none in ([], [""]):  # Liqo's "" for a NodePort server whose node is not Ready is no address either
        server["status"] = {"endpoint": {"addresses": none, "port": 30123}}
        assert outcome(networking.reconcile(p)) == waiting("networking", "WaitingForGatewayServer")
        assert r.GATEWAY_CLIENT.kind not in local.kinds()
    remote.obj(r.DEPLOYMENT, "gw-consumer-id", P_NS)["status"]["readyReplicas"] = 0

    # The client on the consumer, named after the provider, dialing the server's endpoint as soon as there is
    # one: Liqo publishes a NodePort server's once its Pod runs, before that Pod is Ready.
    server["status"] = {"endpoint": dict(SERVER_ENDPOINT)}
    assert outcome(networking.reconcile(p)) == waiting("networking", "WaitingForGatewayClient")
    client = local.obj(r.GATEWAY_CLIENT, "provider-id", C_NS)
    assert client["spec"] == {
        "mtu": 1340,
        "endpoint": {"addresses": ["192.0.2.10"], "port": 30123, "protocol": "UDP"},
        "clientTemplateRef": {
            "apiVersion": "networking.liqo.io/v1beta1",
            "kind": "WgGatewayClientTemplate",
            "name": "wireguard-client",
            "namespace": "liqo",
        },
    }
    assert labels_of(client) == {naming.REMOTE_CLUSTER_ID: "provider-id", **OWNER}
    assert r.PUBLIC_KEY.kind not in local.kinds() | remote.kinds()  # the server has no key Secret yet

    # Each gateway's key goes to the other cluster as soon as Liqo made it, before either gateway's Pod runs: the
    # client's gateway configures the tunnel as it starts, and the server holds the client's key by its first ping.
    gateway_keys(remote, r.GATEWAY_SERVER, "consumer-id", P_NS, SERVER_KEY)
    assert outcome(networking.reconcile(p)) == waiting("networking", "WaitingForGatewayClient")
    assert local.obj(r.PUBLIC_KEY, "provider-id", C_NS)["spec"] == {"publicKey": SERVER_KEY}
    assert r.PUBLIC_KEY.kind not in remote.kinds()
    gateway_keys(local, r.GATEWAY_CLIENT, "provider-id", C_NS, "")
    deployment(local, "provider-id", C_NS, ready=1)
    assert outcome(networking.reconcile(p)) == waiting("networking", "WaitingForGatewayKeys")
    assert r.PUBLIC_KEY.kind not in remote.kinds()
    local.obj(r.DEPLOYMENT, "gw-provider-id", C_NS)["status"]["readyReplicas"] = 0
    local.obj(r.SECRET, "gw-provider-id", C_NS)["data"]["publicKey"] = CLIENT_KEY
    assert outcome(networking.reconcile(p)) == waiting("networking", "WaitingForGatewayClient")
    assert remote.obj(r.PUBLIC_KEY, "consumer-id", P_NS)["spec"] == {"publicKey": CLIENT_KEY}
    local.obj(r.DEPLOYMENT, "gw-provider-id", C_NS)["status"]["readyReplicas"] = 1

    result = networking.reconcile(p)
    assert outcome(result) == waiting("networking", "WaitingForConnection")
    assert result.message.endswith("(consumer absent, provider absent)")
    # Each side holds a PublicKey named after its peer, carrying the OTHER gateway's key.
    on_consumer = local.obj(r.PUBLIC_KEY, "provider-id", C_NS)
    assert on_consumer["spec"] == {"publicKey": SERVER_KEY}
    assert labels_of(on_consumer) == {naming.REMOTE_CLUSTER_ID: "provider-id", naming.GATEWAY_RESOURCE: "true", **OWNER}
    on_provider = remote.obj(r.PUBLIC_KEY, "consumer-id", P_NS)
    assert on_provider["spec"] == {"publicKey": CLIENT_KEY}
    assert labels_of(on_provider) == {naming.REMOTE_CLUSTER_ID: "consumer-id", naming.GATEWAY_RESOURCE: "true", **OWNER}

    # Connections: one per side, labelled with the peer's ID; a Connection for another peer is ignored.
    connection(local, "someone-else", C_NS, "Connected")
    connection(local, "provider-id", C_NS, "Connected")
    result = networking.reconcile(p)
    assert outcome(result) == waiting("networking", "WaitingForConnection")
    assert result.message.endswith("(consumer Connected, provider absent)")
    connection(remote, "consumer-id", P_NS, "Connecting")
    assert networking.reconcile(p).message.endswith("(consumer Connected, provider Connecting)")
    remote.obj(r.CONNECTION, "conn-consumer-id", P_NS)["status"]["value"] = "Connected"

    result = networking.reconcile(p)
    assert (result.state, result.reason) == ("ready", "Established")


def test_networking_with_the_server_on_the_consumer_swaps_the_gateways_roles() -> None:
    """location Consumer, as liqoctl peer --gw-server-service-location Consumer: the same steps with the server
    on the consumer (named after the provider) and the client on the provider (named after the consumer); the
    Configurations and the PublicKeys stay where they are; the status says the consumer serves."""
    p = make_run(make_spec(networking={"gatewayServer": {"location": "Consumer", "serviceType": "NodePort"}}))
    local, remote = fakes(p)
    local.put(r.WG_SERVER_TEMPLATE, naming.SERVER_TEMPLATE, "liqo")
    remote.put(r.WG_CLIENT_TEMPLATE, naming.CLIENT_TEMPLATE, "liqo")
    networking.reconcile(p)
    accept_configuration(local, "provider-id", C_NS)
    accept_configuration(remote, "consumer-id", P_NS)

    assert outcome(networking.reconcile(p)) == waiting("networking", "WaitingForGatewayServer")
    server = local.obj(r.GATEWAY_SERVER, "provider-id", C_NS)
    assert server["spec"]["endpoint"] == {"port": 51840, "serviceType": "NodePort"}
    assert labels_of(server) == {naming.REMOTE_CLUSTER_ID: "provider-id", **OWNER}
    assert r.GATEWAY_SERVER.kind not in remote.kinds() and r.GATEWAY_CLIENT.kind not in local.kinds() | remote.kinds()
    assert "gateway server on the consumer" in networking.reconcile(p).message

    server["status"] = {"endpoint": dict(SERVER_ENDPOINT)}
    deployment(local, "provider-id", C_NS, ready=1)
    result = networking.reconcile(p)
    assert outcome(result) == waiting("networking", "WaitingForGatewayClient")
    assert result.message == "waiting for the gateway client on the provider"
    client = remote.obj(r.GATEWAY_CLIENT, "consumer-id", P_NS)
    assert client["spec"]["endpoint"] == SERVER_ENDPOINT
    assert labels_of(client) == {naming.REMOTE_CLUSTER_ID: "consumer-id", **OWNER}
    assert r.GATEWAY_CLIENT.kind not in local.kinds()

    deployment(remote, "consumer-id", P_NS, ready=1)
    gateway_keys(local, r.GATEWAY_SERVER, "provider-id", C_NS, SERVER_KEY)
    gateway_keys(remote, r.GATEWAY_CLIENT, "consumer-id", P_NS, CLIENT_KEY)
    assert outcome(networking.reconcile(p)) == waiting("networking", "WaitingForConnection")
    # Each side holds a PublicKey named after its peer, carrying the OTHER gateway's key.
    assert local.obj(r.PUBLIC_KEY, "provider-id", C_NS)["spec"] == {"publicKey": CLIENT_KEY}
    assert remote.obj(r.PUBLIC_KEY, "consumer-id", P_NS)["spec"] == {"publicKey": SERVER_KEY}

    connection(local, "provider-id", C_NS, "Connected")
    connection(remote, "consumer-id", P_NS, "Connected")
    assert networking.reconcile(p).state == "ready"
    before = (len(local.writes), len(remote.writes))
    assert networking.reconcile(p).state == "ready"
    assert (len(local.writes), len(remote.writes)) == before  # quiet at rest
    assert detail.observe(p, None)["gateway"] == {"server": "Consumer", **SERVER_ENDPOINT}

    remote.obj(r.CONNECTION, "conn-consumer-id", P_NS)["status"]["value"] = "Error"
    with pytest.raises(GatewayUnreachable) as err:
        networking.reconcile(p)
    assert (
        "the gateway client on the provider cannot reach the gateway server on the consumer at"
        " udp://192.0.2.10:30123: Liqo's Connection is in Error on the provider" in err.value.message
    )


def test_networking_waiting_for_the_tunnel_reads_the_keys_once_per_gateway() -> None:
    """Passes that share a memo (woken by Liqo's objects only) take the keys the first one exchanged: no key
    Secret is read again, and a PublicKey is ensured again only where an informer serves it (a deleted one is
    made again at once). A new gateway, or a full pass (a new memo), reads the Secrets again."""
    p = make_run()
    local, remote = configurations_accepted(p)
    networking.reconcile(p)
    server = remote.obj(r.GATEWAY_SERVER, "consumer-id", P_NS)
    server["status"] = {"endpoint": dict(SERVER_ENDPOINT)}
    deployment(remote, "consumer-id", P_NS, ready=1)
    networking.reconcile(p)
    deployment(local, "provider-id", C_NS, ready=1)
    gateway_keys(remote, r.GATEWAY_SERVER, "consumer-id", P_NS, SERVER_KEY)
    gateway_keys(local, r.GATEWAY_CLIENT, "provider-id", C_NS, CLIENT_KEY)
    local.cached_kinds = {r.PUBLIC_KEY.plural}  # the consumer's PublicKeys are watched, the provider's are not
    assert outcome(networking.reconcile(p)) == waiting("networking", "WaitingForConnection")

    def key_reads() -> list[tuple[str, str, str | None]]:
        return [(c.side, plural, name) for c in (local, remote) for plural, _, name in c.reads if plural in key_kinds]

    key_kinds = {r.SECRET.plural, r.PUBLIC_KEY.plural}
    local.reads.clear()
    remote.reads.clear()
    del local.store[(r.PUBLIC_KEY.plural, C_NS, "provider-id")]
    assert outcome(networking.reconcile(p)) == waiting("networking", "WaitingForConnection")
    assert key_reads() == [("consumer", r.PUBLIC_KEY.plural, "provider-id")]
    assert local.obj(r.PUBLIC_KEY, "provider-id", C_NS)["spec"] == {"publicKey": SERVER_KEY}

    # A new gateway server (another uid) has a new key: read again, and given to the consumer.
    local.reads.clear()
    remote.reads.clear()
    server["metadata"]["uid"] = "another-server"
    remote.obj(r.SECRET, "gw-consumer-id", P_NS)["data"]["publicKey"] = CLIENT_KEY
    networking.reconcile(p)
    assert (r.SECRET.plural, P_NS, "gw-consumer-id") in remote.reads
    assert local.obj(r.PUBLIC_KEY, "provider-id", C_NS)["spec"] == {"publicKey": CLIENT_KEY}

    # A full pass starts from an empty memo.
    fresh = PeeringRun(p.spec, local, remote, p.ctx)
    local.reads.clear()
    remote.reads.clear()
    networking.reconcile(fresh)
    assert {(r.SECRET.plural, "gw-provider-id")} <= {(pl, n) for pl, _, n in local.reads}
    assert {(r.SECRET.plural, "gw-consumer-id")} <= {(pl, n) for pl, _, n in remote.reads}


def test_networking_with_the_server_on_the_consumer_checks_the_templates_on_their_clusters() -> None:
    p = make_run(make_spec(networking={"gatewayServer": {"location": "Consumer"}}))
    local, _ = fakes(p)
    install_templates(p)  # the server template on the provider, the client's on the consumer: not where needed
    with pytest.raises(LiqoNotReady, match="WgGatewayServerTemplate liqo/wireguard-server is missing on the consumer"):
        networking.reconcile(p)
    local.put(r.WG_SERVER_TEMPLATE, naming.SERVER_TEMPLATE, "liqo")
    with pytest.raises(LiqoNotReady, match="WgGatewayClientTemplate liqo/wireguard-client is missing on the provider"):
        networking.reconcile(p)


@pytest.mark.parametrize("side", ["consumer", "provider"])
def test_networking_connection_error_raises_connection_failed(side: str) -> None:
    p = make_run()
    local, remote = fakes(p)
    networking_to_ready(p)
    failing = local.obj(r.CONNECTION, "conn-provider-id", C_NS) if side == "consumer" else None
    failing = failing or remote.obj(r.CONNECTION, "conn-consumer-id", P_NS)
    failing["status"]["value"] = "Error"

    with pytest.raises(GatewayUnreachable, match=f"Connection is in Error on the {side}") as err:
        networking.reconcile(p)
    assert err.value.reason == "GatewayUnreachable"


def test_networking_gateway_client_overrides_reach_the_client() -> None:
    p = make_run(make_spec(networking={"mtu": 1420, "gatewayClient": {"address": "203.0.113.7", "port": 4000}}))
    local, _ = fakes(p)
    networking_to_ready(p)

    spec = local.obj(r.GATEWAY_CLIENT, "provider-id", C_NS)["spec"]
    assert spec["endpoint"] == {"addresses": ["203.0.113.7"], "port": 4000, "protocol": "UDP"}
    assert spec["mtu"] == 1420


@pytest.mark.parametrize(
    ("networking_spec", "field", "value"),
    [
        ({"gatewayServer": {"port": 51841}}, "port", 51841),
        ({"gatewayServer": {"serviceType": "NodePort", "nodePort": 30555}}, "nodePort", 30555),
        ({"mtu": 1280}, "mtu", 1280),
    ],
    ids=["port", "service-type", "mtu"],
)
def test_networking_changed_server_parameters_recreate_both_gateways(
    networking_spec: dict[str, Any], field: str, value: int
) -> None:
    p = make_run()
    local, remote = fakes(p)
    networking_to_ready(p)
    before = len(local.writes), len(remote.writes)

    p.spec = make_spec(networking=networking_spec)
    result = networking.reconcile(p)

    assert outcome(result) == waiting("networking", "RecreatingGateways")
    assert written(remote, before[1]) == [("delete", "gatewayservers", P_NS, "consumer-id")]
    assert written(local, before[0]) == [("delete", "gatewayclients", C_NS, "provider-id")]

    # Next pass: a new server with the new parameters, waiting for Liqo to publish its endpoint again.
    assert outcome(networking.reconcile(p)) == waiting("networking", "WaitingForGatewayServer")
    spec = remote.obj(r.GATEWAY_SERVER, "consumer-id", P_NS)["spec"]
    assert (spec if field == "mtu" else spec["endpoint"])[field] == value
    assert r.GATEWAY_CLIENT.kind not in local.kinds()


def test_networking_a_withdrawn_server_address_keeps_the_client_and_a_new_one_recreates_it() -> None:
    """After the provider's API server was out, its node NotReady for a moment, Liqo publishes the NodePort
    server's address as "" and may keep it so: the client (and the tunnel, still Connected) stays."""
    p = make_run()
    local, remote = fakes(p)
    networking_to_ready(p)
    server = remote.obj(r.GATEWAY_SERVER, "consumer-id", P_NS)
    client = local.obj(r.GATEWAY_CLIENT, "provider-id", C_NS)
    before = len(local.writes), len(remote.writes)
    for withdrawn in ({"addresses": [""], "port": 30123, "protocol": "UDP"}, {}):
        server["status"]["endpoint"] = withdrawn
        assert networking.reconcile(p).state == "ready"
    remote.obj(r.DEPLOYMENT, "gw-consumer-id", P_NS)["status"]["readyReplicas"] = 0
    assert networking.reconcile(p).state == "ready"
    assert written(local, before[0]) == [] and written(remote, before[1]) == []
    assert local.obj(r.GATEWAY_CLIENT, "provider-id", C_NS) is client
    # The tunnel down meanwhile: said so, and still nothing re-created toward no address.
    connection(local, "provider-id", C_NS, "Connecting")
    assert outcome(networking.reconcile(p)) == waiting("networking", "WaitingForConnection")
    assert written(local, before[0]) == []

    # The address published again, the same: nothing to do; another one: the client follows it.
    remote.obj(r.DEPLOYMENT, "gw-consumer-id", P_NS)["status"]["readyReplicas"] = 1
    server["status"]["endpoint"] = dict(SERVER_ENDPOINT)
    assert outcome(networking.reconcile(p)) == waiting("networking", "WaitingForConnection")
    assert written(local, before[0]) == []
    server["status"]["endpoint"] = {**SERVER_ENDPOINT, "addresses": ["192.0.2.99"]}
    assert outcome(networking.reconcile(p)) == waiting("networking", "RecreatingGateways")
    assert written(local, before[0]) == [("delete", "gatewayclients", C_NS, "provider-id")]


def test_networking_changed_client_override_recreates_only_the_client() -> None:
    p = make_run()
    local, remote = fakes(p)
    networking_to_ready(p)
    before = len(local.writes), len(remote.writes)

    p.spec = make_spec(networking={"gatewayClient": {"port": 4001}})
    result = networking.reconcile(p)

    assert outcome(result) == waiting("networking", "RecreatingGateways")
    assert written(remote, before[1]) == []
    assert written(local, before[0]) == [("delete", "gatewayclients", C_NS, "provider-id")]
    assert outcome(networking.reconcile(p)) == waiting("networking", "WaitingForGatewayKeys")
    assert local.obj(r.GATEWAY_CLIENT, "provider-id", C_NS)["spec"]["endpoint"]["port"] == 4001


def test_networking_disabled_removes_owned_objects_and_keeps_foreign_ones() -> None:
    p = make_run()
    local, remote = fakes(p)
    networking_to_ready(p)
    # A liqoctl-made PublicKey (no operator labels) stands in for the one the pass wrote.
    local.obj(r.PUBLIC_KEY, "provider-id", C_NS)["metadata"]["labels"] = {naming.REMOTE_CLUSTER_ID: "provider-id"}

    p.spec = make_spec(networking={"enabled": False})
    result = networking.reconcile(p)

    assert (result.stage, result.state, result.reason) == ("networking", "disabled", "Disabled")
    assert result.message == "networking is disabled; removing its objects"
    for kind in ("GatewayServer", "GatewayClient", "Configuration"):
        assert kind not in local.kinds() | remote.kinds()
    assert r.PUBLIC_KEY.kind not in remote.kinds()
    assert local.obj(r.PUBLIC_KEY, "provider-id", C_NS)  # foreign: kept
    # Liqo's own objects are not the operator's to delete.
    assert local.obj(r.CONNECTION, "conn-provider-id", C_NS)
    assert remote.obj(r.SECRET, "gw-consumer-id", P_NS)

    again = networking.reconcile(p)
    assert again.state == "disabled" and again.message == "networking is disabled"
    assert local.obj(r.PUBLIC_KEY, "provider-id", C_NS)


def test_networking_not_served_configuration_raises_liqo_not_installed() -> None:
    p = PeeringRun(
        make_spec(), FakeClusterClient("consumer"), FakeClusterClient("provider", not_served={"configurations"}), CTX
    )
    install_templates(p)
    with pytest.raises(LiqoNotInstalled, match=r"provider cluster .* does not serve configurations.networking.liqo.io"):
        networking.reconcile(p)


# == authentication ===================================================================================


PRIVATE_KEY = ed25519.Ed25519PrivateKey.generate()
PUBLIC_PEM = PRIVATE_KEY.public_key().public_bytes(
    serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
)
NONCE = base64.b64encode(b"nonce-1").decode()
SIGNED = base64.b64encode(b"signature-of-nonce-1").decode()
AUTH_PARAMS = {"apiServer": "https://provider.example:6443", "signedCRT": "Y2VydA=="}


def install_auth_keys(client: FakeClusterClient) -> None:
    """Liqo's authentication-keys Secret: PKCS8 PEM private key and PEM public key, base64 in data."""
    private_pem = PRIVATE_KEY.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    client.add(
        r.SECRET,
        {
            "metadata": {"name": naming.AUTH_KEYS_SECRET, "namespace": "liqo"},
            "data": {
                "privateKey": base64.b64encode(private_pem).decode(),
                "publicKey": base64.b64encode(PUBLIC_PEM).decode(),
            },
        },
    )


def sign_nonce(local: FakeClusterClient, signature: str = SIGNED) -> None:
    local.obj(r.SECRET, naming.SIGNED_NONCE_SECRET, C_NS).setdefault("data", {})[naming.SIGNED_NONCE_FIELD] = signature


def authentication_to_tenant(
    p: PeeringRun,
    proxy_url: str | None = None,
    stage_pass: Callable[[PeeringRun, str | None], StageResult] = authentication.reconcile,
) -> StageResult:
    """Play Liqo's part up to the Tenant; returns the pass that created it."""
    install_auth_keys(fakes(p)[0])
    authentication_to_signed_nonce(p, proxy_url, stage_pass)
    return stage_pass(p, proxy_url)


def authentication_to_signed_nonce(
    p: PeeringRun,
    proxy_url: str | None = None,
    stage_pass: Callable[[PeeringRun, str | None], StageResult] = authentication.reconcile,
) -> None:
    """Play Liqo's part through the signed nonce: the next pass goes on to the Tenant."""
    local, remote = fakes(p)
    stage_pass(p, proxy_url)
    remote.obj(r.SECRET, naming.NONCE_SECRET, P_NS)["data"] = {naming.NONCE_FIELD: NONCE}
    stage_pass(p, proxy_url)
    sign_nonce(local)


def authentication_to_ready(p: PeeringRun, proxy_url: str | None = None) -> None:
    local, remote = fakes(p)
    authentication_to_tenant(p, proxy_url)
    remote.obj(r.TENANT, "consumer-id", P_NS)["status"] = {"authParams": AUTH_PARAMS, "tenantNamespace": "liqo-t-c"}
    authentication.reconcile(p, proxy_url)
    local.obj(r.IDENTITY, "controlplane-provider-id", C_NS)["status"] = {
        "kubeconfigSecretRef": {"name": "kubeconfig-controlplane-provider-id"}
    }
    assert authentication.reconcile(p, proxy_url).state == "ready"


def test_authentication_nonce_then_signed_nonce() -> None:
    p = make_run()
    local, remote = fakes(p)

    assert outcome(authentication.reconcile(p, None)) == waiting("authentication", "WaitingForNonce")
    nonce_secret = remote.obj(r.SECRET, naming.NONCE_SECRET, P_NS)
    assert labels_of(nonce_secret) == {naming.REMOTE_CLUSTER_ID: "consumer-id", naming.NONCE_LABEL: "true", **OWNER}
    assert "data" not in nonce_secret  # Liqo's nonce creator fills it
    assert local.store == {}

    assert outcome(authentication.reconcile(p, None)) == waiting("authentication", "WaitingForNonce")
    assert written(remote) == [("create", "secrets", P_NS, "liqo-nonce")]

    nonce_secret["data"] = {naming.NONCE_FIELD: NONCE}
    assert outcome(authentication.reconcile(p, None)) == waiting("authentication", "WaitingForSignedNonce")
    signed = local.obj(r.SECRET, naming.SIGNED_NONCE_SECRET, C_NS)
    assert signed["data"] == {naming.NONCE_FIELD: NONCE}
    assert labels_of(signed) == {
        naming.REMOTE_CLUSTER_ID: "provider-id",
        naming.SIGNED_NONCE_LABEL: "true",
        **OWNER,
    }

    result = authentication.reconcile(p, None)
    assert outcome(result) == waiting("authentication", "WaitingForSignedNonce")
    assert "sign the nonce" in result.message
    assert written(local) == [("create", "secrets", C_NS, "liqo-signed-nonce")]
    assert r.TENANT.kind not in remote.kinds()


def test_authentication_changed_provider_nonce_recreates_the_signed_nonce() -> None:
    p = make_run()
    local, remote = fakes(p)
    authentication_to_signed_nonce(p)

    fresh = base64.b64encode(b"nonce-2").decode()
    remote.obj(r.SECRET, naming.NONCE_SECRET, P_NS)["data"] = {naming.NONCE_FIELD: fresh}
    result = authentication.reconcile(p, None)
    assert outcome(result) == waiting("authentication", "WaitingForSignedNonce")
    assert "nonce changed" in result.message
    assert (r.SECRET.plural, C_NS, naming.SIGNED_NONCE_SECRET) not in local.store

    assert outcome(authentication.reconcile(p, None)) == waiting("authentication", "WaitingForSignedNonce")
    assert local.obj(r.SECRET, naming.SIGNED_NONCE_SECRET, C_NS)["data"] == {naming.NONCE_FIELD: fresh}
    assert r.TENANT.kind not in remote.kinds()


def test_authentication_missing_keys_raise_liqo_not_ready() -> None:
    p = make_run()
    _, remote = fakes(p)
    authentication_to_signed_nonce(p)

    with pytest.raises(LiqoNotReady, match=r"Secret liqo/authentication-keys is missing on the consumer"):
        authentication.reconcile(p, None)
    assert r.TENANT.kind not in remote.kinds()


def test_authentication_creates_the_tenant_with_a_csr_from_the_cluster_key() -> None:
    p = make_run()
    _, remote = fakes(p)

    result = authentication_to_tenant(p)

    assert outcome(result) == waiting("authentication", "WaitingForTenant")
    tenant = remote.obj(r.TENANT, "consumer-id", P_NS)
    assert labels_of(tenant) == {naming.REMOTE_CLUSTER_ID: "consumer-id", **OWNER}
    spec = tenant["spec"]
    assert set(spec) == {"clusterID", "publicKey", "csr", "signature"}  # no proxyURL unless asked
    assert spec["clusterID"] == "consumer-id"
    assert spec["signature"] == SIGNED
    assert base64.b64decode(spec["publicKey"]) == PUBLIC_PEM
    csr = x509.load_pem_x509_csr(base64.b64decode(spec["csr"]))
    assert csr.is_signature_valid
    assert csr.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "consumer-id"
    assert csr.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == "liqo.io"
    assert (
        csr.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        == PUBLIC_PEM
    )


def test_authentication_proxy_url_reaches_the_tenant() -> None:
    p = make_run()
    _, remote = fakes(p)
    authentication_to_tenant(p, "http://10.70.0.5:8118")
    assert remote.obj(r.TENANT, "consumer-id", P_NS)["spec"]["proxyURL"] == "http://10.70.0.5:8118"


def test_authentication_never_rewrites_an_existing_tenant() -> None:
    p = make_run()
    local, remote = fakes(p)
    authentication_to_tenant(p)
    tenant_before = remote.obj(r.TENANT, "consumer-id", P_NS)["spec"]

    # A new signature (and another proxy) must not touch the Tenant Liqo already signed a CSR for.
    sign_nonce(local, base64.b64encode(b"another-signature").decode())
    assert outcome(authentication.reconcile(p, "http://other:8118")) == waiting("authentication", "WaitingForTenant")
    assert remote.obj(r.TENANT, "consumer-id", P_NS)["spec"] == tenant_before
    assert [w for w in remote.writes if w[1][0] == "tenants"] == [("create", ("tenants", P_NS, "consumer-id"))]


def test_authentication_adopts_a_liqoctl_tenant_by_patching_labels_only() -> None:
    p = make_run()
    local, remote = fakes(p)
    liqoctl_spec = {"clusterID": "consumer-id", "csr": "bGlxb2N0bA==", "signature": "b2xk", "publicKey": "cGs="}
    remote.add(
        r.TENANT,
        {
            "metadata": {"name": "consumer-id", "namespace": P_NS, "labels": {naming.REMOTE_CLUSTER_ID: "consumer-id"}},
            "spec": liqoctl_spec,
        },
    )
    # No authentication-keys on the consumer: an existing Tenant needs no new CSR.
    authentication.reconcile(p, None)
    remote.obj(r.SECRET, naming.NONCE_SECRET, P_NS)["data"] = {naming.NONCE_FIELD: NONCE}
    authentication.reconcile(p, None)
    sign_nonce(local)

    result = authentication.reconcile(p, "http://proxy:8118")

    assert outcome(result) == waiting("authentication", "WaitingForTenant")
    tenant = remote.obj(r.TENANT, "consumer-id", P_NS)
    assert tenant["spec"] == liqoctl_spec
    assert labels_of(tenant) == {naming.REMOTE_CLUSTER_ID: "consumer-id", **OWNER}
    assert [w for w in remote.writes if w[1][0] == "tenants"] == [("merge_patch", ("tenants", P_NS, "consumer-id"))]


def test_authentication_waits_for_the_tenant_then_the_identity() -> None:
    p = make_run()
    local, remote = fakes(p)
    authentication_to_tenant(p)
    tenant = remote.obj(r.TENANT, "consumer-id", P_NS)

    tenant["status"] = {"authParams": AUTH_PARAMS}
    assert outcome(authentication.reconcile(p, None)) == waiting("authentication", "WaitingForTenant")
    tenant["status"] = {"authParams": {}, "tenantNamespace": "liqo-t-c"}
    assert outcome(authentication.reconcile(p, None)) == waiting("authentication", "WaitingForTenant")
    assert r.IDENTITY.kind not in local.kinds()

    tenant["status"] = {"authParams": AUTH_PARAMS, "tenantNamespace": "liqo-t-c"}
    assert outcome(authentication.reconcile(p, None)) == waiting("authentication", "WaitingForIdentity")
    identity = local.obj(r.IDENTITY, "controlplane-provider-id", C_NS)
    assert identity["spec"] == {
        "clusterID": "provider-id",
        "type": "ControlPlane",
        "authParams": AUTH_PARAMS,
        "namespace": "liqo-t-c",
    }
    assert labels_of(identity) == {naming.REMOTE_CLUSTER_ID: "provider-id", **OWNER}

    identity["status"] = {"kubeconfigSecretRef": {}}
    assert outcome(authentication.reconcile(p, None)) == waiting("authentication", "WaitingForIdentity")
    identity["status"] = {"kubeconfigSecretRef": {"name": "kubeconfig-controlplane-provider-id"}}
    result = authentication.reconcile(p, None)
    assert (result.stage, result.state, result.reason) == ("authentication", "ready", "Established")


# == offloading =======================================================================================


def accept_slice(
    local: FakeClusterClient, authentication_status: str = "Accepted", resources: str = "Accepted"
) -> None:
    local.obj(r.RESOURCE_SLICE, "provider-id", C_NS)["status"] = {
        "conditions": [
            {"type": "Authentication", "status": authentication_status},
            {"type": "Resources", "status": resources},
        ]
    }


def virtual_node(local: FakeClusterClient, kubelet: str, node: str) -> None:
    """The VirtualNode Liqo creates from the slice, with its own conditions (Running as soon as Liqo has
    asked for the virtual kubelet's Deployment: they do not mean the node is usable)."""
    local.add(
        r.VIRTUAL_NODE,
        {
            "metadata": {
                "name": "provider-id",
                "namespace": C_NS,
                "labels": {naming.REMOTE_CLUSTER_ID: "provider-id", "liqo.io/resourceslice-name": "provider-id"},
            },
            "spec": {"clusterID": "provider-id", "resourceQuota": {"hard": {"cpu": "1", "memory": "1Gi"}}},
            "status": {"conditions": [{"type": "VirtualKubelet", "status": kubelet}, {"type": "Node", "status": node}]},
        },
    )


def virtual_kubelet(local: FakeClusterClient, pod_ready: str | None = "True", node_ready: str | None = "True") -> None:
    """What Liqo's virtual kubelet brings up: its Pod in the tenant namespace, then the virtual Node."""
    ready = lambda status: {"conditions": [{"type": "Ready", "status": status}]}  # noqa: E731
    if pod_ready is not None:
        labels = {
            naming.VK_COMPONENT: naming.VK_COMPONENT_VALUE,
            naming.REMOTE_CLUSTER_ID: "provider-id",
            naming.VIRTUAL_NODE_LABEL: "provider-id",
        }
        local.add(
            r.POD,
            {"metadata": {"name": "vk-provider-id-1", "namespace": C_NS, "labels": labels}, "status": ready(pod_ready)},
        )
    if node_ready is not None:
        labels = {naming.VIRTUAL_NODE_TYPE: naming.VIRTUAL_NODE_TYPE_VALUE, naming.REMOTE_CLUSTER_ID: "provider-id"}
        local.add(r.NODE, {"metadata": {"name": "provider-id", "labels": labels}, "status": ready(node_ready)})


def test_offloading_applies_the_slice_and_waits_for_both_acceptances() -> None:
    p = make_run(make_spec(offloading={"resources": {"cpu": 4, "memory": "8Gi", "nvidia.com/gpu": 1}}))
    local, remote = fakes(p)

    assert outcome(offloading.reconcile(p)) == waiting("offloading", "WaitingForResourceSlice")
    slice_ = local.obj(r.RESOURCE_SLICE, "provider-id", C_NS)
    assert labels_of(slice_) == {
        naming.REMOTE_CLUSTER_ID: "provider-id",
        naming.REPLICATION: "true",
        naming.REMOTE_ID: "provider-id",
        **OWNER,
    }
    assert slice_["metadata"]["annotations"] == {naming.CREATE_VIRTUAL_NODE: "true"}
    assert slice_["spec"] == {
        "class": "default",
        "providerClusterID": "provider-id",
        "resources": {"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": "1"},
    }
    assert remote.store == {}  # Liqo replicates it, not the operator

    # liqoctl stops at Authentication=Accepted; the operator waits for Resources too.
    accept_slice(local, resources="Pending")
    assert outcome(offloading.reconcile(p)) == waiting("offloading", "WaitingForResourceSlice")
    accept_slice(local)
    assert outcome(offloading.reconcile(p)) == waiting("offloading", "WaitingForVirtualNode")


@pytest.mark.parametrize(
    ("auth_status", "res_status", "which"),
    [("Denied", "Accepted", "Authentication"), ("Accepted", "Denied", "Resources"), ("Denied", "Denied", "and")],
)
def test_offloading_denied_slice_raises(auth_status: str, res_status: str, which: str) -> None:
    p = make_run()
    local, _ = fakes(p)
    offloading.reconcile(p)
    accept_slice(local, auth_status, res_status)
    with pytest.raises(ResourceSliceDenied, match=which) as err:
        offloading.reconcile(p)
    assert err.value.transient is False
    assert f"ResourceSlice {C_NS}/provider-id" in err.value.message


def test_offloading_is_ready_from_the_virtual_kubelet_pods_and_the_virtual_node() -> None:
    """Liqo's own rule, read at its source (not the ForeignCluster, which lags up to a minute)."""
    p = make_run()
    local, _ = fakes(p)
    offloading.reconcile(p)
    accept_slice(local)

    assert outcome(offloading.reconcile(p)) == waiting("offloading", "WaitingForVirtualNode")
    virtual_node(local, "Running", "Running")  # the VirtualNode's own conditions are not enough
    assert outcome(offloading.reconcile(p)) == waiting("offloading", "WaitingForVirtualNode")
    virtual_kubelet(local, pod_ready="False", node_ready=None)
    assert "vk-provider-id-1 to be Ready" in offloading.reconcile(p).message
    virtual_kubelet(local, pod_ready="True", node_ready=None)
    assert "register its Node" in offloading.reconcile(p).message
    virtual_kubelet(local, pod_ready="True", node_ready="False")
    assert outcome(offloading.reconcile(p)) == waiting("offloading", "WaitingForVirtualNode")
    virtual_kubelet(local, pod_ready="True", node_ready="True")

    result = offloading.reconcile(p)
    assert (result.stage, result.state, result.reason) == ("offloading", "ready", "Established")
    assert "virtual Node provider-id is Ready" in result.message


def test_offloading_without_virtual_node_is_ready_once_accepted_and_deletes_one() -> None:
    p = make_run(make_spec(offloading={"createVirtualNode": False}))
    local, _ = fakes(p)
    virtual_node(local, "Running", "Running")  # left over from when it was requested

    assert outcome(offloading.reconcile(p)) == waiting("offloading", "WaitingForResourceSlice")
    assert local.obj(r.RESOURCE_SLICE, "provider-id", C_NS)["metadata"]["annotations"] == {
        naming.CREATE_VIRTUAL_NODE: "false"
    }
    assert local.obj(r.VIRTUAL_NODE, "provider-id", C_NS)  # not touched before the slice is accepted
    accept_slice(local)

    result = offloading.reconcile(p)
    assert (result.state, result.reason) == ("ready", "Established")
    assert "no virtual node requested" in result.message
    assert r.VIRTUAL_NODE.kind not in local.kinds()


def test_offloading_disabled_deletes_slice_and_virtual_node() -> None:
    p = make_run()
    local, _ = fakes(p)
    offloading.reconcile(p)
    accept_slice(local)
    virtual_node(local, "Running", "Running")
    virtual_kubelet(local)
    assert offloading.reconcile(p).state == "ready"

    p.spec = make_spec(offloading={"createResourceSlice": False, "createVirtualNode": False})
    result = offloading.reconcile(p)

    assert (result.stage, result.state, result.reason) == ("offloading", "disabled", "Disabled")
    assert local.kinds() == {"Pod", "Node"}  # Liqo removes the virtual kubelet with its VirtualNode
    deletes = len(local.deleted)
    assert offloading.reconcile(p).state == "disabled"
    assert len(local.deleted) == deletes  # nothing left to delete: no delete calls either


TWO_SLICES = {
    "resourceSlices": [
        {"name": "cpu", "resources": {"cpu": 4}},
        {"name": "gpu", "class": "gpu", "resources": {"nvidia.com/gpu": 1}},
    ]
}


def accept_named(local: FakeClusterClient, name: str, resources: str = "Accepted", reason: str = "") -> None:
    local.obj(r.RESOURCE_SLICE, name, C_NS)["status"] = {
        "conditions": [
            {"type": "Authentication", "status": "Accepted"},
            {"type": "Resources", "status": resources, **({"reason": reason} if reason else {})},
        ]
    }


def liqo_makes_virtual_node(local: FakeClusterClient, name: str, finalizers: bool = False) -> None:
    """What Liqo makes of an accepted slice: its VirtualNode (named and labelled after it, drained before it
    goes when ``finalizers``), the virtual kubelet's Pod and the Node, all Ready."""
    ready = {"conditions": [{"type": "Ready", "status": "True"}]}
    meta: dict[str, Any] = {
        "name": name,
        "namespace": C_NS,
        "labels": {naming.REMOTE_CLUSTER_ID: "provider-id", naming.RESOURCE_SLICE_NAME: name},
        **({"finalizers": ["liqo.io/virtualnode-controller"]} if finalizers else {}),
    }
    local.add(r.VIRTUAL_NODE, {"metadata": meta, "spec": {"clusterID": "provider-id"}})
    vk = {
        naming.VK_COMPONENT: naming.VK_COMPONENT_VALUE,
        naming.REMOTE_CLUSTER_ID: "provider-id",
        naming.VIRTUAL_NODE_LABEL: name,
    }
    local.add(r.POD, {"metadata": {"name": f"vk-{name}-1", "namespace": C_NS, "labels": vk}, "status": ready})
    local.add(r.NODE, {"metadata": {"name": name}, "status": ready})


def test_offloading_with_several_slices_waits_for_each_and_its_virtual_node() -> None:
    p = make_run(make_spec(offloading=TWO_SLICES))
    local, _ = fakes(p)

    result = offloading.reconcile(p)
    assert outcome(result) == waiting("offloading", "WaitingForResourceSlice")
    assert "ResourceSlice cpu" in result.message and "ResourceSlice gpu" in result.message
    assert {(o["metadata"]["name"], o["spec"]["class"]) for o in local.objects(r.RESOURCE_SLICE)} == {
        ("cpu", "default"),
        ("gpu", "gpu"),
    }
    assert local.obj(r.RESOURCE_SLICE, "gpu", C_NS)["spec"]["resources"] == {"nvidia.com/gpu": "1"}
    accept_named(local, "cpu")
    accept_named(local, "gpu")
    liqo_makes_virtual_node(local, "cpu")
    result = offloading.reconcile(p)
    assert outcome(result) == waiting("offloading", "WaitingForVirtualNode")
    assert result.message == "waiting for Liqo on the consumer to create the VirtualNode of ResourceSlice gpu"
    liqo_makes_virtual_node(local, "gpu")
    result = offloading.reconcile(p)
    assert (result.state, result.reason) == ("ready", "Established")
    assert "virtual Node cpu is Ready" in result.message and "virtual Node gpu is Ready" in result.message
    # At rest: nothing written.
    before = len(local.writes)
    assert offloading.reconcile(p).state == "ready"
    assert len(local.writes) == before and local.deleted == []


def test_a_slice_dropped_from_the_list_goes_alone_with_its_virtual_node() -> None:
    p = make_run(make_spec(offloading=TWO_SLICES))
    local, _ = fakes(p)
    offloading.reconcile(p)
    for name in ("cpu", "gpu"):
        accept_named(local, name)
        liqo_makes_virtual_node(local, name, finalizers=True)
    assert offloading.reconcile(p).state == "ready"
    kept = copy.deepcopy(local.obj(r.VIRTUAL_NODE, "cpu", C_NS))

    p.spec = make_spec(offloading={"resourceSlices": [TWO_SLICES["resourceSlices"][0]]})
    result = offloading.reconcile(p)
    # Liqo drains the virtual node before it goes: the stage says so until it has.
    assert outcome(result) == waiting("offloading", "RemovingResourceSlice")
    assert result.message == "removing VirtualNode gpu, no longer in spec.offloading"
    assert sorted(local.deleted) == [("resourceslices", C_NS, "gpu"), ("virtualnodes", C_NS, "gpu")]
    deletes = len(local.deleted)
    assert offloading.reconcile(p).reason == "RemovingResourceSlice"
    assert len(local.deleted) == deletes  # already going: not deleted again
    local.finish_deletions()
    result = offloading.reconcile(p)
    assert (result.state, result.message) == (
        "ready",
        "the ResourceSlice cpu is accepted and the virtual Node cpu is Ready",
    )
    assert local.obj(r.VIRTUAL_NODE, "cpu", C_NS) == kept  # the other one untouched
    assert local.obj(r.RESOURCE_SLICE, "cpu", C_NS)


def test_switching_from_the_single_slice_to_a_list_replaces_it() -> None:
    p = make_run()
    local, _ = fakes(p)
    offloading.reconcile(p)
    accept_slice(local)
    liqo_makes_virtual_node(local, "provider-id")
    assert offloading.reconcile(p).state == "ready"

    p.spec = make_spec(offloading={"resourceSlices": [{"name": "cpu"}]})
    result = offloading.reconcile(p)
    assert outcome(result) == waiting("offloading", "WaitingForResourceSlice")
    assert ("resourceslices", C_NS, "provider-id") in local.deleted
    assert ("virtualnodes", C_NS, "provider-id") in local.deleted
    assert [o["metadata"]["name"] for o in local.objects(r.RESOURCE_SLICE)] == ["cpu"]


def test_a_denied_slice_of_the_list_names_its_own_fields() -> None:
    p = make_run(make_spec(offloading=TWO_SLICES))
    local, _ = fakes(p)
    offloading.reconcile(p)
    accept_named(local, "cpu")
    accept_named(local, "gpu", resources="Denied", reason=DEFAULT_CLASS_DISABLED)
    with pytest.raises(ResourceSliceDenied) as denied:
        offloading.reconcile(p)
    message = denied.value.message
    assert f"ResourceSlice {C_NS}/gpu" in message and "/cpu" not in message
    assert "set spec.offloading.resourceSlices[1].class to a class the provider serves" in message


def test_offloading_disabled_keeps_a_slice_made_by_liqoctl() -> None:
    """A ResourceSlice of the same name without this peering's labels (liqoctl peer) and its node stay."""
    p = make_run(make_spec(offloading={"createResourceSlice": False, "createVirtualNode": False}))
    local, _ = fakes(p)
    local.add(
        r.RESOURCE_SLICE,
        {
            "metadata": {"name": "provider-id", "namespace": C_NS, "labels": {naming.REMOTE_CLUSTER_ID: "provider-id"}},
            "spec": {"class": "default", "providerClusterID": "provider-id"},
        },
    )
    virtual_node(local, "Running", "Running")

    assert offloading.reconcile(p).state == "disabled"
    assert local.kinds() == {"ResourceSlice", "VirtualNode"}
    assert local.writes == []


# == idempotency ======================================================================================


def _no_writes_on_another_pass(p: PeeringRun, again: Any) -> None:
    local, remote = fakes(p)
    before = (len(local.writes), len(remote.writes), len(local.store), len(remote.store))
    versions = {k: o["metadata"].get("resourceVersion") for k, o in {**local.store, **remote.store}.items()}
    result = again()
    assert result.state == "ready"
    assert written(local, before[0]) == [] and written(remote, before[1]) == []
    assert (len(local.writes), len(remote.writes), len(local.store), len(remote.store)) == before
    assert {k: o["metadata"].get("resourceVersion") for k, o in {**local.store, **remote.store}.items()} == versions


def test_ready_networking_pass_writes_nothing() -> None:
    p = make_run()
    networking_to_ready(p)
    _no_writes_on_another_pass(p, lambda: networking.reconcile(p))


def test_ready_authentication_pass_writes_nothing() -> None:
    p = make_run()
    authentication_to_ready(p, "http://proxy:8118")
    _no_writes_on_another_pass(p, lambda: authentication.reconcile(p, "http://proxy:8118"))


@pytest.mark.parametrize("create_virtual_node", [True, False])
def test_ready_offloading_pass_writes_nothing(create_virtual_node: bool) -> None:
    p = make_run(make_spec(offloading={"createVirtualNode": create_virtual_node, "resources": {"cpu": "2"}}))
    local, _ = fakes(p)
    offloading.reconcile(p)
    accept_slice(local)
    if create_virtual_node:
        virtual_node(local, "Running", "Running")
        virtual_kubelet(local)
    assert offloading.reconcile(p).state == "ready"
    _no_writes_on_another_pass(p, lambda: offloading.reconcile(p))


def _liqo_writes_everything_back(client: FakeClusterClient) -> None:
    for plural, ns, name in list(client.store):
        res = next(x for x in vars(r).values() if isinstance(x, r.Resource) and x.plural == plural)
        client.typed_update(res, name, ns)


def test_a_ready_peering_is_quiet_at_rest_while_liqo_rewrites_its_objects() -> None:
    """Liqo's controllers write the objects back through Go structs (omitempty, canonical quantities);
    the next passes must find nothing to write, on either cluster, and bump no generation."""
    spec = make_spec(offloading={"resources": {"cpu": "1000m", "memory": "1024Mi", "pods": 110}})
    p = make_run(spec)
    local, remote = fakes(p)
    networking_to_ready(p)
    authentication_to_ready(p, None)
    offloading.reconcile(p)
    accept_slice(local)
    virtual_node(local, "Running", "Running")
    virtual_kubelet(local)
    for client in (local, remote):
        _liqo_writes_everything_back(client)
    generations = {k: o["metadata"].get("generation") for k, o in {**local.store, **remote.store}.items()}
    for _ in range(3):
        before = (len(local.writes), len(remote.writes))
        assert networking.reconcile(p).state == "ready"
        assert authentication.reconcile(p, None).state == "ready"
        assert offloading.reconcile(p).state == "ready"
        assert (len(local.writes), len(remote.writes)) == before
        for client in (local, remote):
            _liqo_writes_everything_back(client)
    assert {k: o["metadata"].get("generation") for k, o in {**local.store, **remote.store}.items()} == generations


def test_the_status_detail_is_read_from_the_objects_of_the_peering_and_quiet_at_rest() -> None:
    """What liqoctl info peer shows, read by the engine from both clusters: the same on every pass at rest,
    and no write for it."""
    p = make_run(make_spec(offloading={"resources": {"cpu": "1", "memory": "1Gi"}}))
    local, remote = fakes(p)
    networking_to_ready(p)
    local.obj(r.CONFIGURATION, "provider-id", C_NS)["status"]["remote"] = {"cidr": {"pod": ["10.99.0.0/16"]}}
    authentication_to_ready(p, None)
    offloading.reconcile(p)
    accept_slice(local)
    local.obj(r.RESOURCE_SLICE, "provider-id", C_NS)["status"]["resources"] = {"cpu": "1", "memory": "1Gi"}
    virtual_node(local, "Running", "Running")
    virtual_kubelet(local)
    # A copy Liqo replicated in from the provider (the reverse direction's slice) is not this cluster's own.
    replica_labels = {naming.REMOTE_CLUSTER_ID: "provider-id", detail.REPLICATED: "true"}
    local.add(r.RESOURCE_SLICE, {"metadata": {"name": "consumer-id", "namespace": C_NS, "labels": replica_labels}})
    writes = (len(local.writes), len(remote.writes))

    shown = detail.observe(p, None)
    assert shown == detail.observe(p, None)
    assert (len(local.writes), len(remote.writes)) == writes
    assert shown["network"] == {
        "provider": {
            "podCIDRs": list(CTX.provider.pod_cidrs),
            "externalCIDRs": [CTX.provider.external_cidr],
            "remappedPodCIDRs": ["10.99.0.0/16"],
        },
        "consumer": {"podCIDRs": list(CTX.consumer.pod_cidrs), "externalCIDRs": [CTX.consumer.external_cidr]},
    }
    assert shown["gateway"] == {"server": "Provider", **SERVER_ENDPOINT}
    assert [(s["name"], s["action"], s["accepted"], s.get("granted")) for s in shown["resourceSlices"]] == [
        ("provider-id", "Consuming", True, {"cpu": "1", "memory": "1Gi"})
    ]
    assert shown["virtualNodes"] == [
        {
            "name": "provider-id",
            "ready": True,
            "resourceSlice": "provider-id",
            "resources": {"cpu": "1", "memory": "1Gi"},
        }
    ]
    assert shown["apiServer"] == {"address": AUTH_PARAMS["apiServer"]}

    # Without networking there is no network or gateway to show.
    off = make_run(make_spec(networking={"enabled": False}))
    off_local, off_remote = fakes(off)
    off_local.store, off_remote.store = local.store, remote.store
    assert detail.observe(off, None)["network"] is None and detail.observe(off, None)["gateway"] is None


def _unreachable_dialing(address: str) -> str:
    """The message of a tunnel in Error, the client dialing ``address``:4000."""
    p = make_run(make_spec(networking={"gatewayClient": {"address": address, "port": 4000}}))
    local, _ = fakes(p)
    networking_to_ready(p)
    local.obj(r.CONNECTION, "conn-provider-id", C_NS)["status"]["value"] = "Error"
    with pytest.raises(GatewayUnreachable) as err:
        networking.reconcile(p)
    return err.value.message


def test_a_connection_error_names_the_endpoint_the_client_dials() -> None:
    message = _unreachable_dialing("203.0.113.7")
    assert "gateway server on the provider at udp://203.0.113.7:4000:" in message
    assert "Open udp://203.0.113.7:4000 from the consumer's gateway to the provider" in message


def test_a_gateway_hostname_that_does_not_resolve_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dns, "unresolved", lambda host: "does not resolve" if host == "gw.example.com" else None)
    message = _unreachable_dialing("gw.example.com")
    assert "at udp://gw.example.com:4000:" in message
    assert "from the operator's Pod, gw.example.com does not resolve" in message


def test_the_fake_shows_a_write_war_when_an_apply_sends_what_liqo_drops() -> None:
    """The bug this guards against: an empty map applied every pass, dropped by Liqo every time."""
    local = FakeClusterClient("consumer")
    body = {"metadata": {"name": "provider-id", "namespace": C_NS}, "spec": {"class": "default", "resources": {}}}
    local.apply(r.RESOURCE_SLICE, body)
    generations = []
    for _ in range(3):
        assert local.typed_update(r.RESOURCE_SLICE, "provider-id", C_NS)  # Liqo drops the empty map
        local.apply(r.RESOURCE_SLICE, body)  # and a blind apply puts it back
        generations.append(local.obj(r.RESOURCE_SLICE, "provider-id", C_NS)["metadata"]["generation"])
    assert generations == sorted(set(generations)) and len(generations) == 3
    # ensure() compares the way Liqo stores: nothing to write.
    local.typed_update(r.RESOURCE_SLICE, "provider-id", C_NS)
    writes = len(local.writes)
    local.ensure(r.RESOURCE_SLICE, body)
    assert len(local.writes) == writes


# == discovery ========================================================================================


def liqo_installed(
    client: FakeClusterClient,
    cluster_id: str,
    *,
    pod_cidrs: tuple[str, ...],
    external: str | None,
    version: str | None = "v1.2.0",
) -> None:
    labels = {"app.kubernetes.io/name": "clusterid-configmap"}
    if version is not None:
        labels["app.kubernetes.io/version"] = version
    client.add(
        r.CONFIGMAP,
        {
            "metadata": {"name": "liqo-clusterid-configmap", "namespace": "liqo", "labels": labels},
            "data": {naming.CLUSTER_ID_KEY: cluster_id},
        },
    )
    networks = [("pod-cidr", cidr) for cidr in pod_cidrs] + [("external-cidr", external)]
    for i, (kind, cidr) in enumerate(networks):
        client.add(
            r.NETWORK,
            {
                "metadata": {"name": f"net-{i}", "namespace": "liqo", "labels": {naming.NETWORK_TYPE: kind}},
                "status": {"cidr": cidr} if cidr else {},
            },
        )


def test_cluster_info_reads_id_and_cidrs() -> None:
    client = FakeClusterClient("provider")
    liqo_installed(client, "provider-id", pod_cidrs=("10.200.0.0/16", "10.201.0.0/16"), external="10.210.0.0/16")
    # A Network of another type is not a pod CIDR.
    client.add(
        r.NETWORK,
        {
            "metadata": {"name": "svc", "namespace": "liqo", "labels": {naming.NETWORK_TYPE: "service-cidr"}},
            "status": {"cidr": "10.96.0.0/12"},
        },
    )
    configmap = client.obj(r.CONFIGMAP, "liqo-clusterid-configmap", "liqo")
    configmap["metadata"]["uid"] = "cm-uid"
    found = discovery.cluster_info(client, "liqo", discovery.VersionCache())
    assert found == dataclasses.replace(
        PROVIDER,
        liqo_version=versions.from_label("v1.2.0"),
        kubernetes_version="v1.35.0",
        identity=("cm-uid", configmap["metadata"]["resourceVersion"]),
    )
    # The chart's label says the version: no discovery document is read for it.
    assert client.path_reads == ["/version"]


def test_the_cluster_id_configmap_as_discovery_read_it_is_the_same_identity() -> None:
    """A pass reuses the last discovery only while Liqo's cluster-ID ConfigMap is the one it read: an upgrade
    (its labels) or a reinstall (a new object) is discovered again, as is a Liqo gone."""
    client = FakeClusterClient("provider")
    liqo_installed(client, "provider-id", pod_cidrs=("10.200.0.0/16",), external="10.210.0.0/16")
    found = discovery.cluster_info(client, "liqo", discovery.VersionCache())
    assert discovery.same_identity(client, found)
    client.obj(r.CONFIGMAP, "liqo-clusterid-configmap", "liqo")["metadata"]["resourceVersion"] = "upgraded"
    assert not discovery.same_identity(client, found)
    client.store.clear()
    assert not discovery.same_identity(client, found)


def test_cluster_info_reads_kubernetes_version_once_per_client() -> None:
    client = FakeClusterClient("provider")
    liqo_installed(client, "provider-id", pod_cidrs=("10.200.0.0/16",), external="10.210.0.0/16")
    cache = discovery.VersionCache()
    discovery.cluster_info(client, "liqo", cache)
    discovery.cluster_info(client, "liqo", cache)
    assert client.path_reads == ["/version"]
    other = FakeClusterClient("provider")
    liqo_installed(other, "provider-id", pod_cidrs=("10.200.0.0/16",), external="10.210.0.0/16")
    other.paths["/version"] = {"gitVersion": "v1.34.2"}
    assert discovery.cluster_info(other, "liqo", cache).kubernetes_version == "v1.34.2"


@pytest.mark.parametrize(
    ("label", "paths", "shown"),
    [
        ("v1.1.2", {}, "v1.1.2"),
        # A development build: the API's shape tells what it can.
        ("0123456789abcdef0123456789abcdef01234567", {}, "unknown, v1.2 or newer (development build 0123456789"),
        (
            None,
            {"/openapi/v3/apis/core.liqo.io/v1beta1": {"components": {"schemas": {"x.ForeignCluster": {}}}}},
            "unknown, v1.0 or newer (no version label)",
        ),
    ],
    ids=["label", "commit-sha-v1.2-shape", "no-label-v1.0-shape"],
)
def test_cluster_info_liqo_version(label: str | None, paths: dict[str, Any], shown: str) -> None:
    client = FakeClusterClient("consumer")
    client.paths.update(paths)
    liqo_installed(client, "consumer-id", pod_cidrs=("10.1.0.0/16",), external="10.2.0.0/16", version=label)
    assert discovery.cluster_info(client, "liqo", discovery.VersionCache()).liqo_version.describe().startswith(shown)


@pytest.mark.parametrize(
    ("label", "found"),
    [("v0.10.3", "v0.10.3"), (None, "older than v1.0 (no version label)")],
    ids=["label", "no-authentication-group"],
)
def test_cluster_info_refuses_liqo_before_1_0(label: str | None, found: str) -> None:
    client = FakeClusterClient("provider")
    del client.paths["/apis/authentication.liqo.io"]
    liqo_installed(client, "provider-id", pod_cidrs=("10.1.0.0/16",), external="10.2.0.0/16", version=label)
    with pytest.raises(LiqoVersionUnsupported) as err:
        discovery.cluster_info(client, "liqo", discovery.VersionCache())
    assert (err.value.reason, err.value.side, err.value.found) == ("LiqoVersionUnsupported", "provider", found)
    assert err.value.supported == versions.SUPPORTED_RANGE
    assert err.value.transient is False


@pytest.mark.parametrize(
    ("side", "field"), [("consumer", "spec.liqoNamespace"), ("provider", "spec.remoteLiqoNamespace")]
)
def test_cluster_info_without_cluster_id_configmap_is_not_installed(side: str, field: str) -> None:
    client = FakeClusterClient(side)
    # A ConfigMap without the label is not Liqo's.
    client.add(
        r.CONFIGMAP,
        {"metadata": {"name": "liqo-clusterid-configmap", "namespace": "liqo"}, "data": {"CLUSTER_ID": "x"}},
    )
    with pytest.raises(LiqoNotInstalled) as err:
        discovery.cluster_info(client, "liqo", discovery.VersionCache())
    assert f"of the {side} cluster" in err.value.message
    assert field in err.value.message
    assert "'liqo'" in err.value.message


def test_cluster_info_without_network_crd_is_not_installed() -> None:
    client = FakeClusterClient("consumer", not_served={"networks"})
    liqo_installed_cm = {
        "metadata": {"name": "cm", "namespace": "liqo", "labels": {"app.kubernetes.io/name": "clusterid-configmap"}},
        "data": {naming.CLUSTER_ID_KEY: "consumer-id"},
    }
    client.add(r.CONFIGMAP, liqo_installed_cm)
    with pytest.raises(LiqoNotInstalled, match=r"does not serve networks.ipam.liqo.io"):
        discovery.cluster_info(client, "liqo", discovery.VersionCache())


@pytest.mark.parametrize(
    ("pod_cidrs", "external"),
    [(("10.1.0.0/16",), None), ((None,), "10.2.0.0/16"), ((), "10.2.0.0/16")],
    ids=["no-external-cidr", "pod-network-without-status", "no-pod-network"],
)
def test_cluster_info_networks_without_cidr_are_not_ready(pod_cidrs: tuple[Any, ...], external: str | None) -> None:
    client = FakeClusterClient("consumer")
    liqo_installed(client, "consumer-id", pod_cidrs=pod_cidrs, external=external)
    with pytest.raises(LiqoNotReady, match=r"consumer cluster .* has not published its pod and external CIDRs"):
        discovery.cluster_info(client, "liqo", discovery.VersionCache())


def test_ensure_tenant_namespace_finds_a_labelled_namespace_of_any_name() -> None:
    client = FakeClusterClient("consumer")
    client.add(
        r.NAMESPACE,
        {
            "metadata": {
                "name": "made-by-liqoctl",
                "labels": {naming.REMOTE_CLUSTER_ID: "provider-id", naming.TENANT_NAMESPACE_LABEL: "true"},
            }
        },
    )
    # Another peer's tenant namespace does not count.
    client.add(
        r.NAMESPACE,
        {
            "metadata": {
                "name": "aaa",
                "labels": {naming.REMOTE_CLUSTER_ID: "other", naming.TENANT_NAMESPACE_LABEL: "true"},
            }
        },
    )
    assert discovery.ensure_tenant_namespace(client, "provider-id", OWNER) == "made-by-liqoctl"
    assert client.writes == []


def test_ensure_tenant_namespace_creates_the_default_one() -> None:
    client = FakeClusterClient("provider")
    assert discovery.ensure_tenant_namespace(client, "consumer-id", OWNER) == "liqo-tenant-consumer-id"
    ns = client.obj(r.NAMESPACE, "liqo-tenant-consumer-id")
    assert labels_of(ns) == {
        naming.REMOTE_CLUSTER_ID: "consumer-id",
        naming.TENANT_NAMESPACE_LABEL: "true",
        "pod-security.kubernetes.io/enforce": "privileged",
        "pod-security.kubernetes.io/audit": "privileged",
        "pod-security.kubernetes.io/warn": "privileged",
        **OWNER,
    }
    assert written(client) == [("create", "namespaces", None, "liqo-tenant-consumer-id")]
    assert discovery.ensure_tenant_namespace(client, "consumer-id", OWNER) == "liqo-tenant-consumer-id"
    assert len(client.writes) == 1


def test_read_remote_kubeconfig_missing_secret() -> None:
    client = FakeClusterClient("consumer")
    with pytest.raises(SecretNotFound, match=r"Secret team-a/provider-kubeconfig not found.*key 'kubeconfig'"):
        discovery.read_remote_kubeconfig(client, "team-a", "to-provider", make_spec(), discovery.KubeconfigPolicy())


def test_read_remote_kubeconfig_missing_key_lists_keys_never_values() -> None:
    client = FakeClusterClient("consumer")
    secret_value = base64.b64encode(b"token: super-secret-value").decode()
    client.add(
        r.SECRET,
        {
            "metadata": {"name": "provider-kubeconfig", "namespace": "team-a"},
            "data": {"value": secret_value, "config": secret_value},
        },
    )
    with pytest.raises(SecretKeyMissing) as err:
        discovery.read_remote_kubeconfig(client, "team-a", "to-provider", make_spec(), discovery.KubeconfigPolicy())
    assert "no key 'kubeconfig' (keys: config, value)" in err.value.message
    assert "spec.remoteKubeconfigSecretRef.key" in err.value.message
    assert secret_value not in err.value.message and "super-secret" not in err.value.message


def test_read_remote_kubeconfig_uses_the_configured_key() -> None:
    client = FakeClusterClient("consumer")
    kubeconfig = """
apiVersion: v1
kind: Config
current-context: p
contexts: [{name: p, context: {cluster: p, user: p}}]
clusters: [{name: p, cluster: {server: "https://provider.example:6443"}}]
users: [{name: p, user: {token: abc}}]
"""
    client.add(
        r.SECRET,
        {
            "metadata": {"name": "provider-kubeconfig", "namespace": "team-a"},
            "data": {"kubeconfig": "", "other": base64.b64encode(kubeconfig.encode()).decode()},
        },
    )
    spec = make_spec(remoteKubeconfigSecretRef={"name": "provider-kubeconfig", "key": "other"})
    loaded = discovery.read_remote_kubeconfig(client, "team-a", "to-provider", spec, discovery.KubeconfigPolicy())
    assert loaded.server == "https://provider.example:6443"
    # An empty value counts as missing.
    with pytest.raises(SecretKeyMissing, match=r"keys: kubeconfig, other"):
        discovery.read_remote_kubeconfig(client, "team-a", "to-provider", make_spec(), discovery.KubeconfigPolicy())


# == in-band authentication ============================================================================


def test_in_band_waits_for_the_proxy_address_and_writes_nothing() -> None:
    p = make_run(make_spec(authentication={"inBand": True}))
    local, remote = fakes(p)
    result = authentication.reconcile_in_band(p, None)
    assert outcome(result) == waiting("authentication", "WaitingForProxyAddress")
    assert "liqo/api-server-proxy" in result.message and "proxyURL" in result.message
    assert local.writes == [] and remote.writes == []


def test_in_band_tenant_gets_the_provider_proxy_ip_remapped_on_the_consumer() -> None:
    p = make_run(make_spec(authentication={"inBand": True}))
    local, remote = fakes(p)
    remote.add(r.IP, {"metadata": {"name": "api-server-proxy", "namespace": "liqo"}, "status": {"ip": "10.210.0.2"}})
    local.add(
        r.CONFIGURATION,
        {
            "metadata": {"name": "provider-id", "namespace": C_NS},
            "spec": {"remote": {"cidr": {"pod": ["10.200.0.0/16"], "external": ["10.210.0.0/16"]}}},
            "status": {"remote": {"cidr": {"pod": ["10.200.0.0/16"], "external": ["10.81.0.0/16"]}}},
        },
    )
    result = authentication_to_tenant(p, None, authentication.reconcile_in_band)
    assert outcome(result) == waiting("authentication", "WaitingForTenant")
    assert remote.obj(r.TENANT, "consumer-id", P_NS)["spec"]["proxyURL"] == "http://10.81.0.2:8118"


def test_in_band_with_a_proxy_url_uses_it_as_given() -> None:
    p = make_run(make_spec(authentication={"inBand": True, "proxyURL": "http://proxy:8118"}))
    _, remote = fakes(p)
    authentication_to_tenant(p, "http://proxy:8118", authentication.reconcile_in_band)
    assert remote.obj(r.TENANT, "consumer-id", P_NS)["spec"]["proxyURL"] == "http://proxy:8118"
