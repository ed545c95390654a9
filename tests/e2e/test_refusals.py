"""A provider that refuses a write for a reason other than rights, against real API servers and the stand-in.

A ResourceQuota, a policy webhook (denying with 403, as OPA Gatekeeper does) and a tenant namespace stuck
terminating each refuse the Tenant and the Configuration the operator writes in the provider's tenant
namespace. The status names the cause in its own reason and words, the peering becomes Ready by itself
once the cause is gone, and the operator still writes the Configuration with server-side apply (the
provider's audit log: patches only, no create or update; its managedFields: an Apply by the operator).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, cast

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from liqo_peering.liqo.naming import FIELD_MANAGER
from testenv import audit
from testenv.operator_support import OperatorEnv, PeeringCase, get, wait_for
from testenv.reactions import OPERATOR_AGENT
from testenv.webhook import DenyingWebhook

pytestmark = pytest.mark.e2e

NAME = "provider"
HOLD = "peering.liqo-operator.io/test-hold"  # a finalizer nobody removes but the test
SPEC = {"remoteKubeconfigSecretRef": {"name": "provider-kubeconfig"}, "timeout": "5m"}


def labels(env: OperatorEnv) -> dict[str, str]:
    return {"liqo.io/remote-cluster-id": env.consumer_id, "liqo.io/tenant-namespace": "true"}


def provider_tenant_namespace(env: OperatorEnv) -> str:
    """The provider's tenant namespace for the consumer, made now as Liqo names and labels it unless it is
    there (a namespace being deleted waited out)."""
    core = k8s.CoreV1Api(env.provider_api)
    name = f"liqo-tenant-{env.consumer_id}"
    selector = ",".join(f"{k}={v}" for k, v in labels(env).items())

    def live() -> str | None:
        for ns in core.list_namespace(label_selector=selector).items:
            if ns.metadata.deletion_timestamp is None:  # type: ignore[union-attr]
                return str(ns.metadata.name)  # type: ignore[union-attr]
        try:
            core.create_namespace(cast(Any, {"metadata": {"name": name, "labels": labels(env)}}))
        except ApiException as exc:
            if exc.status != 409:  # 409: still going
                raise
            return None
        return name

    return wait_for(f"the provider's tenant namespace {name}", live, timeout=90)


def refused_then_applied(env: OperatorEnv, since: datetime, resource: str) -> list[int]:
    """The codes of the operator's writes of ``resource`` on the provider since ``since``, checked to be
    server-side apply (patch) only: refused first, then accepted."""
    writes = [
        e
        for e in audit.writes(env.lc["provider"].audit_log, since=since, user_agent_prefix=OPERATOR_AGENT)
        if e.resource == resource
    ]
    assert writes and {e.verb for e in writes} == {"patch"}, [(e.verb, e.code) for e in writes]
    codes = [e.code or 0 for e in writes]
    assert codes[0] >= 400 and 200 <= codes[-1] < 300, codes
    return codes


def applied_by_the_operator(obj: dict[str, Any] | None) -> bool:
    managed = (obj or {}).get("metadata", {}).get("managedFields") or []
    return any(m.get("manager") == FIELD_MANAGER and m.get("operation") == "Apply" for m in managed)


def conditions(case: PeeringCase) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in case.peerings.status(case.namespace, NAME).get("conditions") or []}


def refused(
    case: PeeringCase,
    reason: str,
    authentication: str,
    peer_status: str = "error",
    network: str = "configurations",
) -> dict[str, dict[str, Any]]:
    """The conditions once networking's object ``network`` (the Configuration, when only it is limited; else the
    GatewayServer, which comes first) and ``authentication``'s object (the Tenant, or the nonce Secret that
    comes before it) are refused with ``reason``, and Ready says so; ``peer_status`` is establishing for a
    refusal that is a normal wait."""

    def both() -> dict[str, dict[str, Any]] | None:
        conds = conditions(case)
        stages = [conds.get(t, {}).get("reason") for t in ("Ready", "NetworkReady", "AuthenticationReady")]
        return conds if stages == [reason] * 3 else None

    conds = wait_for(f"Ready, NetworkReady and AuthenticationReady {reason}", both, timeout=90)
    for stage in ("NetworkReady", "AuthenticationReady"):
        print(f"{stage} {reason}: {conds[stage]['message']}")  # the words a user reads, in the test's log
    assert case.peerings.status(case.namespace, NAME)["peerStatus"] == peer_status
    server = case.env.lc["provider"].server.split("//")[1]
    assert (
        server in conds["NetworkReady"]["message"]
        and f"{network}.networking.liqo.io" in (conds["NetworkReady"]["message"])
    )
    assert f"refused to create {authentication}" in conds["AuthenticationReady"]["message"]
    for cond in (conds["NetworkReady"], conds["AuthenticationReady"]):
        assert "peering-user" not in cond["message"] and "grant it" not in cond["message"], cond
    return conds


def ready_and_still_applied(
    case: PeeringCase, since: datetime, tenant_ns: str, network: str = "configurations"
) -> None:
    """Ready, networking's refused object (named after the consumer, as the Configuration and the GatewayServer
    are) applied once the refusal is gone."""
    case.peerings.wait_status(case.namespace, NAME, "ready", timeout=120)
    env = case.env
    refused_then_applied(env, since, network)
    obj = get(env.provider_api, "networking.liqo.io", network, tenant_ns, env.consumer_id)
    assert applied_by_the_operator(obj), (obj or {}).get("metadata", {}).get("managedFields")


def created(case: PeeringCase) -> datetime:
    return datetime.fromisoformat(case.peerings.get(case.namespace, NAME)["metadata"]["creationTimestamp"])  # type: ignore[index]


def test_a_full_quota_is_quota_exceeded_then_ready_once_it_is_gone(case: PeeringCase) -> None:
    env = case.env
    core = k8s.CoreV1Api(env.provider_api)
    tenant_ns = provider_tenant_namespace(env)
    hard = {"count/tenants.authentication.liqo.io": "0", "count/configurations.networking.liqo.io": "0"}
    quota = {"metadata": {"name": "no-liqo"}, "spec": {"hard": hard}}
    core.create_namespaced_resource_quota(tenant_ns, cast(Any, quota))
    try:
        # Its usage, as the quota controller counts it (none of either yet): the admission plugin refuses
        # everything a quota limits until its status says how much is used, and the controller counts a
        # custom resource only once its periodic discovery has set up a monitor for it (not awaited here).
        used = {"status": {"hard": hard, "used": dict.fromkeys(hard, "0")}}
        core.patch_namespaced_resource_quota_status("no-liqo", tenant_ns, cast(Any, used))
        case.peerings.create(case.namespace, NAME, SPEC)
        conds = refused(case, "QuotaExceeded", f"tenants.authentication.liqo.io {tenant_ns}/{env.consumer_id}")
        for cond in (conds["NetworkReady"], conds["AuthenticationReady"]):
            assert f"ResourceQuota {tenant_ns}/no-liqo does not allow it (limited: count/" in cond["message"], cond
            assert "exceeded quota: no-liqo" in cond["message"]
    finally:
        core.delete_namespaced_resource_quota("no-liqo", tenant_ns)
    ready_and_still_applied(case, created(case), tenant_ns)


@pytest.fixture
def denying_webhook(case: PeeringCase, tmp_path: Path) -> Iterator[DenyingWebhook]:
    """A webhook on the provider that denies the consumer's Tenant and Configuration as Gatekeeper does."""
    admission = k8s.AdmissionregistrationV1Api(case.env.provider_api)
    message = "[liqo-needs-approval] peering with this consumer is not approved"
    with DenyingWebhook(tmp_path, code=403, message=message) as hook:
        rules = [
            {
                "apiGroups": ["authentication.liqo.io", "networking.liqo.io"],
                "apiVersions": ["*"],
                "operations": ["CREATE", "UPDATE"],
                "resources": ["tenants", "configurations"],
                "scope": "Namespaced",
            }
        ]
        selector = {"matchLabels": {"liqo.io/remote-cluster-id": case.env.consumer_id}}
        config = hook.configuration("liqo-approval", rules, objectSelector=selector)
        admission.create_validating_webhook_configuration(cast(Any, config))
        try:
            yield hook
        finally:
            try:
                admission.delete_validating_webhook_configuration("liqo-approval")
            except ApiException as exc:
                if exc.status != 404:
                    raise


def test_a_policy_webhook_denial_is_admission_denied_then_ready_once_it_is_gone(
    case: PeeringCase, denying_webhook: DenyingWebhook
) -> None:
    env = case.env
    tenant_ns = provider_tenant_namespace(env)
    case.peerings.create(case.namespace, NAME, SPEC)
    conds = refused(case, "AdmissionDenied", f"tenants.authentication.liqo.io {tenant_ns}/{env.consumer_id}")
    webhook = 'admission webhook "liqo-approval.policy.example.com"'
    for cond in (conds["NetworkReady"], conds["AuthenticationReady"]):
        assert (
            f"(403): {webhook} denied the request: [liqo-needs-approval] peering with this consumer is not"
            in (cond["message"])
        ), cond
        assert f"make {webhook} on the provider cluster allow it" in cond["message"]
    assert denying_webhook.reviews >= 2
    k8s.AdmissionregistrationV1Api(env.provider_api).delete_validating_webhook_configuration("liqo-approval")
    ready_and_still_applied(case, created(case), tenant_ns)


def test_a_tenant_namespace_stuck_terminating_says_so_then_ready_once_it_is_gone(case: PeeringCase) -> None:
    env = case.env
    core = k8s.CoreV1Api(env.provider_api)
    tenant_ns = provider_tenant_namespace(env)
    hold = {"metadata": {"name": "hold", "finalizers": [HOLD]}}
    core.create_namespaced_config_map(tenant_ns, cast(Any, hold))
    try:
        core.delete_namespace(tenant_ns)

        def stuck() -> bool:
            ns = core.read_namespace(tenant_ns)
            conds = {c.type: c.status for c in ns.status.conditions or []}  # type: ignore[union-attr]
            return conds.get("NamespaceFinalizersRemaining") == "True"

        wait_for(f"namespace {tenant_ns} to be stuck terminating on the ConfigMap's finalizer", stuck)
        case.peerings.create(case.namespace, NAME, SPEC)
        nonce = f"secrets {tenant_ns}/liqo-nonce"
        conds = refused(case, "NamespaceTerminating", nonce, "establishing", network="gatewayservers")
        assert conds["Stalled"]["status"] == "False", conds["Stalled"]
        for cond in (conds["NetworkReady"], conds["AuthenticationReady"]):
            assert f"namespace {tenant_ns} is being deleted" in cond["message"], cond
    finally:
        core.patch_namespaced_config_map("hold", tenant_ns, {"metadata": {"finalizers": None}})
    ready_and_still_applied(case, created(case), tenant_ns, network="gatewayservers")
