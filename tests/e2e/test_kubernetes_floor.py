"""The oldest Kubernetes the chart supports (Chart.yaml's kubeVersion, hack/versions.env
KUBERNETES_FLOOR_VERSION): a consumer and a provider running its control plane. The chart installs there,
the CRDs it installs keep every CEL rule, and a peering against the Liqo stand-in becomes Ready and unpeers,
leaving nothing on either cluster."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from admission_cases import admission_failures
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from testenv.chart_rbac import ChartRelease
from testenv.helm import CHART, PLACEHOLDER_IMAGE, run_helm
from testenv.leakscan import LeakScan
from testenv.liqo_env.pytest_plugin import LiqoClusters, StandInProcess, with_liqo
from testenv.localk8s import LocalCluster
from testenv.localk8s.tools import read_versions
from testenv.operator_support import (
    SECRET,
    OperatorEnv,
    Peerings,
    api_client,
    liqo_objects_left,
    tenant_ns,
    wait_for,
)

FLOOR = read_versions()["KUBERNETES_FLOOR_VERSION"]
RELEASE = "lpo"
CHART_NAMESPACE = "lpo-system"
NAMESPACE = "floor"  # where the LiqoPeering and its kubeconfig Secret live
NAME = "provider"

pytestmark = pytest.mark.solo  # the floor's pair is its own


@pytest.fixture(scope="module")
def floor(floor_clusters: dict[str, LocalCluster]) -> LiqoClusters:
    """The floor pair with Liqo's objects (the stand-in plays its controllers)."""
    return with_liqo(floor_clusters)


@pytest.fixture(scope="module")
def chart(floor: LiqoClusters, helm: Path) -> str:
    """`helm install` of the chart into the floor consumer (its CRDs with it): NOTES.txt, as helm printed it.
    No --wait: without nodes the operator's Pod never starts; the operator runs as a process below."""
    return run_helm(
        "install",
        RELEASE,
        str(CHART),
        "--namespace",
        CHART_NAMESPACE,
        "--create-namespace",
        *[a for s in PLACEHOLDER_IMAGE for a in ("--set", s)],  # no node pulls it
        "--set",
        f"liqoNamespace={floor.namespace}",
        kubeconfig=floor["consumer"].kubeconfig,
        binary=helm,
    )


@pytest.fixture(scope="module")
def env(
    floor: LiqoClusters, chart: str, helm: Path, tmp_path_factory: pytest.TempPathFactory, leak_scan: LeakScan
) -> Iterator[OperatorEnv]:
    """The operator as a process against the floor consumer, as the ServiceAccount of the chart's release
    there, and the stand-in against both clusters."""
    log_dir = tmp_path_factory.mktemp("floor-operator")
    apis = {name: api_client(floor[name].kubeconfig) for name in ("consumer", "provider")}
    release = ChartRelease(Path(floor["consumer"].kubeconfig), RELEASE, CHART_NAMESPACE, binary=helm)
    operator = release.operator(log_dir).start()
    leak_scan.add_log(operator.log_path)
    standin = StandInProcess(floor, log_dir / "liqo-standin.log")
    try:
        yield OperatorEnv(floor, operator, Peerings(apis["consumer"]), apis["provider"])
    finally:
        leak_scan.collect(apis)  # before the clusters go: the credentials they held, the Events and status
        standin.stop()
        operator.stop()


def _server_version(cluster: LocalCluster) -> str:
    return str(k8s.VersionApi(cluster.api_client()).get_code().git_version)


def _serves_validating_admission_policies(cluster: LocalCluster) -> bool:
    try:
        found = k8s.AdmissionregistrationV1Api(cluster.api_client()).get_api_resources()
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return any(r.kind == "ValidatingAdmissionPolicy" for r in found.resources)


def test_the_chart_installs_and_its_crds_refuse_what_every_rule_refuses(
    floor: LiqoClusters, chart: str, helm: Path
) -> None:
    consumer = floor["consumer"]
    assert {_server_version(c) for c in floor.clusters.values()} == {f"v{FLOOR}"}
    assert "It watches LiqoPeerings in all namespaces." in chart, chart  # NOTES.txt: the install went through
    # No ValidatingAdmissionPolicy on the floor: the notes say the tenant-namespace one is not there, and what
    # RBAC alone then lets the operator do.
    assert "(rbac.tenantNamespacePolicy) is not installed" in chart and "any namespace" in chart, chart
    assert "(rbac.secretPolicy) is not installed" in chart and "a ServiceAccount token Secret" in chart, chart
    # Chart.yaml's kubeVersion is the floor: one minor below, helm refuses the chart.
    major, minor = (int(n) for n in FLOOR.split(".")[:2])
    below = f"{major}.{minor - 1}.0"
    image = [a for s in PLACEHOLDER_IMAGE for a in ("--set", s)]
    refused = run_helm("template", RELEASE, str(CHART), *image, "--kube-version", below, check=False, binary=helm)
    assert "is incompatible with Kubernetes" in refused, refused

    api = api_client(consumer.kubeconfig)
    Peerings(api).make_namespace(NAMESPACE)
    assert admission_failures(api, NAMESPACE) == []

    # With watchNamespaces the chart would add a ValidatingAdmissionPolicy, which the floor does not serve
    # (admissionregistration.k8s.io/v1 came in 1.30; 1.29's v1beta1 is off by default): the upgrade leaves it
    # out and says so.
    assert not _serves_validating_admission_policies(consumer)
    notes = run_helm(
        "upgrade",
        RELEASE,
        str(CHART),
        "--namespace",
        CHART_NAMESPACE,
        "--reuse-values",
        "--set",
        f"watchNamespaces={{{NAMESPACE}}}",
        kubeconfig=consumer.kubeconfig,
        binary=helm,
    )
    assert "ValidatingAdmissionPolicy" in notes and "not installed" in notes, notes
    manifest = run_helm(
        "get", "manifest", RELEASE, "--namespace", CHART_NAMESPACE, kubeconfig=consumer.kubeconfig, binary=helm
    )
    kinds = {d["kind"] for d in yaml.safe_load_all(manifest) if d}
    assert "ValidatingAdmissionPolicy" not in kinds and "RoleBinding" in kinds, kinds


def test_a_peering_becomes_ready_and_unpeers_leaving_nothing(env: OperatorEnv) -> None:
    peerings = env.peerings
    peerings.make_namespace(NAMESPACE)
    peerings.put_kubeconfig_secret(NAMESPACE, SECRET, env.provider_kubeconfig())
    peerings.create(NAMESPACE, NAME, {"remoteKubeconfigSecretRef": {"name": SECRET}, "timeout": "2m"})
    status = peerings.wait_status(NAMESPACE, NAME, "ready")
    assert status["localClusterID"] == env.consumer_id and status["remoteClusterID"] == env.provider_id
    conds = {c["type"]: c["status"] for c in status["conditions"]}
    assert all(conds[t] == "True" for t in ("Ready", "NetworkReady", "AuthenticationReady", "OffloadingReady")), conds

    c_ns, p_ns = tenant_ns(env.peerings.api, env.provider_id), tenant_ns(env.provider_api, env.consumer_id)
    assert liqo_objects_left(env, c_ns, p_ns)  # what the unpeering must remove
    peerings.delete(NAMESPACE, NAME)
    peerings.wait_gone(NAMESPACE, NAME)
    assert liqo_objects_left(env, c_ns, p_ns) == []
    wait_for("the operator's finalizer to leave the kubeconfig Secret", lambda: _secret_unprotected(peerings))


def _secret_unprotected(peerings: Peerings) -> bool:
    found = peerings.core.read_namespaced_secret(SECRET, NAMESPACE)
    return not (found.metadata and found.metadata.finalizers)
