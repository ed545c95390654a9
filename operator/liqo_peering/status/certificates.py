"""status.certificates and the CertificatesValid condition: when each identity's certificate expires (pure).

Liqo issues a certificate for each identity a peering uses: the ControlPlane one, which the consumer's Liqo
holds on the provider's API server, and one per ResourceSlice, which its virtual kubelet uses. Their lifetime
is the provider's CSR signer's (kube-controller-manager's --cluster-signing-duration, a year by default).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from liqo_peering.stages import STAGES, IdentityCertificate, StageResult
from liqo_peering.status.conditions import format_time

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


def _times(entry: dict[str, Any]) -> tuple[datetime, datetime] | None:
    try:
        return (
            datetime.fromisoformat(str(entry["notBefore"]).replace("Z", "+00:00")),
            datetime.fromisoformat(str(entry["notAfter"]).replace("Z", "+00:00")),
        )
    except (KeyError, ValueError):
        return None


def _described(entry: dict[str, Any]) -> str:
    which = f"ResourceSlice {entry.get('resourceSlice')}'s identity"
    if entry.get("type") == "ControlPlane":
        which = "ControlPlane identity"
    return f"the {which} the {entry.get('heldBy')} holds"


def _warn_at(not_before: datetime, not_after: datetime) -> datetime:
    return IdentityCertificate("", not_before, not_after).warn_at


def _renew_at(not_before: datetime, not_after: datetime) -> datetime:
    return IdentityCertificate("", not_before, not_after).renew_at


def condition(certs: list[dict[str, Any]], now: datetime) -> tuple[bool, str, str] | None:
    """(status, reason, message) of CertificatesValid; None without a certificate. False once a certificate is
    past half-way from its renewal point to its expiry (renewal is late), or expired."""
    timed = [(e, t) for e in certs if (t := _times(e)) is not None]
    if not timed:
        return None
    expired = [(e, t) for e, t in timed if now >= t[1]]
    if expired:
        parts = [f"{_described(e)} expired at {format_time(t[1])}" for e, t in expired]
        return False, "CertificateExpired", "; ".join(parts) + ": Liqo did not renew it in time"
    late = [(e, t) for e, t in timed if now >= _warn_at(*t)]
    if late:
        parts = [
            f"{_described(e)} expires at {format_time(t[1])}, due for renewal since {e.get('renewAt')}" for e, t in late
        ]
        return False, "CertificateExpiringSoon", "; ".join(parts)
    first, (_, not_after) = min(timed, key=lambda et: et[1][1])
    return (
        True,
        "CertificatesValid",
        f"{len(timed)} identity certificate{'s' if len(timed) > 1 else ''} valid; the first to expire is"
        f" {_described(first)}, at {format_time(not_after)} (due for renewal at {first.get('renewAt')})",
    )


def next_change(certs: list[dict[str, Any]], now: datetime) -> datetime | None:
    """When to look again without any event: the next renewal point (where the operator renews what a Liqo
    before v1.2 does not), warning point or expiry."""
    points = [p for e in certs if (t := _times(e)) is not None for p in (_renew_at(*t), _warn_at(*t), t[1]) if p > now]
    return min(points, default=None)
