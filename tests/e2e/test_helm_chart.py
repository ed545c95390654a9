"""The Helm chart: lint, render, server-side dry-run, install and upgrade on the local consumer cluster.

helm comes from the tool cache (hack/build-tools.sh); a missing helm fails these tests, saying how to
build it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml
from kubernetes.client.rest import ApiException

import testenv.helm
from hack.crdgen import CRD_NAME, SET_CRD_NAME
from testenv.helm import CHART, PLACEHOLDER_IMAGE, PLACEHOLDER_REPOSITORY
from testenv.localk8s import LocalCluster, start_clusters

REPO = Path(__file__).resolve().parents[2]
NAMESPACE = "lpo-chart-test"
RELEASE = "lpo"


def run_helm(helm: Path, *args: str, kubeconfig: Path | None = None, check: bool = True) -> str:
    return testenv.helm.run_helm(*args, kubeconfig=kubeconfig, check=check, binary=helm)


KOPF_CRDS = {"clusterkopfpeerings.kopf.dev", "kopfpeerings.kopf.dev"}


def render(helm: Path, *sets: str, namespace: str = NAMESPACE, extra: list[str] | None = None) -> list[dict[str, Any]]:
    """`helm template` with `sets` after the placeholder image (the chart names none of its own)."""
    args = ["template", RELEASE, str(CHART), "--namespace", namespace, *(extra or [])]
    for s in (*PLACEHOLDER_IMAGE, *sets):
        args += ["--set", s]
    return [d for d in yaml.safe_load_all(run_helm(helm, *args)) if d]


def find(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]


def operator_args(docs: list[dict[str, Any]]) -> list[str]:
    (deployment,) = find(docs, "Deployment")
    return list(deployment["spec"]["template"]["spec"]["containers"][0]["args"])


# -- lint and render -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sets",
    [
        [],
        ["ha.enabled=true", "replicaCount=3"],
        ["watchNamespaces={team-a,team-b}", "ha.enabled=true", "replicaCount=2"],
        ["metrics.serviceMonitor.enabled=true", "crds.keep=false"],
    ],
    ids=["defaults", "ha", "ha-namespaced", "servicemonitor"],
)
def test_lint_clean(helm: Path, sets: list[str]) -> None:
    args = ["lint", "--strict", str(CHART)]
    for s in (*PLACEHOLDER_IMAGE, *sets):
        args += ["--set", s]
    out = run_helm(helm, *args)
    assert "0 chart(s) failed" in out, out
    assert "[WARNING]" not in out and "[ERROR]" not in out, out


def test_default_render(helm: Path) -> None:
    docs = render(helm)
    kinds = sorted(d["kind"] for d in docs)
    assert kinds == sorted(
        [
            "ClusterRole",
            "ClusterRoleBinding",
            "CustomResourceDefinition",
            "CustomResourceDefinition",
            "Deployment",
            "Role",
            "RoleBinding",
            "Service",
            "ServiceAccount",
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding",
            "ValidatingAdmissionPolicyBinding",
        ]
    )
    (deployment,) = find(docs, "Deployment")
    spec = deployment["spec"]
    assert spec["replicas"] == 1 and spec["strategy"] == {"type": "Recreate"}
    pod = spec["template"]["spec"]
    container = pod["containers"][0]
    assert container["image"] == f"{PLACEHOLDER_REPOSITORY}:{chart_app_version()}"  # no tag: the appVersion
    assert container["args"] == [
        "run",
        "--log-format=json",
        "--log-level=info",
        "--metrics-port=8080",
        "--health-port=8081",
        "--stall-timeout=300",
        "--pass-markers-dir=/var/lib/liqo-peering-operator/pass-markers",
    ]
    # Start-up and liveness: the event loop and worker pools make progress; readiness: informers synced.
    assert container["startupProbe"]["httpGet"] == {"path": "/livez", "port": "health"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/livez", "port": "health"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    assert spec["revisionHistoryLimit"] == 10 and "affinity" not in pod
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert pod["securityContext"]["runAsUser"] == 65532
    assert pod["automountServiceAccountToken"] is True
    (service,) = find(docs, "Service")
    assert service["spec"]["ports"][0]["name"] == "metrics"
    crds = {d["metadata"]["name"]: d for d in find(docs, "CustomResourceDefinition")}
    assert set(crds) == {CRD_NAME, SET_CRD_NAME}
    for name, source_file in ((CRD_NAME, "liqopeerings"), (SET_CRD_NAME, "liqopeeringsets")):
        assert crds[name]["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}
        source = yaml.safe_load((REPO / "crds" / f"peering.liqo-operator.io_{source_file}.yaml").read_text())
        assert crds[name]["spec"] == source["spec"]
    # All namespaces: LiqoPeerings and Secrets through the ClusterRole; the only Role is Liqo's namespace.
    (role,) = find(docs, "Role")
    assert role["metadata"]["namespace"] == "liqo"
    (cluster_role,) = find(docs, "ClusterRole")
    groups = {g for rule in cluster_role["rules"] for g in rule["apiGroups"]}
    assert "kopf.dev" not in groups and "coordination.k8s.io" not in groups
    assert any("liqopeerings" in rule["resources"] for rule in cluster_role["rules"])
    assert any("liqopeeringsets" in rule["resources"] for rule in cluster_role["rules"])


def chart_app_version() -> str:
    return str(yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"])


def test_options_render(helm: Path) -> None:
    docs = render(
        helm,
        "watchNamespaces={team-a,team-b}",
        "logFormat=console",
        "resyncInterval=600",
        "insecureKubeconfig.exec=true",
        "insecureKubeconfig.tls=true",
        "extraArgs={--foo=bar}",
        "image.tag=1.2.3",
        "podAnnotations.a=b",
        "nodeSelector.disk=ssd",
    )
    args = operator_args(docs)
    assert args[:3] == ["run", "--namespace=team-a", "--namespace=team-b"]
    for flag in ("--log-format=console", "--resync-interval=600", "--insecure-kubeconfig-exec"):
        assert flag in args
    assert "--insecure-kubeconfig-tls" in args and args[-1] == "--foo=bar"
    (deployment,) = find(docs, "Deployment")
    pod = deployment["spec"]["template"]
    assert pod["metadata"]["annotations"] == {"a": "b"}
    assert pod["spec"]["nodeSelector"] == {"disk": "ssd"}
    assert pod["spec"]["containers"][0]["image"].endswith(":1.2.3")
    roles = {r["metadata"]["namespace"]: r for r in find(docs, "Role")}
    assert set(roles) == {"team-a", "team-b", "liqo"}
    assert any("liqopeerings" in rule["resources"] for rule in roles["team-a"]["rules"])
    assert any(a.startswith("--tenant-access-role=") for a in args), args
    cluster_roles = {r["metadata"]["name"]: r for r in find(docs, "ClusterRole")}
    (tenant_access,) = [r for name, r in cluster_roles.items() if name.endswith("-tenant-access")]
    assert tenant_access["rules"] == [
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]},
    ]
    (cluster_role,) = [r for name, r in cluster_roles.items() if not name.endswith("-tenant-access")]
    for rule in cluster_role["rules"]:
        if "liqopeerings" in rule["resources"]:
            # Cluster-wide only the duplicate check's informer (list and watch): no writes, no status.
            assert rule["resources"] == ["liqopeerings"] and rule["verbs"] == ["list", "watch"], rule
        if "secrets" in rule["resources"]:
            # No cluster-wide Secret reads: only create, delete (both confined by the secret policy to what the
            # operator writes), and the nonces by name (tenant namespaces are read through the tenant-access
            # ClusterRole the operator binds there).
            assert rule["verbs"] in (["create"], ["delete"]) or rule.get("resourceNames") == [
                "liqo-signed-nonce",
                "liqo-nonce",
            ], rule
        # No cluster-wide Pod reads either: the virtual kubelet's Pods are read in tenant namespaces.
        assert "pods" not in rule["resources"], rule
        if "clusterroles" in rule["resources"]:
            assert rule["verbs"] == ["bind"] and rule["resourceNames"] == [tenant_access["metadata"]["name"]]


def test_ha_render(helm: Path) -> None:
    docs = render(helm, "ha.enabled=true", "replicaCount=2")
    (deployment,) = find(docs, "Deployment")
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["strategy"]["type"] == "RollingUpdate"
    args = operator_args(docs)
    # kopf peering with the chart's peering lifetime (30 s, not kopf's 60: values.yaml says why).
    assert f"--peering-name={RELEASE}-liqo-peering-operator" in args and "--peering-lifetime=30" in args, args
    assert "--peering-lifetime=15" in operator_args(render(helm, "ha.enabled=true", "ha.peeringLifetime=15"))
    # Without ha.enabled the operator runs standalone: no peering flags, whatever the lifetime says.
    standalone = operator_args(render(helm, "ha.peeringLifetime=15"))
    assert not [a for a in standalone if a.startswith("--peering-")], standalone
    # kopf's CRDs are in the chart's crds/ (installed before the release, owned by none); the peering
    # object is a normal release object, no hook (Argo CD would run a hook as its own PostSync hook).
    crds = {d["metadata"]["name"] for d in find(docs, "CustomResourceDefinition")}
    assert crds == {CRD_NAME, SET_CRD_NAME}
    with_crds = render(helm, "ha.enabled=true", "replicaCount=2", extra=["--include-crds"])
    assert {d["metadata"]["name"] for d in find(with_crds, "CustomResourceDefinition")} == crds | KOPF_CRDS
    (peering,) = find(docs, "ClusterKopfPeering")
    assert "annotations" not in peering["metadata"], peering
    for kopf_crd in find(with_crds, "CustomResourceDefinition"):
        if kopf_crd["metadata"]["name"] in KOPF_CRDS:  # Argo CD applies crds/: never deleted with an application
            annotations = kopf_crd["metadata"]["annotations"]
            assert annotations["argocd.argoproj.io/sync-options"] == "Delete=false,Prune=false", annotations
    # Disruptions leave a replica, and the replicas prefer different nodes.
    (pdb,) = find(docs, "PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    anti = deployment["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    (preferred,) = anti["preferredDuringSchedulingIgnoredDuringExecution"]
    assert preferred["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert preferred["podAffinityTerm"]["labelSelector"]["matchLabels"] == pdb["spec"]["selector"]["matchLabels"]
    (cluster_role,) = find(docs, "ClusterRole")
    assert any("clusterkopfpeerings" in rule["resources"] for rule in cluster_role["rules"])

    namespaced = render(helm, "ha.enabled=true", "replicaCount=2", "watchNamespaces={team-a}")
    assert not find(namespaced, "ClusterKopfPeering")
    (kp,) = find(namespaced, "KopfPeering")
    assert kp["metadata"]["namespace"] == "team-a"


def test_one_replica_gets_no_disruption_budget_nor_anti_affinity(helm: Path) -> None:
    for sets in ([], ["ha.enabled=true"]):
        docs = render(helm, *sets)
        assert not find(docs, "PodDisruptionBudget"), sets
        (deployment,) = find(docs, "Deployment")
        assert "affinity" not in deployment["spec"]["template"]["spec"], sets


def test_ha_scheduling_values(helm: Path) -> None:
    ha = ["ha.enabled=true", "replicaCount=3"]

    def pod(*sets: str) -> dict[str, Any]:
        (deployment,) = find(render(helm, *ha, *sets), "Deployment")
        return dict(deployment["spec"]["template"]["spec"])

    (required,) = pod("ha.podAntiAffinity=hard")["affinity"]["podAntiAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert required["topologyKey"] == "kubernetes.io/hostname"
    assert "affinity" not in pod("ha.podAntiAffinity=none")
    # An explicit affinity replaces the default one.
    own = pod(
        "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key=x",
        "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator=Exists",
    )
    assert set(own["affinity"]) == {"nodeAffinity"}
    # topologySpreadConstraints and podDisruptionBudget.*: tests/unit/test_chart_options.py.


TENANT_ACCESS = f"{RELEASE}-liqo-peering-operator-tenant-access"
TENANT_NAMESPACES = f"{RELEASE}-liqo-peering-operator-tenant-namespaces"


def policies(docs: list[dict[str, Any]]) -> set[str]:
    """Names of the ValidatingAdmissionPolicies rendered, each checked to come with its Deny binding."""
    names = {d["metadata"]["name"] for d in find(docs, "ValidatingAdmissionPolicy")}
    bindings = find(docs, "ValidatingAdmissionPolicyBinding")
    assert sorted(b["spec"]["policyName"] for b in bindings) == sorted(names), bindings
    assert all(b["spec"]["validationActions"] == ["Deny"] for b in bindings), bindings
    return names


def test_tenant_access_policy_with_watch_namespaces(helm: Path) -> None:
    assert TENANT_ACCESS not in policies(render(helm))
    docs = render(helm, "watchNamespaces={team-a}")
    assert TENANT_ACCESS in policies(docs)
    (policy,) = find(docs, "ValidatingAdmissionPolicy", TENANT_ACCESS)
    (condition,) = policy["spec"]["matchConditions"]
    assert f"system:serviceaccount:{NAMESPACE}:{RELEASE}-liqo-peering-operator" in condition["expression"]
    assert TENANT_ACCESS not in policies(render(helm, "watchNamespaces={team-a}", "rbac.tenantAccessPolicy=false"))
    # admissionregistration.k8s.io/v1 is served from Kubernetes 1.30: on the 1.29 floor the chart leaves it out.
    assert not policies(render(helm, "watchNamespaces={team-a}", extra=["--kube-version", "1.29.15"]))
    assert TENANT_ACCESS in policies(render(helm, "watchNamespaces={team-a}", extra=["--kube-version", "1.30.0"]))


def test_tenant_namespace_policy_whatever_the_namespaces_watched(helm: Path) -> None:
    # The ClusterRole's namespace patch and delete, confined to Liqo's tenant namespaces, in both RBAC modes.
    for sets in ([], ["watchNamespaces={team-a}"]):
        docs = render(helm, *sets)
        assert TENANT_NAMESPACES in policies(docs), sets
        (policy,) = find(docs, "ValidatingAdmissionPolicy", TENANT_NAMESPACES)
        (rule,) = policy["spec"]["matchConstraints"]["resourceRules"]
        assert rule["resources"] == ["namespaces"] and set(rule["operations"]) == {"CREATE", "UPDATE", "DELETE"}
        (condition,) = policy["spec"]["matchConditions"]
        assert f"system:serviceaccount:{NAMESPACE}:{RELEASE}-liqo-peering-operator" in condition["expression"]
        (cluster_role,) = find(docs, "ClusterRole", f"{RELEASE}-liqo-peering-operator")
        (namespaces,) = [r for r in cluster_role["rules"] if r["resources"] == ["namespaces"]]
        assert {"patch", "delete"} <= set(namespaces["verbs"]), namespaces
    assert TENANT_NAMESPACES not in policies(render(helm, "rbac.tenantNamespacePolicy=false"))
    assert not policies(render(helm, "rbac.create=false"))
    assert TENANT_NAMESPACES not in policies(render(helm, extra=["--kube-version", "1.29.15"]))
    assert TENANT_NAMESPACES in policies(render(helm, extra=["--kube-version", "1.30.0"]))


def test_crd_toggles(helm: Path) -> None:
    assert not find(render(helm, "crds.enabled=false"), "CustomResourceDefinition")
    assert not find(render(helm, "crds.enabled=false", "ha.enabled=true"), "CustomResourceDefinition")
    crds = find(render(helm, "crds.keep=false"), "CustomResourceDefinition")
    assert len(crds) == 2 and all("annotations" not in crd["metadata"] for crd in crds)


@pytest.mark.parametrize(
    ("sets", "error"),
    [
        (["replicaCount=2"], "needs ha.enabled=true"),
        (["unknownKey=1"], "additional properties"),
        (["logFormat=xml"], "logFormat"),
        (["image.tag=latest"], "/image/tag"),
        (["ha.enabled=true", "ha.peeringLifetime=10"], "/ha/peeringLifetime"),  # kopf could not keep it alive
        (["ha.enabled=true", "ha.peeringLifetime=30.5"], "/ha/peeringLifetime"),
        (["ha.enabled=true", "replicaCount=2", "podDisruptionBudget.maxUnavailable=1"], "not both"),
        (["image.digest=latest"], "/image/digest"),
        (["ha.podAntiAffinity=always"], "/ha/podAntiAffinity"),
    ],
)
def test_rejected_values(helm: Path, sets: list[str], error: str) -> None:
    args = ["template", RELEASE, str(CHART)]
    for s in (*PLACEHOLDER_IMAGE, *sets):
        args += ["--set", s]
    out = run_helm(helm, *args, check=False)
    assert error.lower() in out.lower(), out


# -- on the local consumer cluster ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def consumer(tmp_path_factory: pytest.TempPathFactory, helm: Path) -> Iterator[LocalCluster]:
    """A cluster of its own for the chart: installing, upgrading (crds.keep=false) and uninstalling the
    release deletes the CRD, which must not pull the rug from under the operator tests' shared clusters."""
    cluster = start_clusters(["chart"], tmp_path_factory.mktemp("chart-cluster"))["chart"]
    try:
        core = kubernetes.client.CoreV1Api(cluster.api_client())
        core.create_namespace(kubernetes.client.V1Namespace(metadata=kubernetes.client.V1ObjectMeta(name=NAMESPACE)))
        yield cluster
    finally:
        cluster.stop()


def _values(*sets: str) -> list[str]:
    # Liqo's namespace Role goes into the test namespace: the chart must not depend on Liqo being installed here.
    # No node pulls the image: the placeholder.
    args = ["--set", f"liqoNamespace={NAMESPACE}"]
    for s in (*PLACEHOLDER_IMAGE, *sets):
        args += ["--set", s]
    return args


def _apply_kopf_crds(consumer: LocalCluster, client: kubernetes.client.ApiClient) -> None:
    """The chart's crds/ (kopf's peering CRDs), as Helm installs them before a release, established."""
    for crd in yaml.safe_load_all((CHART / "crds" / "kopf-peerings.yaml").read_text()):
        kubernetes.dynamic.DynamicClient(client).resources.get(
            api_version=crd["apiVersion"], kind=crd["kind"]
        ).server_side_apply(body=crd, name=crd["metadata"]["name"], field_manager="lpo-test")
        _wait_established(consumer, crd["metadata"]["name"])


def test_server_side_dry_run(consumer: LocalCluster, helm: Path) -> None:
    """Every rendered object passes the API server's validation, once the chart's crds/ (kopf's peering
    CRDs, which Helm installs before the release) are in."""
    client = consumer.api_client()
    _apply_kopf_crds(consumer, client)
    # The optional objects too: the NetworkPolicy (with a peer of each kind) and the dashboard's ConfigMap.
    optional = (
        "networkPolicy.enabled=true",
        "networkPolicy.apiServer.cidrs={10.0.0.10/32,fd00::10/128}",
        "networkPolicy.providers.cidrs={203.0.113.7/32}",
        "networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.team=monitoring",
        "networkPolicy.metricsFrom[0].podSelector.matchLabels.app=prometheus",
        "networkPolicy.healthFrom[0].ipBlock.cidr=192.0.2.0/24",
        "grafanaDashboard.enabled=true",
        "commonLabels.team=platform",
        "topologySpreadConstraints[0].maxSkew=1",
        "topologySpreadConstraints[0].topologyKey=topology.kubernetes.io/zone",
        "topologySpreadConstraints[0].whenUnsatisfiable=ScheduleAnyway",
        "extraVolumes[0].name=ca",
        "extraVolumes[0].configMap.name=ca-bundle",
        "extraVolumeMounts[0].name=ca",
        "extraVolumeMounts[0].mountPath=/etc/ssl/ca",
    )
    args = ["template", RELEASE, str(CHART), "--namespace", NAMESPACE]
    args += _values("ha.enabled=true", "replicaCount=2", *optional)
    docs = [d for d in yaml.safe_load_all(run_helm(helm, *args)) if d]
    checked = set()
    for doc in docs:
        if "helm.sh/hook" in (doc["metadata"].get("annotations") or {}):
            continue
        _server_dry_run(client, doc)
        checked.add(doc["kind"])
    assert {"Deployment", "PodDisruptionBudget", "NetworkPolicy", "ConfigMap"} <= checked and len(checked) >= 9


def _server_dry_run(client: kubernetes.client.ApiClient, doc: dict[str, Any]) -> None:
    dyn = kubernetes.dynamic.DynamicClient(client)
    api = dyn.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
    namespace = doc["metadata"].get("namespace", NAMESPACE) if api.namespaced else None
    try:
        api.server_side_apply(
            body=doc, name=doc["metadata"]["name"], namespace=namespace, field_manager="lpo-test", dry_run="All"
        )
    except ApiException as exc:
        raise AssertionError(f"{doc['kind']}/{doc['metadata']['name']}: {exc.body}") from None


def read(cluster: LocalCluster, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
    dyn = kubernetes.dynamic.DynamicClient(cluster.api_client())
    obj = dyn.resources.get(api_version=api_version, kind=kind).get(name=name, namespace=namespace)
    return dict(obj.to_dict())


def test_install_and_upgrade(consumer: LocalCluster, helm: Path) -> None:
    kubeconfig = consumer.kubeconfig
    name = f"{RELEASE}-liqo-peering-operator"
    # No --wait: the local clusters run no kubelet, so the operator pod never starts.
    out = run_helm(helm, "install", RELEASE, str(CHART), "--namespace", NAMESPACE, *_values(), kubeconfig=kubeconfig)
    assert "It watches LiqoPeerings in all namespaces." in out, out  # NOTES.txt

    crd = _wait_established(consumer, CRD_NAME)
    assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    deployment = read(consumer, "apps/v1", "Deployment", name, NAMESPACE)
    assert "--log-level=info" in deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert deployment["spec"]["strategy"]["type"] == "Recreate"

    out = run_helm(
        helm,
        "upgrade",
        RELEASE,
        str(CHART),
        "--namespace",
        NAMESPACE,
        *_values("logLevel=debug", "crds.keep=false", "ha.enabled=true", "replicaCount=2"),
        kubeconfig=kubeconfig,
    )
    assert "(2 replicas, kopf peering" in out, out
    deployment = read(consumer, "apps/v1", "Deployment", name, NAMESPACE)
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--log-level=debug" in args and f"--peering-name={name}" in args
    assert deployment["spec"]["replicas"] == 2 and deployment["spec"]["strategy"]["type"] == "RollingUpdate"
    # The CRD is a template, so the upgrade updated it (the keep annotation is gone) ...
    crd = read(consumer, "apiextensions.k8s.io/v1", "CustomResourceDefinition", CRD_NAME)
    assert "helm.sh/resource-policy" not in (crd["metadata"].get("annotations") or {})
    # ... kopf's peering CRDs came with the install, from crds/, and belong to no release ...
    for kopf_crd in KOPF_CRDS:
        labels = _wait_established(consumer, kopf_crd)["metadata"].get("labels") or {}
        assert "app.kubernetes.io/managed-by" not in labels, labels
    # ... and the peering object and the PodDisruptionBudget are part of the release, no hook.
    peering = read(consumer, "kopf.dev/v1", "ClusterKopfPeering", name)
    assert peering["metadata"]["annotations"]["meta.helm.sh/release-name"] == RELEASE
    manifest = run_helm(helm, "get", "manifest", RELEASE, "--namespace", NAMESPACE, kubeconfig=kubeconfig)
    kinds = {d["kind"] for d in yaml.safe_load_all(manifest) if d}
    assert {"ClusterKopfPeering", "PodDisruptionBudget"} <= kinds, kinds
    hooks = run_helm(helm, "get", "hooks", RELEASE, "--namespace", NAMESPACE, kubeconfig=kubeconfig)
    assert "ClusterKopfPeering" not in hooks, hooks

    status = run_helm(helm, "status", RELEASE, "--namespace", NAMESPACE, kubeconfig=kubeconfig)
    assert "STATUS: deployed" in status and "REVISION: 2" in status


def test_a_peering_object_an_earlier_chart_made_as_a_hook_is_taken_over_with_its_entries(
    consumer: LocalCluster, helm: Path
) -> None:
    """Earlier charts made the kopf peering object with a post-install hook, which Helm does not record as the
    release's: `helm upgrade` refuses to take it over until --take-ownership (docs/operations/upgrade.md), and
    then keeps it, the replicas' entries with it."""
    kubeconfig, release, namespace = consumer.kubeconfig, "hooked", "lpo-hooked"
    name = f"{release}-liqo-peering-operator"
    client = consumer.api_client()
    _apply_kopf_crds(consumer, client)
    # The release without the object (another release owns the CRD templates), then the object as the hook
    # made it: the chart's labels, the hook's annotations, an entry a replica wrote.
    base = ["--namespace", namespace, *_values("crds.enabled=false", "ha.enabled=true", "replicaCount=2")]
    run_helm(helm, "install", release, str(CHART), *base, "--set", "ha.createPeering=false", "--create-namespace",
             kubeconfig=kubeconfig)  # fmt: skip
    peerings = kubernetes.dynamic.DynamicClient(client).resources.get(
        api_version="kopf.dev/v1", kind="ClusterKopfPeering"
    )
    labels = {"app.kubernetes.io/managed-by": "Helm", "app.kubernetes.io/instance": release}
    hook = {"helm.sh/hook": "post-install,post-upgrade", "helm.sh/hook-delete-policy": "before-hook-creation"}
    entry = {"priority": -1, "lifetime": 30, "lastseen": "2026-01-01T00:00:00+00:00"}
    body = {"apiVersion": "kopf.dev/v1", "kind": "ClusterKopfPeering", "status": {"replica-a": entry},
            "metadata": {"name": name, "labels": labels, "annotations": hook}}  # fmt: skip
    uid = peerings.create(body=body).metadata.uid
    try:
        refused = run_helm(helm, "upgrade", release, str(CHART), *base, kubeconfig=kubeconfig, check=False)
        assert "cannot be imported into the current release" in refused, refused
        run_helm(helm, "upgrade", release, str(CHART), *base, "--take-ownership", kubeconfig=kubeconfig)
        manifest = run_helm(helm, "get", "manifest", release, "--namespace", namespace, kubeconfig=kubeconfig)
        assert "kind: ClusterKopfPeering" in manifest, manifest
        # The next upgrade patches it as the release's (ownership annotations), still in place.
        run_helm(helm, "upgrade", release, str(CHART), *base, "--set", "logLevel=debug", kubeconfig=kubeconfig)
        taken = read(consumer, "kopf.dev/v1", "ClusterKopfPeering", name)
        assert taken["metadata"]["uid"] == uid and taken["status"] == {"replica-a": entry}, taken
        annotations = taken["metadata"].get("annotations") or {}
        assert annotations.get("meta.helm.sh/release-name") == release, taken["metadata"]
    finally:
        run_helm(helm, "uninstall", release, "--namespace", namespace, kubeconfig=kubeconfig, check=False)
    # Now the release's: uninstalling deletes it.
    assert not [p for p in peerings.get().items if p.metadata.name == name]


def _wait_established(cluster: LocalCluster, name: str, timeout: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        crd = read(cluster, "apiextensions.k8s.io/v1", "CustomResourceDefinition", name)
        conds = (crd.get("status") or {}).get("conditions") or []
        if any(c["type"] == "Established" and c["status"] == "True" for c in conds):
            return crd
        if time.monotonic() > deadline:
            raise AssertionError(f"CRD {name} not established: {conds}")
        time.sleep(0.3)


def test_sync_script_escapes_template_delimiters(helm: Path, tmp_path: Path) -> None:
    """A CRD whose text holds {{ or }} renders through Helm unchanged (hack/sync_chart_crd.py escapes them)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("sync_chart_crd_e2e", REPO / "hack" / "sync_chart_crd.py")
    assert spec is not None and spec.loader is not None
    sync = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sync)
    crd = yaml.safe_load((REPO / "crds" / "peering.liqo-operator.io_liqopeerings.yaml").read_text())
    tricky = "Use {{ .Values.x }} and }} or {{- literally"
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["description"] = tricky
    chart = tmp_path / "chart"
    (chart / "templates" / "crds").mkdir(parents=True)
    for name in ("Chart.yaml", "values.yaml"):
        (chart / name).write_text((CHART / name).read_text())
    (chart / "templates" / "_helpers.tpl").write_text((CHART / "templates" / "_helpers.tpl").read_text())
    (chart / "templates" / "crds" / "liqopeerings.yaml").write_text(sync.render_chart_crd(yaml.safe_dump(crd)))
    (rendered,) = [d for d in yaml.safe_load_all(run_helm(helm, "template", RELEASE, str(chart))) if d]
    assert rendered["spec"] == crd["spec"]
