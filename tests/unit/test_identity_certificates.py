"""The certificates of the identities Liqo issues for a peering: read within bounds from authParams, shown in
status.certificates and the CertificatesValid condition, woken for on time, and exported as metrics."""

from __future__ import annotations

import base64
import dataclasses
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import yaml

from liqo_peering.api.model import LiqoPeeringStatus
from liqo_peering.engine import renewal, reverse
from liqo_peering.engine.watches import peering_routes
from liqo_peering.errors import LiqoNotReady
from liqo_peering.liqo import resources as r
from liqo_peering.liqo import versions
from liqo_peering.liqo.certificates import (
    LOADED_ANNOTATION,
    MAX_CERTIFICATE_CHARS,
    REISSUE_ANNOTATION,
    RESTART_GRACE_SECONDS,
    RESTARTED_ANNOTATION,
    of_auth_params,
    restarting,
)
from liqo_peering.liqo.offloading import virtual_node_usable
from liqo_peering.metrics import Metrics
from liqo_peering.stages import STAGES, IdentityCertificate, StageResult
from liqo_peering.status import certificates as certs
from liqo_peering.status.compute import Observation, compute, requeue_after
from liqo_peering.status.conditions import get_condition
from unit.fakes import FakeClusterClient
from unit.test_peering_metrics import KEY, _body, _status, named, samples
from unit.test_peering_user import b64, issue
from unit.test_stage_steps import C_NS, CONSUMER, CTX, P_NS, PROVIDER, fakes, make_run

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
# As kube-controller-manager signs with --cluster-signing-duration=4m: backdated 5 minutes, valid 4 more.
NOT_BEFORE, NOT_AFTER = T0 - timedelta(minutes=5), T0 + timedelta(minutes=4)


def signed_crt(not_before: datetime = NOT_BEFORE, not_after: datetime = NOT_AFTER) -> str:
    """authParams.signedCRT as Liqo writes it: a PEM certificate, base64-encoded (each one a serial of its own)."""
    return b64(issue("consumer-id", not_before, not_after - not_before))


def test_a_certificate_in_auth_params_gives_its_validity_and_renewal_point() -> None:
    cert = of_auth_params({"signedCRT": signed_crt(), "apiServer": "https://p"}, "consumer", "slice-a")
    assert cert is not None and cert.serial
    assert cert == IdentityCertificate("consumer", NOT_BEFORE, NOT_AFTER, "slice-a", cert.serial)
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
    # The next look without any event: when the first certificate is due for renewal.
    assert requeue_after(status, _observe(timedelta(0), {}), False) == 60.0
    assert requeue_after(status, _observe(timedelta(minutes=2), {}), False) == 30.0  # late for renewal


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


# -- renewal where the provider's Liqo does not renew -----------------------------------------------------------
def _due_run(version: str) -> Any:
    provider = dataclasses.replace(PROVIDER, liqo_version=versions.from_label(version))
    ctx = dataclasses.replace(CTX, provider=provider)
    p = make_run(ctx=ctx)
    _, remote = fakes(p)
    remote.add(r.TENANT, {"metadata": {"name": "consumer-id", "namespace": P_NS}, "spec": {}})
    return p


def _stored(remote: Any, name: str, crt: str) -> None:
    remote.add(r.SECRET, {"metadata": {"name": name, "namespace": P_NS}, "data": {"certificate": crt, "csr": "eA=="}})


def test_a_due_certificate_on_liqo_1_1_is_issued_again_through_the_tenant_once() -> None:
    crt = signed_crt()
    cert = of_auth_params({"signedCRT": crt}, "consumer")
    assert cert is not None
    p = _due_run("v1.1.2")
    _, remote = fakes(p)
    _stored(remote, "liqo-remote-certificate", crt)
    other = signed_crt()  # another slice's stored certificate stays
    _stored(remote, "liqo-remote-certificate-other", other)
    assert not renewal.reissue_if_due(p, cert, now=T0 + timedelta(seconds=59))  # not due yet
    assert renewal.reissue_if_due(p, cert, now=T0 + timedelta(minutes=1))
    assert remote.get(r.SECRET, "liqo-remote-certificate", P_NS) is None
    assert remote.get(r.SECRET, "liqo-remote-certificate-other", P_NS) is not None
    tenant = remote.get(r.TENANT, "consumer-id", P_NS)
    assert tenant is not None and tenant["metadata"]["annotations"][REISSUE_ANNOTATION] == cert.serial
    # A slice's, due at the same time: named beside it, so that neither asks again while the other waits.
    sliced = of_auth_params({"signedCRT": other}, "consumer", "other")
    assert sliced is not None and renewal.reissue_if_due(p, sliced, now=T0 + timedelta(minutes=1))
    tenant = remote.get(r.TENANT, "consumer-id", P_NS)
    assert tenant is not None
    assert tenant["metadata"]["annotations"][REISSUE_ANNOTATION] == f"{cert.serial},{sliced.serial}"
    # Asked once: the next pass, before Liqo's new certificate reaches the consumer, writes nothing.
    before = len(remote.writes)
    assert not renewal.reissue_if_due(p, cert, now=T0 + timedelta(minutes=1, seconds=5))
    assert len(remote.writes) == before


def test_a_certificate_liqo_already_issued_again_is_not_deleted() -> None:
    """Killed after Liqo stored a new certificate but before the consumer saw it: the new one stays."""
    cert = of_auth_params({"signedCRT": signed_crt()}, "consumer", "slice")
    assert cert is not None
    p = _due_run("v1.0.3")
    _, remote = fakes(p)
    _stored(remote, "liqo-remote-certificate-slice", signed_crt())
    renewal.reissue_if_due(p, cert, now=T0 + timedelta(minutes=2))
    assert remote.get(r.SECRET, "liqo-remote-certificate-slice", P_NS) is not None


def test_liqo_1_2_is_left_to_liqo() -> None:
    crt = signed_crt()
    cert = of_auth_params({"signedCRT": crt}, "consumer")
    for p in (_due_run("v1.2.0"), _due_run("")):
        _, remote = fakes(p)
        _stored(remote, "liqo-remote-certificate", crt)
        assert not renewal.reissue_if_due(p, cert, now=T0 + timedelta(minutes=3))
        assert remote.get(r.SECRET, "liqo-remote-certificate", P_NS) is not None


def test_in_the_reverse_direction_this_cluster_issues_the_providers_certificate_again() -> None:
    """A bidirectional peering's reverse direction: this cluster's Liqo v1.1 issued the provider's identity, so
    the stored certificate that goes and the Tenant annotated are here, in the tenant namespace for the
    provider; nothing is written on the provider."""
    consumer = dataclasses.replace(CONSUMER, liqo_version=versions.from_label("v1.1.2"))
    rev = reverse.run_of(make_run(ctx=dataclasses.replace(CTX, consumer=consumer)))
    local, remote = cast(FakeClusterClient, rev.provider), cast(FakeClusterClient, rev.consumer)
    local.add(r.TENANT, {"metadata": {"name": "provider-id", "namespace": C_NS}, "spec": {}})
    crt = signed_crt()
    cert = of_auth_params({"signedCRT": crt}, rev.consumer.side, "consumer-id")
    assert cert is not None and cert.held_by == "provider"
    local.add(
        r.SECRET,
        {"metadata": {"name": "liqo-remote-certificate-consumer-id", "namespace": C_NS}, "data": {"certificate": crt}},
    )
    assert renewal.reissue_if_due(rev, cert, now=T0 + timedelta(minutes=1))
    assert local.get(r.SECRET, "liqo-remote-certificate-consumer-id", C_NS) is None
    tenant = local.get(r.TENANT, "provider-id", C_NS)
    assert tenant is not None and tenant["metadata"]["annotations"][REISSUE_ANNOTATION] == cert.serial
    assert remote.writes == []


def test_in_the_reverse_direction_the_providers_liqo_restarts() -> None:
    """With --restart-liqo-on-renewal, the reverse direction restarts what read the identity once on its consumer,
    the provider cluster: the controller manager in the provider's Liqo namespace, the slice's virtual kubelet in
    its tenant namespace for this cluster."""
    provider = dataclasses.replace(PROVIDER, liqo_version=versions.from_label("v1.1.2"), liqo_namespace="liqo-p")
    p = dataclasses.replace(make_run(ctx=dataclasses.replace(CTX, provider=provider)), restart_liqo=True)
    rev = reverse.run_of(p)
    assert rev.restart_liqo
    local, remote = cast(FakeClusterClient, rev.provider), cast(FakeClusterClient, rev.consumer)
    manager = {"app.kubernetes.io/name": "controller-manager", "app.kubernetes.io/component": "controller-manager"}
    remote.add(r.POD, _pod("liqo-controller-manager-1", "liqo-p", manager))
    vk = {"offloading.liqo.io/component": "virtual-kubelet", "liqo.io/remote-cluster-id": "consumer-id"}
    remote.add(r.POD, _pod("vk-1", P_NS, {**vk, "liqo.io/virtual-node": "consumer-id"}))
    renewed = signed_crt()
    new = of_auth_params({"signedCRT": renewed}, rev.consumer.side)
    assert new is not None
    identity = remote.add(
        r.IDENTITY,
        {"metadata": {"name": "controlplane-consumer-id", "namespace": P_NS, "annotations": {LOADED_ANNOTATION: "1"}}},
    )
    secret = _kubeconfig_secret("consumer-id", "kubeconfig-controlplane-consumer-id", renewed)
    secret["metadata"]["namespace"] = P_NS
    remote.add(r.SECRET, secret)
    identity = renewal.restart_if_renewed(rev, new, identity, r.IDENTITY)
    assert remote.find(r.POD, "liqo-p") == [] and len(remote.find(r.POD, P_NS)) == 1
    assert identity["metadata"]["annotations"][LOADED_ANNOTATION] == new.serial
    assert local.writes == []


def test_the_reverse_direction_wakes_on_the_providers_kubeconfig_secrets_where_it_restarts_liqo() -> None:
    def secret_scopes(version: str, restarts: bool) -> list[str | None]:
        provider = dataclasses.replace(PROVIDER, liqo_version=versions.from_label(version))
        ctx = dataclasses.replace(CTX, provider=provider)
        local, remote = FakeClusterClient("consumer"), FakeClusterClient("provider")
        routes = peering_routes(local, remote, ctx, ("team-a", "kubeconfig"), reverse=True, restarts=restarts)
        return [route.scope.labels for route in routes if route.scope.res == r.SECRET and route.client is remote]

    every = "liqo.io/identity-type,liqo.io/remote-cluster-id=consumer-id"
    assert every in secret_scopes("v1.1.2", restarts=True)
    assert every not in secret_scopes("v1.1.2", restarts=False)
    assert every not in secret_scopes("v1.2.0", restarts=True)


def _kubeconfig_secret(remote_id: str, name: str, crt: str) -> dict[str, Any]:
    config = {"users": [{"name": "u", "user": {"client-certificate-data": crt, "client-key-data": "eA=="}}]}
    data = base64.b64encode(yaml.safe_dump(config).encode()).decode()
    labels = {"liqo.io/identity-type": "ControlPlane", "liqo.io/remote-cluster-id": remote_id}
    return {"metadata": {"name": name, "namespace": C_NS, "labels": labels}, "data": {"kubeconfig": data}}


def _pod(name: str, namespace: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace, "labels": labels}}


def _restart_run(version: str = "v1.1.2", restart: bool = True) -> Any:
    consumer = dataclasses.replace(CONSUMER, liqo_version=versions.from_label(version))
    p = dataclasses.replace(make_run(ctx=dataclasses.replace(CTX, consumer=consumer)), restart_liqo=restart)
    local, _ = fakes(p)
    manager = {"app.kubernetes.io/name": "controller-manager", "app.kubernetes.io/component": "controller-manager"}
    local.add(r.POD, _pod("liqo-controller-manager-1", "liqo", manager))
    local.add(r.POD, _pod("liqo-webhook-1", "liqo", {"app.kubernetes.io/name": "webhook"}))
    vk = {"offloading.liqo.io/component": "virtual-kubelet", "liqo.io/remote-cluster-id": "provider-id"}
    local.add(r.POD, _pod("vk-a-1", C_NS, {**vk, "liqo.io/virtual-node": "a"}))
    local.add(r.POD, _pod("vk-b-1", C_NS, {**vk, "liqo.io/virtual-node": "b"}))
    return p


def test_a_renewed_certificate_restarts_what_read_the_old_one_once_liqo_wrote_it() -> None:
    p = _restart_run()
    local, _ = fakes(p)
    first, renewed = signed_crt(), signed_crt()
    cert = of_auth_params({"signedCRT": first}, "consumer")
    new = of_auth_params({"signedCRT": renewed}, "consumer")
    assert cert is not None and new is not None
    identity = local.add(r.IDENTITY, {"metadata": {"name": "controlplane-provider-id", "namespace": C_NS}})
    # The first certificate: what runs was started with it; only noted.
    identity = renewal.restart_if_renewed(p, cert, identity, r.IDENTITY)
    assert identity["metadata"]["annotations"][LOADED_ANNOTATION] == cert.serial
    assert len(local.find(r.POD, "liqo")) == 2
    # Renewed, but Liqo has not written the kubeconfig yet: nothing restarts.
    local.add(r.SECRET, _kubeconfig_secret("provider-id", "kubeconfig-controlplane-provider-id", first))
    assert renewal.restart_if_renewed(p, new, identity, r.IDENTITY) is identity
    assert len(local.find(r.POD, "liqo")) == 2
    # Written: the controller manager restarts (its Pods deleted), nothing else, and the new serial is noted.
    local.add(r.SECRET, _kubeconfig_secret("provider-id", "kubeconfig-controlplane-provider-id", renewed))
    identity = renewal.restart_if_renewed(p, new, identity, r.IDENTITY)
    assert [pod["metadata"]["name"] for pod in local.find(r.POD, "liqo")] == ["liqo-webhook-1"]
    assert len(local.find(r.POD, C_NS)) == 2
    assert identity["metadata"]["annotations"][LOADED_ANNOTATION] == new.serial
    assert RESTARTED_ANNOTATION not in identity["metadata"]["annotations"]  # only a virtual kubelet's restart
    before = len(local.writes)
    renewal.restart_if_renewed(p, new, identity, r.IDENTITY)  # once
    assert len(local.writes) == before


def test_a_renewed_slice_certificate_restarts_that_slices_virtual_kubelet() -> None:
    p = _restart_run()
    local, _ = fakes(p)
    renewed = signed_crt()
    new = of_auth_params({"signedCRT": renewed}, "consumer", "a")
    assert new is not None
    slice_ = local.add(
        r.RESOURCE_SLICE, {"metadata": {"name": "a", "namespace": C_NS, "annotations": {LOADED_ANNOTATION: "1"}}}
    )
    local.add(r.SECRET, _kubeconfig_secret("provider-id", "kubeconfig-resourceslice-a", renewed))
    slice_ = renewal.restart_if_renewed(p, new, slice_, r.RESOURCE_SLICE)
    assert [pod["metadata"]["name"] for pod in local.find(r.POD, C_NS)] == ["vk-b-1"]
    # For a while, its restart does not make the virtual node unusable.
    now = datetime.now(UTC)
    assert restarting(slice_, now) and not restarting(slice_, now + timedelta(seconds=RESTART_GRACE_SECONDS + 1))
    node = {"metadata": {"name": "a"}, "status": {"conditions": [{"type": "Ready", "status": "False"}]}}
    assert virtual_node_usable(node, [], restarting=True)[0]
    assert not virtual_node_usable(node, [], restarting=False)[0]
    assert not virtual_node_usable(None, [], restarting=True)[0]


def test_no_restart_on_liqo_1_2_or_unless_enabled() -> None:
    for p in (_restart_run("v1.2.0"), _restart_run(restart=False)):
        local, _ = fakes(p)
        cert = of_auth_params({"signedCRT": signed_crt()}, "consumer")
        identity = local.add(r.IDENTITY, {"metadata": {"name": "controlplane-provider-id", "namespace": C_NS}})
        assert renewal.restart_if_renewed(p, cert, identity, r.IDENTITY) is identity
        assert LOADED_ANNOTATION not in (local.get(r.IDENTITY, "controlplane-provider-id", C_NS) or {})["metadata"].get(
            "annotations", {}
        )


def test_the_kubeconfig_secrets_wake_the_peering_only_where_it_restarts_liqo() -> None:
    def secret_scopes(version: str, restarts: bool) -> list[str | None]:
        consumer = dataclasses.replace(CONSUMER, liqo_version=versions.from_label(version))
        ctx = dataclasses.replace(CTX, consumer=consumer)
        local, remote = FakeClusterClient("consumer"), FakeClusterClient("provider")
        routes = peering_routes(local, remote, ctx, ("team-a", "kubeconfig"), restarts=restarts)
        return [route.scope.labels for route in routes if route.scope.res == r.SECRET and route.client is local]

    watched = "liqo.io/identity-type,liqo.io/remote-cluster-id=provider-id"
    assert watched in secret_scopes("v1.1.2", restarts=True)
    assert watched not in secret_scopes("v1.1.2", restarts=False)
    assert watched not in secret_scopes("v1.2.0", restarts=True)
