"""Flux drives a LiqoPeering from Git: source-controller and kustomize-controller (built from their Go
modules, run as processes against the consumer) apply examples/gitops/ from a Git server on loopback, with
the Flux objects of examples/flux/liqo-peering.yaml (`wait: true`)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from gitops_common import (
    Timeline,
    commit_example,
    peering_objects_left,
    peering_summary,
    tenant_namespaces,
)

from testenv import kube as k
from testenv.gitops import GITREPOSITORY, KUSTOMIZATION, Flux, condition, manifests
from testenv.gitserver import GitServer
from testenv.localk8s.tools import REPO_ROOT, tool_path
from testenv.operator_support import SECRET, OperatorEnv, PeeringCase, wait_for

pytestmark = pytest.mark.gitops

FLUX_EXAMPLE = REPO_ROOT / "examples" / "flux" / "liqo-peering.yaml"
OFFLOADING = k.Res("offloading.liqo.io", "v1beta1", "namespaceoffloadings")


@pytest.fixture(scope="module")
def flux(operator_env: OperatorEnv, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Flux]:
    tool_path("source-controller")  # a tool not built is a failure: ToolMissingError says how to build it
    tool_path("kustomize-controller")
    started = time.monotonic()
    controllers = Flux(Path(operator_env.lc["consumer"].kubeconfig), tmp_path_factory.mktemp("flux")).start()
    try:
        yield controllers
    finally:
        controllers.stop()
        print(f"\ntest_flux: Flux up, tests and teardown took {time.monotonic() - started:.1f}s")


def apply_flux_objects(flux: Flux, git: GitServer, repo: str) -> str:
    """examples/flux/liqo-peering.yaml with this test's names and Git URL; returns the Kustomization's name."""
    gitrepo, ks = manifests(FLUX_EXAMPLE)
    gitrepo["metadata"]["name"] = ks["spec"]["sourceRef"]["name"] = repo
    gitrepo["spec"]["url"] = git.url(repo)
    ks["metadata"]["name"] = repo
    ks["spec"]["retryInterval"] = "15s"  # the example's 1m, shortened to keep the test short
    flux.kc.apply(GITREPOSITORY, gitrepo, "e2e-gitops", Flux.NAMESPACE)
    flux.kc.apply(KUSTOMIZATION, ks, "e2e-gitops", Flux.NAMESPACE)
    return repo


def kustomization(flux: Flux, name: str) -> dict[str, Any] | None:
    return flux.kc.get(KUSTOMIZATION, name, Flux.NAMESPACE)


def verdict(obj: dict[str, Any] | None) -> str:
    ready = condition(obj, "Ready")
    return f"Kustomization {ready.get('status', '-')}/{ready.get('reason', '-')}"


def reconcile_now(flux: Flux, name: str) -> None:
    """What `flux reconcile kustomization --with-source` does: ask both controllers for a reconcile now."""
    now = datetime.now().isoformat()
    patch = {"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": now}}}
    flux.kc.patch(GITREPOSITORY, name, patch, Flux.NAMESPACE)
    flux.kc.patch(KUSTOMIZATION, name, patch, Flux.NAMESPACE)


def parse_time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def test_kustomization_is_ready_only_once_the_peering_is(flux: Flux, git_server: GitServer, case: PeeringCase) -> None:
    ns, started = case.namespace, time.monotonic()
    repo = f"flux-{ns}"
    commit = commit_example(git_server, repo, case)
    case.standin.set_faults("both", delay="8")  # keep the peering establishing for a while
    name = apply_flux_objects(flux, git_server, repo)

    timeline = Timeline()

    def look() -> tuple[str, str]:
        # The Kustomization first: were it Ready, the peering read after it must be Ready too.
        return verdict(kustomization(flux, name)), peering_summary(case.peerings.get(ns, "provider"))

    # Applied from Git, and Flux waits on the peering while the operator establishes it.
    timeline.until(
        "the peering establishing while Flux waits on it",
        look,
        lambda g, p: p.startswith("establishing") and g == "Kustomization Unknown/Progressing",
        timeout=120,
    )
    case.standin.set_faults("both", delay=None)
    try:
        timeline.until("the Kustomization Ready", look, lambda g, p: g.startswith("Kustomization True"), timeout=180)
    finally:
        timeline.report("Flux Kustomization (wait: true) and the LiqoPeering it applied")
    flux.check()

    ks = kustomization(flux, name)
    assert ks is not None
    ready = condition(ks, "Ready")
    assert ready["reason"] == "ReconciliationSucceeded", ready
    assert ks["status"]["lastAppliedRevision"] == f"main@sha1:{commit}"
    # Ready only once the peering was: never Ready while the peering was not, and the operator's readyAt
    # is no later than the moment Flux declared the Kustomization Ready.
    assert not [s for s in timeline.seen if s[1].startswith("Kustomization True") and not s[2].startswith("ready")]
    status = case.peerings.status(ns, "provider")
    assert status["peerStatus"] == "ready"
    assert parse_time(status["readyAt"]) <= parse_time(ready["lastTransitionTime"]), (status["readyAt"], ready)
    # Every object of the example came from Git, with the revision's inventory.
    inventory = {e["id"] for e in ks["status"]["inventory"]["entries"]}
    assert inventory == {
        f"{ns}_{SECRET}__Secret",
        f"{ns}_provider_peering.liqo-operator.io_LiqoPeering",
        f"{ns}_offloading_offloading.liqo.io_NamespaceOffloading",
    }, inventory
    print(f"Kustomization Ready {time.monotonic() - started:.1f}s after the commit")

    # Deleting the Kustomization prunes everything it applied at once, the Secret too: the operator keeps
    # the Secret (its finalizer) until it has unpeered both sides, and then lets it go.
    consumer_ns, provider_ns = tenant_namespaces(case)
    flux.kc.delete(KUSTOMIZATION, name, Flux.NAMESPACE)
    wait_for("the Kustomization gone", lambda: kustomization(flux, name) is None, timeout=90)
    try:
        case.peerings.wait_gone(ns, "provider", timeout=90)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\nstatus: {case.peerings.status(ns, 'provider')}") from None
    assert flux.kc.get(OFFLOADING, "offloading", ns) is None
    assert peering_objects_left(case, consumer_ns, provider_ns) == []
    wait_for("the Secret gone once unpeered", lambda: flux.kc.get(k.SECRET, SECRET, ns) is None, timeout=30)
    flux.kc.delete(GITREPOSITORY, name, Flux.NAMESPACE)


def test_kustomization_fails_when_the_peering_does(flux: Flux, git_server: GitServer, case: PeeringCase) -> None:
    ns = case.namespace
    repo = f"flux-{ns}"
    commit_example(git_server, repo, case, kubeconfig=b"this is not a kubeconfig\n")
    name = apply_flux_objects(flux, git_server, repo)

    cond = case.peerings.wait_reason(ns, "provider", "KubeconfigInvalid", timeout=120)
    operator_message = cond["message"]

    def failed() -> dict[str, Any] | None:
        ready = condition(kustomization(flux, name), "Ready")
        return ready if ready.get("status") == "False" and ready.get("reason") == "HealthCheckFailed" else None

    ready = wait_for("the Kustomization failed", failed, timeout=180)
    print(f"\nKustomization Ready=False {ready['reason']}: {ready['message']}")
    print(f"LiqoPeering Ready=False {cond['reason']}: {operator_message}")
    # Flux names the failed LiqoPeering (kstatus Failed: the operator's Stalled=True).
    assert f"LiqoPeering/{ns}/provider status: 'Failed'" in ready["message"], ready
    flux.check()

    # Fixing the Secret in Git is enough: once Flux fetches the commit (asked to at once here, as
    # `flux reconcile kustomization --with-source` does) it applies it, the operator peers, and the next
    # retry (retryInterval) finds the peering Ready.
    commit = commit_example(git_server, repo, case)
    reconcile_now(flux, name)
    case.peerings.wait_status(ns, "provider", "ready", timeout=120)
    fixed = time.monotonic()
    revision = f"main@sha1:{commit}"

    def applied() -> bool:
        # Ready for the fixed commit, read from one object: Ready alone may still be a status written before
        # the revision was recorded.
        ks = kustomization(flux, name) or {}
        last = (ks.get("status") or {}).get("lastAppliedRevision")
        return condition(ks, "Ready").get("status") == "True" and last == revision

    wait_for("the Kustomization Ready with the fixed commit applied", applied, timeout=180)
    print(f"Kustomization Ready {time.monotonic() - fixed:.1f}s after the peering (retryInterval: 15s)")
    assert case.peerings.status(ns, "provider")["peerStatus"] == "ready"
    consumer_ns, provider_ns = tenant_namespaces(case)
    flux.kc.delete(KUSTOMIZATION, name, Flux.NAMESPACE)
    case.peerings.wait_gone(ns, "provider", timeout=90)
    assert peering_objects_left(case, consumer_ns, provider_ns) == []
    flux.kc.delete(GITREPOSITORY, name, Flux.NAMESPACE)
