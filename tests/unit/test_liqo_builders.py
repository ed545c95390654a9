"""Unit tests for the Liqo object builders (liqo_peering.liqo.*), checked against the facts sheet."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.x509.name import _ASN1Type
from cryptography.x509.oid import NameOID

from liqo_peering.api.model import (
    ApiServerSpec,
    GatewayClientSpec,
    GatewayServerSpec,
    NetworkingSpec,
    OffloadingSpec,
)
from liqo_peering.errors import LiqoNotReady
from liqo_peering.liqo import authentication as auth
from liqo_peering.liqo import naming, networking, offloading, tenancy
from liqo_peering.liqo.context import ClusterInfo, PeeringContext, metadata
from liqo_peering.liqo.stored import canonical_quantity, covers, overlay, prune

CONSUMER = ClusterInfo("consumer-id", ("10.100.0.0/16",), "10.110.0.0/16")
PROVIDER = ClusterInfo("provider-id", ("10.200.0.0/16", "10.201.0.0/16"), "10.210.0.0/16", liqo_namespace="liqo-p")
C_NS = "liqo-tenant-provider-id"  # on the consumer, for the provider
P_NS = "liqo-tenant-consumer-id"  # on the provider, for the consumer
OWNER = {
    "app.kubernetes.io/managed-by": "liqo-peering-operator",
    "peering.liqo-operator.io/peering-namespace": "team-a",
    "peering.liqo-operator.io/peering-name": "to-provider",
}


@pytest.fixture
def ctx() -> PeeringContext:
    return PeeringContext("team-a", "to-provider", CONSUMER, PROVIDER, consumer_tenant_ns=C_NS, provider_tenant_ns=P_NS)


def labels_for(remote: str, **extra: str) -> dict[str, str]:
    return {"liqo.io/remote-cluster-id": remote, **OWNER, **extra}


# -- naming and context ----------------------------------------------------------------------


def test_naming_helpers() -> None:
    assert naming.tenant_namespace("abc") == "liqo-tenant-abc"
    assert naming.gateway_deployment("abc") == "gw-abc"
    assert naming.identity_name("abc") == "controlplane-abc"
    assert naming.owner_labels("ns", "n") == {
        "app.kubernetes.io/managed-by": "liqo-peering-operator",
        "peering.liqo-operator.io/peering-namespace": "ns",
        "peering.liqo-operator.io/peering-name": "n",
    }
    assert naming.owner_selector("ns", "n") == (
        "app.kubernetes.io/managed-by=liqo-peering-operator,"
        "peering.liqo-operator.io/peering-namespace=ns,peering.liqo-operator.io/peering-name=n"
    )


def test_context_labels(ctx: PeeringContext) -> None:
    assert ctx.owner == OWNER
    assert ctx.labels("x") == labels_for("x")
    assert ctx.labels("x", extra="1") == labels_for("x", extra="1")


def test_metadata_omits_empty_namespace_and_annotations() -> None:
    assert metadata("n", None, {"a": "b"}) == {"name": "n", "labels": {"a": "b"}}
    assert metadata("n", "", {}) == {"name": "n", "labels": {}}
    assert metadata("n", "ns", {}, {"k": "v"}) == {
        "name": "n",
        "namespace": "ns",
        "labels": {},
        "annotations": {"k": "v"},
    }


def test_tenant_namespace() -> None:
    ns = tenancy.tenant_namespace("provider-id", C_NS, OWNER)
    assert ns["apiVersion"] == "v1" and ns["kind"] == "Namespace"
    assert ns["metadata"]["name"] == C_NS
    assert "namespace" not in ns["metadata"]
    assert ns["metadata"]["labels"] == {
        "liqo.io/remote-cluster-id": "provider-id",
        "liqo.io/tenant-namespace": "true",
        "pod-security.kubernetes.io/enforce": "privileged",
        "pod-security.kubernetes.io/audit": "privileged",
        "pod-security.kubernetes.io/warn": "privileged",
        **OWNER,
    }
    assert tenancy.tenant_namespace_selector("provider-id") == (
        "liqo.io/remote-cluster-id=provider-id,liqo.io/tenant-namespace=true"
    )


# -- networking ------------------------------------------------------------------------------


def test_configuration_describes_the_other_cluster(ctx: PeeringContext) -> None:
    on_consumer = networking.configuration(ctx, ctx.provider, C_NS)
    assert on_consumer == {
        "apiVersion": "networking.liqo.io/v1beta1",
        "kind": "Configuration",
        "metadata": {"name": "provider-id", "namespace": C_NS, "labels": labels_for("provider-id")},
        "spec": {"remote": {"cidr": {"pod": ["10.200.0.0/16", "10.201.0.0/16"], "external": ["10.210.0.0/16"]}}},
    }
    on_provider = networking.configuration(ctx, ctx.consumer, P_NS)
    assert on_provider["metadata"] == {"name": "consumer-id", "namespace": P_NS, "labels": labels_for("consumer-id")}
    assert on_provider["spec"]["remote"]["cidr"] == {"pod": ["10.100.0.0/16"], "external": ["10.110.0.0/16"]}


def cfg(generation: int, conditions: list[dict[str, Any]] | None = None, remote: Any = None) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if conditions is not None:
        status["conditions"] = conditions
    if remote is not None:
        status["remote"] = remote
    return {"metadata": {"name": "x", "generation": generation}, "status": status}


def cidrs(status: str, observed: int | None) -> dict[str, Any]:
    return {"type": "NetworkCIDRsConfigured", "status": status, "observedGeneration": observed}


@pytest.mark.parametrize(
    ("obj", "ready"),
    [
        (cfg(2, [cidrs("True", 2)]), True),
        (cfg(3, [cidrs("True", 2)]), False),  # stale: Liqo has not seen the new spec yet
        (cfg(2, [cidrs("False", 2)]), False),
        (cfg(2, [cidrs("Unknown", 2)]), False),
        (cfg(2, [cidrs("True", None)]), False),
        (cfg(2, [{"type": "Other", "status": "True", "observedGeneration": 2}, cidrs("True", 2)]), True),
        # v1.2 condition wins over the old field
        (cfg(2, [cidrs("False", 2)], remote={"cidr": {"pod": ["10.0.0.0/16"]}}), False),
        # v1.1 and older: status.remote set
        (cfg(1, None, remote={"cidr": {"pod": ["10.71.0.0/16"], "external": ["10.70.0.0/16"]}}), True),
        # ... both the pod and the external CIDR, as liqoctl's IsConfigurationStatusSet wants them
        (cfg(1, [], remote={"cidr": {"pod": ["10.71.0.0/16"]}}), False),
        (cfg(1), False),
        ({"metadata": {"name": "x"}}, False),
        ({"metadata": {"name": "x", "generation": 1}, "status": None}, False),
    ],
)
def test_configuration_ready(obj: dict[str, Any], ready: bool) -> None:
    assert networking.configuration_ready(obj) is ready


def test_gateway_server_defaults(ctx: PeeringContext) -> None:
    server = networking.gateway_server(ctx, NetworkingSpec())
    assert server == {
        "apiVersion": "networking.liqo.io/v1beta1",
        "kind": "GatewayServer",
        "metadata": {"name": "consumer-id", "namespace": P_NS, "labels": labels_for("consumer-id")},
        "spec": {
            "mtu": 1340,
            "endpoint": {"port": 51840, "serviceType": "LoadBalancer"},
            "serverTemplateRef": {
                "apiVersion": "networking.liqo.io/v1beta1",
                "kind": "WgGatewayServerTemplate",
                "name": "wireguard-server",
                "namespace": "liqo-p",  # the provider's Liqo namespace: the server runs there
            },
        },
    }


def test_gateway_server_node_port_and_load_balancer_ip(ctx: PeeringContext) -> None:
    node_port = NetworkingSpec(mtu=1420, gateway_server=GatewayServerSpec(service_type="NodePort", node_port=30001))
    spec = networking.gateway_server(ctx, node_port)["spec"]
    assert spec["mtu"] == 1420
    assert spec["endpoint"] == {"port": 51840, "serviceType": "NodePort", "nodePort": 30001}
    lb = NetworkingSpec(gateway_server=GatewayServerSpec.model_validate({"port": 4444, "loadBalancerIP": "192.0.2.7"}))
    assert networking.gateway_server(ctx, lb)["spec"]["endpoint"] == {
        "port": 4444,
        "serviceType": "LoadBalancer",
        "loadBalancerIP": "192.0.2.7",
    }


SERVER_STATUS_ENDPOINT = {"addresses": ["203.0.113.5"], "port": 32000, "protocol": "UDP"}


def test_gateways_follow_the_location(ctx: PeeringContext) -> None:
    """liqoctl's places: each gateway is named after the other cluster, in its own cluster's tenant namespace,
    with its own cluster's Liqo namespace for its template; Consumer swaps the two clusters' roles."""
    assert networking.gateways(ctx, "Provider") == networking.Gateways(
        server_side="provider",
        client_side="consumer",
        server_name="consumer-id",
        server_namespace=P_NS,
        server_template_namespace="liqo-p",
        client_name="provider-id",
        client_namespace=C_NS,
        client_template_namespace="liqo",
    )
    on_consumer = networking.gateways(ctx, "Consumer")
    assert on_consumer == networking.Gateways(
        server_side="consumer",
        client_side="provider",
        server_name="provider-id",
        server_namespace=C_NS,
        server_template_namespace="liqo",
        client_name="consumer-id",
        client_namespace=P_NS,
        client_template_namespace="liqo-p",
    )
    assert on_consumer.location == "Consumer" and networking.gateways(ctx, "Provider").location == "Provider"


def test_gateways_on_the_consumer_side(ctx: PeeringContext) -> None:
    """location Consumer: the server (with every Service parameter) on the consumer, named after the provider;
    the client on the provider, named after the consumer, with the overrides of spec.networking.gatewayClient."""
    spec = NetworkingSpec.model_validate(
        {
            "mtu": 1300,
            "gatewayServer": {"location": "Consumer", "serviceType": "NodePort", "nodePort": 30001},
            "gatewayClient": {"port": 40000},
        }
    )
    server = networking.gateway_server(ctx, spec)
    assert server["metadata"] == {"name": "provider-id", "namespace": C_NS, "labels": labels_for("provider-id")}
    assert server["spec"]["endpoint"] == {"port": 51840, "serviceType": "NodePort", "nodePort": 30001}
    assert server["spec"]["serverTemplateRef"]["namespace"] == "liqo"  # the consumer's Liqo namespace
    client = networking.gateway_client(ctx, spec, SERVER_STATUS_ENDPOINT)
    assert client["metadata"] == {"name": "consumer-id", "namespace": P_NS, "labels": labels_for("consumer-id")}
    assert client["spec"]["mtu"] == 1300
    assert client["spec"]["endpoint"] == {"addresses": ["203.0.113.5"], "port": 40000, "protocol": "UDP"}
    assert client["spec"]["clientTemplateRef"]["namespace"] == "liqo-p"  # the provider's Liqo namespace


def test_server_endpoint() -> None:
    assert networking.server_endpoint({"status": {"endpoint": SERVER_STATUS_ENDPOINT}}) == SERVER_STATUS_ENDPOINT
    assert networking.server_endpoint({"status": {"endpoint": {"addresses": [], "port": 1}}}) is None
    # Liqo's NodePort server whose node is not Ready publishes "": no address, no endpoint.
    assert networking.server_endpoint({"status": {"endpoint": {"addresses": [""], "port": 1}}}) is None
    mixed = {"status": {"endpoint": {**SERVER_STATUS_ENDPOINT, "addresses": ["", "203.0.113.5"]}}}
    assert networking.server_endpoint(mixed) == SERVER_STATUS_ENDPOINT
    assert networking.server_endpoint({"status": {}}) is None
    assert networking.server_endpoint({}) is None


def test_gateway_client_copies_the_server_endpoint(ctx: PeeringContext) -> None:
    client = networking.gateway_client(ctx, NetworkingSpec(), SERVER_STATUS_ENDPOINT)
    assert client == {
        "apiVersion": "networking.liqo.io/v1beta1",
        "kind": "GatewayClient",
        "metadata": {"name": "provider-id", "namespace": C_NS, "labels": labels_for("provider-id")},
        "spec": {
            "mtu": 1340,
            "endpoint": {"addresses": ["203.0.113.5"], "port": 32000, "protocol": "UDP"},
            "clientTemplateRef": {
                "apiVersion": "networking.liqo.io/v1beta1",
                "kind": "WgGatewayClientTemplate",
                "name": "wireguard-client",
                "namespace": "liqo",  # the consumer's Liqo namespace
            },
        },
    }


def test_gateway_client_does_not_alias_the_server_addresses(ctx: PeeringContext) -> None:
    endpoint = {"addresses": ["203.0.113.5"], "port": 32000}
    client = networking.gateway_client(ctx, NetworkingSpec(), endpoint)
    client["spec"]["endpoint"]["addresses"].append("x")
    assert endpoint["addresses"] == ["203.0.113.5"]
    assert client["spec"]["endpoint"]["protocol"] == "UDP"  # defaulted when the server does not say


def test_gateway_client_overrides(ctx: PeeringContext) -> None:
    spec = NetworkingSpec(mtu=1300, gateway_client=GatewayClientSpec(address="gw.example", port=40000))
    client = networking.gateway_client(ctx, spec, SERVER_STATUS_ENDPOINT)
    assert client["spec"]["mtu"] == 1300
    assert client["spec"]["endpoint"] == {"addresses": ["gw.example"], "port": 40000, "protocol": "UDP"}
    only_port = NetworkingSpec(gateway_client=GatewayClientSpec(port=40000))
    assert networking.gateway_client(ctx, only_port, SERVER_STATUS_ENDPOINT)["spec"]["endpoint"] == {
        "addresses": ["203.0.113.5"],
        "port": 40000,
        "protocol": "UDP",
    }


def test_gateway_spec_matches(ctx: PeeringContext) -> None:
    desired = networking.gateway_server(ctx, NetworkingSpec())
    live = {
        "spec": {
            "mtu": 1340,
            "endpoint": {"port": 51840, "serviceType": "LoadBalancer", "nodePort": 31234},  # set by the API server
            "serverTemplateRef": desired["spec"]["serverTemplateRef"],
        },
        "status": {"endpoint": SERVER_STATUS_ENDPOINT},
    }
    assert networking.gateway_spec_matches(live, desired) is True
    other_mtu = {"spec": {**live["spec"], "mtu": 1400}}
    assert networking.gateway_spec_matches(other_mtu, desired) is False
    other_port = {"spec": {**live["spec"], "endpoint": {"port": 1, "serviceType": "LoadBalancer"}}}
    assert networking.gateway_spec_matches(other_port, desired) is False
    other_type = {"spec": {**live["spec"], "endpoint": {"port": 51840, "serviceType": "NodePort"}}}
    assert networking.gateway_spec_matches(other_type, desired) is False
    assert networking.gateway_spec_matches({}, desired) is False

    client = networking.gateway_client(ctx, NetworkingSpec(), SERVER_STATUS_ENDPOINT)
    assert networking.gateway_spec_matches(client, client) is True
    moved = networking.gateway_client(ctx, NetworkingSpec(), {**SERVER_STATUS_ENDPOINT, "addresses": ["198.51.100.1"]})
    assert networking.gateway_spec_matches(client, moved) is False


def test_public_key(ctx: PeeringContext) -> None:
    key = base64.b64encode(b"k" * 32).decode()
    pk = networking.public_key(ctx, "provider-id", C_NS, key)
    assert pk == {
        "apiVersion": "networking.liqo.io/v1beta1",
        "kind": "PublicKey",
        "metadata": {
            "name": "provider-id",
            "namespace": C_NS,
            "labels": labels_for("provider-id", **{"networking.liqo.io/gateway-resource": "true"}),
        },
        "spec": {"publicKey": key},
    }
    on_provider = networking.public_key(ctx, "consumer-id", P_NS, key)
    assert on_provider["metadata"]["name"] == "consumer-id"
    assert on_provider["metadata"]["labels"]["liqo.io/remote-cluster-id"] == "consumer-id"


def test_gateway_secret_name() -> None:
    assert networking.gateway_secret_name({"status": {"secretRef": {"name": "gw-provider-id"}}}) == "gw-provider-id"
    assert networking.gateway_secret_name({"status": {"secretRef": {}}}) is None
    assert networking.gateway_secret_name({"status": {}}) is None
    assert networking.gateway_secret_name({}) is None


def conn(value: str | None) -> dict[str, Any]:
    return {"metadata": {"name": "c"}, "status": {"value": value} if value is not None else {}}


@pytest.mark.parametrize(
    ("connections", "state"),
    [
        ([conn("Connected")], "Connected"),
        ([conn("Connecting")], "Connecting"),
        ([conn("Error")], "Error"),
        ([conn(None)], "Connecting"),  # created by the gateway, status not written yet
        ([{"metadata": {"name": "c"}}], "Connecting"),
        ([conn(None), conn("Connected")], "Connected"),
        ([], None),
    ],
)
def test_connection_state(connections: list[dict[str, Any]], state: str | None) -> None:
    assert networking.connection_state(connections) == state


# -- authentication --------------------------------------------------------------------------


def test_nonce_secret(ctx: PeeringContext) -> None:
    secret = auth.nonce_secret(ctx)
    assert secret == {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": "liqo-nonce",
            "namespace": P_NS,
            "labels": labels_for("consumer-id", **{"liqo.io/nonce": "true"}),
        },
    }


def test_signed_nonce_secret(ctx: PeeringContext) -> None:
    nonce = base64.b64encode(b"nonce-bytes").decode()
    secret = auth.signed_nonce_secret(ctx, nonce)
    assert secret == {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": "liqo-signed-nonce",
            "namespace": C_NS,
            "labels": labels_for("provider-id", **{"liqo.io/signed-nonce": "true"}),
        },
        "data": {"nonce": nonce},
    }


def test_secret_field() -> None:
    assert auth.secret_field({"data": {"nonce": "bm9uY2U="}}, "nonce") == "bm9uY2U="
    assert auth.secret_field({"data": {"nonce": ""}}, "nonce") is None
    assert auth.secret_field({"data": {}}, "nonce") is None
    assert auth.secret_field({"data": None}, "nonce") is None
    assert auth.secret_field(None, "nonce") is None


ED_KEY = ed25519.Ed25519PrivateKey.from_private_bytes(bytes(range(32)))


def load_csr(pem: bytes) -> x509.CertificateSigningRequest:
    assert pem.startswith(b"-----BEGIN CERTIFICATE REQUEST-----\n")
    return x509.load_pem_x509_csr(pem)


def test_control_plane_csr_ed25519() -> None:
    csr = load_csr(auth.control_plane_csr(ED_KEY, "consumer-id"))
    assert csr.is_signature_valid
    assert csr.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "consumer-id"
    assert csr.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == "liqo.io"
    assert len(csr.subject) == 2
    assert csr.public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    ) == ED_KEY.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


# What Liqo v1.2.0's GenerateCSRForControlPlane (Go's x509.CreateCertificateRequest) makes from ED_KEY for
# cluster "consumer-cluster-id", printed by a Go program once (kept here, not generated at test time).
GO_CONTROL_PLANE_CSR = b"""-----BEGIN CERTIFICATE REQUEST-----
MIGvMGMCAQAwMDEQMA4GA1UEChMHbGlxby5pbzEcMBoGA1UEAxMTY29uc3VtZXIt
Y2x1c3Rlci1pZDAqMAUGAytlcAMhAAOhB7/zzhC+HXDdGOdLwJln5NYwm6UNXx3c
hmQSVTG4oAAwBQYDK2VwA0EAdVRtiJK4tEBYt++YP4QAx0mvFXEio5ISIax9Wx0c
lxkKEYbzcvx3mOSXPNbIhuUpQsclRdCpDIGTjxPcyTuVCQ==
-----END CERTIFICATE REQUEST-----
"""


def test_control_plane_csr_is_byte_for_byte_liqos() -> None:
    # The provider compares a new Tenant's CSR with the one it stored at the first peering (kept after
    # unpeering): liqoctl's and the operator's must be the same bytes, or one cannot follow the other.
    assert auth.control_plane_csr(ED_KEY, "consumer-cluster-id") == GO_CONTROL_PLANE_CSR


def test_control_plane_csr_tags_strings_as_go_does() -> None:
    assert auth._go_string_type("consumer-id") == _ASN1Type.PrintableString
    assert auth._go_string_type("ünïcode") == _ASN1Type.UTF8String
    assert auth._go_string_type("under_score") == _ASN1Type.UTF8String


def test_control_plane_csr_is_deterministic_for_ed25519() -> None:
    # The Tenant is re-applied every reconcile: a changing CSR would rewrite it each time.
    assert auth.control_plane_csr(ED_KEY, "consumer-id") == auth.control_plane_csr(ED_KEY, "consumer-id")
    assert auth.control_plane_csr(ED_KEY, "consumer-id") != auth.control_plane_csr(ED_KEY, "other-id")


def test_control_plane_csr_rsa_and_ec() -> None:
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    csr = load_csr(auth.control_plane_csr(rsa_key, "consumer-id"))
    assert csr.is_signature_valid
    assert csr.subject.rfc4514_string() == "CN=consumer-id,O=liqo.io"  # RFC 4514 lists the last RDN first
    ec_csr = load_csr(auth.control_plane_csr(ec.generate_private_key(ec.SECP256R1()), "consumer-id"))
    assert ec_csr.is_signature_valid


def test_control_plane_csr_rejects_other_keys() -> None:
    from cryptography.hazmat.primitives.asymmetric import ed448

    with pytest.raises(ValueError, match="unsupported cluster key type"):
        auth.control_plane_csr(ed448.Ed448PrivateKey.generate(), "consumer-id")


def keys_secret(private: Any) -> dict[str, Any]:
    priv_pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    pub_pem = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return {
        "metadata": {"name": "authentication-keys", "namespace": "liqo"},
        "data": {"privateKey": base64.b64encode(priv_pem).decode(), "publicKey": base64.b64encode(pub_pem).decode()},
    }


def test_load_cluster_keys() -> None:
    private, public_der = auth.load_cluster_keys(keys_secret(ED_KEY))
    assert isinstance(private, ed25519.Ed25519PrivateKey)
    assert private.private_bytes_raw() == ED_KEY.private_bytes_raw()
    assert public_der == ED_KEY.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    # and the loaded key signs the same CSR as the original
    assert auth.control_plane_csr(private, "c") == auth.control_plane_csr(ED_KEY, "c")


@pytest.mark.parametrize("missing", ["privateKey", "publicKey"])
def test_load_cluster_keys_needs_both_fields(missing: str) -> None:
    secret = keys_secret(ED_KEY)
    del secret["data"][missing]
    with pytest.raises(LiqoNotReady, match="no usable privateKey and publicKey"):
        auth.load_cluster_keys(secret)
    with pytest.raises(LiqoNotReady, match="no usable privateKey and publicKey"):
        auth.load_cluster_keys({"metadata": {}})


@pytest.mark.parametrize("private_key", ["", "!!", base64.b64encode(b"not a PEM key").decode(), 42])
def test_load_cluster_keys_refuses_an_unusable_key_with_a_typed_error(private_key: object) -> None:
    secret = keys_secret(ED_KEY)
    secret["data"]["privateKey"] = private_key
    with pytest.raises(LiqoNotReady):
        auth.load_cluster_keys(secret)


def tenant_inputs() -> tuple[bytes, bytes]:
    public_der = ED_KEY.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return public_der, auth.control_plane_csr(ED_KEY, "consumer-id")


def test_tenant(ctx: PeeringContext) -> None:
    public_der, csr = tenant_inputs()
    signature = base64.b64encode(b"sig").decode()
    tenant = auth.tenant(ctx, public_der, csr, signature, None)
    assert tenant["apiVersion"] == "authentication.liqo.io/v1beta1"
    assert tenant["kind"] == "Tenant"
    assert tenant["metadata"] == {"name": "consumer-id", "namespace": P_NS, "labels": labels_for("consumer-id")}
    spec = tenant["spec"]
    assert set(spec) == {"clusterID", "publicKey", "csr", "signature"}
    assert spec["clusterID"] == "consumer-id"
    assert spec["signature"] == signature  # already base64: passed through, not encoded twice
    assert base64.b64decode(spec["csr"]) == csr
    public_pem = base64.b64decode(spec["publicKey"])
    assert public_pem.startswith(b"-----BEGIN PUBLIC KEY-----")
    assert (
        serialization.load_pem_public_key(public_pem).public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        == public_der
    )


def test_tenant_proxy_url_only_when_set(ctx: PeeringContext) -> None:
    public_der, csr = tenant_inputs()
    with_proxy = auth.tenant(ctx, public_der, csr, "c2ln", "http://10.70.0.1:8118")
    assert with_proxy["spec"]["proxyURL"] == "http://10.70.0.1:8118"
    assert "proxyURL" not in auth.tenant(ctx, public_der, csr, "c2ln", "")["spec"]


@pytest.mark.parametrize(
    ("obj", "ready"),
    [
        ({"status": {"authParams": {"signedCRT": "eA=="}, "tenantNamespace": "liqo-tenant-consumer-id"}}, True),
        ({"status": {"authParams": {"signedCRT": "eA=="}, "tenantNamespace": ""}}, False),
        ({"status": {"authParams": {}, "tenantNamespace": "t"}}, False),
        ({"status": {"tenantNamespace": "t"}}, False),
        ({"status": None}, False),
        ({}, False),
        (None, False),
    ],
)
def test_tenant_ready(obj: dict[str, Any] | None, ready: bool) -> None:
    assert auth.tenant_ready(obj) is ready


def test_identity(ctx: PeeringContext) -> None:
    status = {"authParams": {"ca": "Y2E=", "signedCRT": "Y3J0", "apiServer": "https://p:6443"}, "tenantNamespace": "t1"}
    identity = auth.identity(ctx, status)
    assert identity == {
        "apiVersion": "authentication.liqo.io/v1beta1",
        "kind": "Identity",
        "metadata": {"name": "controlplane-provider-id", "namespace": C_NS, "labels": labels_for("provider-id")},
        "spec": {
            "clusterID": "provider-id",
            "type": "ControlPlane",
            "authParams": status["authParams"],
            "namespace": "t1",
        },
    }


def test_identity_reaches_the_api_server_where_the_spec_says(ctx: PeeringContext) -> None:
    """spec.authentication.apiServer: the address replaces the published one, and the CA too when given; the
    signed certificate stays the Tenant's. The Tenant's status is left as it was."""
    params = {"ca": "Y2E=", "signedCRT": "Y3J0", "apiServer": "https://p:6443"}
    status = {"authParams": params, "tenantNamespace": "t1"}
    given = ApiServerSpec.model_validate(
        {"address": "https://proxy.example:443", "certificateAuthorityData": "cHJveHk="}
    )
    proxied = auth.identity(ctx, status, given)["spec"]["authParams"]
    assert proxied == {"ca": "cHJveHk=", "signedCRT": "Y3J0", "apiServer": "https://proxy.example:443"}
    same_ca = auth.identity(ctx, status, ApiServerSpec(address="https://proxy.example:443"))["spec"]["authParams"]
    assert same_ca == {"ca": "Y2E=", "signedCRT": "Y3J0", "apiServer": "https://proxy.example:443"}
    assert status["authParams"] == {"ca": "Y2E=", "signedCRT": "Y3J0", "apiServer": "https://p:6443"}


@pytest.mark.parametrize(
    ("obj", "ready"),
    [
        ({"status": {"kubeconfigSecretRef": {"name": "kubeconfig-controlplane-provider-id"}}}, True),
        ({"status": {"kubeconfigSecretRef": {"name": ""}}}, False),
        ({"status": {"kubeconfigSecretRef": None}}, False),
        ({"status": {}}, False),
        (None, False),
    ],
)
def test_identity_ready(obj: dict[str, Any] | None, ready: bool) -> None:
    assert auth.identity_ready(obj) is ready


# -- offloading ------------------------------------------------------------------------------


def single(spec: OffloadingSpec) -> offloading.SliceRequest:
    """The one slice of the single form."""
    (req,) = offloading.requested_slices(spec, "provider-id")
    return req


def test_resource_slice(ctx: PeeringContext) -> None:
    spec = OffloadingSpec(resources={"cpu": 4, "memory": "8Gi", "nvidia.com/gpu": 1})
    rs = offloading.resource_slice(ctx, single(spec))
    assert rs == {
        "apiVersion": "authentication.liqo.io/v1beta1",
        "kind": "ResourceSlice",
        "metadata": {
            "name": "provider-id",
            "namespace": C_NS,
            "labels": labels_for("provider-id", **{"liqo.io/replication": "true", "liqo.io/remoteID": "provider-id"}),
            "annotations": {"liqo.io/create-virtual-node": "true"},
        },
        "spec": {
            "class": "default",
            "providerClusterID": "provider-id",
            "resources": {"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": "1"},
        },
    }


def test_resource_slice_without_virtual_node_and_with_class(ctx: PeeringContext) -> None:
    rs = offloading.resource_slice(ctx, single(OffloadingSpec(create_virtual_node=False, resource_slice_class="gold")))
    assert rs["metadata"]["annotations"] == {"liqo.io/create-virtual-node": "false"}
    # No resources asked for: no resources key at all. An empty map is what Liqo's Go structs drop
    # (omitempty), and sending it each pass started a write war with Liqo's controllers.
    assert rs["spec"] == {"class": "gold", "providerClusterID": "provider-id"}


def test_resource_slice_quantities_are_in_gos_canonical_form(ctx: PeeringContext) -> None:
    spec = OffloadingSpec(resources={"cpu": "1000m", "memory": "1024Mi", "ephemeral-storage": "0.5", "pods": 110})
    rs = offloading.resource_slice(ctx, single(spec))
    assert rs["spec"]["resources"] == {"cpu": "1", "memory": "1Gi", "ephemeral-storage": "500m", "pods": "110"}


def test_slice_conditions() -> None:
    obj = {
        "status": {
            "conditions": [
                {"type": "Authentication", "status": "Accepted", "reason": "x"},
                {"type": "Resources", "status": "Denied"},
            ]
        }
    }
    assert offloading.slice_conditions(obj) == {"Authentication": "Accepted", "Resources": "Denied"}
    assert offloading.slice_conditions({"status": {}}) == {}
    assert offloading.slice_conditions(None) == {}


def ready_condition(status: str) -> dict[str, Any]:
    return {"status": {"conditions": [{"type": "Ready", "status": status}]}}


def vk_pod(name: str, ready: str = "True") -> dict[str, Any]:
    return {"metadata": {"name": name}, **ready_condition(ready)}


def vnode_node(ready: str = "True") -> dict[str, Any]:
    return {"metadata": {"name": "provider-id"}, **ready_condition(ready)}


@pytest.mark.parametrize(
    ("node", "pods", "usable", "says"),
    [
        (vnode_node(), [vk_pod("vk-a")], True, "virtual Node provider-id is Ready"),
        (vnode_node(), [vk_pod("vk-a"), vk_pod("vk-b")], True, "is Ready"),
        (vnode_node(), [], False, "start the virtual kubelet"),
        (vnode_node(), [vk_pod("vk-a"), vk_pod("vk-b", "False")], False, "vk-b to be Ready"),
        (None, [vk_pod("vk-a")], False, "register its Node"),
        (vnode_node("False"), [vk_pod("vk-a")], False, "provider-id to be Ready"),
        (vnode_node("Unknown"), [vk_pod("vk-a")], False, "provider-id to be Ready"),
        ({"metadata": {"name": "provider-id"}}, [vk_pod("vk-a")], False, "to be Ready"),
    ],
)
def test_virtual_node_usable_follows_liqos_rule(
    node: dict[str, Any] | None, pods: list[dict[str, Any]], usable: bool, says: str
) -> None:
    got, message = offloading.virtual_node_usable(node, pods)
    assert got is usable and says in message


def test_virtual_kubelet_selector() -> None:
    assert offloading.virtual_kubelet_selector("p", "gpu") == (
        "offloading.liqo.io/component=virtual-kubelet,liqo.io/remote-cluster-id=p,liqo.io/virtual-node=gpu"
    )


def test_requested_slices_single_form_is_one_named_after_the_provider() -> None:
    assert offloading.requested_slices(OffloadingSpec(resources={"cpu": 2}), "p") == [
        offloading.SliceRequest("p", "default", {"cpu": 2}, True)
    ]
    assert (
        offloading.requested_slices(OffloadingSpec(create_resource_slice=False, create_virtual_node=False), "p") == []
    )


def test_requested_slices_list_form_names_each_and_where_the_spec_sets_it() -> None:
    spec = OffloadingSpec.model_validate(
        {
            "resourceSlices": [
                {"name": "cpu", "resources": {"cpu": 4}},
                {"name": "gpu", "class": "gpu", "resources": {"nvidia.com/gpu": 1}, "createVirtualNode": False},
            ]
        }
    )
    assert offloading.requested_slices(spec, "p") == [
        offloading.SliceRequest("cpu", "default", {"cpu": 4}, True, ".resourceSlices[0]"),
        offloading.SliceRequest("gpu", "gpu", {"nvidia.com/gpu": 1}, False, ".resourceSlices[1]"),
    ]
    assert offloading.wants_virtual_node(spec)
    no_nodes = OffloadingSpec.model_validate({"resourceSlices": [{"name": "a", "createVirtualNode": False}]})
    assert not offloading.wants_virtual_node(no_nodes)


def test_resource_slice_of_the_list_form(ctx: PeeringContext) -> None:
    spec = OffloadingSpec.model_validate({"resourceSlices": [{"name": "gpu", "class": "gpu", "resources": {"cpu": 1}}]})
    (req,) = offloading.requested_slices(spec, "provider-id")
    rs = offloading.resource_slice(ctx, req)
    assert rs["metadata"]["name"] == "gpu"
    assert rs["metadata"]["labels"][naming.REMOTE_CLUSTER_ID] == "provider-id"
    assert rs["spec"] == {"class": "gpu", "providerClusterID": "provider-id", "resources": {"cpu": "1"}}


def _obj(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": C_NS, "labels": labels or {}}}


def test_leftovers_are_our_dropped_slices_and_the_virtual_nodes_made_from_them() -> None:
    owner = naming.owner_labels("team-a", "to-provider")
    made = lambda slice_name: {naming.RESOURCE_SLICE_NAME: slice_name}  # noqa: E731
    slices = [
        _obj("keep", owner),
        _obj("drop", owner),
        _obj("liqoctl"),  # not ours: stays, with its virtual node
        _obj("copy", {**owner, naming.REPLICATED: "true"}),  # the other direction's, replicated in
    ]
    vnodes = [
        _obj("keep", made("keep")),
        _obj("drop", made("drop")),
        _obj("liqoctl", made("liqoctl")),
        _obj("orphan", made("gone")),  # its slice is gone already: going too
        _obj("hand-made"),  # no slice at all (liqoctl create virtualnode): not ours
        _obj("p"),  # the single form's, named after the provider, without Liqo's label
    ]
    left = offloading.leftovers(slices, vnodes, {"keep"}, owner, "p")
    assert left == offloading.Leftovers(slices=("drop",), virtual_nodes=("drop", "orphan", "p"))
    # Unpeering: nothing is wanted any more.
    everything = offloading.leftovers(slices, vnodes, set(), owner, "p")
    assert everything.slices == ("drop", "keep")
    assert "liqoctl" not in everything.virtual_nodes and "hand-made" not in everything.virtual_nodes


def _every_builder(ctx: PeeringContext) -> list[dict[str, Any]]:
    private, csr = tenant_inputs()
    endpoint = {"addresses": ["198.18.0.1"], "port": 51840, "protocol": "UDP"}
    status = {"authParams": {"apiServer": "https://198.18.0.2:6443"}, "tenantNamespace": "liqo-tenant-consumer-id"}
    return [
        networking.configuration(ctx, ctx.provider, ctx.consumer_tenant_ns),
        networking.gateway_server(ctx, NetworkingSpec()),
        networking.gateway_client(ctx, NetworkingSpec(), endpoint),
        networking.public_key(ctx, "provider-id", ctx.consumer_tenant_ns, "a2V5"),
        auth.nonce_secret(ctx),
        auth.signed_nonce_secret(ctx, "bm9uY2U="),
        auth.tenant(ctx, private, csr, "c2ln", None),
        auth.identity(ctx, status),
        offloading.resource_slice(ctx, single(OffloadingSpec())),
        offloading.resource_slice(ctx, single(OffloadingSpec(create_virtual_node=False, resources={"cpu": 2}))),
        tenancy.tenant_namespace("provider-id", "liqo-tenant-provider-id", ctx.owner),
        tenancy.tenant_access_binding("liqo-tenant-provider-id", "role", "ops", "sa", ctx.owner),
    ]


def test_no_builder_sends_anything_liqo_drops(ctx: PeeringContext) -> None:
    """Nothing empty (omitempty drops it) and nothing a stored copy would not cover: Liqo's typed
    writes leave every built object exactly as built, so the next pass writes nothing."""
    for built in _every_builder(ctx):
        assert prune(built) == built, built["kind"]
        assert covers(built, built), built["kind"]


@pytest.mark.parametrize(
    ("given", "canonical"),
    [
        ("1000m", "1"),
        ("0.5", "500m"),
        ("1024Mi", "1Gi"),
        ("1.5Gi", "1536Mi"),
        ("1000", "1k"),
        ("1500", "1500"),
        ("0.1", "100m"),
        ("1Ki", "1Ki"),
        ("512", "512"),
        ("100Gi", "100Gi"),
        ("1e3", "1e3"),
        ("0.0000000001", "1n"),  # Go rounds up to nano precision
        (110, "110"),
        ("0", "0"),
        ("1E", "1E"),
    ],
)
def test_canonical_quantity_matches_go(given: str | int, canonical: str) -> None:
    assert canonical_quantity(given) == canonical


def test_canonical_quantity_rejects_garbage() -> None:
    with pytest.raises(ValueError):
        canonical_quantity("lots")


def test_covers_compares_the_way_liqo_stores() -> None:
    want = {"metadata": {"name": "x", "labels": {"a": "1"}}, "spec": {"n": 0, "flag": False, "m": {"k": "v"}}}
    # Liqo's copy: extra labels and fields of its own, zero values omitted.
    live = {
        "metadata": {"name": "x", "labels": {"a": "1", "liqo": "y"}},
        "spec": {"m": {"k": "v", "x": 1}},
        "status": {},
    }
    assert covers(live, want)
    assert not covers({**live, "metadata": {"name": "x", "labels": {"a": "2"}}}, want)
    assert not covers({**live, "spec": {"m": {"k": "w"}}}, want)
    assert not covers(None, want)
    lists = {"metadata": {"name": "x"}, "spec": {"l": ["a", "b"]}}
    assert covers(lists, lists) and not covers({"metadata": {}, "spec": {"l": ["a"]}}, lists)


def test_overlay_is_what_an_apply_leaves_and_is_then_covered() -> None:
    """Without patch rights, an update of ``overlay(live, want)`` stands in for server-side apply."""
    want: dict[str, Any] = {"metadata": {"name": "x", "labels": {"a": "1"}}, "spec": {"m": {"k": "v"}, "l": ["b"]}}
    live: dict[str, Any] = {
        "metadata": {"name": "x", "resourceVersion": "7", "labels": {"a": "0", "liqo": "y"}},
        "spec": {"m": {"k": "old", "x": 1}, "l": ["a", "c"], "theirs": True},
        "status": {"s": 1},
    }
    out = overlay(live, want)
    assert out == {
        "metadata": {"name": "x", "resourceVersion": "7", "labels": {"a": "1", "liqo": "y"}},
        "spec": {"m": {"k": "v", "x": 1}, "l": ["b"], "theirs": True},
        "status": {"s": 1},
    }
    assert covers(out, want) and live["spec"]["m"]["k"] == "old"  # live itself is untouched
    assert overlay(live, {"metadata": {"labels": {"liqo": None}}})["metadata"]["labels"] == {"a": "0"}


def _conf(spec_pod: Any, spec_ext: Any, status_pod: Any = None, status_ext: Any = None) -> dict[str, Any]:
    conf: dict[str, Any] = {"spec": {"remote": {"cidr": {"pod": spec_pod, "external": spec_ext}}}}
    if status_pod or status_ext:
        conf["status"] = {"remote": {"cidr": {"pod": status_pod or spec_pod, "external": status_ext or spec_ext}}}
    return conf


@pytest.mark.parametrize(
    ("conf", "address", "expected"),
    [
        # Not remapped (status equals spec, or no status yet): unchanged.
        (_conf(["10.200.0.0/16"], ["10.210.0.0/16"]), "10.210.0.7", "10.210.0.7"),
        (_conf(["10.200.0.0/16"], ["10.210.0.0/16"], ["10.200.0.0/16"], ["10.210.0.0/16"]), "10.210.0.7", "10.210.0.7"),
        # External CIDR remapped: the host part stays, the network part is the remapped one.
        (_conf(["10.200.0.0/16"], ["10.210.0.0/16"], None, ["10.81.0.0/16"]), "10.210.3.7", "10.81.3.7"),
        # Liqo's own examples (ipam RemapMask): 10.1.0.1 into 40.32.0.0/10; 10.255.1.1 into 78.5.64.0/18.
        (_conf(["10.0.0.0/10"], ["10.210.0.0/16"], ["40.32.0.0/10"]), "10.1.0.1", "40.1.0.1"),
        (_conf(["10.255.0.0/18"], ["10.210.0.0/16"], ["78.5.64.0/18"]), "10.255.1.1", "78.5.65.1"),
        # Outside both CIDRs: unchanged.
        (_conf(["10.200.0.0/16"], ["10.210.0.0/16"], ["10.80.0.0/16"], ["10.81.0.0/16"]), "192.168.1.1", "192.168.1.1"),
        # Older Liqo wrote single strings, not lists.
        (_conf("10.200.0.0/16", "10.210.0.0/16", "10.80.0.0/16", "10.81.0.0/16"), "10.210.0.9", "10.81.0.9"),
    ],
)
def test_remap_address_follows_the_configuration(conf: dict[str, Any], address: str, expected: str) -> None:
    assert networking.remap_address(conf, address) == expected


def test_in_band_proxy_url_is_the_remapped_proxy_ip_on_port_8118() -> None:
    conf = _conf(["10.200.0.0/16"], ["10.210.0.0/16"], None, ["10.81.0.0/16"])
    assert networking.in_band_proxy_url(conf, "10.210.0.2") == "http://10.81.0.2:8118"
