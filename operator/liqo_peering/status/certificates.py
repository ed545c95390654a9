"""status.certificates and the CertificatesValid condition: when each identity's certificate expires (pure).

Liqo issues a certificate for each identity a peering uses: the ControlPlane one, which the consumer's Liqo
holds on the provider's API server, and one per ResourceSlice, which its virtual kubelet uses. Their lifetime
is the provider's CSR signer's (kube-controller-manager's --cluster-signing-duration, a year by default).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from liqo_peering.stages import STAGES, IdentityCertificate, StageResult
from liqo_peering.status.conditions import format_time, parse_time

CONDITION = "CertificatesValid"
_AUTHENTICATION, _OFFLOADING = STAGES[1], STAGES[2]


def _entry(cert: IdentityCertificate) -> dict[str, Any]:
    entry: dict[str, Any] = {"heldBy": cert.held_by, "type": cert.identity_type}
    if cert.resource_slice is not None:
        entry["resourceSlice"] = cert.resource_slice
    entry.update(
        notBefore=format_time(cert.not_before),
        notAfter=format_time(cert.not_after),
        renewAt=format_time(cert.renew_at),
    )
    return entry


def _key(entry: dict[str, Any]) -> tuple[str, str, str]:
    return (str(entry.get("heldBy")), str(entry.get("type")), str(entry.get("resourceSlice") or ""))


def _reported_by(stage: str, entry: dict[str, Any]) -> bool:
    """Whether ``stage`` (forward or reverse) is the one that finds this entry's identity."""
    reverse = stage.startswith("reverse-")
    base = stage.removeprefix("reverse-")
    held_by_consumer = entry.get("heldBy") == "consumer"
    kind = "ControlPlane" if base == _AUTHENTICATION else "ResourceSlice" if base == _OFFLOADING else None
    return entry.get("type") == kind and held_by_consumer != reverse


def entries(previous: list[dict[str, Any]] | None, stages: dict[str, StageResult]) -> list[dict[str, Any]]:
    """status.certificates after a pass: what each stage that ran found, and for a stage that failed or did not
    run, what it found before (its identities are still there)."""
    found = [_entry(cert) for result in stages.values() if result.state != "error" for cert in result.certificates]
    ran = [stage for stage, result in stages.items() if result.state != "error"]
    kept = [e for e in previous or [] if isinstance(e, dict) and not any(_reported_by(s, e) for s in ran)]
    return sorted(found + kept, key=_key)


def _read(entry: dict[str, Any]) -> IdentityCertificate | None:
    """An entry of status.certificates read back (None if it is not one: the status is anyone's to write)."""
    try:
        not_before, not_after = parse_time(entry.get("notBefore")), parse_time(entry.get("notAfter"))
    except (AttributeError, ValueError):
        return None
    if not_before is None or not_after is None:
        return None
    return IdentityCertificate(str(entry.get("heldBy")), not_before, not_after, entry.get("resourceSlice"))


def _described(entry: dict[str, Any]) -> str:
    which = f"ResourceSlice {entry.get('resourceSlice')}'s identity"
    if entry.get("type") == "ControlPlane":
        which = "ControlPlane identity"
    return f"the {which} the {entry.get('heldBy')} holds"


def condition(certs: list[dict[str, Any]], now: datetime) -> tuple[bool, str, str] | None:
    """(status, reason, message) of CertificatesValid; None without a certificate. False once a certificate is
    past half-way from its renewal point to its expiry (renewal is late), or expired."""
    read = [(e, c) for e in certs if (c := _read(e)) is not None]
    if not read:
        return None
    expired = [(e, c) for e, c in read if now >= c.not_after]
    if expired:
        parts = [f"{_described(e)} expired at {format_time(c.not_after)}" for e, c in expired]
        return False, "CertificateExpired", "; ".join(parts) + ": Liqo did not renew it in time"
    late = [(e, c) for e, c in read if now >= c.warn_at]
    if late:
        parts = [
            f"{_described(e)} expires at {format_time(c.not_after)}, due for renewal since {e.get('renewAt')}"
            for e, c in late
        ]
        return False, "CertificateExpiringSoon", "; ".join(parts)
    first, cert = min(read, key=lambda ec: ec[1].not_after)
    return (
        True,
        "CertificatesValid",
        f"{len(read)} identity certificate{'s' if len(read) > 1 else ''} valid; the first to expire is"
        f" {_described(first)}, at {format_time(cert.not_after)} (due for renewal at {first.get('renewAt')})",
    )


def next_change(certs: list[dict[str, Any]], now: datetime) -> datetime | None:
    """When to look again without any event: the next renewal point (where the operator renews what a Liqo
    before v1.2 does not), warning point or expiry."""
    read = [c for e in certs if (c := _read(e)) is not None]
    points = [p for c in read for p in (c.renew_at, c.warn_at, c.not_after) if p > now]
    return min(points, default=None)
