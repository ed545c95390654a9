"""The Liqo stand-in's pure logic (no cluster): handshake check, kubeconfig shape, condition bookkeeping."""

from __future__ import annotations

import base64
from typing import Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from cryptography.x509.oid import NameOID

from testenv import kube as k
from testenv.standin.standin import Side, StandIn, merge_conditions, strip_none


class _NoKube(k.Kube):
    def __init__(self) -> None:  # never talks to a server
        pass


def _tenant(key: ed25519.Ed25519PrivateKey, nonce: bytes, cn: str = "consumer", org: str = "liqo.io") -> dict[str, Any]:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn), x509.NameAttribute(NameOID.ORGANIZATION_NAME, org)])
    csr = x509.CertificateSigningRequestBuilder().subject_name(name).sign(key, None)
    pub = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    return {
        "kind": "Tenant",
        "metadata": {"name": "consumer", "uid": "u1"},
        "spec": {
            "clusterID": "consumer",
            "publicKey": k.b64(pub),
            "csr": k.b64(csr.public_bytes(serialization.Encoding.PEM)),
            "signature": k.b64(key.sign(nonce)),
        },
    }


def _side_with_nonce(nonce: bytes) -> Side:
    side = Side("provider", _NoKube(), "liqo", cluster_id="provider")
    secret = {"metadata": {"labels": {"liqo.io/remote-cluster-id": "consumer"}}, "data": {"nonce": k.b64(nonce)}}
    side.snap = {"nonces": [secret]}
    return side


def test_handshake_accepts_what_liqo_would_send() -> None:
    nonce = base64.b64encode(b"n" * 64)  # Liqo stores the base64 text and signs those bytes
    key = ed25519.Ed25519PrivateKey.generate()
    standin = StandIn(_NoKube(), _NoKube())
    assert standin._verify_handshake(_side_with_nonce(nonce), _tenant(key, nonce), "consumer")


def test_handshake_rejects_wrong_signature_subject_or_key() -> None:
    nonce = b"abc"
    key = ed25519.Ed25519PrivateKey.generate()
    standin = StandIn(_NoKube(), _NoKube())
    side = _side_with_nonce(nonce)
    assert not standin._verify_handshake(side, _tenant(key, b"other"), "consumer")
    assert not standin._verify_handshake(side, _tenant(key, nonce, cn="someone-else"), "consumer")
    assert not standin._verify_handshake(side, _tenant(key, nonce, org="example.com"), "consumer")
    # CSR signed by another key than spec.publicKey.
    tenant = _tenant(key, nonce)
    tenant["spec"]["csr"] = _tenant(ed25519.Ed25519PrivateKey.generate(), nonce)["spec"]["csr"]
    assert not standin._verify_handshake(side, tenant, "consumer")


def test_kubeconfig_shape_matches_liqo() -> None:
    params = {"apiServer": "https://127.0.0.1:6443", "ca": k.b64(b"CA"), "signedCRT": k.b64(b"CRT")}
    cfg = yaml.safe_load(StandIn._kubeconfig("controlplane-p", "p", params, k.b64(b"KEY"), "liqo-tenant-c"))
    assert cfg["current-context"] == "default-context"
    assert cfg["contexts"][0]["context"] == {"cluster": "p", "user": "controlplane-p", "namespace": "liqo-tenant-c"}
    user = cfg["users"][0]["user"]
    assert user["client-certificate-data"] == params["signedCRT"] and user["client-key-data"] == k.b64(b"KEY")


def test_merge_conditions_keeps_transition_time_while_status_holds() -> None:
    old = [{"type": "A", "status": "Ready", "lastTransitionTime": "2020-01-01T00:00:00Z"}]
    same = merge_conditions(old, [{"type": "A", "status": "Ready"}])
    changed = merge_conditions(old, [{"type": "A", "status": "NotReady"}])
    assert same[0]["lastTransitionTime"] == "2020-01-01T00:00:00Z"
    assert changed[0]["lastTransitionTime"] != "2020-01-01T00:00:00Z"
    assert strip_none({"a": None, "b": [{"c": None, "d": 1}]}) == {"b": [{"d": 1}]}
