"""The certificates of the identities Liqo issues for a peering: read within bounds from authParams, shown in
status.certificates and the CertificatesValid condition, woken for on time, and exported as metrics."""

from __future__ import annotations

import base64
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509.oid import NameOID

from liqo_peering.api.model import LiqoPeeringStatus
from liqo_peering.errors import LiqoNotReady
from liqo_peering.liqo.certificates import MAX_CERTIFICATE_CHARS, of_auth_params
from liqo_peering.metrics import Metrics
from liqo_peering.stages import STAGES, IdentityCertificate, StageResult
from liqo_peering.status import certificates as certs
from liqo_peering.status.compute import Observation, compute, requeue_after
from liqo_peering.status.conditions import get_condition
from unit.test_peering_metrics import KEY, _body, _status, named, samples

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
# As kube-controller-manager signs with --cluster-signing-duration=4m: backdated 5 minutes, valid 4 more.
NOT_BEFORE, NOT_AFTER = T0 - timedelta(minutes=5), T0 + timedelta(minutes=4)


def signed_crt(not_before: datetime = NOT_BEFORE, not_after: datetime = NOT_AFTER) -> str:
    """authParams.signedCRT as Liqo writes it: a PEM certificate, base64-encoded."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "consumer-id")])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .sign(key, hashes.SHA256())
    )
    return base64.b64encode(cert.public_bytes(Encoding.PEM)).decode()


def test_a_certificate_in_auth_params_gives_its_validity_and_renewal_point() -> None:
    cert = of_auth_params({"signedCRT": signed_crt(), "apiServer": "https://p"}, "consumer", "slice-a")
    assert cert == IdentityCertificate("consumer", NOT_BEFORE, NOT_AFTER, "slice-a")
    assert cert.identity_type == "ResourceSlice"
    # Two thirds into its 9 minutes, where Liqo's renewer asks; the warning half-way from there to expiry.
    assert (cert.renew_at, cert.warn_at) == (T0 + timedelta(minutes=1), T0 + timedelta(minutes=2, seconds=30))


def test_anything_else_in_auth_params_is_no_certificate() -> None:
    pem_text = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nnot der\n-----END CERTIFICATE-----\n").decode()
    for params in (
        None,
        "text",
        {},
        {"signedCRT": 7},
        {"signedCRT": "not base64!"},
        {"signedCRT": base64.b64encode(b"not a PEM").decode()},
        {"signedCRT": pem_text},
        {"signedCRT": "A" * (MAX_CERTIFICATE_CHARS + 4)},
    ):
        assert of_auth_params(params, "consumer") is None, params


def _stages(*found: IdentityCertificate, failed: str | None = None) -> dict[str, StageResult]:
    results = {stage: StageResult.ready(stage, "ok") for stage in STAGES}
    for cert in found:
        stage = "authentication" if cert.resource_slice is None else "offloading"
        results[stage] = replace(results[stage], certificates=(*results[stage].certificates, cert))
    if failed is not None:
        results[failed] = StageResult.failed(failed, LiqoNotReady("down"), "down")
    return results


CONTROL_PLANE = IdentityCertificate("consumer", NOT_BEFORE, NOT_AFTER)
SLICE = IdentityCertificate("consumer", NOT_BEFORE + timedelta(seconds=30), NOT_AFTER + timedelta(seconds=30), "p")


def _condition(status: dict[str, Any], type_: str = certs.CONDITION) -> dict[str, Any]:
    found = get_condition(status["conditions"], type_)
    assert found is not None, type_
    return found


def _observe(at: timedelta, stages: dict[str, StageResult]) -> Observation:
    return Observation(generation=1, now=T0 + at, timeout_seconds=300, stages=stages)


def test_status_lists_each_identity_and_the_condition_says_when_the_first_expires() -> None:
    status, events = compute(None, _observe(timedelta(0), _stages(CONTROL_PLANE, SLICE)))
    assert status["certificates"] == [
        {
            "heldBy": "consumer",
            "type": "ControlPlane",
            "notBefore": "2026-03-01T11:55:00Z",
            "notAfter": "2026-03-01T12:04:00Z",
            "renewAt": "2026-03-01T12:01:00Z",
        },
        {
            "heldBy": "consumer",
            "type": "ResourceSlice",
            "resourceSlice": "p",
            "notBefore": "2026-03-01T11:55:30Z",
            "notAfter": "2026-03-01T12:04:30Z",
            "renewAt": "2026-03-01T12:01:30Z",
        },
    ]
    LiqoPeeringStatus.model_validate(status)
    cond = get_condition(status["conditions"], certs.CONDITION)
    assert cond is not None and (cond["status"], cond["reason"]) == ("True", "CertificatesValid")
    assert "the ControlPlane identity the consumer holds, at 2026-03-01T12:04:00Z" in cond["message"]
    assert not [e for e in events if e.reason.startswith("Certificate")]
    # The next look without any event: when the first certificate would be late for renewal.
    assert requeue_after(status, _observe(timedelta(0), {}), False) == 150.0


def test_a_certificate_late_for_renewal_warns_then_expired_and_a_renewed_one_is_valid_again() -> None:
    status, _ = compute(None, _observe(timedelta(0), _stages(CONTROL_PLANE)))
    late, events = compute(status, _observe(timedelta(minutes=3), _stages(CONTROL_PLANE)))
    cond = get_condition(late["conditions"], certs.CONDITION)
    assert cond is not None and (cond["status"], cond["reason"]) == ("False", "CertificateExpiringSoon")
    assert [(e.type, e.reason) for e in events] == [("Warning", "CertificateExpiringSoon")]
    assert _condition(late, "Ready")["status"] == "True"  # a warning, not an outage
    again, events = compute(late, _observe(timedelta(minutes=3, seconds=10), _stages(CONTROL_PLANE)))
    assert again == late and not events  # quiet while nothing changes
    expired, events = compute(late, _observe(timedelta(minutes=5), _stages(CONTROL_PLANE)))
    assert _condition(expired)["reason"] == "CertificateExpired"
    assert [(e.type, e.reason) for e in events] == [("Warning", "CertificateExpired")]
    renewed = IdentityCertificate("consumer", T0, T0 + timedelta(minutes=9))
    valid, _ = compute(expired, _observe(timedelta(minutes=5), _stages(renewed)))
    assert _condition(valid)["status"] == "True"
    assert [c["notAfter"] for c in valid["certificates"]] == ["2026-03-01T12:09:00Z"]


def test_a_stage_that_fails_keeps_what_it_found_and_one_turned_off_drops_it() -> None:
    status, _ = compute(None, _observe(timedelta(0), _stages(CONTROL_PLANE, SLICE)))
    kept, _ = compute(status, _observe(timedelta(0), _stages(CONTROL_PLANE, failed="offloading")))
    assert [c["type"] for c in kept["certificates"]] == ["ControlPlane", "ResourceSlice"]
    off = _stages(CONTROL_PLANE)
    off["offloading"] = StageResult.disabled("offloading", "no ResourceSlice requested")
    dropped, _ = compute(kept, _observe(timedelta(0), off))
    assert [c["type"] for c in dropped["certificates"]] == ["ControlPlane"]
    none, _ = compute(dropped, _observe(timedelta(0), {s: StageResult.disabled(s, "off") for s in STAGES}))
    assert none["certificates"] is None and get_condition(none["conditions"], certs.CONDITION) is None


def test_the_reverse_direction_reports_the_identities_the_provider_holds() -> None:
    held = IdentityCertificate("provider", NOT_BEFORE, NOT_AFTER)
    stages = _stages(CONTROL_PLANE)
    stages["reverse-authentication"] = replace(StageResult.ready("reverse-authentication", "ok"), certificates=(held,))
    stages["reverse-offloading"] = StageResult.ready("reverse-offloading", "ok")
    status, _ = compute(None, Observation(1, T0, 300, stages=stages, bidirectional=True))
    assert [(c["heldBy"], c["type"]) for c in status["certificates"]] == [
        ("consumer", "ControlPlane"),
        ("provider", "ControlPlane"),
    ]
    # The reverse authentication failing keeps the provider's entry; the forward one's still comes from its stage.
    stages["reverse-authentication"] = StageResult.waiting("reverse-authentication", "x", "y")
    status, _ = compute(status, Observation(1, T0, 300, stages=stages, bidirectional=True))
    assert [(c["heldBy"], c["type"]) for c in status["certificates"]] == [("consumer", "ControlPlane")]


def test_each_identity_exports_its_expiry_and_renewal() -> None:
    metrics = Metrics()
    times = {"notAfter": "2026-02-01T00:00:00Z", "renewAt": "2026-01-21T00:00:00Z"}
    entries: list[Any] = [
        {"heldBy": "consumer", "type": "ControlPlane", **times},
        {"heldBy": "consumer", "type": "ResourceSlice", "resourceSlice": "p", **times},
        {"heldBy": "consumer", "type": "ResourceSlice", "notAfter": "garbage", "renewAt": "garbage"},
        "not an entry",
    ]
    metrics.observe(_body("a"), {}, _status(True, "Established", "ready", certificates=entries))
    found = samples(metrics)
    control = (*KEY[:2], ("held_by", "consumer"), KEY[2], ("resource_slice", ""), ("type", "ControlPlane"))
    sliced = (*KEY[:2], ("held_by", "consumer"), KEY[2], ("resource_slice", "p"), ("type", "ResourceSlice"))
    expiry = named(found, "liqo_peering_certificate_expiration_timestamp_seconds")
    assert expiry == {tuple(sorted(control)): 1769904000.0, tuple(sorted(sliced)): 1769904000.0}
    assert set(named(found, "liqo_peering_certificate_renewal_timestamp_seconds").values()) == {1768953600.0}
