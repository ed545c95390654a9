"""The install pages run as written: the ```sh blocks of docs/installation.md, README.md's Install section and
docs/getting-started.md, with the placeholders of doc_blocks.SUBSTITUTIONS replaced, against the session's
clusters with nodes (`liqo_node_clusters`: the consumer's node pulls the operator's image) and the harness's
OCI registry (`oci_registry`, which the nodes' containerd trusts). tests/doc_blocks.py lists every block, and
the test that runs each of the others: the Flux and Argo CD guides' (their controllers), liqoctl's (Liqo's own
chart) and `make demo` (clusters of its own). `docker` is a stand-in (testenv/docker/docker): buildah does the
pages' `docker build` and `docker push`, FROM the python base image the harness built, since no Docker engine
runs here and Docker Hub cannot be reached. The Liqo stand-in plays Liqo's controllers.

The blocks run in bash (-e, pipefail) from the repository's root, as a user's shell on a machine that trusts
the registry: helm, kubectl and oras of the tool cache first on PATH, KUBECONFIG the consumer's, the registry's
CA in SSL_CERT_FILE (helm and oras read it) and in REGISTRY_CA (which `make release` passes to hack/release.sh,
as the page says to add for a registry with a private CA).

One test per page, in doc_blocks.PAGES' order. A block that installs the chart starts from a consumer
without the pages' release, peering and Secret; at the end none of them is left, nor the chart's CRDs (kept on
uninstall: the tier's next install of the chart must own them itself) or its namespace.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from doc_blocks import PAGES, Block, blocks, shell, unlisted
from hack.crdgen import CRD_NAME, SET_CRD_NAME
from testenv import kube as k
from testenv.helm import HELM_HOME, run_helm
from testenv.kube import Kube
from testenv.liqo_env.pytest_plugin import LiqoClusters, StandInProcess
from testenv.localk8s.images import Image
from testenv.localk8s.registry import Registry
from testenv.localk8s.tools import tool_path
from testenv.operator_support import Peerings, api_client, wait_for

# What the pages name: the release and its namespace, the peering of examples/basic.yaml and its Secret.
RELEASE, RELEASE_NS = "liqo-peering-operator", "liqo-peering"
PEERING_NS, PEERING, SECRET = "default", "provider", "provider-kubeconfig"
# The chart's CRDs, which uninstalling keeps, and kopf's peering CRDs from its crds/, which Helm never deletes.
KEPT_CRDS = (CRD_NAME, SET_CRD_NAME, "clusterkopfpeerings.kopf.dev", "kopfpeerings.kopf.dev")
# `make release` builds (cached) and pushes the image; `kubectl wait` waits up to 10 minutes.
BLOCK_TIMEOUT = 1200
# The pages' `docker build` and `docker push`, done by buildah (no Docker engine or Docker Hub here).
DOCKER_STANDIN = Path(__file__).resolve().parents[2] / "testenv" / "docker" / "docker"


@dataclass
class DocsEnv:
    lc: LiqoClusters
    registry: Registry
    environ: dict[str, str]  # the blocks' shell's environment
    values: dict[str, str]  # doc_blocks.SUBSTITUTIONS' values
    kc: Kube
    peerings: Peerings

    @property
    def kubeconfig(self) -> Path:
        return Path(self.lc["consumer"].kubeconfig)

    def run(self, block: Block) -> str:
        return shell(block, self.values, self.environ, BLOCK_TIMEOUT, self.diagnosis)

    def operator_available(self) -> bool:
        deployment = self.kc.get(k.DEPLOYMENT, RELEASE, RELEASE_NS) or {}
        return bool((deployment.get("status") or {}).get("availableReplicas"))

    def reset(self) -> None:
        """None of the pages' peering, Secret and release on the consumer."""
        if self.peerings.get(PEERING_NS, PEERING) is not None:
            self.peerings.delete(PEERING_NS, PEERING)
            if self.operator_available():
                self.peerings.wait_gone(PEERING_NS, PEERING, timeout=180)
            else:  # no operator to unpeer it (a page that failed): released by hand
                self.peerings.patch(PEERING_NS, PEERING, {"metadata": {"finalizers": None}})
        if self.kc.get(k.SECRET, SECRET, PEERING_NS) is not None:
            self.kc.patch(k.SECRET, SECRET, {"metadata": {"finalizers": None}}, PEERING_NS)
            self.kc.delete(k.SECRET, SECRET, PEERING_NS)
        run_helm(
            "uninstall", RELEASE, "--namespace", RELEASE_NS, "--wait", "--ignore-not-found", kubeconfig=self.kubeconfig
        )
        wait_for(
            "the pages' peering and Secret gone",
            lambda: (
                self.peerings.get(PEERING_NS, PEERING) is None and self.kc.get(k.SECRET, SECRET, PEERING_NS) is None
            ),
            timeout=60,
        )

    def diagnosis(self) -> str:
        """The operator's Pods, the release namespace's Events and the peering's status, for a failure message."""
        lines = k.container_states(self.kc.list(k.POD, RELEASE_NS))
        for event in self.kc.list(k.Res("", "v1", "events"), RELEASE_NS):
            lines.append(f"event {event['involvedObject']['name']}: {event.get('reason')}: {event.get('message')}")
        lines.append(f"LiqoPeering {PEERING_NS}/{PEERING} status: {self.peerings.status(PEERING_NS, PEERING)}")
        return "\n".join(lines)


@pytest.fixture(scope="module")
def env(
    liqo_node_clusters: LiqoClusters,
    node_images: dict[str, Image],
    oci_registry: Registry,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[DocsEnv]:
    # node_images: the operator's image is built, so `make release` finds its build cached; the python base is
    # what the docker stand-in builds FROM.
    lc = liqo_node_clusters
    work = tmp_path_factory.mktemp("docs-run")
    bin_dir = work / "bin"
    bin_dir.mkdir()
    for tool in ("helm", "kubectl", "oras"):
        (bin_dir / tool).symlink_to(tool_path(tool))  # a tool not built is a failure that says how to build it
    (bin_dir / "docker").symlink_to(DOCKER_STANDIN)
    system_cas = Path(os.environ.get("SSL_CERT_FILE") or "/etc/ssl/certs/ca-certificates.crt")
    bundle = work / "ca-bundle.crt"
    bundle.write_text((system_cas.read_text() if system_cas.is_file() else "") + oci_registry.ca_cert.read_text())
    environ = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "KUBECONFIG": str(lc["consumer"].kubeconfig),
        "KUBECACHEDIR": str(work / "kube-cache"),
        # helm's caches and configuration, as testenv.helm keeps them: out of the user's home.
        "HELM_CACHE_HOME": str(HELM_HOME / "cache"),
        "HELM_CONFIG_HOME": str(HELM_HOME / "config"),
        "HELM_DATA_HOME": str(HELM_HOME / "data"),
        "SSL_CERT_FILE": str(bundle),
        "REGISTRY_CA": str(oci_registry.ca_cert),
        # The docker stand-in's storage, the base image it builds FROM, and the registry's CA.
        "DOCKER_STANDIN_STORE": str(work / "docker"),
        "DOCKER_STANDIN_BASE": str(node_images["python-base"].archive),
        "DOCKER_STANDIN_CERTS": str(oci_registry.cert_dir),
    }
    values = {"registry": oci_registry.host, "provider_kubeconfig": str(lc["provider"].kubeconfig)}
    kc = lc.kube("consumer")
    docs = DocsEnv(lc, oci_registry, environ, values, kc, Peerings(api_client(lc["consumer"].kubeconfig)))
    standin = StandInProcess(lc, work / "liqo-standin.log")
    started = time.monotonic()
    try:
        yield docs
    finally:
        try:
            docs.reset()
            for crd in KEPT_CRDS:
                kc.delete(k.CRD, crd)
            kc.delete(k.NAMESPACE, RELEASE_NS)
            gone = [(k.CRD, crd) for crd in KEPT_CRDS] + [(k.NAMESPACE, RELEASE_NS)]
            wait_for("the CRDs and the namespace gone", lambda: all(kc.get(*o) is None for o in gone), timeout=120)
        finally:
            standin.stop()
            shutil.rmtree(work / "docker", ignore_errors=True)  # the docker stand-in's storage: image copies
            print(f"\ntest_docs_run: the pages ran, and were cleaned up, in {time.monotonic() - started:.0f}s")


@pytest.mark.parametrize("page", list(PAGES))
def test_the_page_runs_as_written(env: DocsEnv, page: str) -> None:
    found = blocks(page)
    assert unlisted(found) == [], "name each block in doc_blocks.BLOCKS: None to run it, or why it cannot run"
    to_run = [b for b in found if b.skipped is None]
    for block in found:
        if block.skipped is not None:
            print(f"not run: {block.page}:{block.line}: {block.first} ({block.skipped})")
    if not to_run:
        return
    for block in to_run:
        if block.installs_the_operator:
            env.reset()
        started = time.monotonic()
        out = env.run(block)
        print(f"ran {block.page}:{block.line} in {time.monotonic() - started:.0f}s: {block.first}\n{out[-1500:]}")
    # The operator the page installed runs an image of the test's registry, pulled by the node: the pages'
    # registry was replaced everywhere (the node has the image it was built as under another name only).
    deployment = env.kc.get(k.DEPLOYMENT, RELEASE, RELEASE_NS)
    assert deployment is not None, f"{page} left no operator installed"
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"].startswith(f"{env.registry.host}/"), container["image"]
    assert env.operator_available(), env.diagnosis()
