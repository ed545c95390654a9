"""The certificates in Liqo's authParams: when the identity that carries one expires (pure).

``authParams.signedCRT`` is a PEM certificate, base64-encoded as Kubernetes encodes bytes. It comes from the
other cluster (its Tenant or ResourceSlice status), so it is read within bounds and anything else is no
certificate at all.
"""

from __future__ import annotations

import base64
import binascii
from datetime import UTC, datetime
from typing import Any

from cryptography import x509

from liqo_peering.fields import mapping_at, mappings_at, text_at
from liqo_peering.kubeconfig import KubeconfigError, parse_yaml
from liqo_peering.liqo import naming
from liqo_peering.liqo.versions import LiqoVersion
from liqo_peering.stages import IdentityCertificate

# A client certificate is about a kilobyte; an RSA-4096 one with a chain is under 8 KiB.
MAX_CERTIFICATE_CHARS = 16384
# Where the provider's Liqo keeps the certificate it issued for an identity, in its tenant namespace
# (pkg/identityManager: remoteCertificateSecret, "-<slice>" for a ResourceSlice's), and the key holding it.
STORED_CERTIFICATE_SECRET = "liqo-remote-certificate"
STORED_CERTIFICATE_KEY = "certificate"
# On the provider's Tenant: the serials of the last certificates the operator had Liqo issue again. Changing it
# wakes Liqo's tenant controller, and through the Tenant its ResourceSlice controller.
REISSUE_ANNOTATION = "peering.liqo-operator.io/reissued-certificates"
REISSUES_KEPT = 4


def stored_certificate_secret(resource_slice: str | None) -> str:
    return STORED_CERTIFICATE_SECRET if resource_slice is None else f"{STORED_CERTIFICATE_SECRET}-{resource_slice}"


def renewal_broken(provider: LiqoVersion) -> bool:
    """Whether the provider's Liqo renews from the certificate it stored, which hands out the same one again:
    v1.0 and v1.1 (reworked in v1.2.0, liqotech/liqo#3172 and #3173). Unknown: no."""
    return provider.at_least(1, 2) is False


def serial_of_stored(secret: Any) -> str | None:
    """The serial of the certificate in the provider's stored-certificate Secret, or None."""
    data = secret.get("data") if isinstance(secret, dict) else None
    cert = of_auth_params({"signedCRT": (data or {}).get(STORED_CERTIFICATE_KEY)}, "")
    return cert.serial if cert is not None else None


def of_auth_params(auth_params: Any, held_by: str, resource_slice: str | None = None) -> IdentityCertificate | None:
    """The certificate of ``authParams`` (an Identity's spec, a Tenant's or ResourceSlice's status), or None."""
    encoded = text_at(auth_params, "signedCRT") if isinstance(auth_params, dict) else None
    if not encoded or len(encoded) > MAX_CERTIFICATE_CHARS:
        return None
    try:
        cert = x509.load_pem_x509_certificate(base64.b64decode(encoded, validate=True))
    except (binascii.Error, ValueError):
        return None
    return IdentityCertificate(
        held_by,
        cert.not_valid_before_utc.astimezone(UTC),
        cert.not_valid_after_utc.astimezone(UTC),
        resource_slice,
        format(cert.serial_number, "x"),
    )


# On the consumer's Identity (ControlPlane) or ResourceSlice, ours: the serial of the certificate Liqo's components
# that load it once (before v1.2) were started with.
LOADED_ANNOTATION = "peering.liqo-operator.io/loaded-certificate"
# On the ResourceSlice: when the operator last restarted its virtual kubelet (RFC 3339). For this long after it,
# the restart does not turn the peering NotReady: the offloaded Pods keep running meanwhile. A virtual kubelet
# that does not come back changes its Pod (restarts, back-off), which wakes the peering after that.
RESTARTED_ANNOTATION = "peering.liqo-operator.io/virtual-kubelet-restarted"
RESTART_GRACE_SECONDS = 120.0


def restarting(slice_: Any, now: datetime) -> bool:
    """Whether the operator restarted this ResourceSlice's virtual kubelet less than RESTART_GRACE_SECONDS ago."""
    when = mapping_at(slice_, "metadata", "annotations").get(RESTARTED_ANNOTATION)
    try:
        since = (now - datetime.fromisoformat(str(when).replace("Z", "+00:00"))).total_seconds()
    except (TypeError, ValueError):
        return False
    return 0 <= since < RESTART_GRACE_SECONDS


def loads_identity_once(consumer: LiqoVersion) -> bool:
    """Whether the consumer's Liqo reads an identity's kubeconfig only when it starts: before v1.2, its controller
    manager's API server checker and its virtual kubelet (v1.2 reloads it on change). Unknown: no."""
    return consumer.at_least(1, 2) is False


def kubeconfig_secret(resource_slice: str | None, provider_id: str) -> str:
    """The Secret Liqo writes an Identity's kubeconfig to, in the consumer's tenant namespace."""
    identity = naming.identity_name(provider_id) if resource_slice is None else f"resourceslice-{resource_slice}"
    return f"kubeconfig-{identity}"


def serial_of_kubeconfig(secret: Any) -> str | None:
    """The serial of the client certificate in a kubeconfig Secret Liqo wrote, or None."""
    encoded = text_at(secret, "data", "kubeconfig")
    if encoded is None:
        return None
    try:
        config = parse_yaml(base64.b64decode(encoded, validate=True))
    except (binascii.Error, ValueError, KubeconfigError):
        return None
    users = mappings_at(config, "users")
    crt = text_at(mapping_at(users[0] if users else {}, "user"), "client-certificate-data")
    cert = of_auth_params({"signedCRT": crt}, "") if crt else None
    return cert.serial if cert is not None else None
