"""The Liqo stand-in, driven by creating what the operator (or liqoctl) would create."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from cryptography.x509.oid import NameOID

from testenv import kube as k
from testenv.kube import Kube, Obj
from testenv.liqo_env.pytest_plugin import LiqoClusters, StandInProcess
from testenv.wait import wait_for

pytestmark = pytest.mark.e2e

REMOTE = "liqo.io/remote-cluster-id"
# Every Liqo kind a test may create in the tenant namespaces, removed after each test.
CLEANUP = [
    k.RESOURCESLICE,
    k.VIRTUALNODE,
    k.IDENTITY,
    k.TENANT,
    k.CONNECTION,
    k.PUBLICKEY,
    k.GATEWAYCLIENT,
    k.GATEWAYSERVER,
    k.CONFIGURATION,
    k.SECRET,
    k.DEPLOYMENT,
]


@dataclass
class Peering:
    """Both clusters, seen from the consumer: `c` consumer, `p` provider, their IDs and tenant namespaces."""

    c: Kube
    p: Kube
    cid: str
    pid: str
    c_ns: str  # on the consumer, for the provider
    p_ns: str  # on the provider, for the consumer


def _tenant_ns(kc: Kube, remote: str) -> str:
    name = f"liqo-tenant-{remote}"
    if kc.get(k.NAMESPACE, name) is None:
        lbl = {REMOTE: remote, "liqo.io/tenant-namespace": "true"}
        kc.create(k.NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": lbl}})
    return name


@pytest.fixture
def peering(liqo_clusters: LiqoClusters, liqo_standin: StandInProcess) -> Iterator[Peering]:
    c, p = liqo_clusters.kube("consumer"), liqo_clusters.kube("provider")
    cid, pid = liqo_clusters.ids["consumer"], liqo_clusters.ids["provider"]
    pr = Peering(c, p, cid, pid, _tenant_ns(c, pid), _tenant_ns(p, cid))
    yield pr
    for kc, ns in ((c, pr.c_ns), (p, pr.p_ns)):
        for res in CLEANUP:
            for obj in kc.list(res, ns):
                if obj["metadata"].get("finalizers"):
                    kc.patch(res, obj["metadata"]["name"], {"metadata": {"finalizers": None}}, ns)
                kc.delete(res, obj["metadata"]["name"], ns)


def obj(res: k.Res, kind: str, name: str, ns: str, remote: str, spec: Obj | None = None, **extra: Obj) -> Obj:
    body: Obj = {
        "apiVersion": res.api_version,
        "kind": kind,
        "metadata": {"name": name, "namespace": ns, "labels": {REMOTE: remote}},
    }
    if spec is not None:
        body["spec"] = spec
    body["metadata"].update(extra.get("metadata", {}))
    return body


def get_when(kc: Kube, res: k.Res, name: str, ns: str | None, pred: Callable[[Obj], object]) -> Obj | None:
    """The object when pred(object) holds, else None (for wait_for)."""
    o = kc.get(res, name, ns)
    return o if o is not None and pred(o) else None


def cond(o: Obj | None, ctype: str) -> str | None:
    for c in ((o or {}).get("status") or {}).get("conditions") or []:
        if c["type"] == ctype:
            return str(c["status"])
    return None


def fc_cond(fc: Obj | None, module: str, ctype: str) -> str | None:
    mod = (((fc or {}).get("status") or {}).get("modules") or {}).get(module) or {}
    return next((c["status"] for c in mod.get("conditions") or [] if c["type"] == ctype), None)


# --- networking -------------------------------------------------------------------------------------------
def test_configuration_gets_cidrs_configured(peering: Peering) -> None:
    pr = peering
    spec = {"remote": {"cidr": {"pod": ["10.200.0.0/16"], "external": ["10.210.0.0/16"]}}}
    pr.c.create(k.CONFIGURATION, obj(k.CONFIGURATION, "Configuration", pr.pid, pr.c_ns, pr.pid, spec), pr.c_ns)

    def ready() -> Obj | None:
        cfg = pr.c.get(k.CONFIGURATION, pr.pid, pr.c_ns) or {}
        for c in (cfg.get("status") or {}).get("conditions") or []:
            if c["type"] == "NetworkCIDRsConfigured" and c["status"] == "True":
                return c if c["observedGeneration"] == cfg["metadata"]["generation"] else None
        return None

    wait_for("NetworkCIDRsConfigured", ready)
    cfg = pr.c.get(k.CONFIGURATION, pr.pid, pr.c_ns)
    assert cfg and cfg["status"]["remote"]["cidr"]["pod"] == ["10.200.0.0/16"]
    fc = wait_for("ForeignCluster", lambda: pr.c.get(k.FOREIGNCLUSTER, pr.pid))
    assert fc["spec"]["clusterID"] == pr.pid
    wait_for(
        "networking enabled",
        lambda: fc_cond(pr.c.get(k.FOREIGNCLUSTER, pr.pid), "networking", "NetworkConfigurationStatus") == "Ready",
    )


def _gateways(pr: Peering) -> tuple[Obj, Obj]:
    """GatewayServer on the provider, GatewayClient on the consumer, keys exchanged through PublicKeys."""
    server_spec = {
        "mtu": 1340,
        "endpoint": {"port": 51840, "serviceType": "LoadBalancer"},
        "serverTemplateRef": {
            "apiVersion": "networking.liqo.io/v1beta1",
            "kind": "WgGatewayServerTemplate",
            "name": "wireguard-server",
            "namespace": "liqo",
        },
    }
    pr.p.create(k.GATEWAYSERVER, obj(k.GATEWAYSERVER, "GatewayServer", pr.cid, pr.p_ns, pr.cid, server_spec), pr.p_ns)
    server = wait_for(
        "GatewayServer endpoint",
        lambda: get_when(pr.p, k.GATEWAYSERVER, pr.cid, pr.p_ns, lambda o: o.get("status", {}).get("endpoint")),
    )
    ep = server["status"]["endpoint"]
    assert ep["addresses"] and ep["port"] == 51840 and ep["protocol"] == "UDP"
    client_spec = {
        "mtu": 1340,
        "endpoint": {"addresses": ep["addresses"], "port": ep["port"], "protocol": "UDP"},
        "clientTemplateRef": {
            "apiVersion": "networking.liqo.io/v1beta1",
            "kind": "WgGatewayClientTemplate",
            "name": "wireguard-client",
            "namespace": "liqo",
        },
    }
    pr.c.create(k.GATEWAYCLIENT, obj(k.GATEWAYCLIENT, "GatewayClient", pr.pid, pr.c_ns, pr.pid, client_spec), pr.c_ns)

    def gateway_ready(kc: Kube, res: k.Res, name: str, ns: str) -> bool:
        gw, dep = kc.get(res, name, ns) or {}, kc.get(k.DEPLOYMENT, f"gw-{name}", ns) or {}
        return bool(gw.get("status", {}).get("secretRef") and (dep.get("status") or {}).get("readyReplicas"))

    wait_for("GatewayServer ready", lambda: gateway_ready(pr.p, k.GATEWAYSERVER, pr.cid, pr.p_ns))
    wait_for("GatewayClient ready", lambda: gateway_ready(pr.c, k.GATEWAYCLIENT, pr.pid, pr.c_ns))
    return server, pr.c.get(k.GATEWAYCLIENT, pr.pid, pr.c_ns) or {}


def _gateway_key(kc: Kube, gw: Obj) -> str:
    ref = gw["status"]["secretRef"]
    sec = kc.get(k.SECRET, ref["name"], ref["namespace"])
    assert sec is not None
    labels = sec["metadata"]["labels"]
    assert labels["networking.liqo.io/gateway-resource"] == "true" and REMOTE in labels
    assert len(k.unb64(sec["data"]["privateKey"])) == 32 and len(k.unb64(sec["data"]["publicKey"])) == 32
    return str(sec["data"]["publicKey"])


def _exchange_keys(pr: Peering, server: Obj, client: Obj) -> None:
    server = pr.p.get(k.GATEWAYSERVER, pr.cid, pr.p_ns) or server
    skey, ckey = _gateway_key(pr.p, server), _gateway_key(pr.c, client)
    extra = {"metadata": {"labels": {REMOTE: pr.pid, "networking.liqo.io/gateway-resource": "true"}}}
    pk = obj(k.PUBLICKEY, "PublicKey", pr.pid, pr.c_ns, pr.pid, {"publicKey": skey}, **extra)
    pr.c.create(k.PUBLICKEY, pk, pr.c_ns)
    extra = {"metadata": {"labels": {REMOTE: pr.cid, "networking.liqo.io/gateway-resource": "true"}}}
    pk = obj(k.PUBLICKEY, "PublicKey", pr.cid, pr.p_ns, pr.cid, {"publicKey": ckey}, **extra)
    pr.p.create(k.PUBLICKEY, pk, pr.p_ns)


def _connection(kc: Kube, ns: str, remote: str) -> str | None:
    conns = kc.list(k.CONNECTION, ns, f"{REMOTE}={remote}")
    return (conns[0].get("status") or {}).get("value") if conns else None


def test_gateways_get_connected_connections(peering: Peering, liqo_standin: StandInProcess) -> None:
    pr = peering
    server, client = _gateways(pr)
    assert _connection(pr.c, pr.c_ns, pr.pid) is None  # no PublicKey yet: the tunnel is not configured
    _exchange_keys(pr, server, client)
    wait_for("consumer Connected", lambda: _connection(pr.c, pr.c_ns, pr.pid) == "Connected")
    wait_for("provider Connected", lambda: _connection(pr.p, pr.p_ns, pr.cid) == "Connected")
    wait_for(
        "ForeignCluster NetworkConnectionStatus Established",
        lambda: fc_cond(pr.c.get(k.FOREIGNCLUSTER, pr.pid), "networking", "NetworkConnectionStatus") == "Established",
    )
    conn = pr.c.list(k.CONNECTION, pr.c_ns, f"{REMOTE}={pr.pid}")[0]
    assert conn["spec"]["type"] == "Client" and conn["spec"]["gatewayRef"]["name"] == pr.pid

    liqo_standin.set_faults("consumer", connection="Error")
    wait_for("consumer Error", lambda: _connection(pr.c, pr.c_ns, pr.pid) == "Error")
    wait_for(
        "ForeignCluster NetworkConnectionStatus Error",
        lambda: fc_cond(pr.c.get(k.FOREIGNCLUSTER, pr.pid), "networking", "NetworkConnectionStatus") == "Error",
    )
    liqo_standin.set_faults("both", connection="Never")
    wait_for("no Connection", lambda: not pr.c.list(k.CONNECTION, pr.c_ns) and not pr.p.list(k.CONNECTION, pr.p_ns))
    liqo_standin.set_faults("both", connection=None)
    wait_for("Connected again", lambda: _connection(pr.c, pr.c_ns, pr.pid) == "Connected")

    # Deleting the gateway removes what was derived from it.
    pr.c.delete(k.GATEWAYCLIENT, pr.pid, pr.c_ns)
    wait_for("Connection gone", lambda: not pr.c.list(k.CONNECTION, pr.c_ns))


def test_wrong_public_key_ends_in_error(peering: Peering) -> None:
    pr = peering
    server, client = _gateways(pr)
    _exchange_keys(pr, server, client)
    wait_for("Connected", lambda: _connection(pr.c, pr.c_ns, pr.pid) == "Connected")
    wrong = k.b64(b"\1" * 32)
    pr.c.patch(k.PUBLICKEY, pr.pid, {"spec": {"publicKey": wrong}}, pr.c_ns)
    wait_for("Connecting while the handshake is retried", lambda: _connection(pr.c, pr.c_ns, pr.pid) == "Connecting")
    wait_for("Error after the grace period", lambda: _connection(pr.c, pr.c_ns, pr.pid) == "Error", timeout=20)


def test_connection_never_appears(peering: Peering, liqo_standin: StandInProcess) -> None:
    pr = peering
    liqo_standin.set_faults("both", connection="Never")
    server, client = _gateways(pr)
    _exchange_keys(pr, server, client)
    time.sleep(4)
    assert not pr.c.list(k.CONNECTION, pr.c_ns) and not pr.p.list(k.CONNECTION, pr.p_ns)


# --- authentication ---------------------------------------------------------------------------------------
def _secret(name: str, ns: str, labels: dict[str, str], string_data: dict[str, str] | None = None) -> Obj:
    body: Obj = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": ns, "labels": labels}}
    if string_data:
        body["stringData"] = string_data
    return body


def _nonce_handshake(pr: Peering) -> tuple[str, str]:
    """Provider nonce -> consumer signed nonce; returns (nonce, signedNonce as base64)."""
    pr.p.create(k.SECRET, _secret("liqo-nonce", pr.p_ns, {"liqo.io/nonce": "true", REMOTE: pr.cid}), pr.p_ns)
    nonce_b64 = wait_for(
        "nonce", lambda: ((pr.p.get(k.SECRET, "liqo-nonce", pr.p_ns) or {}).get("data") or {}).get("nonce")
    )
    nonce = k.unb64(nonce_b64).decode()
    labels = {"liqo.io/signed-nonce": "true", REMOTE: pr.pid}
    pr.c.create(k.SECRET, _secret("liqo-signed-nonce", pr.c_ns, labels, {"nonce": nonce}), pr.c_ns)
    signed = wait_for(
        "signedNonce",
        lambda: ((pr.c.get(k.SECRET, "liqo-signed-nonce", pr.c_ns) or {}).get("data") or {}).get("signedNonce"),
    )
    return nonce, str(signed)


def _consumer_key(pr: Peering) -> ed25519.Ed25519PrivateKey:
    sec = pr.c.get(k.SECRET, "authentication-keys", "liqo")
    assert sec is not None
    key = serialization.load_pem_private_key(k.unb64(sec["data"]["privateKey"]), None)
    assert isinstance(key, ed25519.Ed25519PrivateKey)
    return key


def test_nonce_is_filled_and_signed(peering: Peering) -> None:
    nonce, signed = _nonce_handshake(peering)
    _consumer_key(peering).public_key().verify(k.unb64(signed), nonce.encode())  # raises if wrong


def _tenant_spec(pr: Peering, signature: str) -> Obj:
    key = _consumer_key(pr)
    name = x509.Name(
        [x509.NameAttribute(NameOID.COMMON_NAME, pr.cid), x509.NameAttribute(NameOID.ORGANIZATION_NAME, "liqo.io")]
    )
    csr = x509.CertificateSigningRequestBuilder().subject_name(name).sign(key, None)
    pub = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    return {
        "clusterID": pr.cid,
        "publicKey": k.b64(pub),
        "csr": k.b64(csr.public_bytes(serialization.Encoding.PEM)),
        "signature": signature,
        "authzPolicy": "KeysExchange",
        "tenantCondition": "Active",
    }


def test_tenant_gets_auth_params_and_identity_a_working_kubeconfig(peering: Peering) -> None:
    pr = peering
    _, signed = _nonce_handshake(pr)
    pr.p.create(k.TENANT, obj(k.TENANT, "Tenant", pr.cid, pr.p_ns, pr.cid, _tenant_spec(pr, signed)), pr.p_ns)
    tenant = wait_for(
        "Tenant authParams",
        lambda: get_when(pr.p, k.TENANT, pr.cid, pr.p_ns, lambda o: o.get("status", {}).get("authParams")),
        timeout=60,
    )
    params = tenant["status"]["authParams"]
    assert tenant["status"]["tenantNamespace"] == pr.p_ns
    assert params["apiServer"].startswith("https://")
    cert = x509.load_pem_x509_certificate(k.unb64(params["signedCRT"]))
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == pr.cid
    assert b"BEGIN CERTIFICATE" in k.unb64(params["ca"])
    rb = pr.p.get(k.ROLEBINDING, "liqo-binding-liqo-remote-controlplane", pr.p_ns)
    assert rb and rb["subjects"][0] == {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": pr.cid}

    ident_spec = {"clusterID": pr.pid, "type": "ControlPlane", "authParams": params, "namespace": pr.p_ns}
    ident_name = f"controlplane-{pr.pid}"
    pr.c.create(k.IDENTITY, obj(k.IDENTITY, "Identity", ident_name, pr.c_ns, pr.pid, ident_spec), pr.c_ns)
    ref = wait_for(
        "kubeconfigSecretRef",
        lambda: ((pr.c.get(k.IDENTITY, ident_name, pr.c_ns) or {}).get("status") or {}).get("kubeconfigSecretRef"),
    )
    assert ref["name"] == f"kubeconfig-{ident_name}"
    sec = pr.c.get(k.SECRET, ref["name"], pr.c_ns)
    assert sec and sec["metadata"]["labels"]["liqo.io/identity-type"] == "ControlPlane"
    assert sec["metadata"]["annotations"]["liqo.io/remote-tenant-namespace"] == pr.p_ns
    kubeconfig = yaml.safe_load(k.unb64(sec["data"]["kubeconfig"]))
    assert kubeconfig["contexts"][0]["context"]["namespace"] == pr.p_ns

    # The kubeconfig authenticates to the provider as User <consumer ID> (Ed25519 client certificate).
    from kubernetes import config

    remote = Kube(config.new_client_from_config_dict(kubeconfig))
    review = remote._call(
        "POST",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
    )
    assert review["status"]["userInfo"]["username"] == pr.cid

    fc = wait_for(
        "ForeignCluster Provider",
        lambda: get_when(
            pr.c,
            k.FOREIGNCLUSTER,
            pr.pid,
            None,
            lambda o: fc_cond(o, "authentication", "AuthIdentityControlPlaneStatus") == "Ready",
        ),
    )
    assert fc["status"]["role"] == "Provider" and fc["status"]["tenantNamespace"]["remote"] == pr.p_ns
    fcp = wait_for(
        "provider's ForeignCluster Consumer",
        lambda: get_when(
            pr.p, k.FOREIGNCLUSTER, pr.cid, None, lambda o: fc_cond(o, "authentication", "AuthTenantStatus") == "Ready"
        ),
    )
    assert fcp["status"]["role"] == "Consumer"


def test_tenant_with_a_bad_signature_gets_nothing(peering: Peering) -> None:
    pr = peering
    _nonce_handshake(pr)
    spec = _tenant_spec(pr, k.b64(b"\0" * 64))
    pr.p.create(k.TENANT, obj(k.TENANT, "Tenant", pr.cid, pr.p_ns, pr.cid, spec), pr.p_ns)
    time.sleep(4)
    assert not ((pr.p.get(k.TENANT, pr.cid, pr.p_ns) or {}).get("status") or {}).get("authParams")


# --- offloading -------------------------------------------------------------------------------------------
def _declarative_auth(pr: Peering) -> None:
    """A TolerateNoHandshake Tenant and a ControlPlane kubeconfig Secret (liqoctl's declarative path)."""
    spec = {"clusterID": pr.cid, "authzPolicy": "TolerateNoHandshake", "tenantCondition": "Active"}
    pr.p.create(k.TENANT, obj(k.TENANT, "Tenant", pr.cid, pr.p_ns, pr.cid, spec), pr.p_ns)
    labels = {"liqo.io/identity-type": "ControlPlane", REMOTE: pr.pid}
    kubeconfig = yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "p", "cluster": {"server": "https://127.0.0.1:1"}}],
        }
    )
    sec = _secret(f"kubeconfig-controlplane-{pr.pid}", pr.c_ns, labels, {"kubeconfig": kubeconfig})
    sec["metadata"]["annotations"] = {"liqo.io/remote-tenant-namespace": pr.p_ns}
    pr.c.create(k.SECRET, sec, pr.c_ns)


def _slice(pr: Peering, virtual_node: bool = True) -> Obj:
    labels = {"liqo.io/replication": "true", "liqo.io/remoteID": pr.pid, REMOTE: pr.pid}
    spec = {"class": "default", "providerClusterID": pr.pid, "resources": {"cpu": "2", "memory": "4Gi", "pods": "50"}}
    body = obj(k.RESOURCESLICE, "ResourceSlice", pr.pid, pr.c_ns, pr.pid, spec)
    body["metadata"]["labels"] = labels
    if virtual_node:
        body["metadata"]["annotations"] = {"liqo.io/create-virtual-node": "true"}
    return body


def test_resourceslice_accepted_and_virtual_node(peering: Peering) -> None:
    pr = peering
    _declarative_auth(pr)
    pr.c.create(k.RESOURCESLICE, _slice(pr), pr.c_ns)
    rs = wait_for(
        "slice accepted",
        lambda: get_when(
            pr.c,
            k.RESOURCESLICE,
            pr.pid,
            pr.c_ns,
            lambda o: cond(o, "Authentication") == "Accepted" and cond(o, "Resources") == "Accepted",
        ),
    )
    assert rs["status"]["resources"] == {"cpu": "2", "memory": "4Gi", "pods": "50"}
    vn = wait_for(
        "VirtualNode running",
        lambda: get_when(
            pr.c,
            k.VIRTUALNODE,
            pr.pid,
            pr.c_ns,
            lambda o: cond(o, "VirtualKubelet") == "Running" and cond(o, "Node") == "Running",
        ),
    )
    assert vn["spec"]["clusterID"] == pr.pid
    node = wait_for(
        "virtual Node Ready", lambda: get_when(pr.c, k.NODE, pr.pid, None, lambda o: cond(o, "Ready") == "True")
    )
    assert node["metadata"]["labels"]["liqo.io/type"] == "virtual-node"
    fc = wait_for(
        "offloading Ready",
        lambda: get_when(
            pr.c, k.FOREIGNCLUSTER, pr.pid, None, lambda o: fc_cond(o, "offloading", "OffloadingNodeStatus") == "Ready"
        ),
    )
    assert fc["status"]["modules"]["offloading"]["enabled"] is True

    pr.c.delete(k.RESOURCESLICE, pr.pid, pr.c_ns)
    wait_for(
        "VirtualNode and Node gone",
        lambda: not pr.c.get(k.VIRTUALNODE, pr.pid, pr.c_ns) and not pr.c.get(k.NODE, pr.pid),
    )
    wait_for(
        "offloading disabled",
        lambda: (pr.c.get(k.FOREIGNCLUSTER, pr.pid) or {})["status"]["modules"]["offloading"]["enabled"] is False,
    )


def test_resourceslice_denied_by_fault(peering: Peering, liqo_standin: StandInProcess) -> None:
    pr = peering
    liqo_standin.set_faults("provider", resourceslice="Denied")
    _declarative_auth(pr)
    pr.c.create(k.RESOURCESLICE, _slice(pr), pr.c_ns)
    wait_for("Resources Denied", lambda: cond(pr.c.get(k.RESOURCESLICE, pr.pid, pr.c_ns), "Resources") == "Denied")
    assert cond(pr.c.get(k.RESOURCESLICE, pr.pid, pr.c_ns), "Authentication") == "Accepted"
    time.sleep(2)
    assert pr.c.get(k.VIRTUALNODE, pr.pid, pr.c_ns) is None
    liqo_standin.set_faults("provider", resourceslice=None)
    wait_for(
        "Accepted after the fault", lambda: cond(pr.c.get(k.RESOURCESLICE, pr.pid, pr.c_ns), "Resources") == "Accepted"
    )
    wait_for("VirtualNode", lambda: pr.c.get(k.VIRTUALNODE, pr.pid, pr.c_ns))


def test_resourceslice_without_tenant_is_denied(peering: Peering) -> None:
    pr = peering
    labels = {"liqo.io/identity-type": "ControlPlane", REMOTE: pr.pid}
    pr.c.create(k.SECRET, _secret(f"kubeconfig-controlplane-{pr.pid}", pr.c_ns, labels, {"kubeconfig": "{}"}), pr.c_ns)
    pr.c.create(k.RESOURCESLICE, _slice(pr, virtual_node=False), pr.c_ns)
    wait_for(
        "Authentication Denied", lambda: cond(pr.c.get(k.RESOURCESLICE, pr.pid, pr.c_ns), "Authentication") == "Denied"
    )


# --- faults -----------------------------------------------------------------------------------------------
def test_delay_fault(peering: Peering, liqo_standin: StandInProcess) -> None:
    pr = peering
    liqo_standin.set_faults("both", delay=4)
    start = time.monotonic()
    pr.p.create(k.SECRET, _secret("liqo-nonce", pr.p_ns, {"liqo.io/nonce": "true", REMOTE: pr.cid}), pr.p_ns)
    wait_for("nonce", lambda: ((pr.p.get(k.SECRET, "liqo-nonce", pr.p_ns) or {}).get("data") or {}).get("nonce"))
    assert time.monotonic() - start >= 3.5


def test_paused_fault(peering: Peering, liqo_standin: StandInProcess) -> None:
    pr = peering
    liqo_standin.set_faults("provider", paused="true")
    pr.p.create(k.SECRET, _secret("liqo-nonce", pr.p_ns, {"liqo.io/nonce": "true", REMOTE: pr.cid}), pr.p_ns)
    time.sleep(3)
    assert not ((pr.p.get(k.SECRET, "liqo-nonce", pr.p_ns) or {}).get("data") or {}).get("nonce")
    liqo_standin.set_faults("provider", paused=None)
    wait_for("nonce", lambda: ((pr.p.get(k.SECRET, "liqo-nonce", pr.p_ns) or {}).get("data") or {}).get("nonce"))


def test_tenant_and_virtualnode_never_faults(peering: Peering, liqo_standin: StandInProcess) -> None:
    pr = peering
    liqo_standin.set_faults("provider", tenant="Never")
    liqo_standin.set_faults("consumer", virtualnode="Never")
    _declarative_auth(pr)
    pr.c.create(k.RESOURCESLICE, _slice(pr), pr.c_ns)
    time.sleep(3)
    assert not (pr.p.get(k.TENANT, pr.cid, pr.p_ns) or {}).get("status")
    # The slice is still judged (its Tenant exists) but no virtual node comes.
    assert cond(pr.c.get(k.RESOURCESLICE, pr.pid, pr.c_ns), "Authentication") == "Accepted"
    assert pr.c.get(k.VIRTUALNODE, pr.pid, pr.c_ns) is None
    liqo_standin.set_faults("both", tenant=None, virtualnode=None)
    wait_for(
        "Tenant namespace",
        lambda: ((pr.p.get(k.TENANT, pr.cid, pr.p_ns) or {}).get("status") or {}).get("tenantNamespace"),
    )
    wait_for("VirtualNode", lambda: pr.c.get(k.VIRTUALNODE, pr.pid, pr.c_ns))


def test_liqo_missing_on_one_side(liqo_clusters: LiqoClusters, liqo_standin: StandInProcess) -> None:
    liqo_clusters.uninstall("provider")
    try:
        p = liqo_clusters.kube("provider")
        assert p.get(k.CRD, "tenants.authentication.liqo.io") is None
        assert p.list(k.TENANT) == []  # what the operator sees: the kind is gone
        time.sleep(3)
        assert liqo_standin.proc.poll() is None, liqo_standin.log()  # the stand-in copes
    finally:
        liqo_clusters.ensure_installed()
    assert liqo_clusters.kube("provider").get(k.CRD, "tenants.authentication.liqo.io")


def test_in_process_start_stop(liqo_clusters: LiqoClusters) -> None:
    """The stand-in also runs inside the test process (StandIn.start()/stop())."""
    from testenv.standin import StandIn

    liqo_clusters.ensure_installed()
    c, p = liqo_clusters.kube("consumer"), liqo_clusters.kube("provider")
    ns = _tenant_ns(p, liqo_clusters.ids["consumer"])
    standin = StandIn(c, p, resync=1)
    standin.start()
    try:
        labels = {"liqo.io/nonce": "true", REMOTE: liqo_clusters.ids["consumer"]}
        p.create(k.SECRET, _secret("liqo-nonce", ns, labels), ns)
        wait_for("nonce", lambda: ((p.get(k.SECRET, "liqo-nonce", ns) or {}).get("data") or {}).get("nonce"))
    finally:
        standin.stop()
        p.delete(k.SECRET, "liqo-nonce", ns)
    assert standin.passes > 0
