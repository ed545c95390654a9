"""The operator's ServiceAccount, used as an attacker would, on the chart's install: every way from its rights
to more rights is refused, by RBAC or by the chart's ValidatingAdmissionPolicies, and each write the operator
does make still goes through.

The chart is installed without a Pod (testenv.chart_rbac): the test holds a token of its ServiceAccount and
makes each request itself, with a user agent of its own (the RBAC proof of testenv.rbacproof counts only
the operator's). Two installs: the defaults (every namespace), and watchNamespaces with credentialsMinting.
With restartLiqoOnRenewal (a third install), the Pods it may delete are Liqo's virtual kubelets in tenant
namespaces and Liqo's controller manager, and no other. Each refusal's origin is in the test id: `rbac` (the
authorizer, or RBAC's escalation check) or `policy` (a ValidatingAdmissionPolicy of the chart).
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from liqo_peering.liqo import naming
from liqo_peering.liqo import peeringuser as pu
from testenv import chart_rbac
from testenv import kube as k
from testenv.kube import Kube, KubeError
from testenv.liqo_env.pytest_plugin import LiqoClusters
from testenv.wait import wait_for

pytestmark = pytest.mark.e2e

WATCHED = "e2e-escalation-watched"  # where LiqoPeerings would live (watchNamespaces)
TENANT = "e2e-escalation-tenant"  # stands for a Liqo tenant namespace: the label is what counts
OTHER = "e2e-escalation-other"  # any other namespace
TENANT_LABEL = "liqo.io/tenant-namespace"
IN_USE = naming.KUBECONFIG_IN_USE
VICTIM = "victim-kubeconfig"  # a user's Secret, in WATCHED and in OTHER
AGENT = "e2e-escalation"
INSTALLS = {
    "default": (),
    "watch-minting": (f"watchNamespaces={{{WATCHED}}}", "credentialsMinting=true"),
    "restarts": ("restartLiqoOnRenewal=true",),
}
VK_LABELS = {naming.VK_COMPONENT: naming.VK_COMPONENT_VALUE}
MANAGER_LABELS = dict(label.split("=") for label in pu.CONTROLLER_MANAGER_SELECTOR.split(","))
ROLEBINDING = k.ROLEBINDING
WEBHOOKS = (
    k.Res("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations", namespaced=False),
    k.Res("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations", namespaced=False),
)
TENANT_BINDING = "liqo-peering-operator-tenant-access"
STORED = "liqo-remote-certificate"  # a certificate Liqo v1.0/v1.1 stored when it issued an identity
TENANT_KUBECONFIG = "kubeconfig-controlplane-victim"


@dataclass
class Install:
    name: str
    admin: Kube
    sa: Kube  # the chart's ServiceAccount
    chart: chart_rbac.ChartRelease
    liqo_namespace: str

    @property
    def minting(self) -> bool:
        return "credentialsMinting=true" in INSTALLS[self.name]

    @property
    def watching(self) -> bool:
        return any(s.startswith("watchNamespaces=") for s in INSTALLS[self.name])

    @property
    def fullname(self) -> str:
        return f"{self.chart.release}-liqo-peering-operator"


def _ensure(admin: Kube, res: k.Res, body: dict[str, Any], namespace: str | None = None) -> None:
    if admin.get(res, body["metadata"]["name"], namespace) is None:
        admin.create(res, body, namespace)


def _victims(admin: Kube) -> None:
    """A user's kubeconfig Secret in WATCHED and OTHER; a TLS Secret; a nonce-named Secret outside tenants."""
    data = {"kubeconfig": k.b64("apiVersion: v1\nkind: Config\n")}
    for ns in (WATCHED, OTHER):
        _ensure(admin, k.SECRET, {"metadata": {"name": VICTIM}, "data": data}, ns)
        _ensure(admin, k.SECRET, {"metadata": {"name": naming.NONCE_SECRET}, "data": {"nonce": k.b64("x")}}, ns)
    _ensure(admin, k.SECRET, {"metadata": {"name": STORED}, "data": {"certificate": k.b64("x")}}, OTHER)
    # What Liqo keeps in a tenant namespace beside the certificates it stored: a kubeconfig of an identity.
    _ensure(admin, k.SECRET, {"metadata": {"name": TENANT_KUBECONFIG}, "data": data}, TENANT)
    tls = {"tls.crt": k.b64("crt"), "tls.key": k.b64("key")}
    _ensure(admin, k.SECRET, {"metadata": {"name": "victim-tls"}, "type": "kubernetes.io/tls", "data": tls}, WATCHED)
    _ensure(admin, k.CONFIGMAP, {"metadata": {"name": "owner"}}, WATCHED)
    owner = admin.get(k.CONFIGMAP, "owner", WATCHED)
    assert owner is not None
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]}
    _ensure(admin, k.SECRET, {"metadata": {"name": "victim-owned", "ownerReferences": [ref]}, "data": data}, WATCHED)


@pytest.fixture(scope="module")
def installs(
    liqo_clusters: LiqoClusters, helm: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[[str], Install]]:
    """The chart's installs on the consumer, made on first use, uninstalled at the end of the module."""
    admin = liqo_clusters.kube("consumer")
    kubeconfig = Path(liqo_clusters["consumer"].kubeconfig)
    for ns, labels in ((WATCHED, {}), (OTHER, {}), (TENANT, {TENANT_LABEL: "true"})):
        _ensure(admin, k.NAMESPACE, {"metadata": {"name": ns, "labels": labels}})
    _victims(admin)
    _victim_pods(admin, liqo_clusters.namespace)
    made: dict[str, Install] = {}

    def install(name: str) -> Install:
        if name not in made:
            release = f"lpo-escalation-{name}"
            chart = chart_rbac.install(
                kubeconfig,
                liqo_clusters.namespace,
                ("replicaCount=0", "crds.enabled=false", *INSTALLS[name]),
                release=release,
                namespace=release,
                binary=helm,
            )
            path = chart.service_account_kubeconfig(tmp_path_factory.mktemp(name) / "sa.kubeconfig")
            made[name] = Install(name, admin, Kube.from_kubeconfig(str(path), AGENT), chart, liqo_clusters.namespace)
            _in_force(made[name])
        return made[name]

    try:
        yield install
    finally:
        for one in made.values():
            one.chart.uninstall()
            admin.delete(k.NAMESPACE, one.chart.namespace)
        for ns in (WATCHED, OTHER, TENANT):
            admin.delete(k.NAMESPACE, ns)
        admin.delete(k.POD, "escalation-app", liqo_clusters.namespace)


def _victim_pod(admin: Kube, ns: str, name: str, labels: dict[str, str]) -> None:
    body = {
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    _ensure(admin, k.POD, body, ns)


def _victim_pods(admin: Kube, liqo_ns: str) -> None:
    """Pods the operator may not delete: a user's in a tenant namespace and in Liqo's, a virtual-kubelet
    lookalike and a controller-manager lookalike outside the namespaces they would be in."""
    _victim_pod(admin, OTHER, "app", {})
    _victim_pod(admin, OTHER, "vk-lookalike", VK_LABELS)
    _victim_pod(admin, OTHER, "manager-lookalike", MANAGER_LABELS)
    _victim_pod(admin, TENANT, "app", {})
    _victim_pod(admin, liqo_ns, "escalation-app", {})


def _in_force(one: Install) -> None:
    """The API server applies a new ValidatingAdmissionPolicy once its informer has it: wait until each of the
    chart's policies refuses a dry run, and check that the server found no type error in their expressions."""
    probes: list[Callable[[], Any]] = [
        lambda: one.sa._call("POST", k.SECRET.path(OTHER), {"dryRun": "All"}, body=_secret("probe")),
        lambda: one.sa._call(
            "PATCH",
            k.NAMESPACE.path(None, OTHER),
            {"dryRun": "All"},
            body={"metadata": {"labels": {TENANT_LABEL: "true"}}},
            content_type=k.MERGE,
        ),
    ]
    if "restartLiqoOnRenewal=true" in INSTALLS[one.name]:
        probes.append(lambda: one.sa._call("DELETE", k.POD.path(OTHER, "app"), {"dryRun": "All"}))
    for probe in probes:

        def refused(probe: Callable[[], Any] = probe) -> bool:
            try:
                probe()
            except KubeError as exc:
                return exc.status == 403 and "ValidatingAdmissionPolicy" in exc.body
            return False

        wait_for(f"the policies of {one.chart.release} to be in force", refused, timeout=60)
    policies = k.Res("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies", namespaced=False)
    for policy in one.admin.list(policies):
        if policy["metadata"]["name"].startswith(one.fullname):
            status = policy.get("status") or {}
            assert not (status.get("typeChecking") or {}).get("expressionWarnings"), status


def refusal(attempt: Callable[[], Any]) -> tuple[str, str]:
    """Who refused the request (`rbac` or `policy`) and what the API server said; the test fails if it passed."""
    try:
        attempt()
    except KubeError as exc:
        assert exc.status == 403, exc
        if "ValidatingAdmissionPolicy" in exc.body:
            return "policy", exc.body
        assert "cannot " in exc.body or "attempting to grant RBAC permissions" in exc.body, exc.body
        return "rbac", exc.body
    raise AssertionError("the ServiceAccount's request went through")


def _secret(name: str, type_: str = "Opaque", **meta: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, **meta}, "type": type_}


# Each escalation path: (name, request as the ServiceAccount, origin of the refusal per install).
Attempt = Callable[[Install], Any]


def _sa_token(ns: str, name: str) -> Attempt:
    # The control plane fills such a Secret with a token of that ServiceAccount: here one that may escalate.
    annotations = {"kubernetes.io/service-account.name": "clusterrole-aggregation-controller"}
    body = _secret(name, "kubernetes.io/service-account-token", annotations=annotations)
    return lambda i: i.sa.create(k.SECRET, body, ns)


def _bootstrap_token(i: Install) -> Any:
    body = _secret("bootstrap-token-abcdef", "bootstrap.kubernetes.io/token")
    body["stringData"] = {
        "token-id": "abcdef",
        "token-secret": "0123456789abcdef",
        "usage-bootstrap-authentication": "true",
    }
    return i.sa.create(k.SECRET, body, "kube-system")


def _minted_lookalike(ns: str) -> Attempt:
    def attempt(i: Install) -> Any:
        peering = {"metadata": {"name": "peering", "uid": "00000000-0000-0000-0000-000000000001"}}
        return i.sa.create(k.SECRET, pu.secret(ns, naming.minted_secret("peering"), peering, {}), ns)

    return attempt


def _patch(ns: str, name: str, body: dict[str, Any]) -> Attempt:
    return lambda i: i.sa.patch(k.SECRET, name, body, ns)


def _delete(ns: str, name: str) -> Attempt:
    return lambda i: i.sa.delete(k.SECRET, name, ns)


def _delete_pod(ns: str | None, name: str) -> Attempt:
    """Delete a Pod; ns None: in Liqo's namespace."""
    return lambda i: i.sa.delete(k.POD, name, ns or i.liqo_namespace)


def _pod(i: Install) -> Any:
    body = {"metadata": {"name": "escalation"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    return i.sa.create(k.POD, body, WATCHED)


def _binding(ns: str, role: str | None, subject: tuple[str, str] | None = None) -> Attempt:
    def attempt(i: Install) -> Any:
        sa_ns, sa_name = subject or (i.chart.namespace, i.chart.service_account())
        body = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": TENANT_BINDING},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": role or f"{i.fullname}-tenant-access",
            },
            "subjects": [{"kind": "ServiceAccount", "name": sa_name, "namespace": sa_ns}],
        }
        # Server-side apply, as the operator makes it: a PATCH, authorized as `create` of that one name.
        return i.sa.apply(ROLEBINDING, body, AGENT, ns)

    return attempt


def _cluster_binding(i: Install) -> Any:
    body = {
        "metadata": {"name": "escalation"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": i.chart.service_account(), "namespace": i.chart.namespace}],
    }
    return i.sa.create(k.CLUSTERROLEBINDING, body)


def _webhook(res: k.Res) -> Attempt:
    webhook = {
        "name": "escalation.example.com",
        "clientConfig": {"url": "https://127.0.0.1:9/"},
        "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["secrets"]}],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
    }
    return lambda i: i.sa.create(res, {"metadata": {"name": "escalation"}, "webhooks": [webhook]})


def _approve(i: Install) -> Any:
    approved = {"type": "Approved", "status": "True", "reason": "Escalation", "message": "escalation"}
    body = {"metadata": {"name": "escalation"}, "spec": {}, "status": {"conditions": [approved]}}
    return i.sa.replace(k.CSR, body, sub="approval")


def _impersonate(i: Install) -> Any:
    i.sa.api.set_default_header("Impersonate-User", "system:admin")
    try:
        return i.sa.list(k.NAMESPACE)
    finally:
        i.sa.api.default_headers.pop("Impersonate-User")


def _escalate(i: Install) -> Any:
    rule = {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}
    return i.sa.patch(k.CLUSTERROLE, i.fullname, {"rules": [rule]})


def _new_cluster_role(i: Install) -> Any:
    rule = {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}
    return i.sa.create(k.CLUSTERROLE, {"metadata": {"name": "escalation"}, "rules": [rule]})


def _token_request(i: Install) -> Any:
    path = "/api/v1/namespaces/kube-system/serviceaccounts/clusterrole-aggregation-controller/token"
    return i.sa._call("POST", path, body={"spec": {"audiences": None}})


def _label_tenant(i: Install) -> Any:
    return i.sa.patch(k.NAMESPACE, OTHER, {"metadata": {"labels": {TENANT_LABEL: "true"}}})


P, R = "policy", "rbac"
ATTEMPTS: list[tuple[str, Attempt, dict[str, str]]] = [
    ("sa-token-secret-kube-system", _sa_token("kube-system", "escalation-token"), {"default": P, "watch-minting": P}),
    ("sa-token-secret-tenant", _sa_token(TENANT, naming.NONCE_SECRET), {"default": P, "watch-minting": P}),
    ("bootstrap-token-secret", _bootstrap_token, {"default": P, "watch-minting": P}),
    (
        "opaque-secret-other-ns",
        lambda i: i.sa.create(k.SECRET, _secret(naming.NONCE_SECRET), OTHER),
        {"default": P, "watch-minting": P},
    ),
    ("minted-lookalike-kube-system", _minted_lookalike("kube-system"), {"default": P, "watch-minting": P}),
    ("minted-lookalike-other-ns", _minted_lookalike(OTHER), {"default": P, "watch-minting": P}),
    (
        "patch-data-watched",
        _patch(WATCHED, VICTIM, {"data": {"kubeconfig": k.b64("x")}}),
        {"default": P, "watch-minting": P},
    ),
    (
        "patch-data-other-ns",
        _patch(OTHER, VICTIM, {"data": {"kubeconfig": k.b64("x")}}),
        {"default": P, "watch-minting": R},
    ),
    (
        "patch-minted-label-onto-user-secret",
        _patch(WATCHED, VICTIM, {"metadata": {"labels": {pu.CREDENTIALS_LABEL: pu.MINTED}}}),
        {"default": P, "watch-minting": P},
    ),
    (
        "patch-other-finalizer",
        _patch(WATCHED, VICTIM, {"metadata": {"finalizers": ["example.com/hold"]}}),
        {"default": P, "watch-minting": P},
    ),
    # With credentialsMinting an unowned Opaque Secret where LiqoPeerings live may be a bootstrap Secret
    # (deleteBootstrapSecret): the chart's README says so. Without it, RBAC refuses.
    # With the secret policy, RBAC lets the operator delete Secrets cluster-wide (tenant namespaces appear at run
    # time): the policy allows only the certificates Liqo stored, in tenant namespaces.
    ("delete-user-secret-watched", _delete(WATCHED, VICTIM), {"default": P}),
    ("delete-owned-secret-watched", _delete(WATCHED, "victim-owned"), {"default": P, "watch-minting": P}),
    ("delete-tls-secret-watched", _delete(WATCHED, "victim-tls"), {"default": P, "watch-minting": P}),
    ("delete-user-secret-other-ns", _delete(OTHER, VICTIM), {"default": P, "watch-minting": P}),
    ("delete-stored-certificate-other-ns", _delete(OTHER, STORED), {"default": P, "watch-minting": P}),
    ("delete-kubeconfig-tenant-ns", _delete(TENANT, TENANT_KUBECONFIG), {"default": P, "watch-minting": P}),
    ("delete-nonce-named-other-ns", _delete(OTHER, naming.NONCE_SECRET), {"default": P, "watch-minting": P}),
    ("create-pod", _pod, {"default": R, "watch-minting": R, "restarts": R}),
    ("delete-pod-other-ns", _delete_pod(OTHER, "app"), {"default": R, "restarts": P}),
    ("delete-vk-lookalike-other-ns", _delete_pod(OTHER, "vk-lookalike"), {"default": R, "restarts": P}),
    ("delete-manager-lookalike-other-ns", _delete_pod(OTHER, "manager-lookalike"), {"default": R, "restarts": P}),
    ("delete-pod-tenant-ns", _delete_pod(TENANT, "app"), {"default": R, "restarts": P}),
    ("delete-pod-liqo-ns", _delete_pod(None, "escalation-app"), {"default": R, "restarts": P}),
    ("rolebinding-other-ns", _binding(OTHER, None), {"default": R, "watch-minting": P}),
    ("rolebinding-tenant-cluster-admin", _binding(TENANT, "cluster-admin"), {"default": R, "watch-minting": R}),
    (
        "rolebinding-tenant-other-subject",
        _binding(TENANT, None, ("kube-system", "default")),
        {"default": R, "watch-minting": P},
    ),
    ("clusterrolebinding", _cluster_binding, {"default": R, "watch-minting": R}),
    ("validating-webhook", _webhook(WEBHOOKS[0]), {"default": R, "watch-minting": R}),
    ("mutating-webhook", _webhook(WEBHOOKS[1]), {"default": R, "watch-minting": R}),
    ("approve-csr", _approve, {"default": R, "watch-minting": R}),
    ("impersonate", _impersonate, {"default": R, "watch-minting": R}),
    ("escalate-own-clusterrole", _escalate, {"default": R, "watch-minting": R}),
    ("create-clusterrole", _new_cluster_role, {"default": R, "watch-minting": R}),
    ("token-request", _token_request, {"default": R, "watch-minting": R}),
    ("label-namespace-tenant", _label_tenant, {"default": P, "watch-minting": P}),
]
CASES = [
    pytest.param(install, attempt, origins[install], id=f"{install}-{name}-by-{origins[install]}")
    for install in INSTALLS
    for name, attempt, origins in ATTEMPTS
    if install in origins
]


@pytest.mark.parametrize(("install", "attempt", "origin"), CASES)
def test_escalation_is_refused(installs: Callable[[str], Install], install: str, attempt: Attempt, origin: str) -> None:
    one = installs(install)
    by, said = refusal(lambda: attempt(one))
    assert by == origin, said
    if by == "policy":
        assert one.fullname in said, said  # the chart's own policy, not another one on the cluster


# The writes the operator makes, as it makes them: the policies let each one through.


def test_nonce_secret_in_a_tenant_namespace(installs: Callable[[str], Install]) -> None:
    for name in INSTALLS:
        sa = installs(name).sa
        body = {"metadata": {"name": naming.NONCE_SECRET, "labels": {naming.NONCE_LABEL: "true"}}}
        sa.create(k.SECRET, body, TENANT)
        sa.patch(
            k.SECRET,
            naming.NONCE_SECRET,
            {"metadata": {"labels": {"team": "a"}}, "data": {"nonce": k.b64("n")}},
            TENANT,
        )
        assert sa.delete(k.SECRET, naming.NONCE_SECRET, TENANT)


def test_stored_certificates_in_a_tenant_namespace(installs: Callable[[str], Install]) -> None:
    """What the reverse direction's renewal deletes on Liqo v1.0/v1.1: the certificates Liqo stored in a tenant
    namespace (liqo-remote-certificate, and one per ResourceSlice); no other Secret there."""
    for name in ("default", "watch-minting"):
        one = installs(name)
        for stored in (STORED, f"{STORED}-slice"):
            one.admin.create(k.SECRET, {"metadata": {"name": stored}, "data": {"certificate": k.b64("x")}}, TENANT)
            assert one.sa.delete(k.SECRET, stored, TENANT)
        by, said = refusal(partial(one.sa.delete, k.SECRET, TENANT_KUBECONFIG, TENANT))
        assert by == P, said


def test_kubeconfig_in_use_finalizer_on_a_user_secret(installs: Callable[[str], Install]) -> None:
    for name in INSTALLS:
        sa = installs(name).sa
        sa.patch(k.SECRET, VICTIM, {"metadata": {"finalizers": [IN_USE]}}, WATCHED)
        sa.patch(k.SECRET, VICTIM, {"metadata": {"finalizers": None}}, WATCHED)
        assert not sa.get(k.SECRET, VICTIM, WATCHED)["metadata"].get("finalizers")  # type: ignore[index]


def test_minted_secret_and_bootstrap_secret_with_credentials_minting(installs: Callable[[str], Install]) -> None:
    one = installs("watch-minting")
    name = naming.minted_secret("peering")
    owner = {"apiVersion": "peering.liqo-operator.io/v1alpha1", "kind": "LiqoPeering"}
    peering = {**owner, "metadata": {"name": "peering", "uid": "00000000-0000-0000-0000-000000000002"}}
    body = pu.secret(WATCHED, name, peering, {})
    # Created as the operator creates it (a dry run: its owner does not exist, the garbage collector would take it).
    one.sa._call("POST", k.SECRET.path(WATCHED), {"dryRun": "All"}, body=body)
    # Patched at each step and deleted at unpeering: one made with its label (and no owner) stands for it.
    one.admin.create(k.SECRET, {"metadata": {"name": name, "labels": {pu.CREDENTIALS_LABEL: pu.MINTED}}}, WATCHED)
    one.sa.patch(k.SECRET, name, pu.begin_patch("cn", b"key"), WATCHED)
    one.sa.patch(k.SECRET, name, {"metadata": {"finalizers": [IN_USE]}}, WATCHED)
    one.sa.patch(k.SECRET, name, {"metadata": {"finalizers": None}}, WATCHED)
    key = base64.b64encode(b"kubeconfig").decode()
    assert one.sa.delete(k.SECRET, name, WATCHED)
    # deleteBootstrapSecret: the user's bootstrap kubeconfig Secret, once the minted credential is in use.
    one.admin.create(k.SECRET, {"metadata": {"name": "bootstrap"}, "data": {"kubeconfig": key}}, WATCHED)
    assert one.sa.delete(k.SECRET, "bootstrap", WATCHED)


def test_virtual_kubelet_and_controller_manager_pods_with_restarts(installs: Callable[[str], Install]) -> None:
    """What --restart-liqo-on-renewal deletes: a virtual kubelet's Pod in a tenant namespace, and Liqo's controller
    manager's in Liqo's namespace."""
    one = installs("restarts")
    _victim_pod(one.admin, TENANT, "vk-1", VK_LABELS)
    _victim_pod(one.admin, one.liqo_namespace, "escalation-manager", MANAGER_LABELS)
    one.sa.delete(k.POD, "vk-1", TENANT)
    one.sa.delete(k.POD, "escalation-manager", one.liqo_namespace)
    assert [
        p["metadata"]["name"] for p in one.sa.list(k.POD, one.liqo_namespace, selector=pu.CONTROLLER_MANAGER_SELECTOR)
    ] == []


def test_tenant_namespace_and_tenant_access_binding(installs: Callable[[str], Install]) -> None:
    for name in INSTALLS:
        one = installs(name)
        ns = f"e2e-escalation-tenant-{name}"
        one.sa.create(k.NAMESPACE, {"metadata": {"name": ns, "labels": {TENANT_LABEL: "true"}}})
        if one.watching:
            _binding(ns, None)(one)
            one.admin.delete(ROLEBINDING, TENANT_BINDING, ns)
        assert one.sa.delete(k.NAMESPACE, ns)
