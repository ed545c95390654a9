"""Argo CD drives a LiqoPeering from Git, and installs the operator's chart from an OCI registry: its
application controller and repo server (built from its Go module, run as processes against the consumer,
with Debian's redis-server) sync the Application of examples/gitops/application.yaml from a Git server on
loopback, with deploy/argocd/argocd-cm-snippet.yaml merged into argocd-cm as a user would, and the
Application of examples/argocd/operator.yaml from a registry on loopback (testenv.localk8s.registry, TLS
with a CA of its own), to which the test pushes the chart."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from gitops_common import Timeline, commit_example, peering_objects_left, peering_summary, tenant_namespaces

import doc_blocks
from hack.crdgen import CRD_NAME, SET_CRD_NAME
from testenv import kube as k
from testenv.gitops import APPLICATION, TLS_CERTS_CM, ArgoCD, manifests
from testenv.gitserver import GitServer
from testenv.helm import PLACEHOLDER_REPOSITORY, push_chart
from testenv.kube import KubeError
from testenv.localk8s.registry import Registry
from testenv.localk8s.tools import REPO_ROOT, tool_path
from testenv.operator_support import SECRET, OperatorEnv, PeeringCase, install_crd, wait_for

pytestmark = pytest.mark.gitops

APP_EXAMPLE = REPO_ROOT / "examples" / "gitops" / "application.yaml"
OFFLOADING = k.Res("offloading.liqo.io", "v1beta1", "namespaceoffloadings")
OPERATOR_EXAMPLE = REPO_ROOT / "examples" / "argocd" / "operator.yaml"
CHARTS = "argocd/charts"  # where the chart is pushed, under the registry's host
SERVICEACCOUNT = k.Res("", "v1", "serviceaccounts")
ROLE = k.Res("rbac.authorization.k8s.io", "v1", "roles")
# What the chart makes on its own (a Role in Liqo's namespace among them), by kind; and its CRDs, which
# carry helm.sh/resource-policy: keep, and kopf's, from its crds/ (Argo CD applies those too).
CHART_KINDS = (k.DEPLOYMENT, k.SERVICE, SERVICEACCOUNT, k.CLUSTERROLE, k.CLUSTERROLEBINDING, ROLE, k.ROLEBINDING)
KEPT_CRDS = (CRD_NAME, SET_CRD_NAME)
KOPF_CRDS = ("clusterkopfpeerings.kopf.dev", "kopfpeerings.kopf.dev")
REFRESH = "argocd.argoproj.io/refresh"


@pytest.fixture(scope="module")
def argocd(operator_env: OperatorEnv, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ArgoCD]:
    for tool in ("argocd", "kustomize", "helm"):
        tool_path(tool)  # a tool not built is a failure: ToolMissingError says how to build it
    started = time.monotonic()
    argo = ArgoCD(Path(operator_env.lc["consumer"].kubeconfig), tmp_path_factory.mktemp("argocd"))
    argo.start()
    try:
        # The snippet merged into argocd-cm by the Argo CD guide's command as written.
        guide = doc_blocks.block("docs/guides/argocd.md", "kubectl -n argocd patch configmap argocd-cm ")
        doc_blocks.run(guide, {}, Path(operator_env.lc["consumer"].kubeconfig), [tool_path("kubectl")])
        yield argo
    finally:
        argo.stop()
        print(f"\ntest_argocd: Argo CD up, tests and teardown took {time.monotonic() - started:.1f}s")


def apply_application(argocd: ArgoCD, git: GitServer, repo: str, namespace: str) -> str:
    """examples/gitops/application.yaml with this test's Git URL and namespace; returns its name (short:
    Argo CD puts it in a label on every object it syncs)."""
    (app,) = manifests(APP_EXAMPLE)
    name = "lp-" + hashlib.sha256(namespace.encode()).hexdigest()[:10]
    app["metadata"]["name"] = name
    app["spec"]["source"]["repoURL"] = git.url(repo)
    app["spec"]["destination"]["namespace"] = namespace
    argocd.kc.apply(APPLICATION, app, "e2e-gitops", ArgoCD.NAMESPACE)
    return name


def application(argocd: ArgoCD, name: str) -> dict[str, Any] | None:
    return argocd.kc.get(APPLICATION, name, ArgoCD.NAMESPACE)


def delete_application(argocd: ArgoCD, name: str) -> None:
    """Delete the Application and wait until it is gone, with its resources. Right after a terminated sync,
    Argo CD's controller may act on the deletion only at its next comparison (two minutes later, seen in a
    run), so a refresh is asked for too, as `argocd app get --refresh` does."""
    argocd.kc.delete(APPLICATION, name, ArgoCD.NAMESPACE)
    refresh(argocd, name)
    wait_for("the Application gone", lambda: application(argocd, name) is None, timeout=180)


def refresh(argocd: ArgoCD, name: str) -> None:
    """Ask Argo CD to compare the Application again now, as `argocd app get --refresh` does (it removes the
    annotation once done); nothing if the Application is gone."""
    annotation = {"metadata": {"annotations": {REFRESH: "normal"}}}
    try:
        argocd.kc.patch(APPLICATION, name, annotation, ArgoCD.NAMESPACE)
    except KubeError as exc:
        if exc.status != 404:
            raise


def resource_health(app: dict[str, Any] | None, kind: str) -> dict[str, Any]:
    """The health Argo CD computed for one of the Application's resources (its status.resources)."""
    for res in ((app or {}).get("status") or {}).get("resources") or []:
        if res.get("kind") == kind:
            return dict(res.get("health") or {})
    return {}


def app_summary(app: dict[str, Any] | None) -> str:
    status = (app or {}).get("status") or {}
    lp = resource_health(app, "LiqoPeering")
    return (
        f"app {status.get('sync', {}).get('status', '-')}/{status.get('health', {}).get('status', '-')}"
        f" LiqoPeering {lp.get('status', '-')}"
    )


def parse_time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def test_application_syncs_in_waves_and_reports_the_peerings_health(
    argocd: ArgoCD, git_server: GitServer, case: PeeringCase
) -> None:
    ns, started = case.namespace, time.monotonic()
    repo = f"argocd-{ns}"
    commit_example(git_server, repo, case)
    case.standin.set_faults("both", delay="8")  # keep the peering establishing for a while
    name = apply_application(argocd, git_server, repo, ns)
    kc = argocd.kc
    timeline = Timeline()
    messages: set[str] = set()

    def look() -> tuple[str, str]:
        app = application(argocd, name)
        lp = resource_health(app, "LiqoPeering")
        if lp.get("status") == "Progressing":
            messages.add(str(lp.get("message")))
        offloading = "offloading" if kc.get(OFFLOADING, "offloading", ns) else "no offloading"
        secret = "secret" if kc.get(k.SECRET, SECRET, ns) else "no secret"
        return f"{app_summary(app)} ({secret}, {offloading})", peering_summary(case.peerings.get(ns, "provider"))

    timeline.until(
        "Argo CD to report the peering Progressing while it establishes",
        look,
        lambda g, p: p.startswith("establishing") and "LiqoPeering Progressing" in g,
        timeout=180,
    )
    case.standin.set_faults("both", delay=None)
    try:
        timeline.until(
            "the Application Synced and Healthy",
            look,
            lambda g, p: g.startswith("app Synced/Healthy") and "LiqoPeering Healthy" in g,
            timeout=240,
        )
    finally:
        timeline.report("Argo CD Application, its LiqoPeering's health, and the LiqoPeering")
    argocd.check()

    status = case.peerings.status(ns, "provider")
    conds = {c["type"]: c for c in status["conditions"]}
    app = application(argocd, name)
    # Argo CD's own verdicts, through its Lua VM and deploy/argocd/health.lua: Progressing with the
    # operator's message while establishing, Healthy with its Ready message once Ready.
    assert resource_health(app, "LiqoPeering") == {"status": "Healthy", "message": conds["Ready"]["message"]}
    print(f"Argo CD's Progressing messages: {sorted(messages)}")
    assert messages and "" not in messages, messages
    # Sync waves: the Secret (0) before the LiqoPeering (1); the NamespaceOffloading (2) only once the
    # LiqoPeering was Healthy, so never while it was not ready.
    assert not [s for s in timeline.seen if ", offloading)" in s[1] and not s[2].startswith("ready")], timeline.seen
    secret = kc.get(k.SECRET, SECRET, ns)
    peering = case.peerings.get(ns, "provider")
    offloading = kc.get(OFFLOADING, "offloading", ns)
    assert secret and peering and offloading
    assert parse_time(secret["metadata"]["creationTimestamp"]) <= parse_time(peering["metadata"]["creationTimestamp"])
    assert parse_time(offloading["metadata"]["creationTimestamp"]) >= parse_time(status["readyAt"]).replace(
        microsecond=0
    )
    print(f"Application Synced and Healthy {time.monotonic() - started:.1f}s after the commit")

    # Deleting the Application prunes in reverse waves: the LiqoPeering is unpeered and gone before its
    # Secret goes.
    consumer_ns, provider_ns = tenant_namespaces(case)
    kc.delete(APPLICATION, name, ArgoCD.NAMESPACE)
    order = Timeline()

    def present() -> tuple[str, str]:
        secret_there = "secret" if kc.get(k.SECRET, SECRET, ns) else "no secret"
        app_there = "app" if application(argocd, name) else "no app"
        return f"{app_there}, {secret_there}", peering_summary(case.peerings.get(ns, "provider"))

    try:
        order.until("the Application and what it synced gone", present, lambda g, p: g == "no app, no secret", 180)
    finally:
        order.report("Deleting the Application")
    assert case.peerings.get(ns, "provider") is None
    assert not [s for s in order.seen if "no secret" in s[1] and s[2] != "absent"], order.seen
    assert kc.get(OFFLOADING, "offloading", ns) is None
    assert peering_objects_left(case, consumer_ns, provider_ns) == []


def test_wrong_secret_is_degraded_with_the_operators_message(
    argocd: ArgoCD, git_server: GitServer, case: PeeringCase
) -> None:
    ns = case.namespace
    repo = f"argocd-{ns}"
    commit_example(git_server, repo, case, kubeconfig=b"this is not a kubeconfig\n")
    name = apply_application(argocd, git_server, repo, ns)
    case.peerings.wait_reason(ns, "provider", "KubeconfigInvalid", timeout=120)

    def degraded() -> dict[str, Any] | None:
        app = application(argocd, name)
        health = resource_health(app, "LiqoPeering")
        app_health = (((app or {}).get("status") or {}).get("health") or {}).get("status")
        return {"app": app_health, **health} if health.get("status") == "Degraded" and app_health else None

    verdict = wait_for("Argo CD to report the LiqoPeering Degraded", degraded, timeout=180)
    stalled = case.peerings.condition(ns, "provider", "Stalled") or {}
    print(f"\nArgo CD: LiqoPeering {verdict}\nLiqoPeering Stalled: {stalled.get('message')}")
    assert verdict == {"app": "Degraded", "status": "Degraded", "message": stalled["message"]}
    assert stalled["status"] == "True" and stalled["reason"] == "KubeconfigInvalid"
    # The wave after it is never applied.
    assert argocd.kc.get(OFFLOADING, "offloading", ns) is None
    argocd.check()

    # The sync keeps retrying (syncPolicy.retry) and Argo CD deletes no Application while its sync operation
    # runs: terminate it first, as `argocd app terminate-op` does, then delete.
    op = ((application(argocd, name) or {}).get("status") or {}).get("operationState") or {}
    print(f"sync operation: {op.get('phase')}: {op.get('message')}")
    argocd.end_sync(name)
    delete_application(argocd, name)
    assert case.peerings.get(ns, "provider") is None
    assert argocd.kc.get(k.SECRET, SECRET, ns) is None


def test_application_installs_the_operators_chart_from_an_oci_registry(
    argocd: ArgoCD, operator_env: OperatorEnv, tmp_path: Path
) -> None:
    """examples/argocd/operator.yaml: the chart from the registry, by version, its objects applied. No node
    runs the operator's Pod here, so its Deployment never becomes available."""
    started = time.monotonic()
    kc = argocd.kc
    repository, app = manifests(OPERATOR_EXAMPLE)
    name, source = app["metadata"]["name"], app["spec"]["source"]
    target_ns, release = app["spec"]["destination"]["namespace"], source["helm"]["releaseName"]
    # On loopback: the repo server is the only client, and no node pulls from it.
    registry = Registry(tmp_path / "registry", "127.0.0.1").start()
    try:
        version, _ = push_chart(f"oci://{registry.host}/{CHARTS}", registry.ca_cert, tmp_path)
        pushed_log = len((registry.workdir / "registry.log").read_text())
        assert source["targetRevision"] == version, source  # the example's version, the chart's
        source["repoURL"] = repository["stringData"]["url"] = f"{registry.host}/{CHARTS}"
        source["helm"]["valuesObject"]["liqoNamespace"] = operator_env.lc.namespace
        # The chart pushed as committed names no image (one `make release` packaged does); no node pulls it here.
        source["helm"]["valuesObject"]["image"] = {"repository": PLACEHOLDER_REPOSITORY}
        # The registry's CA, by its host name, as `kubectl -n argocd edit configmap argocd-tls-certs-cm` adds it.
        kc.patch(k.CONFIGMAP, TLS_CERTS_CM, {"data": {registry.ip: registry.ca_cert.read_text()}}, ArgoCD.NAMESPACE)
        argocd.mount_tls_certs()
        repository["data"] = {key: k.b64(value) for key, value in repository.pop("stringData").items()}
        kc.apply(k.SECRET, repository, "e2e-gitops", ArgoCD.NAMESPACE)
        kc.apply(APPLICATION, app, "e2e-gitops", ArgoCD.NAMESPACE)

        def synced() -> dict[str, Any] | None:
            found = application(argocd, name)
            sync = ((found or {}).get("status") or {}).get("sync") or {}
            deployment = kc.get(k.DEPLOYMENT, release, target_ns)
            health = resource_health(found, "Deployment").get("status")
            return found if sync.get("status") == "Synced" and deployment is not None and health else None

        try:
            found = wait_for("the Application Synced from the registry's chart", synced, timeout=180)
        except AssertionError as exc:
            status = (application(argocd, name) or {}).get("status") or {}
            out_of_sync = [r for r in status.get("resources") or [] if r.get("status") != "Synced"]
            raise AssertionError(f"{exc}\nconditions: {status.get('conditions')}\nnot synced: {out_of_sync}"
                                 f"\noperation: {status.get('operationState')}") from None  # fmt: skip
        argocd.check()
        status = found["status"]
        print(f"\nApplication Synced {time.monotonic() - started:.1f}s after the registry started")
        print(f"sync operation: {(status.get('operationState') or {}).get('phase')}: "
              f"{(status.get('operationState') or {}).get('message')}")  # fmt: skip

        # The chart, at the version pushed, from the registry: Argo CD's revision is the chart's version,
        # and the repo server (helm pull) fetched the chart's blobs from the registry after the push.
        assert status["sourceType"] == "Helm", status
        assert status["sync"]["revision"] == version, status["sync"]
        compared = status["sync"]["comparedTo"]["source"]
        assert (compared["repoURL"], compared["chart"]) == (f"{registry.host}/{CHARTS}", "liqo-peering-operator")
        log = (registry.workdir / "registry.log").read_text()[pushed_log:]
        assert f"GET /v2/{CHARTS}/liqo-peering-operator/blobs/sha256:" in log, log

        # Its objects, with the chart's labels at that version, the CRDs among them; each tracked by Argo CD
        # (an annotation naming the Application) but the CRDs: Argo CD never marks a CRD as an Application's.
        labels = {
            "helm.sh/chart": f"liqo-peering-operator-{version}",
            "app.kubernetes.io/name": "liqo-peering-operator",
            "app.kubernetes.io/instance": release,
            "app.kubernetes.io/managed-by": "Helm",
        }
        selector = ",".join(f"{key}={value}" for key, value in labels.items())
        made = {f"{res.plural} {o['metadata'].get('namespace', '')}/{o['metadata']['name']}": o
                for res in (*CHART_KINDS, k.CRD) for o in kc.list(res, None, selector)}  # fmt: skip
        expected = [
            f"deployments {target_ns}/{release}",
            f"serviceaccounts {target_ns}/{release}",
            f"clusterroles /{release}",
            f"clusterrolebindings /{release}",
            f"roles {operator_env.lc.namespace}/{release}-liqo",
            *(f"customresourcedefinitions /{crd}" for crd in KEPT_CRDS),
        ]
        assert not [where for where in expected if where not in made], sorted(made)
        annotations = {where: obj["metadata"].get("annotations") or {} for where, obj in made.items()}
        untracked = {
            where: found
            for where, found in annotations.items()
            if not found.get("argocd.argoproj.io/tracking-id", "").startswith(f"{name}:")
        }
        assert sorted(untracked) == sorted(f"customresourcedefinitions /{crd}" for crd in KEPT_CRDS), untracked
        kept_crd = made[f"customresourcedefinitions /{CRD_NAME}"]
        assert kept_crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"

        # The operator's Pod has no node to run on: its Deployment, and so the Application, stay Progressing
        # (once the CRDs just created are Established: until then Argo CD counts them, hence it, Degraded).
        # Argo CD tracks no CRD, so a new CRD becoming Established need not refresh the Application: left
        # alone, it sees that only at its next periodic refresh (timeout.reconciliation and its jitter,
        # about every 3 minutes by default). So once kopf's CRDs are Established here, a refresh is asked for,
        # again each time Argo CD has done the last one, as a user would with `argocd app get --refresh`.
        def kopf_crds() -> dict[str, list[tuple[str, str]]]:
            return {crd: [(c["type"], c["status"]) for c in ((kc.get(k.CRD, crd) or {}).get("status") or {})
                          .get("conditions") or []] for crd in KOPF_CRDS}  # fmt: skip

        def progressing() -> dict[str, Any] | None:
            app = application(argocd, name)
            health = ((app or {}).get("status") or {}).get("health", {}).get("status")
            deployment = resource_health(app, "Deployment").get("status")
            if health == deployment == "Progressing":
                return app
            asked = REFRESH in ((app or {}).get("metadata", {}).get("annotations") or {})
            if app and not asked and all(("Established", "True") in c for c in kopf_crds().values()):
                refresh(argocd, name)
            return None

        try:
            found = wait_for("the Application Progressing with its Deployment", progressing, timeout=200)
        except AssertionError as exc:
            resources = ((application(argocd, name) or {}).get("status") or {}).get("resources") or []
            unhealthy = [(r["kind"], r["name"], r.get("health")) for r in resources
                         if (r.get("health") or {}).get("status") not in (None, "Healthy")]  # fmt: skip
            raise AssertionError(f"{exc}\nnot healthy: {unhealthy}\nkopf's CRDs here: {kopf_crds()}") from None
        print(f"Argo CD: Application Progressing, Deployment {resource_health(found, 'Deployment')}")

        # Deleted (its sync ended first, as `argocd app terminate-op` does, were it still running), the
        # Application takes the chart's objects with it but the CRDs, kopf's too: untracked, never deleted.
        argocd.end_sync(name)
        delete_application(argocd, name)

        def left() -> list[str]:
            return sorted(
                f"{res.plural} {o['metadata']['name']}"
                for res in (*CHART_KINDS, k.CRD)
                for o in kc.list(res, None, selector)
            )

        kept = sorted(f"customresourcedefinitions {crd}" for crd in KEPT_CRDS)
        wait_for("the chart's objects gone but its CRDs", lambda: left() == kept, timeout=60)
        assert all(kc.get(k.CRD, crd) is not None for crd in KOPF_CRDS)
        argocd.check()
    finally:
        registry.stop()
        kc.delete(k.SECRET, repository["metadata"]["name"], ArgoCD.NAMESPACE)
        kc.delete(k.NAMESPACE, target_ns)
        for crd in KOPF_CRDS:  # which no test here installs otherwise
            kc.delete(k.CRD, crd)
        # The kept CRDs, with the chart's labels and annotation: back as the session applied them.
        install_crd(operator_env.peerings.api)
        print(f"test_application_installs_the_operators_chart_from_an_oci_registry: {time.monotonic() - started:.0f}s")
