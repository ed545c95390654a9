"""CredentialsMinted, status.credentials and the renewal requeue (liqo_peering.status.credentials, compute)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from liqo_peering.api.model import LiqoPeeringStatus
from liqo_peering.status.compute import compute, requeue_after
from liqo_peering.status.credentials import CredentialsObservation
from unit.test_status_compute import T0, brief, cond, observe, reasons

MINTED = CredentialsObservation(
    "team-a/p-provider-credentials",
    "team-a/provider-kubeconfig",
    bootstrap_present=True,
    user="liqo-peer-user-consumer-id-00ff",
    not_after=T0 + timedelta(hours=3),
    renew_at=T0 + timedelta(hours=2),
)


def test_minted_says_the_bootstrap_secret_may_be_deleted() -> None:
    status, events = compute(None, observe(credentials=MINTED))
    assert brief(status, "CredentialsMinted") == ("True", "Minted")
    message = cond(status, "CredentialsMinted")["message"]
    assert "team-a/provider-kubeconfig is not used any more and may be deleted" in message
    assert "liqo-peer-user-consumer-id-00ff" in message and "team-a/p-provider-credentials" in message
    assert "2026-03-01T14:00:00Z" in message  # when it is needed again, to renew
    assert status["credentials"] == {
        "secretName": "p-provider-credentials",
        "user": "liqo-peer-user-consumer-id-00ff",
        "notAfter": "2026-03-01T15:00:00Z",
        "renewAt": "2026-03-01T14:00:00Z",
    }
    assert ("Normal", "CredentialsMinted") in reasons(events)
    LiqoPeeringStatus.model_validate(status)  # the CRD's status schema holds it
    assert status["peerStatus"] == "ready"  # minting adds to Ready, never blocks a minted peering


def test_an_event_per_minted_identity_not_per_pass() -> None:
    first, _ = compute(None, observe(credentials=MINTED))
    _, again = compute(first, observe(at=timedelta(seconds=30), credentials=MINTED))
    assert ("Normal", "CredentialsMinted") not in reasons(again)
    renewed = replace(MINTED, user="liqo-peer-user-consumer-id-11aa", renew_at=T0 + timedelta(hours=4))
    status, events = compute(first, observe(at=timedelta(hours=2), credentials=renewed))
    assert ("Normal", "CredentialsMinted") in reasons(events)
    assert status["credentials"]["user"] == "liqo-peer-user-consumer-id-11aa"


def test_bootstrap_deleted_then_renewal_due_is_reported_once() -> None:
    gone = replace(MINTED, bootstrap_present=False)
    status, _ = compute(None, observe(credentials=gone))
    assert brief(status, "CredentialsMinted") == ("True", "Minted")
    assert "is deleted: to have the certificate renewed, put" in cond(status, "CredentialsMinted")["message"]
    due, events = compute(status, observe(at=timedelta(hours=2, minutes=1), credentials=gone))
    assert brief(due, "CredentialsMinted") == ("True", "RenewalBlocked")
    assert "before 2026-03-01T15:00:00Z" in cond(due, "CredentialsMinted")["message"]
    assert ("Warning", "RenewalBlocked") in reasons(events)
    _, again = compute(due, observe(at=timedelta(hours=2, minutes=2), credentials=gone))
    assert ("Warning", "RenewalBlocked") not in reasons(again)
    assert due["peerStatus"] == "ready"  # the certificate still works until it expires


def test_minting_failed_is_false_with_the_reason_and_keeps_what_was_minted() -> None:
    minted, _ = compute(None, observe(credentials=MINTED))
    failed = replace(
        MINTED, user=None, not_after=None, renew_at=None, error_reason="ProviderForbidden", error_message="no"
    )
    status, _ = compute(
        minted, observe(credentials=failed, error_reason="ProviderForbidden", error_message="minting: no", stages={})
    )
    assert brief(status, "CredentialsMinted") == ("False", "ProviderForbidden")
    assert status["credentials"] == minted["credentials"]


def test_without_mint_the_condition_and_block_go() -> None:
    minted, _ = compute(None, observe(credentials=MINTED))
    status, _ = compute(minted, observe())
    assert all(c["type"] != "CredentialsMinted" for c in status["conditions"])
    assert "credentials" in status and status["credentials"] is None  # a merge patch removes it
    plain, _ = compute(None, observe())
    assert "credentials" not in plain


def test_the_runner_wakes_at_renewal_time() -> None:
    status, _ = compute(None, observe(credentials=MINTED))
    assert requeue_after(status, observe(credentials=MINTED), transient_error=False) == 2 * 3600
    later = observe(at=timedelta(hours=1, minutes=59, seconds=59, microseconds=900000), credentials=MINTED)
    assert requeue_after(status, later, transient_error=False) == 0.5
    # Past it (no bootstrap Secret to renew with): the Secret's return wakes the peering, not a timer.
    overdue = observe(at=timedelta(hours=2, seconds=1), credentials=replace(MINTED, bootstrap_present=False))
    assert requeue_after(status, overdue, transient_error=False) is None
    assert requeue_after(status, observe(credentials=MINTED), transient_error=True) == 5.0


def test_minted_by_the_cloud_identity_names_no_bootstrap_secret() -> None:
    # spec.remoteCluster: the operator's own identity minted it, and renews it; no Secret to keep or put back.
    for renew_at in (T0 + timedelta(hours=2), T0 - timedelta(minutes=1)):
        obs = replace(MINTED, bootstrap="", renew_at=renew_at)
        status, _ = compute(None, observe(credentials=obs))
        assert brief(status, "CredentialsMinted") == ("True", "Minted")
        message = cond(status, "CredentialsMinted")["message"]
        assert "cloud identity minted it and renews it at" in message and "bootstrap" not in message
