"""The minted peering user (liqo_peering.liqo.peeringuser): what `liqoctl generate peering-user` makes on the
provider (Liqo v1.2, pkg/liqoctl/rest/peering-user/userfactory), the minted Secret's states, renewal."""

from __future__ import annotations

import base64
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from cryptography.x509.oid import NameOID

from liqo_peering.kubeconfig import load_remote_kubeconfig
from liqo_peering.liqo import naming
from liqo_peering.liqo import peeringuser as pu
from liqo_peering.liqo.authentication import long_common_names

CONSUMER = "consumer-id"
OWNER = naming.owner_labels("team-a", "to-provider")
T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
CA_KEY = ed25519.Ed25519PrivateKey.generate()
USER_KEY = ed25519.Ed25519PrivateKey.generate()
BOOTSTRAP = """
apiVersion: v1
kind: Config
clusters:
- name: provider
  cluster: {server: "https://198.18.0.2:6443", certificate-authority-data: Q0EK, tls-server-name: kubernetes}
users:
- name: admin
  user: {token: admin-token-not-to-be-copied}
contexts:
- name: admin@provider
  context: {cluster: provider, user: admin}
current-context: admin@provider
"""


def issue(cn: str, not_before: datetime, lifetime: timedelta, key: Any = USER_KEY) -> bytes:
    """A certificate for ``cn`` as a signer issues it (PEM)."""
    with long_common_names():
        common_name = x509.NameAttribute(NameOID.COMMON_NAME, cn, _validate=False)
    name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "liqo.io"), common_name])
    ca = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "provider-ca")])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(ca)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_before + lifetime)
        .sign(CA_KEY, None)
    )
    return cert.public_bytes(serialization.Encoding.PEM)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


# -- names, as liqoctl spells them ---------------------------------------------------------------------------
def test_names_are_liqoctls() -> None:
    assert pu.user_name(CONSUMER) == "liqo-peer-user-consumer-id"
    assert pu.reader_binding_name(CONSUMER) == "liqo-peer-user-consumer-id-liqo-ns-reader"
    assert pu.writer_binding_name(CONSUMER) == "liqo-peer-user-consumer-id-tenant-ns-writer"
    assert re.fullmatch(r"liqo-peer-user-consumer-id-[0-9a-f]{32}", pu.common_name(CONSUMER, "ab" * 16))
    assert pu.labels(CONSUMER, OWNER)["liqo.io/peering-user-name"] == "liqo-peer-user-consumer-id"


def test_the_minted_secret_name_is_deterministic_and_fits() -> None:
    assert naming.minted_secret("provider") == "provider-provider-credentials"
    long_a, long_b = "a" * 250, "a" * 249 + "b"
    assert len(naming.minted_secret(long_a)) <= 253 and len(naming.minted_secret(long_b)) <= 253
    assert naming.minted_secret(long_a) != naming.minted_secret(long_b)
    assert naming.minted_secret(long_a) == naming.minted_secret(long_a)


# -- the CSR ---------------------------------------------------------------------------------------------------
def test_the_request_is_liqos_subject_and_the_same_for_the_same_key() -> None:
    cn = pu.common_name(CONSUMER, "0" * 32)
    pem = pu.csr_request(USER_KEY, cn)
    request = x509.load_pem_x509_csr(pem)
    assert request.is_signature_valid
    assert [(a.oid, a.value) for a in request.subject] == [
        (NameOID.ORGANIZATION_NAME, "liqo.io"),
        (NameOID.COMMON_NAME, cn),
    ]
    assert pu.csr_request(USER_KEY, cn) == pem  # a resumed minting recognises its CSR
    assert pu.csr_request(ed25519.Ed25519PrivateKey.generate(), cn) != pem


def test_a_cn_longer_than_x509s_64_characters_is_encoded_as_go_does() -> None:
    """48 characters and the cluster ID: Liqo's own IDs (such as "consumer-cluster-id") pass X.509's bound."""
    cn = pu.common_name("a-cluster-id-of-thirty-characters", "f" * 32)
    assert len(cn) > 64
    request = x509.load_pem_x509_csr(pu.csr_request(USER_KEY, cn))
    assert request.is_signature_valid
    with long_common_names():
        assert request.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == cn
    assert pu.certificate(issue(cn, T0, timedelta(hours=1))).cn == cn


def test_the_csr_object_is_liqoctls() -> None:
    obj = pu.csr(CONSUMER, b"PEM", None, OWNER)
    assert obj["metadata"]["name"] == "liqo-peer-user-consumer-id"
    assert obj["metadata"]["labels"]["liqo.io/peering-user-name"] == "liqo-peer-user-consumer-id"
    assert obj["spec"]["signerName"] == "kubernetes.io/kube-apiserver-client"
    assert obj["spec"]["usages"] == ["digital signature", "key encipherment", "client auth"]
    assert base64.b64decode(obj["spec"]["request"]) == b"PEM"
    assert "expirationSeconds" not in obj["spec"]  # liqoctl's default: the signer's own duration
    assert pu.csr(CONSUMER, b"PEM", 600, OWNER)["spec"]["expirationSeconds"] == 600
    assert pu.csr_is_for(obj, b"PEM") and not pu.csr_is_for(obj, b"OTHER")


def test_approval_and_issuance() -> None:
    obj = pu.csr(CONSUMER, b"PEM", None, OWNER)
    assert not pu.csr_approved(obj) and pu.issued(obj) is None and pu.csr_refusal(obj) is None
    approved = pu.approval(obj, "team-a/to-provider")
    (cond,) = approved["status"]["conditions"]
    assert cond["type"] == "Approved" and cond["status"] == "True" and "team-a/to-provider" in cond["message"]
    assert pu.csr_approved(approved) and not pu.csr_approved(obj)  # the input is left alone
    signed = {**approved, "status": {**approved["status"], "certificate": b64(b"CERT")}}
    assert pu.issued(signed) == b"CERT"
    denied = {**obj, "status": {"conditions": [{"type": "Denied", "reason": "Policy", "message": "no"}]}}
    assert pu.csr_refusal(denied) == "Denied: Policy no"


# -- RBAC --------------------------------------------------------------------------------------------------------
def test_the_revoke_role_allows_deleting_itself_only() -> None:
    role = pu.revoke_role(CONSUMER, OWNER)
    name = "liqo-peer-user-consumer-id-revoke"
    assert role["kind"] == "ClusterRole" and role["metadata"]["name"] == name
    assert role["rules"] == [
        {
            "apiGroups": ["rbac.authorization.k8s.io"],
            "resources": ["clusterroles"],
            "verbs": ["delete"],
            "resourceNames": [name],
        }
    ]


def test_the_bindings_are_liqoctls_and_hang_on_the_revoke_role() -> None:
    role = {**pu.revoke_role(CONSUMER, OWNER)}
    role["metadata"] = {**role["metadata"], "uid": "uid-1"}
    owners = pu.owned_by_revoke_role(role)
    assert owners == [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "name": role["metadata"]["name"],
            "uid": "uid-1",
        }
    ]
    users = ["cn-old", "cn-new"]
    reader = pu.reader_binding(CONSUMER, "liqo", "liqo-peering-user-liqo-ns", users, OWNER, owners)
    writer = pu.writer_binding(CONSUMER, "liqo-tenant-consumer-id", "liqo-peering-user-tenant-ns", users, OWNER, owners)
    own = pu.revoke_binding(CONSUMER, users, OWNER, owners)
    assert (reader["metadata"]["name"], reader["metadata"]["namespace"]) == (pu.reader_binding_name(CONSUMER), "liqo")
    assert reader["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "liqo-peering-user-liqo-ns",
    }
    assert writer["metadata"]["namespace"] == "liqo-tenant-consumer-id"
    assert writer["roleRef"]["kind"] == "ClusterRole" and writer["roleRef"]["name"] == "liqo-peering-user-tenant-ns"
    assert own["kind"] == "ClusterRoleBinding" and own["roleRef"]["name"] == role["metadata"]["name"]
    for binding in (reader, writer, own):
        assert binding["subjects"] == [
            {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "cn-old"},
            {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "cn-new"},
        ]
        assert pu.bound_users(binding) == users
        assert binding["metadata"]["ownerReferences"] == owners
        assert binding["metadata"]["labels"]["liqo.io/peering-user-name"] == "liqo-peer-user-consumer-id"
        assert binding["metadata"]["labels"][naming.MANAGED_BY] == naming.MANAGER


# -- the kubeconfig --------------------------------------------------------------------------------------------
def test_the_kubeconfig_reaches_the_provider_as_the_bootstrap_does_with_the_minted_certificate_only() -> None:
    bootstrap = load_remote_kubeconfig(BOOTSTRAP, context=None, allow_exec=False, allow_insecure_tls=False)
    cert = issue("cn", T0, timedelta(days=1))
    key = pu.private_key_pem(USER_KEY)
    config = pu.kubeconfig(bootstrap, CONSUMER, cert, key, "liqo-tenant-consumer-id")
    text = yaml.safe_dump(config)
    assert "admin-token-not-to-be-copied" not in text
    minted = load_remote_kubeconfig(text, context=None, allow_exec=False, allow_insecure_tls=False)
    assert minted.server == "https://198.18.0.2:6443"
    (cluster,) = config["clusters"]
    assert cluster["cluster"] == bootstrap.config["clusters"][0]["cluster"]  # CA, TLS server name, server
    (user,) = config["users"]
    assert user["name"] == "consumer-id-user"  # liqoctl's user name
    assert base64.b64decode(user["user"]["client-certificate-data"]) == cert
    assert pu.load_private_key(base64.b64decode(user["user"]["client-key-data"])).public_key() == USER_KEY.public_key()
    assert config["contexts"][0]["context"]["namespace"] == "liqo-tenant-consumer-id"


# -- renewal -------------------------------------------------------------------------------------------------------
def test_renewal_is_at_two_thirds_of_the_lifetime() -> None:
    assert pu.renew_at(T0, T0 + timedelta(hours=3)) == T0 + timedelta(hours=2)
    cert = pu.certificate(issue("cn-x", T0, timedelta(minutes=15)))
    assert (cert.cn, cert.not_before, cert.not_after) == ("cn-x", T0, T0 + timedelta(minutes=15))
    assert cert.renew_at == T0 + timedelta(minutes=10)


def minted_secret(
    *, cert: bytes | None = None, user: str | None = None, pending: str | None = None, retired: str | None = None
) -> dict[str, Any]:
    bootstrap = load_remote_kubeconfig(BOOTSTRAP, context=None, allow_exec=False, allow_insecure_tls=False)
    body = pu.secret(
        "team-a", naming.minted_secret("to-provider"), {"metadata": {"name": "to-provider", "uid": "u"}}, OWNER
    )
    body.setdefault("data", {})
    body["metadata"]["annotations"] = {}
    if cert is not None:
        config = pu.kubeconfig(bootstrap, CONSUMER, cert, pu.private_key_pem(USER_KEY), "ns")
        body["data"][pu.KUBECONFIG_KEY] = b64(yaml.safe_dump(config).encode())
        body["metadata"]["annotations"][pu.USER_ANNOTATION] = user or "cn-1"
    if pending is not None:
        body["data"][pu.PENDING_KEY] = b64(pu.private_key_pem(USER_KEY))
        body["metadata"]["annotations"][pu.PENDING_ANNOTATION] = pending
    if retired is not None:
        body["metadata"]["annotations"][pu.RETIRED_ANNOTATION] = retired
    return body


def test_the_secret_is_owned_by_the_peering_and_labelled() -> None:
    body = pu.secret(
        "team-a",
        "s",
        {"apiVersion": "peering.liqo-operator.io/v1alpha1", "metadata": {"name": "p", "uid": "u1"}},
        OWNER,
    )
    assert body["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "peering.liqo-operator.io/v1alpha1",
            "kind": "LiqoPeering",
            "name": "p",
            "uid": "u1",
            "controller": True,
        }
    ]
    assert body["metadata"]["labels"][pu.CREDENTIALS_LABEL] == pu.MINTED
    assert body["metadata"]["labels"][naming.PEERING_NAME] == "to-provider"  # OWNER's
    assert "data" not in body  # no credential before minting


@pytest.mark.parametrize(
    ("secret", "now", "step"),
    [
        (None, T0, "begin"),  # nothing minted yet
        ({"cert": None}, T0, "begin"),  # the Secret, empty (a restart right after creating it)
        ({"pending": "cn-2"}, T0, "issue"),  # key stored: finish this CSR
        ({"cert": "valid", "pending": "cn-2"}, T0, "issue"),  # a renewal under way
        ({"cert": "valid", "retired": "cn-0"}, T0, "retire"),  # renewed, the old CN still bound
        ({"cert": "valid"}, T0 + timedelta(minutes=9), "use"),
        ({"cert": "valid"}, T0 + timedelta(minutes=10), "begin"),  # two thirds of 15 minutes: renew
        ({"cert": "valid"}, T0 + timedelta(minutes=20), "begin"),  # expired
    ],
)
def test_next_step(secret: dict[str, Any] | None, now: datetime, step: str) -> None:
    body = None
    if secret is not None:
        cert = issue("cn-1", T0, timedelta(minutes=15)) if secret.get("cert") else None
        body = minted_secret(cert=cert, pending=secret.get("pending"), retired=secret.get("retired"))
    assert pu.next_step(pu.MintState.of(body), now) == step


def test_a_pending_minting_needs_both_its_key_and_its_cn() -> None:
    half = minted_secret(pending="cn-2")
    del half["data"][pu.PENDING_KEY]
    assert pu.MintState.of(half).pending_user is None
    half = minted_secret(pending="cn-2")
    del half["metadata"]["annotations"][pu.PENDING_ANNOTATION]
    assert pu.MintState.of(half).pending_key is None


def test_the_state_reads_what_the_patches_write() -> None:
    state = pu.MintState.of(minted_secret(cert=issue("cn-1", T0, timedelta(hours=1)), user="cn-1"))
    assert state.user == "cn-1" and state.cert is not None and state.cert.cn == "cn-1"
    begin = pu.begin_patch("cn-2", b"KEY")
    assert begin["metadata"]["annotations"] == {pu.PENDING_ANNOTATION: "cn-2"}
    assert base64.b64decode(begin["data"][pu.PENDING_KEY]) == b"KEY"
    bootstrap = load_remote_kubeconfig(BOOTSTRAP, context=None, allow_exec=False, allow_insecure_tls=False)
    config = pu.kubeconfig(bootstrap, CONSUMER, issue("cn-2", T0, timedelta(hours=1)), b"KEY", "ns")
    renewed = pu.issued_patch(state, "cn-2", config)
    assert renewed["metadata"]["annotations"] == {
        pu.USER_ANNOTATION: "cn-2",
        pu.PENDING_ANNOTATION: None,
        pu.RETIRED_ANNOTATION: "cn-1",  # still bound: unbound next
    }
    assert renewed["data"][pu.PENDING_KEY] is None  # the key now lives in the kubeconfig only
    assert yaml.safe_load(base64.b64decode(renewed["data"][pu.KUBECONFIG_KEY])) == config
    first = pu.issued_patch(pu.MintState(), "cn-1", config)
    assert pu.RETIRED_ANNOTATION not in first["metadata"]["annotations"]
    assert pu.retired_patch() == {"metadata": {"annotations": {pu.RETIRED_ANNOTATION: None}}}
    assert not state.revoking
    body = minted_secret(cert=issue("cn-1", T0, timedelta(hours=1)))
    body["metadata"]["annotations"].update(pu.revoking_patch()["metadata"]["annotations"])
    assert pu.MintState.of(body).revoking  # unpeered: the next pass only finishes the revocation


def test_an_unreadable_kubeconfig_counts_as_none() -> None:
    body = minted_secret()
    body["data"][pu.KUBECONFIG_KEY] = b64(b"not: [a kubeconfig")
    state = pu.MintState.of(body)
    assert state.cert is None and pu.next_step(state, T0) == "begin"


# -- the key's algorithm (spec.credentials.keyAlgorithm) -----------------------------------------------------------
def controller_manager(*args: str, name: str = "controller-manager") -> dict[str, Any]:
    """liqo-controller-manager's Deployment as Liqo's chart renders it (only what the rule reads)."""
    return {"spec": {"template": {"spec": {"containers": [{"name": name, "args": list(args)}]}}}}


@pytest.mark.parametrize(
    ("deployments", "compatible"),
    [
        ([controller_manager("--cluster-id=p", "--tls-compatibility-mode=true")], True),  # the chart's rendering
        ([controller_manager("--tls-compatibility-mode=True")], True),
        ([controller_manager("--tls-compatibility-mode")], True),  # a bare flag means true
        ([controller_manager("--tls-compatibility-mode=")], True),  # liqoctl: an empty value too
        ([controller_manager("--tls-compatibility-mode=false")], False),  # the chart's default
        ([controller_manager("--cluster-id=p")], False),
        ([controller_manager("--tls-compatibility-mode=true", name="sidecar")], False),  # another container's
        ([], False),  # no controller manager found
        ([controller_manager("--tls-compatibility-mode=true")] * 2, False),  # several: liqoctl gives up
    ],
)
def test_tls_compatibility_mode_is_read_as_liqoctl_reads_it(
    deployments: list[dict[str, Any]], compatible: bool
) -> None:
    assert pu.tls_compatibility_mode(deployments) is compatible


@pytest.mark.parametrize(
    ("setting", "tls_compatibility", "algorithm"),
    [
        ("Auto", True, "RSA"),
        ("Auto", False, "Ed25519"),
        ("Auto", None, "Ed25519"),  # unknown: liqoctl's default
        ("RSA", False, "RSA"),
        ("Ed25519", True, "Ed25519"),  # the spec's word over the provider's mode
    ],
)
def test_key_algorithm(setting: str, tls_compatibility: bool | None, algorithm: str) -> None:
    assert pu.key_algorithm(setting, tls_compatibility) == algorithm


def test_an_rsa_key_makes_liqos_csr_signed_with_sha256_and_the_same_bytes_again() -> None:
    key = pu.new_private_key("RSA")
    assert pu.algorithm_of(key) == "RSA" and key.key_size == pu.RSA_KEY_BITS  # liqoctl's RSA-2048
    pem = pu.private_key_pem(key)
    request = pu.csr_request(pu.load_private_key(pem), "liqo-peer-user-consumer-id-x")
    csr = x509.load_pem_x509_csr(request)
    assert csr.is_signature_valid and csr.signature_hash_algorithm is not None
    assert csr.signature_hash_algorithm.name == "sha256"
    assert csr.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == "liqo.io"
    # A resumed minting rebuilds its request from the stored key and must recognise its own CSR.
    assert pu.csr_request(pu.load_private_key(pem), "liqo-peer-user-consumer-id-x") == request
    assert pu.algorithm_of(pu.new_private_key("Ed25519")) == "Ed25519"


def test_a_key_of_the_other_algorithm_than_the_spec_names_is_minted_again() -> None:
    state = pu.MintState.of(minted_secret(cert=issue("cn-1", T0, timedelta(hours=1))))
    assert state.key_algorithm == "Ed25519"  # USER_KEY's, read back from the kubeconfig
    assert pu.next_step(state, T0, "Ed25519") == "use"
    assert pu.next_step(state, T0, "Auto") == "use"  # Auto's rule was applied when it was minted
    assert pu.next_step(state, T0, "RSA") == "begin"
