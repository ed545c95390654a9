"""The peering user the operator mints (spec.credentials.mint), and the Secret that keeps it.

On the provider, the same identity `liqoctl generate peering-user --consumer-cluster-id` makes (Liqo v1.2,
pkg/liqoctl/rest/peering-user/userfactory): a client certificate for CN ``liqo-peer-user-<consumer>-<32 hex>``,
O ``liqo.io``, issued through a CSR of signer ``kubernetes.io/kube-apiserver-client`` named
``liqo-peer-user-<consumer>``, and two RoleBindings labelled ``liqo.io/peering-user-name``: Liqo's
peering-user Role in Liqo's namespace (``-liqo-ns-reader``) and its ClusterRole in the tenant namespace
(``-tenant-ns-writer``). One object more than liqoctl's: a ClusterRole ``-revoke``, bound to the user, that
allows nothing but deleting itself, and owns the bindings. Deleting it revokes everything at once (the
garbage collector removes what it owns), so the identity can revoke itself at unpeering even when the
bootstrap kubeconfig is gone. A certificate cannot be revoked in Kubernetes; without its bindings the user
is refused (403), as after `liqoctl delete peering-user`.

On the consumer, the minted kubeconfig lives in a Secret owned by the LiqoPeering, which also carries a
minting in progress (its private key is stored before its CSR exists), so an operator restarted at any
point finishes the same CSR. Everything here is pure: the key and the random suffix come from the caller.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa
from cryptography.x509.oid import NameOID

from liqo_peering.fields import mapping_at
from liqo_peering.kubeconfig import KubeconfigError, RemoteKubeconfig, parse_yaml
from liqo_peering.liqo import resources
from liqo_peering.liqo.authentication import liqo_csr, long_common_names
from liqo_peering.liqo.context import metadata

# Liqo's names (pkg/consts, the chart's peering-user roles).
USER_LABEL = "liqo.io/peering-user-name"
ROLES_SELECTOR = "app.kubernetes.io/component=peering-user"
SIGNER = "kubernetes.io/kube-apiserver-client"
USAGES = ("digital signature", "key encipherment", "client auth")
RBAC_GROUP = "rbac.authorization.k8s.io"

# The minted Secret on the consumer.
KUBECONFIG_KEY = "kubeconfig"
PENDING_KEY = "pending.key"  # the private key of the CSR in flight
CREDENTIALS_LABEL = "peering.liqo-operator.io/credentials"
MINTED = "minted"
MINTED_SELECTOR = f"{CREDENTIALS_LABEL}={MINTED}"  # every minted kubeconfig Secret
USER_ANNOTATION = "peering.liqo-operator.io/minted-user"  # the CN of the kubeconfig in the Secret
PENDING_ANNOTATION = "peering.liqo-operator.io/pending-user"  # the CN being minted
RETIRED_ANNOTATION = "peering.liqo-operator.io/retired-user"  # a renewed CN still bound, to unbind
REVOKING_ANNOTATION = "peering.liqo-operator.io/revoking"  # unpeered: the identity is being revoked
# Renewed at this share of the certificate's lifetime (kubelet and cert-manager renew at 70-90 % and 2/3).
RENEW_AT = 2 / 3
# liqo-controller-manager's Deployment (Liqo's ControllerManagerLabelSelector), its container and the flag that
# makes Liqo's own keys RSA (pkg/liqoctl/rest/peering-user/generate.go reads it the same way).
CONTROLLER_MANAGER_SELECTOR = "app.kubernetes.io/name=controller-manager,app.kubernetes.io/component=controller-manager"
CONTROLLER_MANAGER_CONTAINER = "controller-manager"
TLS_COMPATIBILITY_FLAG = "--tls-compatibility-mode"
RSA_KEY_BITS = 2048
KeyAlgorithm = Literal["Ed25519", "RSA"]


def user_name(consumer_id: str) -> str:
    """liqoctl's GetUserNameFromClusterID: the CSR's name, the label's value, the bindings' prefix."""
    return f"liqo-peer-user-{consumer_id}"


def common_name(consumer_id: str, suffix: str) -> str:
    """The certificate's CN: a random suffix per minting, so a renewed or re-made user is a new one."""
    return f"{user_name(consumer_id)}-{suffix}"


def consumer_of(cn: str) -> str | None:
    """The consumer cluster ID in a CN made by ``common_name``; None for any other name."""
    prefix = user_name("")
    if not cn.startswith(prefix) or "-" not in cn[len(prefix) :]:
        return None
    consumer, _, _suffix = cn[len(prefix) :].rpartition("-")
    return consumer or None


def reader_binding_name(consumer_id: str) -> str:
    return f"{user_name(consumer_id)}-liqo-ns-reader"


def writer_binding_name(consumer_id: str) -> str:
    return f"{user_name(consumer_id)}-tenant-ns-writer"


def revoke_role_name(consumer_id: str) -> str:
    return f"{user_name(consumer_id)}-revoke"


def labels(consumer_id: str, owner: dict[str, str]) -> dict[str, str]:
    return {USER_LABEL: user_name(consumer_id), **owner}


# -- the CSR ---------------------------------------------------------------------------------------------
def csr_request(private_key: Any, cn: str) -> bytes:
    """The PEM request: Liqo's encoding (O=liqo.io, then the CN). Ed25519 and RSA PKCS#1 v1.5 signatures are
    deterministic, so the same key gives the same bytes, and a resumed minting recognises its own CSR."""
    return liqo_csr(private_key, cn)


def csr(consumer_id: str, request_pem: bytes, lifetime_seconds: int | None, owner: dict[str, str]) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "request": base64.b64encode(request_pem).decode(),
        "signerName": SIGNER,
        "usages": list(USAGES),
    }
    if lifetime_seconds is not None:
        spec["expirationSeconds"] = lifetime_seconds
    return {
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": metadata(user_name(consumer_id), None, labels(consumer_id, owner)),
        "spec": spec,
    }


def csr_is_for(obj: dict[str, Any], request_pem: bytes) -> bool:
    return str((obj.get("spec") or {}).get("request") or "") == base64.b64encode(request_pem).decode()


def _conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c.get("type", ""): c for c in (obj.get("status") or {}).get("conditions") or []}


def csr_approved(obj: dict[str, Any]) -> bool:
    return "Approved" in _conditions(obj)


def csr_refusal(obj: dict[str, Any]) -> str | None:
    """Why the CSR will never be issued (denied, or the signer failed), else None."""
    for kind in ("Denied", "Failed"):
        cond = _conditions(obj).get(kind)
        if cond is not None:
            return f"{kind}: {cond.get('reason') or ''} {cond.get('message') or ''}".strip()
    return None


def approval(obj: dict[str, Any], peering: str) -> dict[str, Any]:
    """The CSR with an Approved condition, for its approval subresource (as liqoctl approves it)."""
    status = dict(obj.get("status") or {})
    status["conditions"] = [
        *(status.get("conditions") or []),
        {
            "type": "Approved",
            "status": "True",
            "reason": "LiqoPeeringOperatorApproval",
            "message": f"approved by liqo-peering-operator for LiqoPeering {peering} (a Liqo peering user)",
        },
    ]
    return {**obj, "status": status}


def issued(obj: dict[str, Any]) -> bytes | None:
    """The PEM certificate the signer issued, once it did."""
    value = (obj.get("status") or {}).get("certificate")
    if not value:
        return None
    try:
        return base64.b64decode(value)
    except (binascii.Error, ValueError):
        return None


# -- RBAC ------------------------------------------------------------------------------------------------
def revoke_role(consumer_id: str, owner: dict[str, str]) -> dict[str, Any]:
    """A ClusterRole that may delete itself only: the anchor every other grant of the user hangs on."""
    name = revoke_role_name(consumer_id)
    return {
        "apiVersion": f"{RBAC_GROUP}/v1",
        "kind": "ClusterRole",
        "metadata": metadata(name, None, labels(consumer_id, owner)),
        "rules": [
            {"apiGroups": [RBAC_GROUP], "resources": ["clusterroles"], "verbs": ["delete"], "resourceNames": [name]}
        ],
    }


def owned_by_revoke_role(role: dict[str, Any]) -> list[dict[str, Any]]:
    meta = role["metadata"]
    return [{"apiVersion": f"{RBAC_GROUP}/v1", "kind": "ClusterRole", "name": meta["name"], "uid": meta["uid"]}]


def _subjects(users: list[str]) -> list[dict[str, str]]:
    return [{"kind": "User", "apiGroup": RBAC_GROUP, "name": user} for user in users]


def _binding(
    kind: str,
    name: str,
    namespace: str | None,
    role_kind: str,
    role: str,
    users: list[str],
    consumer_id: str,
    owner: dict[str, str],
    owners: list[dict[str, Any]],
) -> dict[str, Any]:
    meta = metadata(name, namespace, labels(consumer_id, owner))
    meta["ownerReferences"] = owners
    return {
        "apiVersion": f"{RBAC_GROUP}/v1",
        "kind": kind,
        "metadata": meta,
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": role_kind, "name": role},
        "subjects": _subjects(users),
    }


def revoke_binding(
    consumer_id: str, users: list[str], owner: dict[str, str], owners: list[dict[str, Any]]
) -> dict[str, Any]:
    name = revoke_role_name(consumer_id)
    return _binding("ClusterRoleBinding", name, None, "ClusterRole", name, users, consumer_id, owner, owners)


def reader_binding(
    consumer_id: str,
    liqo_namespace: str,
    role: str,
    users: list[str],
    owner: dict[str, str],
    owners: list[dict[str, Any]],
) -> dict[str, Any]:
    """Liqo's peering-user Role (read Liqo's namespace), bound in Liqo's namespace."""
    name = reader_binding_name(consumer_id)
    return _binding("RoleBinding", name, liqo_namespace, "Role", role, users, consumer_id, owner, owners)


def writer_binding(
    consumer_id: str,
    tenant_namespace: str,
    cluster_role: str,
    users: list[str],
    owner: dict[str, str],
    owners: list[dict[str, Any]],
) -> dict[str, Any]:
    """Liqo's peering-user ClusterRole (write the peering's objects), bound in the tenant namespace."""
    name = writer_binding_name(consumer_id)
    return _binding(
        "RoleBinding", name, tenant_namespace, "ClusterRole", cluster_role, users, consumer_id, owner, owners
    )


def bound_users(binding: dict[str, Any] | None) -> list[str]:
    return [s["name"] for s in (binding or {}).get("subjects") or [] if s.get("kind") == "User"]


# -- the kubeconfig --------------------------------------------------------------------------------------
def kubeconfig(
    bootstrap: RemoteKubeconfig, consumer_id: str, cert_pem: bytes, key_pem: bytes, namespace: str
) -> dict[str, Any]:
    """The minted kubeconfig: the bootstrap's cluster entry (server, CA, TLS name, proxy: what already
    reaches the provider), the certificate and key, the tenant namespace as liqoctl sets it."""
    cluster = bootstrap.config["clusters"][0]
    user = f"{consumer_id}-user"
    context = f"{user}@{cluster['name']}"
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate-data": base64.b64encode(cert_pem).decode(),
                    "client-key-data": base64.b64encode(key_pem).decode(),
                },
            }
        ],
        "contexts": [{"name": context, "context": {"cluster": cluster["name"], "user": user, "namespace": namespace}}],
        "current-context": context,
    }


def tls_compatibility_mode(deployments: list[dict[str, Any]]) -> bool:
    """Whether the provider's liqo-controller-manager runs in TLS compatibility mode, read as liqoctl reads it:
    one Deployment, its controller-manager container, the flag bare or ``=true`` (any case); anything else
    (no such Deployment, or several, or no flag) is not."""
    if len(deployments) != 1:
        return False
    containers = (((deployments[0].get("spec") or {}).get("template") or {}).get("spec") or {}).get("containers") or []
    for container in containers:
        if container.get("name") != CONTROLLER_MANAGER_CONTAINER:
            continue
        for arg in container.get("args") or []:
            if arg == TLS_COMPATIBILITY_FLAG:
                return True
            if isinstance(arg, str) and arg.startswith(TLS_COMPATIBILITY_FLAG + "="):
                value = arg.split("=", 1)[1]
                return value == "" or value.lower() == "true"
        return False
    return False


def key_algorithm(setting: str, tls_compatibility: bool | None) -> KeyAlgorithm:
    """The algorithm of a new minted key: the spec's, or for Auto what the provider's TLS mode calls for
    (``tls_compatibility`` None: not known, Ed25519 as liqoctl defaults)."""
    if setting == "RSA" or (setting == "Auto" and tls_compatibility):
        return "RSA"
    return "Ed25519"


def new_private_key(algorithm: KeyAlgorithm) -> Any:
    if algorithm == "RSA":
        return rsa.generate_private_key(public_exponent=65537, key_size=RSA_KEY_BITS)
    return ed25519.Ed25519PrivateKey.generate()


def algorithm_of(private_key: Any) -> KeyAlgorithm | None:
    if isinstance(private_key, rsa.RSAPrivateKey):
        return "RSA"
    if isinstance(private_key, ed25519.Ed25519PrivateKey):
        return "Ed25519"
    return None


def private_key_pem(private_key: Any) -> bytes:
    return bytes(
        private_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )


def load_private_key(pem: bytes) -> Any:
    return serialization.load_pem_private_key(pem, password=None)


@dataclass(frozen=True)
class Certificate:
    cn: str
    not_before: datetime
    not_after: datetime

    @property
    def renew_at(self) -> datetime:
        return renew_at(self.not_before, self.not_after)


def certificate(pem: bytes) -> Certificate:
    cert = x509.load_pem_x509_certificate(pem)
    with long_common_names():
        cns = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return Certificate(str(cns[0].value) if cns else "", cert.not_valid_before_utc, cert.not_valid_after_utc)


def renew_at(not_before: datetime, not_after: datetime) -> datetime:
    """When to renew: at two thirds of the lifetime, so a failing renewal has a third left to be fixed."""
    return not_before + timedelta(seconds=(not_after - not_before).total_seconds() * RENEW_AT)


# -- the minted Secret -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class MintState:
    """What the minted Secret says: the kubeconfig in use and its certificate, and any minting under way."""

    kubeconfig: bytes | None = None
    cert: Certificate | None = None
    key_algorithm: KeyAlgorithm | None = None  # of the kubeconfig in use
    user: str | None = None
    pending_user: str | None = None
    pending_key: bytes | None = None
    retired_user: str | None = None
    revoking: bool = False

    @classmethod
    def of(cls, secret: dict[str, Any] | None) -> MintState:
        if secret is None:
            return cls()
        data = mapping_at(secret, "data")
        notes = (secret.get("metadata") or {}).get("annotations") or {}
        raw = _decoded(data.get(KUBECONFIG_KEY))
        pending_key = _decoded(data.get(PENDING_KEY))
        return cls(
            kubeconfig=raw,
            cert=_kubeconfig_certificate(raw),
            key_algorithm=_kubeconfig_key_algorithm(raw),
            user=notes.get(USER_ANNOTATION),
            pending_user=notes.get(PENDING_ANNOTATION) if pending_key else None,
            pending_key=pending_key if notes.get(PENDING_ANNOTATION) else None,
            retired_user=notes.get(RETIRED_ANNOTATION),
            revoking=notes.get(REVOKING_ANNOTATION) == "true",
        )


def _decoded(value: Any) -> bytes | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return base64.b64decode(value)
    except (binascii.Error, ValueError):
        return None


def _kubeconfig_certificate(raw: bytes | None) -> Certificate | None:
    """The client certificate of a kubeconfig this module wrote, or None if it cannot be read."""
    if raw is None:
        return None
    try:
        doc = parse_yaml(raw)
        data = doc["users"][0]["user"]["client-certificate-data"]
        return certificate(base64.b64decode(data))
    except (KubeconfigError, KeyError, IndexError, TypeError, ValueError, binascii.Error):
        return None


def _kubeconfig_key_algorithm(raw: bytes | None) -> KeyAlgorithm | None:
    """The algorithm of a kubeconfig's client key, None if it cannot be read."""
    if raw is None:
        return None
    try:
        doc = parse_yaml(raw)
        return algorithm_of(load_private_key(base64.b64decode(doc["users"][0]["user"]["client-key-data"])))
    except (KubeconfigError, KeyError, IndexError, TypeError, ValueError, binascii.Error):
        return None


Step = Literal["issue", "retire", "begin", "use"]


def next_step(state: MintState, now: datetime, algorithm: str = "Auto") -> Step:
    """What minting does next: finish a CSR under way, unbind a renewed user, start one, or nothing.

    "begin" when there is no usable kubeconfig, its certificate is due for renewal, or its key is not of the
    ``algorithm`` the spec names (Auto takes the key as it is: its rule was applied when it was minted).
    """
    if state.pending_user:
        return "issue"
    if state.retired_user:
        return "retire"
    if state.kubeconfig is None or state.cert is None or now >= state.cert.renew_at:
        return "begin"
    if algorithm != "Auto" and state.key_algorithm is not None and state.key_algorithm != algorithm:
        return "begin"
    return "use"


def secret(
    namespace: str,
    name: str,
    peering: dict[str, Any],
    owner: dict[str, str],
) -> dict[str, Any]:
    """The minted Secret, empty: owned by the LiqoPeering (the garbage collector removes it with it)."""
    meta = metadata(name, namespace, {**owner, CREDENTIALS_LABEL: MINTED})
    pmeta = peering["metadata"]
    meta["ownerReferences"] = [
        {
            "apiVersion": str(peering.get("apiVersion") or resources.LIQOPEERING.api_version),
            "kind": str(peering.get("kind") or resources.LIQOPEERING.kind),
            "name": pmeta["name"],
            "uid": pmeta["uid"],
            "controller": True,
        }
    ]
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": meta}


def begin_patch(cn: str, key_pem: bytes) -> dict[str, Any]:
    """Record a minting before its CSR exists: the key, and the CN it is for."""
    return {
        "metadata": {"annotations": {PENDING_ANNOTATION: cn}},
        "data": {PENDING_KEY: base64.b64encode(key_pem).decode()},
    }


def issued_patch(state: MintState, cn: str, config: dict[str, Any]) -> dict[str, Any]:
    """The new kubeconfig in use; the CN it replaces (if any) is left to unbind."""
    notes: dict[str, Any] = {USER_ANNOTATION: cn, PENDING_ANNOTATION: None}
    if state.user and state.user != cn:
        notes[RETIRED_ANNOTATION] = state.user
    raw = yaml.safe_dump(config, sort_keys=False).encode()
    return {
        "metadata": {"annotations": notes},
        "data": {KUBECONFIG_KEY: base64.b64encode(raw).decode(), PENDING_KEY: None},
    }


def retired_patch() -> dict[str, Any]:
    return {"metadata": {"annotations": {RETIRED_ANNOTATION: None}}}


def revoking_patch() -> dict[str, Any]:
    """Unpeered, revocation begun: from now on the minted credential is expected to be refused."""
    return {"metadata": {"annotations": {REVOKING_ANNOTATION: "true"}}}
