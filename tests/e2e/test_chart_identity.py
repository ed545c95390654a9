"""The operator with exactly the rights the Helm chart gives it.

The chart is installed on the consumer cluster as a second release (its Deployment runs no Pod), then the
operator runs as a process with a token of that release's ServiceAccount (TokenRequest API; testenv.chart_rbac).
A LiqoPeering must become ready and be torn down with those rights alone, with no request refused, and the
identity must not write outside the namespace it watches.

The chart is installed with watchNamespaces=[<peering namespace>]. The operator then reads Secrets only
there and, through RoleBindings it makes to the chart's tenant-access ClusterRole, in Liqo's tenant
namespaces (created at run time): a Secret in an unrelated namespace stays out of its reach. It may
label (spec.commonMetadata) and delete (spec.deletion.deleteTenantNamespaces, force-delete) a tenant
namespace, and no other namespace: the chart's tenant-namespace policy.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from kubernetes import client as k8s
from kubernetes import dynamic
from kubernetes.client.exceptions import ApiException

from hack.crdgen import CRD_NAME, SET_CRD_NAME
from testenv import chart_rbac
from testenv.liqo_env.pytest_plugin import StandInProcess
from testenv.localk8s import tool_path
from testenv.operator_support import (
    GROUP,
    PLURAL,
    SECRET,
    VERSION,
    OperatorEnv,
    OperatorProcess,
    Peerings,
    api_client,
    install_crd,
    wait_for,
)

RELEASE = "lpo-identity"
TENANT_ACCESS_BINDING = "liqo-peering-operator-tenant-access"  # the one RoleBinding name the chart allows
RELEASE_NS = "liqo-peering-system"
SERVICE_ACCOUNT = f"{RELEASE}-liqo-peering-operator"
PEERING_NS = "e2e-chart-identity"
OTHER_NS = "e2e-chart-identity-other"
NAME = "provider"
PEERINGS = (GROUP, VERSION)
SET, SETS = "fleet", "liqopeeringsets"
IN_USE = "peering.liqo-operator.io/kubeconfig-in-use"  # kubeconfigSecretProtection (on by default)
TENANT_LABEL = "liqo.io/tenant-namespace"
COMMON_LABELS = {"cost-centre": "chart-identity"}


def adopt_crd(api: k8s.ApiClient) -> None:
    """An earlier test may have applied the CRDs by hand: hand them to this release (Helm's ownership metadata)."""
    ext = k8s.ApiextensionsV1Api(api)
    patch = {
        "metadata": {
            "labels": {"app.kubernetes.io/managed-by": "Helm"},
            "annotations": {"meta.helm.sh/release-name": RELEASE, "meta.helm.sh/release-namespace": RELEASE_NS},
        }
    }
    for name in (CRD_NAME, SET_CRD_NAME):
        try:
            ext.patch_custom_resource_definition(name, patch)
        except ApiException as exc:
            if exc.status != 404:
                raise


def delete_namespace(core: k8s.CoreV1Api, name: str) -> None:
    try:
        core.delete_namespace(name)
    except ApiException as exc:
        if exc.status != 404:
            raise


@pytest.fixture
def chart_operator(
    operator_env: OperatorEnv, liqo_standin: StandInProcess, tmp_path: Path
) -> Iterator[tuple[OperatorProcess, k8s.ApiClient]]:
    """The chart installed (watching PEERING_NS only), the operator running as its ServiceAccount.

    The suite's operator (the ServiceAccount of its own release) watches all namespaces: it is stopped
    meanwhile, so that one operator (this one) reconciles the peering, and started again afterwards.
    """
    cluster = operator_env.lc["consumer"]
    admin = operator_env.peerings
    admin.make_namespace(RELEASE_NS)
    admin.make_namespace(PEERING_NS)
    admin.make_namespace(OTHER_NS)
    admin.put_kubeconfig_secret(PEERING_NS, SECRET, operator_env.provider_kubeconfig())
    admin.put_kubeconfig_secret(OTHER_NS, SECRET, operator_env.provider_kubeconfig())
    adopt_crd(admin.api)
    kubeconfig = Path(cluster.kubeconfig)
    chart = chart_rbac.install(
        kubeconfig,
        operator_env.lc.namespace,
        ("replicaCount=0", "crds.enabled=true", f"watchNamespaces={{{PEERING_NS}}}"),
        release=RELEASE,
        namespace=RELEASE_NS,
        binary=tool_path("helm"),
        skip_crds=False,
    )
    assert chart.service_account() == SERVICE_ACCOUNT
    operator_env.operator.stop()
    operator = chart.operator(tmp_path)
    # Scoped to PEERING_NS, the operator reads Liqo's tenant namespaces through its tenant-access RoleBindings.
    assert any(a.startswith("--tenant-access-role=") for a in operator.extra_args), operator.extra_args
    operator.start()
    sa_kubeconfig = operator.kubeconfig
    sa_api = api_client(sa_kubeconfig)
    try:
        yield operator, sa_api
    finally:
        try:
            # Unpeer (if the test did not) with the chart's rights, before the release takes them away.
            _release_set(admin)
            admin.delete(PEERING_NS, NAME)
            try:
                admin.wait_gone(PEERING_NS, NAME, timeout=90)
            except AssertionError:
                admin.patch(PEERING_NS, NAME, {"metadata": {"finalizers": None}})
                raise
        finally:
            operator.stop()
            sa_api.close()
            print(f"\n--- chart-identity operator log: {operator.log_path}")
            chart.uninstall()
            # The CRD stays (crds.keep) with this release's labels and Helm as their field manager, which the
            # next release's server-side apply would conflict with: put it back as the session applied it.
            install_crd(admin.api)
            for ns in (PEERING_NS, OTHER_NS, RELEASE_NS):
                delete_namespace(admin.core, ns)
            operator_env.operator.start()


def status_of(call: Any) -> int | None:
    """The HTTP status the API server refused the call with; None if it succeeded."""
    try:
        call()
    except ApiException as exc:
        return int(exc.status)
    return None


def test_peering_ready_with_the_charts_service_account_only(
    chart_operator: tuple[OperatorProcess, k8s.ApiClient], operator_env: OperatorEnv
) -> None:
    operator, sa_api = chart_operator
    sa = Peerings(sa_api)
    whoami: Any = k8s.AuthenticationV1Api(sa_api).create_self_subject_review(cast(Any, {}))
    assert whoami.status.user_info.username == f"system:serviceaccount:{RELEASE_NS}:{SERVICE_ACCOUNT}"

    spec = {
        "remoteKubeconfigSecretRef": {"name": SECRET},
        "timeout": "2m",
        "commonMetadata": {"labels": COMMON_LABELS},
    }
    # The consumer's tenant namespace must be this peering's own, as the operator labels only those it makes:
    # an earlier test's peering with the same provider leaves one (tenant namespaces outlive an unpeering).
    core = operator_env.peerings.core
    tenant = f"liqo.io/remote-cluster-id={operator_env.provider_id},liqo.io/tenant-namespace=true"
    for earlier in core.list_namespace(label_selector=tenant).items:
        core.delete_namespace(str(earlier.metadata.name))  # type: ignore[union-attr]
    wait_for("an earlier tenant namespace to go", lambda: not core.list_namespace(label_selector=tenant).items)
    operator_env.peerings.create(PEERING_NS, NAME, spec)

    def settled() -> dict[str, Any] | None:
        # Ready, or refused by the API server (a right the chart lacks): no point waiting longer then.
        status = operator_env.peerings.status(PEERING_NS, NAME)
        reasons = {c["type"]: c.get("reason") for c in status.get("conditions") or []}
        return status if status.get("peerStatus") == "ready" or reasons.get("Ready") == "ConsumerForbidden" else None

    status = wait_for(f"LiqoPeering {PEERING_NS}/{NAME} to be ready", settled, timeout=120)
    assert status["peerStatus"] == "ready", f"{status}\n--- operator log (tail):\n{operator.log()[-6000:]}"
    assert status["localClusterID"] == operator_env.consumer_id
    assert status["remoteClusterID"] == operator_env.provider_id
    conds = {c["type"]: c["status"] for c in status["conditions"]}
    assert conds["Ready"] == "True" and conds["Stalled"] == "False", conds

    # Nothing the operator asked for was refused.
    # (Not a bare "403": a timestamp's microseconds, such as 06:00:38.540372, contain one.)
    denied = [line for line in operator.log().splitlines() if "forbidden" in line.lower()]
    assert not denied, "\n".join(denied[:20])

    # The identity reads the kubeconfig Secret next to the peering it watches, and nothing outside it and
    # Liqo's tenant namespaces: no Secret read, changed or deleted, no LiqoPeering read, changed or created.
    assert (sa.core.read_namespaced_secret(SECRET, PEERING_NS).data or {})["kubeconfig"]
    assert status_of(lambda: sa.core.read_namespaced_secret(SECRET, OTHER_NS)) == 403
    assert status_of(lambda: sa.core.list_namespaced_secret(OTHER_NS)) == 403
    assert status_of(lambda: sa.core.patch_namespaced_secret(SECRET, OTHER_NS, {"data": {"x": "eA=="}})) == 403
    assert status_of(lambda: sa.core.delete_namespaced_secret(SECRET, OTHER_NS)) == 403
    assert status_of(lambda: sa.custom.get_namespaced_custom_object(*PEERINGS, OTHER_NS, PLURAL, NAME)) == 403
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "LiqoPeering", "metadata": {"name": NAME}, "spec": {}}
    assert status_of(lambda: sa.custom.create_namespaced_custom_object(*PEERINGS, OTHER_NS, PLURAL, body)) == 403
    assert status_of(lambda: sa.core.delete_namespace(OTHER_NS)) == 403
    # Namespaces: created, patched and deleted only when they are Liqo's tenant namespaces, and the label
    # stays on (the chart's tenant-namespace ValidatingAdmissionPolicy; RBAC cannot name them). The tenant
    # namespace the operator made carries spec.commonMetadata's labels, and it may delete it (a dry run:
    # what spec.deletion.deleteTenantNamespaces and force-delete send). RoleBindings: only the tenant-access
    # one, by name (RBAC), and only in Liqo's tenant namespaces (the tenant-access policy).
    c_ns = tenant_namespace(operator_env.peerings.api, operator_env.provider_id)
    made: Any = operator_env.peerings.core.read_namespace(c_ns)
    assert COMMON_LABELS.items() <= (made.metadata.labels or {}).items(), made.metadata.labels
    assert status_of(lambda: sa.core.delete_namespace(c_ns, dry_run="All")) is None
    labels: Any = {"metadata": {"labels": {"x": "y"}}}
    assert status_of(lambda: sa.core.patch_namespace(OTHER_NS, labels)) == 403
    untenanted: Any = {"metadata": {"labels": {TENANT_LABEL: None}}}
    assert status_of(lambda: sa.core.patch_namespace(c_ns, untenanted, dry_run="All")) == 403
    other: Any = {"metadata": {"name": f"{OTHER_NS}-made"}}
    assert status_of(lambda: sa.core.create_namespace(other, dry_run="All")) == 403
    rbac = k8s.RbacAuthorizationV1Api(sa_api)
    for binding_name in ("anything", TENANT_ACCESS_BINDING):
        binding = _tenant_access_binding(binding_name, OTHER_NS)
        assert status_of(lambda b=binding: rbac.create_namespaced_role_binding(OTHER_NS, b)) == 403, binding_name
        assert status_of(lambda b=binding: _apply_binding(sa_api, b)) == 403, binding_name

    # Unpeering runs with the same rights: the finalizer is released and this cluster's objects are gone.
    operator_env.peerings.delete(PEERING_NS, NAME)
    try:
        operator_env.peerings.wait_gone(PEERING_NS, NAME, timeout=90)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n--- operator log (tail):\n{operator.log()[-6000:]}") from None
    custom = k8s.CustomObjectsApi(operator_env.peerings.api)
    for group, plural in (
        ("authentication.liqo.io", "resourceslices"),
        ("authentication.liqo.io", "identities"),
        ("networking.liqo.io", "gatewayclients"),
        ("networking.liqo.io", "configurations"),
        ("offloading.liqo.io", "virtualnodes"),
    ):
        left: Any = custom.list_namespaced_custom_object(group, "v1beta1", c_ns, plural)
        metas = [
            {k: i["metadata"].get(k) for k in ("name", "creationTimestamp", "deletionTimestamp")} for i in left["items"]
        ]
        assert metas == [], f"{plural} left in {c_ns}\n--- operator log (tail):\n{operator.log()[-4000:]}"

    # A LiqoPeeringSet with the same rights: it makes its LiqoPeering (Ready; the Secret protected while in
    # use), reports, carries a change of its template to it, and once deleted unpeers it, and the Secret is
    # released.
    admin = operator_env.peerings
    admin.core.patch_namespaced_secret(SECRET, PEERING_NS, cast(Any, {"metadata": {"labels": {"fleet": "id"}}}))
    spec = {"selector": {"matchLabels": {"fleet": "id"}}, "template": {"timeout": "2m"}}
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "LiqoPeeringSet", "metadata": {"name": SET}, "spec": spec}
    admin.custom.create_namespaced_custom_object(GROUP, VERSION, PEERING_NS, SETS, body)
    child = f"{SET}-{SECRET}"
    try:
        admin.wait_status(PEERING_NS, child, "ready")
        wait_for("the LiqoPeeringSet to be Ready", lambda: _set_ready(admin), timeout=60)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n--- operator log (tail):\n{operator.log()[-6000:]}") from None
    assert admin.core.read_namespaced_secret(SECRET, PEERING_NS).metadata.finalizers == [IN_USE]  # type: ignore[union-attr]
    # A change of the template reaches the LiqoPeering the set made (replaced, with the same rights).
    template = {"spec": {"template": {"timeout": "3m"}}}
    admin.custom.patch_namespaced_custom_object(GROUP, VERSION, PEERING_NS, SETS, SET, template)
    wait_for(
        "the template's timeout in the set's LiqoPeering",
        lambda: ((admin.get(PEERING_NS, child) or {}).get("spec") or {}).get("timeout") == "3m",
        timeout=60,
    )
    admin.custom.delete_namespaced_custom_object(GROUP, VERSION, PEERING_NS, SETS, SET)
    admin.wait_gone(PEERING_NS, child, timeout=90)
    wait_for("the LiqoPeeringSet to go", lambda: _set_ready(admin) is None, timeout=30)
    assert not admin.core.read_namespaced_secret(SECRET, PEERING_NS).metadata.finalizers  # type: ignore[union-attr]
    # (Not a bare "403": a timestamp's microseconds, such as 06:00:38.540372, contain one.)
    denied = [line for line in operator.log().splitlines() if "forbidden" in line.lower()]
    assert not denied, "\n".join(denied[:20])


def _tenant_access_binding(name: str, namespace: str) -> dict[str, Any]:
    """A RoleBinding of the chart's tenant-access ClusterRole to the operator's ServiceAccount."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": name, "namespace": namespace},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": f"{SERVICE_ACCOUNT}-tenant-access",
        },
        "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": RELEASE_NS}],
    }


def _apply_binding(api: k8s.ApiClient, body: dict[str, Any]) -> None:
    """Server-side apply, as the operator writes its RoleBindings."""
    meta = body["metadata"]
    bindings = dynamic.DynamicClient(api).resources.get(api_version=body["apiVersion"], kind=body["kind"])
    bindings.server_side_apply(body=body, name=meta["name"], namespace=meta["namespace"], field_manager="lpo-test")


def _release_set(admin: Peerings) -> None:
    """A set the test left: deleted; if it hangs, its finalizers and those of what it made are released."""
    try:
        admin.custom.delete_namespaced_custom_object(GROUP, VERSION, PEERING_NS, SETS, SET)
    except ApiException as exc:
        if exc.status == 404:
            return
        raise
    try:
        wait_for("the LiqoPeeringSet to go", lambda: _set_ready(admin) is None, timeout=90)
    except AssertionError:
        unfinalized: Any = {"metadata": {"finalizers": None}}
        admin.custom.patch_namespaced_custom_object(GROUP, VERSION, PEERING_NS, SETS, SET, unfinalized)
        for item in admin.in_namespace(PEERING_NS):
            admin.patch(PEERING_NS, item["metadata"]["name"], unfinalized)
        admin.core.patch_namespaced_secret(SECRET, PEERING_NS, unfinalized)
        raise


def _set_ready(admin: Peerings) -> bool | None:
    """Whether the LiqoPeeringSet is Ready; None once it is gone."""
    try:
        found: Any = admin.custom.get_namespaced_custom_object(GROUP, VERSION, PEERING_NS, SETS, SET)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    conditions = (found.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def tenant_namespace(api: k8s.ApiClient, peer_id: str) -> str:
    selector = f"liqo.io/remote-cluster-id={peer_id},liqo.io/tenant-namespace=true"
    found = k8s.CoreV1Api(api).list_namespace(label_selector=selector).items
    assert found, f"no tenant namespace for {peer_id}"
    return str(found[0].metadata.name)  # type: ignore[union-attr]
