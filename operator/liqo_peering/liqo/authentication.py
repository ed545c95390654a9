"""Stage 2 builders: nonce Secrets, Tenant (with its CSR) and ControlPlane Identity (liqoctl authenticate)."""

from __future__ import annotations

import base64
import contextlib
import warnings
from collections.abc import Iterator
from typing import Any

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.x509.name import _ASN1Type
from cryptography.x509.oid import NameOID

from liqo_peering.api.model import ApiServerSpec
from liqo_peering.errors import LiqoNotReady
from liqo_peering.fields import mapping_at, text_at
from liqo_peering.liqo import naming, resources
from liqo_peering.liqo.context import PeeringContext

CONTROL_PLANE_ORGANIZATION = "liqo.io"
# ASN.1 PrintableString's alphabet (Go's encoding/asn1 isPrintable, as it marshals names).
_PRINTABLE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789 '()+,-./:=?")


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def nonce_secret(ctx: PeeringContext) -> dict[str, Any]:
    """Empty nonce Secret on the provider; Liqo's nonce creator fills data.nonce."""
    labels = ctx.labels(ctx.consumer.cluster_id, **{naming.NONCE_LABEL: "true"})
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": ctx.metadata(naming.NONCE_SECRET, ctx.provider_tenant_ns, labels),
    }


def signed_nonce_secret(ctx: PeeringContext, nonce_b64: str) -> dict[str, Any]:
    """Signed-nonce Secret on the consumer carrying the provider's nonce; Liqo fills data.signedNonce."""
    labels = ctx.labels(ctx.provider.cluster_id, **{naming.SIGNED_NONCE_LABEL: "true"})
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": ctx.metadata(naming.SIGNED_NONCE_SECRET, ctx.consumer_tenant_ns, labels),
        "data": {naming.NONCE_FIELD: nonce_b64},
    }


def secret_field(secret: dict[str, Any] | None, key: str) -> str | None:
    """A Secret's base64 value for key, or None when absent or empty."""
    return text_at(secret, "data", key)


def load_cluster_keys(keys_secret: dict[str, Any]) -> tuple[Any, bytes]:
    """The cluster's private key and public-key DER from Liqo's authentication-keys Secret (PEM values)."""
    data = mapping_at(keys_secret, "data")
    unusable = LiqoNotReady(
        f"Liqo's Secret {naming.AUTH_KEYS_SECRET} has no usable privateKey and publicKey; Liqo's controller"
        " manager writes them at start-up: check that Liqo runs on this cluster"
    )
    private_b64 = data.get("privateKey")
    if not isinstance(private_b64, str) or not data.get("publicKey"):
        raise unusable
    try:
        private = serialization.load_pem_private_key(base64.b64decode(private_b64), password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        raise unusable from None
    public_der = private.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return private, public_der


def _go_string_type(value: str) -> _ASN1Type:
    """How Go's encoding/asn1 tags a string in a name: PrintableString when it can, else UTF8String."""
    return _ASN1Type.PrintableString if all(c in _PRINTABLE for c in value) else _ASN1Type.UTF8String


def control_plane_csr(private_key: Any, cluster_id: str) -> bytes:
    """PEM CSR with O=liqo.io, CN=<cluster ID>, signed with the cluster key: byte for byte what Liqo's
    GenerateCSRForControlPlane makes from an ed25519 key (Go's subject order, O before CN, and its string
    types). The provider keeps the first CSR of a consumer in its tenant namespace beyond unpeering (Secret
    liqo-remote-certificate) and refuses any other ("the stored and the provided CSR do not match"), so a
    different encoding would keep `liqoctl peer` from re-peering after the operator, and back."""
    return liqo_csr(private_key, cluster_id)


@contextlib.contextmanager
def long_common_names() -> Iterator[None]:
    """Go does not hold a CN to X.509's 64 characters, and a peering user's has 48 plus the cluster ID: no
    warning from cryptography for one."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Attribute's length must be", category=UserWarning)
        yield


def liqo_csr(private_key: Any, common_name: str) -> bytes:
    """PEM CSR with O=liqo.io and this CN, as Liqo's generateCSR makes them (control plane and peering user)."""
    org = CONTROL_PLANE_ORGANIZATION
    with long_common_names():
        subject = x509.Name(
            [
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, org, _type=_go_string_type(org)),
                x509.NameAttribute(
                    NameOID.COMMON_NAME, common_name, _type=_go_string_type(common_name), _validate=False
                ),
            ]
        )
    algorithm: hashes.SHA256 | None = None
    if isinstance(private_key, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey):
        algorithm = hashes.SHA256()
    elif not isinstance(private_key, ed25519.Ed25519PrivateKey):
        raise ValueError(f"unsupported cluster key type {type(private_key).__name__}")
    csr = x509.CertificateSigningRequestBuilder().subject_name(subject).sign(private_key, algorithm)
    return csr.public_bytes(serialization.Encoding.PEM)


def tenant(
    ctx: PeeringContext, public_key_der: bytes, csr_pem: bytes, signed_nonce_b64: str, proxy_url: str | None
) -> dict[str, Any]:
    """Tenant applied on the provider, named after the consumer (Liqo's TenantForRemoteCluster)."""
    public_pem = serialization.load_der_public_key(public_key_der).public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    spec: dict[str, Any] = {
        "clusterID": ctx.consumer.cluster_id,
        "publicKey": b64(public_pem),
        "csr": b64(csr_pem),
        "signature": signed_nonce_b64,
    }
    if proxy_url:
        spec["proxyURL"] = proxy_url
    return {
        "apiVersion": resources.TENANT.api_version,
        "kind": resources.TENANT.kind,
        "metadata": ctx.metadata(ctx.consumer.cluster_id, ctx.provider_tenant_ns, ctx.labels(ctx.consumer.cluster_id)),
        "spec": spec,
    }


def tenant_metadata(ctx: PeeringContext) -> dict[str, Any]:
    """The Tenant's metadata alone, as ``tenant`` makes it: what a Tenant already there is compared with."""
    return {
        "metadata": ctx.metadata(ctx.consumer.cluster_id, ctx.provider_tenant_ns, ctx.labels(ctx.consumer.cluster_id))
    }


def tenant_ready(obj: dict[str, Any] | None) -> bool:
    status = mapping_at(obj, "status")
    return bool(mapping_at(status, "authParams")) and bool(text_at(status, "tenantNamespace"))


def identity(
    ctx: PeeringContext, tenant_status: dict[str, Any], api_server: ApiServerSpec | None = None
) -> dict[str, Any]:
    """ControlPlane Identity on the consumer, from the provider Tenant's status; with ``api_server``
    (spec.authentication.apiServer), the provider's API server reached there instead of where its Liqo says."""
    provider_id = ctx.provider.cluster_id
    params = dict(tenant_status["authParams"])
    if api_server is not None:
        params["apiServer"] = api_server.address
        if api_server.certificate_authority_data is not None:
            params["ca"] = api_server.certificate_authority_data
    return {
        "apiVersion": resources.IDENTITY.api_version,
        "kind": resources.IDENTITY.kind,
        "metadata": ctx.metadata(naming.identity_name(provider_id), ctx.consumer_tenant_ns, ctx.labels(provider_id)),
        "spec": {
            "clusterID": provider_id,
            "type": "ControlPlane",
            "authParams": params,
            "namespace": tenant_status["tenantNamespace"],
        },
    }


def identity_ready(obj: dict[str, Any] | None) -> bool:
    return text_at(obj, "status", "kubeconfigSecretRef", "name") is not None


def has_labels(obj: dict[str, Any], labels: dict[str, str]) -> bool:
    have = (obj.get("metadata") or {}).get("labels") or {}
    return all(have.get(k) == v for k, v in labels.items())
