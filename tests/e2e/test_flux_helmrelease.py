"""Flux installs the operator: a HelmRelease (helm-controller) of the chart, from an OCIRepository.

source-controller and helm-controller (built from their Go modules, run as processes against the consumer,
as in test_flux.py) install deploy/helm/liqo-peering-operator, packaged and pushed with `helm push` to the
harness's OCI registry (`oci_registry`: TLS with a CA of its own, which the OCIRepository trusts through
its certSecretRef), with the objects of examples/flux/helmrelease.yaml. The consumer has a real node (the
session's `liqo_node_clusters`, shared with test_operator_pod.py), into which the image `make images` built
is loaded (only the chart comes from the registry here: test_release.py pulls the image from it too); the
Liqo stand-in plays Liqo's controllers. The tests run in order, on one release: install and peer, then
delete the HelmRelease (and install again to unpeer).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from gitops_common import Timeline, liqo_objects
from kubernetes import client as k8s

import doc_blocks
from hack.crdgen import CRD_NAME, SET_CRD_NAME
from testenv import audit
from testenv import kube as k
from testenv.crashwatch import PodWatch
from testenv.gitops import HELMCHART, HELMRELEASE, OCIREPOSITORY, Flux, condition, manifests
from testenv.helm import push_chart, run_helm
from testenv.leakscan import LeakScan
from testenv.liqo_env.pytest_plugin import LiqoClusters, StandInProcess
from testenv.localk8s.images import Image
from testenv.localk8s.registry import Registry
from testenv.localk8s.tools import REPO_ROOT, tool_path
from testenv.operator_support import SECRET, Peerings, api_client, tenant_ns, wait_for
from testenv.rbacproof import installs

EXAMPLE = REPO_ROOT / "examples" / "flux" / "helmrelease.yaml"
PEERING_EXAMPLE = REPO_ROOT / "examples" / "basic.yaml"
PEERING_NS = "e2e-flux-helm"
CHARTS = "flux/charts"  # where the chart is pushed, under the registry's host
CA_SECRET = "registry-ca"  # the registry's CA, for the OCIRepository's certSecretRef
ROLE = k.Res("rbac.authorization.k8s.io", "v1", "roles")
SERVICEACCOUNT = k.Res("", "v1", "serviceaccounts")
# What the chart makes, by kind (each object carries helm-controller's helm.toolkit.fluxcd.io/name label).
RELEASE_KINDS = (
    k.DEPLOYMENT, k.SERVICE, SERVICEACCOUNT, k.CLUSTERROLE, k.CLUSTERROLEBINDING, ROLE, k.ROLEBINDING, k.CRD
)  # fmt: skip


@dataclass
class Env:
    lc: LiqoClusters
    kc: k.Kube
    peerings: Peerings
    provider_api: k8s.ApiClient
    flux: Flux
    registry: Registry
    image: Image
    ocirepo: dict[str, Any]  # examples/flux/helmrelease.yaml's two objects, as the tests apply them
    release: dict[str, Any]
    chart_version: str  # the chart pushed to the registry: its version and its manifest's digest
    chart_digest: str

    @property
    def name(self) -> str:
        return str(self.release["metadata"]["name"])

    @property
    def target_ns(self) -> str:
        return str(self.release["spec"]["targetNamespace"])

    @property
    def release_name(self) -> str:
        return str(self.release["spec"]["releaseName"])

    def helmrelease(self) -> dict[str, Any] | None:
        return self.kc.get(HELMRELEASE, self.name, Flux.NAMESPACE)

    def deployment(self) -> dict[str, Any] | None:
        # The chart's full name is the release name, which holds the chart's name.
        return self.kc.get(k.DEPLOYMENT, self.release_name, self.target_ns)

    def apply(self) -> None:
        # The registry's CA, by the Flux guide's command as written.
        if self.kc.get(k.SECRET, CA_SECRET, Flux.NAMESPACE) is None:
            guide = doc_blocks.block("docs/guides/flux.md", "kubectl -n flux-system create secret generic registry-ca ")
            values = {"registry_ca": str(self.registry.ca_cert)}
            doc_blocks.run(guide, values, Path(self.lc["consumer"].kubeconfig), [tool_path("kubectl")])
        self.kc.apply(OCIREPOSITORY, self.ocirepo, "e2e-gitops", Flux.NAMESPACE)
        # helm-controller installs the chart with these values (for the RBAC proof, testenv.rbacproof).
        installs.note_values(
            self.lc["consumer"].kubeconfig, self.release_name, self.target_ns, self.release["spec"]["values"]
        )
        self.kc.apply(HELMRELEASE, self.release, "e2e-gitops", Flux.NAMESPACE)

    def note_uninstall(self) -> None:
        """The HelmRelease is about to go, and helm-controller to uninstall the release: noted for the RBAC
        proof, as its Pods' requests once their RBAC is going are not the chart's doing."""
        installs.note_uninstall(self.lc["consumer"].kubeconfig, self.release_name, self.target_ns)

    def delete_helmrelease(self) -> None:
        self.note_uninstall()
        self.kc.delete(HELMRELEASE, self.name, Flux.NAMESPACE)

    def ocirepository(self) -> dict[str, Any] | None:
        return self.kc.get(OCIREPOSITORY, self.ocirepo["metadata"]["name"], Flux.NAMESPACE)

    def released(self) -> list[str]:
        """The objects helm-controller's release made, still there: "deployments <ns>/<name>"."""
        selector = f"helm.toolkit.fluxcd.io/name={self.name}"
        return [
            f"{res.plural} {o['metadata'].get('namespace', '')}/{o['metadata']['name']}"
            for res in RELEASE_KINDS
            for o in self.kc.list(res, None, selector)
        ]

    def tenant_namespaces(self) -> tuple[str, str]:
        consumer_ns = tenant_ns(self.peerings.api, self.lc.ids["provider"])
        return consumer_ns, tenant_ns(self.provider_api, self.lc.ids["consumer"])

    def peering_objects(self) -> list[str]:
        return sorted(liqo_objects(self.peerings.api, self.provider_api, *self.tenant_namespaces()))

    def __post_init__(self) -> None:
        # The Pods helm-controller's release runs are watched: a crash is a failure (testenv.crashwatch).
        self.watch = PodWatch(f"the HelmRelease's release {self.release_name}", self.operator_pods, self.pod_log)

    def operator_pods(self) -> list[dict[str, Any]]:
        return self.kc.list(k.POD, self.target_ns, f"app.kubernetes.io/instance={self.release_name}")

    def pod_log(self, name: str, previous: bool) -> str:
        """The log of an operator Pod's container (with `previous`, of the one before it); "" if there is none."""
        try:
            return self.kc.get_text(
                f"/api/v1/namespaces/{self.target_ns}/pods/{name}/log" + ("?previous=true" if previous else "")
            )
        except k.KubeError:
            return ""

    def diagnosis(self) -> str:
        hr, ocirepo = self.helmrelease() or {}, self.ocirepository() or {}
        lines = [
            f"OCIRepository status: {(ocirepo.get('status') or {}).get('conditions')}",
            f"HelmRelease status: {(hr.get('status') or {}).get('conditions')}",
        ]
        lines += k.container_states(self.operator_pods())
        lines += [f"--- {p.name} log\n{p.log_tail()}" for p in self.flux.procs]
        return "\n".join(lines)


@pytest.fixture(scope="module")
def env(
    liqo_node_clusters: LiqoClusters,
    node_images: dict[str, Image],
    oci_registry: Registry,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Env]:
    for tool in ("source-controller", "helm-controller"):
        tool_path(tool)  # a tool not built is a failure: ToolMissingError says how to build it
    lc = liqo_node_clusters
    started = time.monotonic()
    peerings = Peerings(api_client(lc["consumer"].kubeconfig))
    peerings.make_namespace(PEERING_NS)
    # The provider's admin kubeconfig: its server is the provider's API server on the LAN, where the Pod is.
    peerings.put_kubeconfig_secret(PEERING_NS, SECRET, Path(lc["provider"].kubeconfig).read_bytes())
    ocirepo, release = manifests(EXAMPLE)
    # The chart as committed, pushed to the registry at its own version, which the example asks for.
    version, digest = push_chart(
        f"oci://{oci_registry.host}/{CHARTS}", oci_registry.ca_cert, tmp_path_factory.mktemp("chart")
    )
    assert ocirepo["spec"]["ref"] == {"tag": version}, ocirepo["spec"]["ref"]
    ocirepo["spec"]["url"] = f"oci://{oci_registry.host}/{CHARTS}/liqo-peering-operator"
    ocirepo["spec"]["certSecretRef"] = {"name": CA_SECRET}
    repository, tag = node_images["operator"].ref.rsplit(":", 1)
    release["spec"]["values"].update(
        {
            # Loaded into the node by `make images`: only the chart comes from the registry here.
            "image": {"repository": repository, "tag": tag, "pullPolicy": "Never"},
            "liqoNamespace": lc.namespace,
            # Probed every 2 s instead of 10 (the first probe still waits 5 s, so the Deployment is
            # unavailable for a while): 8 s less per install, of which the tests make two.
            "readinessProbe": {"periodSeconds": 2},
        }
    )
    flux = Flux(
        Path(lc["consumer"].kubeconfig), tmp_path_factory.mktemp("flux-helm"), ("source-controller", "helm-controller")
    )
    env = Env(
        lc, lc.kube("consumer"), peerings, api_client(lc["provider"].kubeconfig), flux, oci_registry,
        node_images["operator"], ocirepo, release, version, digest,
    )  # fmt: skip
    standin = StandInProcess(lc, tmp_path_factory.mktemp("standin") / "liqo-standin.log")
    try:
        flux.start()
        yield env
    finally:
        try:
            _clean_up(env)
        finally:
            standin.stop()
            print(f"\ntest_flux_helmrelease: Flux up, tests and teardown took {time.monotonic() - started:.1f}s")


# The chart's CRDs, which uninstalling keeps (helm.sh/resource-policy: keep, crds.keep defaults to true), and
# kopf's peering CRDs, which come from the chart's crds/ and which Helm never deletes.
KEPT_CRDS = (CRD_NAME, SET_CRD_NAME, "clusterkopfpeerings.kopf.dev", "kopfpeerings.kopf.dev")


def _clean_up(env: Env) -> None:
    """What a failed test may leave: the release (uninstalled while helm-controller runs), LiqoPeerings
    (unpeered while an operator runs, else released by hand), the kept CRD, the namespaces."""
    if env.helmrelease() is not None and env.deployment() is not None:
        for peering in env.peerings.in_namespace(PEERING_NS):
            env.peerings.delete(PEERING_NS, peering["metadata"]["name"])
        wait_for("the LiqoPeerings unpeered", lambda: not env.peerings.in_namespace(PEERING_NS), timeout=120)
    if env.helmrelease() is not None:
        env.note_uninstall()
    env.flux.stop()  # deletes the HelmRelease: helm-controller uninstalls the release
    if env.kc.get(k.CRD, CRD_NAME) is not None:
        for peering in env.peerings.in_namespace(PEERING_NS):
            env.peerings.patch(PEERING_NS, peering["metadata"]["name"], {"metadata": {"finalizers": None}})
    for crd in KEPT_CRDS:  # the next chart install (test_operator_pod.py) must own them itself
        env.kc.delete(k.CRD, crd)
    for namespace in (env.target_ns, PEERING_NS):
        env.kc.delete(k.NAMESPACE, namespace)
    gone = [(k.CRD, crd) for crd in KEPT_CRDS] + [(k.NAMESPACE, env.target_ns), (k.NAMESPACE, PEERING_NS)]
    wait_for("the CRDs and the namespaces gone", lambda: all(env.kc.get(*o) is None for o in gone), timeout=120)


@pytest.fixture(autouse=True)
def scanned(env: Env, leak_scan: LeakScan) -> Iterator[None]:
    """After each test: the operator Pods' logs, and the clusters' Secrets, Events and statuses, for the run's
    leak scan (tests/e2e/test_zz_no_leaks.py)."""
    yield
    for pod in env.operator_pods():
        name = pod["metadata"]["name"]
        try:
            leak_scan.add_text(
                f"operator Pod {name} log", env.kc.get_text(f"/api/v1/namespaces/{env.target_ns}/pods/{name}/log")
            )
        except k.KubeError:
            continue  # not started, or already gone
    leak_scan.collect({side: api_client(env.lc[side].kubeconfig) for side in ("consumer", "provider")})


def verdict(hr: dict[str, Any] | None) -> str:
    ready = condition(hr, "Ready")
    return f"HelmRelease {ready.get('status', '-')}/{ready.get('reason', '-')}"


def available(deployment: dict[str, Any] | None) -> bool:
    if deployment is None:
        return False
    status, replicas = deployment.get("status") or {}, deployment["spec"]["replicas"]
    return (
        condition(deployment, "Available").get("status") == "True"
        and status.get("observedGeneration") == deployment["metadata"]["generation"]
        and status.get("updatedReplicas") == status.get("availableReplicas") == replicas
    )


def deployment_summary(deployment: dict[str, Any] | None) -> str:
    if deployment is None:
        return "absent"
    ready = (deployment.get("status") or {}).get("readyReplicas", 0)
    return f"{'available' if available(deployment) else 'unavailable'} {ready}/{deployment['spec']['replicas']}"


def status_of(obj: dict[str, Any] | None) -> dict[str, Any]:
    return (obj or {}).get("status") or {}


def parse_time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def wait_helmrelease_ready(env: Env, timeline: Timeline) -> None:
    def look() -> tuple[str, str]:
        # The HelmRelease first: were it Ready, the Deployment read after it must be available too.
        return verdict(env.helmrelease()), deployment_summary(env.deployment())

    try:
        # helm-controller has created the Deployment and waits for it.
        timeline.until(
            "the Deployment unavailable while the HelmRelease is not Ready",
            look,
            lambda h, d: d.startswith("unavailable") and not h.startswith("HelmRelease True"),
            timeout=180,
        )
        timeline.until("the HelmRelease Ready", look, lambda h, d: h.startswith("HelmRelease True"), timeout=240)
        # helm-controller's patch helper writes the conditions first and the rest of the status (the release
        # history) in a second request, so Ready can be read a moment before the history it reports.
        wait_for("the HelmRelease's release history", lambda: status_of(env.helmrelease()).get("history"), timeout=30)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{env.diagnosis()}") from None
    finally:
        timeline.report("Flux HelmRelease (helm-controller's wait) and the operator's Deployment", "Deployment")
    env.flux.check()


def test_helmrelease_installs_the_chart_and_its_operator_peers(env: Env) -> None:
    since = datetime.now(UTC)
    env.apply()
    timeline = Timeline()
    wait_helmrelease_ready(env, timeline)
    print(f"HelmRelease Ready {time.monotonic() - timeline.start:.1f}s after it was applied")

    # Ready only once the Deployment was available: never Ready while it was not, and the Deployment's
    # Available condition is no later than the HelmRelease's Ready.
    assert not [s for s in timeline.seen if s[1].startswith("HelmRelease True") and not s[2].startswith("available")]
    hr, deployment = env.helmrelease(), env.deployment()
    assert hr is not None and available(deployment), deployment_summary(deployment)
    ready = condition(hr, "Ready")
    assert ready["reason"] == "InstallSucceeded", ready
    assert parse_time(condition(deployment, "Available")["lastTransitionTime"]) <= parse_time(
        ready["lastTransitionTime"]
    )

    # The chart came from the registry: the OCIRepository's artifact is the pushed tag and manifest digest,
    # and helm-controller released that artifact (no HelmChart of its own, as a chart from Git would have),
    # the digest's first 12 hex digits appended to the chart's version.
    version, digest = env.chart_version, env.chart_digest
    released = f"{version}+{digest.removeprefix('sha256:')[:12]}"
    ocirepo = env.ocirepository()
    assert ocirepo is not None and ocirepo["status"]["artifact"]["revision"] == f"{version}@{digest}", ocirepo
    assert "helmChart" not in hr["status"] and env.kc.list(HELMCHART, Flux.NAMESPACE) == []
    assert (hr["status"]["lastAttemptedRevision"], hr["status"]["lastAttemptedRevisionDigest"]) == (released, digest)
    (release,) = hr["status"]["history"]
    assert (release["name"], release["namespace"], release["status"]) == (env.release_name, env.target_ns, "deployed")
    assert (release["chartName"], release["chartVersion"], release["version"], release["ociDigest"]) == (
        "liqo-peering-operator", released, 1, digest
    )  # fmt: skip
    # Stored in the target namespace, where Helm's own CLI finds it.
    listed = run_helm(
        "list", "--namespace", env.target_ns, "--output", "yaml", kubeconfig=env.lc["consumer"].kubeconfig
    )
    assert [(r["name"], r["status"], r["chart"]) for r in yaml.safe_load(listed) or []] == [
        (env.release_name, "deployed", f"liqo-peering-operator-{released}")
    ], listed

    # The chart's objects, the CRD among them (kept on uninstall: crds.keep defaults to true).
    (pod,) = [p for p in env.operator_pods() if not p["metadata"].get("deletionTimestamp")]
    assert pod["spec"]["containers"][0]["image"] == env.image.ref and pod["spec"]["nodeName"] == "consumer-node-0"
    crd = env.kc.get(k.CRD, CRD_NAME)
    assert crd is not None and condition(crd, "Established").get("status") == "True"
    annotations = crd["metadata"]["annotations"]
    assert annotations["meta.helm.sh/release-name"] == env.release_name, annotations
    assert annotations["meta.helm.sh/release-namespace"] == env.target_ns, annotations
    assert annotations["helm.sh/resource-policy"] == "keep", annotations
    assert crd["metadata"]["labels"]["helm.toolkit.fluxcd.io/name"] == env.name
    assert crd["metadata"]["labels"]["helm.sh/chart"] == f"liqo-peering-operator-{released.replace('+', '_')}"
    made = env.released()
    assert (
        f"customresourcedefinitions /{CRD_NAME}" in made and f"deployments {env.target_ns}/{env.release_name}" in made
    )

    # The operator it installed peers examples/basic.yaml (in this test's namespace), as the chart's
    # ServiceAccount, from its Pod.
    (peering,) = manifests(PEERING_EXAMPLE)
    env.peerings.create(PEERING_NS, peering["metadata"]["name"], peering["spec"])
    status = env.peerings.wait_status(PEERING_NS, peering["metadata"]["name"], "ready", timeout=180)
    assert (status["localClusterID"], status["remoteClusterID"]) == (env.lc.ids["consumer"], env.lc.ids["provider"])
    seen = audit.status_of("liqopeerings", peering["metadata"]["name"])
    writes = audit.writes_through(env.lc["consumer"].audit_log, since, seen, "liqo-peering-operator")
    assert {w.username for w in writes} == {f"system:serviceaccount:{env.target_ns}:{env.release_name}"}
    assert {w.pod_name for w in writes} == {pod["metadata"]["name"]}
    assert len(env.peering_objects()) == 8, env.peering_objects()  # one of each, on both sides
    env.flux.check()


def test_deleting_the_helmrelease_uninstalls_the_chart_but_the_crd_and_peerings(env: Env) -> None:
    (peering,) = manifests(PEERING_EXAMPLE)
    name = peering["metadata"]["name"]
    objects = env.peering_objects()
    assert len(objects) == 8, objects
    started = time.monotonic()
    env.delete_helmrelease()
    wait_for("the HelmRelease gone (uninstalled)", lambda: env.helmrelease() is None, timeout=120)
    print(f"\nHelmRelease deleted and its release uninstalled in {time.monotonic() - started:.1f}s")
    wait_for("the operator Pods gone", lambda: not env.operator_pods(), timeout=120)

    # Everything of the release is gone but the CRD (helm.sh/resource-policy: keep); so is Helm's record of
    # the release. The namespace stays (Helm never deletes it), and so does the OCIRepository, the
    # HelmRelease's source, with the pushed chart as its artifact.
    assert sorted(env.released()) == sorted(f"customresourcedefinitions /{crd}" for crd in KEPT_CRDS)
    assert env.kc.list(k.SECRET, env.target_ns, "owner=helm") == []
    ocirepo = env.ocirepository()
    assert (
        ocirepo is not None and ocirepo["status"]["artifact"]["revision"] == f"{env.chart_version}@{env.chart_digest}"
    )
    assert env.kc.get(k.NAMESPACE, env.target_ns) is not None
    # The LiqoPeering stays, Ready as the operator last wrote it, with its finalizer: with no operator
    # nothing tears the peering down, and its Liqo objects stay on both sides.
    kept = env.peerings.get(PEERING_NS, name)
    assert kept is not None and kept["metadata"]["finalizers"], kept
    assert kept["status"]["peerStatus"] == "ready"
    assert env.peering_objects() == objects

    # Installed again from the same objects: the release adopts the CRD it kept, and the new operator
    # resumes the peering (it reconciles a spec change, creating nothing: one of each object as before).
    env.apply()
    wait_helmrelease_ready(env, Timeline())
    since = datetime.now(UTC)
    env.peerings.patch(PEERING_NS, name, {"spec": {"timeout": "4m"}})

    def reconciled() -> bool:
        lp = env.peerings.get(PEERING_NS, name) or {}
        status = lp.get("status") or {}
        return (
            status.get("observedGeneration") == lp["metadata"]["generation"]
            and condition(lp, "Ready").get("status") == "True"
        )

    wait_for("the new operator to reconcile the spec change", reconciled, timeout=120)
    assert env.peering_objects() == objects
    seen = audit.status_of("liqopeerings", name)
    writes = audit.writes_through(env.lc["consumer"].audit_log, since, seen, "liqo-peering-operator")
    assert not [w for w in writes if w.verb == "create" and w.resource != "events"], writes

    # Unpeered while the operator runs, then uninstalled: nothing of the peering is left on either side.
    env.peerings.delete(PEERING_NS, name)
    env.peerings.wait_gone(PEERING_NS, name, timeout=120)
    assert env.peering_objects() == []
    env.delete_helmrelease()
    wait_for("the HelmRelease gone (uninstalled)", lambda: env.helmrelease() is None, timeout=120)
    assert sorted(env.released()) == sorted(f"customresourcedefinitions /{crd}" for crd in KEPT_CRDS)
    env.flux.check()
