"""The certificates in Liqo's authParams: when the identity that carries one expires (pure).

``authParams.signedCRT`` is a PEM certificate, base64-encoded as Kubernetes encodes bytes. It comes from the
other cluster (its Tenant or ResourceSlice status), so it is read within bounds and anything else is no
certificate at all.
"""

from __future__ import annotations

import base64
import binascii
from datetime import UTC
from typing import Any

from cryptography import x509

from liqo_peering.fields import text_at
from liqo_peering.stages import IdentityCertificate

# A client certificate is about a kilobyte; an RSA-4096 one with a chain is under 8 KiB.
MAX_CERTIFICATE_CHARS = 16384


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
    )
