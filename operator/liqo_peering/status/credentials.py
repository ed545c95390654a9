"""The CredentialsMinted condition and status.credentials, from what minting found (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from liqo_peering.status.conditions import format_time

CONDITION = "CredentialsMinted"


@dataclass(frozen=True)
class CredentialsObservation:
    """One pass's view of the minted credential (spec.credentials.mint)."""

    secret: str  # the minted Secret, namespace/name
    bootstrap: str  # the bootstrap Secret, namespace/name; "": the operator's cloud identity (spec.remoteCluster)
    bootstrap_present: bool = True
    user: str | None = None  # the minted CN in use
    not_after: datetime | None = None
    renew_at: datetime | None = None
    error_reason: str | None = None  # minting failed (the message is the Ready one)
    error_message: str | None = None


def condition(obs: CredentialsObservation, now: datetime) -> tuple[bool, str, str]:
    """(status, reason, message) of CredentialsMinted: whether the peering runs on the minted credential, and
    what the bootstrap Secret is still needed for."""
    if obs.error_reason is not None:
        return False, obs.error_reason, f"minting the provider credential failed: {obs.error_message or ''}"
    if obs.user is None or obs.not_after is None or obs.renew_at is None:
        return False, "Minting", f"minting a least-privilege identity on the provider into Secret {obs.secret}"
    expiry, renewal = format_time(obs.not_after), format_time(obs.renew_at)
    using = (
        f"the peering uses only the least-privilege identity {obs.user} minted on the provider (kubeconfig in"
        f" Secret {obs.secret}, certificate valid until {expiry})"
    )
    if not obs.bootstrap:
        # The cloud identity is always at hand: nothing to keep or put back for the renewal.
        return True, "Minted", f"{using}; the operator's cloud identity minted it and renews it at {renewal}"
    if obs.bootstrap_present and now < obs.renew_at:
        return (
            True,
            "Minted",
            (
                f"{using}; the bootstrap Secret {obs.bootstrap} is not used any more and may be deleted (the"
                f" operator needs it again only to renew the certificate at {renewal})"
            ),
        )
    if now < obs.renew_at:
        return (
            True,
            "Minted",
            (
                f"{using}; the bootstrap Secret {obs.bootstrap} is deleted: to have the certificate renewed, put a"
                f" kubeconfig able to mint in it between {renewal} and {expiry}"
            ),
        )
    return (
        True,
        "RenewalBlocked",
        (
            f"{using}; it is due for renewal since {renewal}, which needs the bootstrap Secret {obs.bootstrap}:"
            f" put a kubeconfig able to mint (create and approve CSRs, create RoleBindings) in it before {expiry}"
        ),
    )


def status_block(obs: CredentialsObservation) -> dict[str, str] | None:
    """status.credentials, once a credential is minted."""
    if obs.user is None or obs.not_after is None or obs.renew_at is None:
        return None
    return {
        "secretName": obs.secret.split("/", 1)[1],
        "user": obs.user,
        "notAfter": format_time(obs.not_after),
        "renewAt": format_time(obs.renew_at),
    }
