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

One test per page, in doc_blocks.PAGES' order; then Working with LiqoPeerings' blocks, in an order of their
own, against the operator Getting started installed. A block that installs the chart starts from a consumer
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
from typing import Any

import pytest

import doc_blocks
from doc_blocks import PAGES, Block, blocks, shell, unlisted
from hack.crdgen import CRD_NAME, SET_CRD_NAME
from liqo_peering.liqo.tenancy import tenant_namespace_selector
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
SECRET_V2 = "provider-kubeconfig-v2"  # the Secret Working with LiqoPeerings switches to
FOREIGN_CLUSTER = k.Res("core.liqo.io", "v1beta1", "foreignclusters")
FC_UNREACHABLE = "liqo.io/foreign-cluster-permanently-unreachable"
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
        """The block, run as written; its time and the end of its output printed."""
        started = time.monotonic()
        out = shell(block, self.values, self.environ, BLOCK_TIMEOUT, self.diagnosis)
        print(f"ran {block.page}:{block.line} in {time.monotonic() - started:.0f}s: {block.first}\n{out[-1500:]}")
        return out

    def run_commands(self, commands: str) -> str:
        """Commands of another page (Getting started's), run as its blocks are."""
        return shell(Block("(the test)", 0, commands), self.values, self.environ, BLOCK_TIMEOUT, self.diagnosis)

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
        self.remove_secret(SECRET)
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

    def remove_secret(self, name: str) -> None:
        """A Secret of the pages, with the protection finalizer a peering left on it, if any."""
        if self.kc.get(k.SECRET, name, PEERING_NS) is not None:
            self.kc.patch(k.SECRET, name, {"metadata": {"finalizers": None}}, PEERING_NS)
            self.kc.delete(k.SECRET, name, PEERING_NS)

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
    values = {
        "registry": oci_registry.host,
        "provider_kubeconfig": str(lc["provider"].kubeconfig),
        "provider_id": lc.ids["provider"],
    }
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
        env.run(block)
    # The operator the page installed runs an image of the test's registry, pulled by the node: the pages'
    # registry was replaced everywhere (the node has the image it was built as under another name only).
    deployment = env.kc.get(k.DEPLOYMENT, RELEASE, RELEASE_NS)
    assert deployment is not None, f"{page} left no operator installed"
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"].startswith(f"{env.registry.host}/"), container["image"]
    assert env.operator_available(), env.diagnosis()


def test_working_with_liqopeerings_runs_as_written(env: DocsEnv) -> None:
    """The day-to-day page's blocks, against the operator the pages installed last: each finds what it acts on
    (a peering to look at, to change, to delete), which the test makes between them as the pages make it, the
    Secret and examples/basic.yaml. The pages' peering and Secret are gone at the end."""
    assert env.operator_available(), "the pages installed no operator: " + env.diagnosis()
    provider_kubeconfig = Path(env.lc["provider"].kubeconfig).read_bytes()
    env.peerings.put_kubeconfig_secret(PEERING_NS, SECRET, provider_kubeconfig)
    env.peerings.put_kubeconfig_secret(PEERING_NS, SECRET_V2, provider_kubeconfig)  # the page switches to it

    def peering() -> None:
        """The peering `provider`, as Getting started makes it."""
        env.run_commands("kubectl apply -f examples/basic.yaml")

    try:
        peering()
        env.run(
            doc_blocks.block(
                "docs/guides/working-with-liqopeerings.md",
                "kubectl -n default wait --for=condition=Ready lp/provider --timeout=10m",
            )
        )
        listed = env.run(doc_blocks.block("docs/guides/working-with-liqopeerings.md", "kubectl get lp -A -o wide"))
        assert "provider" in listed and "ready" in listed, listed
        conditions = env.run(
            doc_blocks.block("docs/guides/working-with-liqopeerings.md", "kubectl -n default get lp provider \\")
        )
        assert "Ready\tTrue" in conditions, conditions
        env.run(
            doc_blocks.block(
                "docs/guides/working-with-liqopeerings.md", "kubectl -n default get events --field-selector"
            )
        )
        generations = env.run(
            doc_blocks.block(
                "docs/guides/working-with-liqopeerings.md",
                "kubectl -n default get lp provider -o jsonpath='{.metadata.generation}",
            )
        )
        generation, observed = generations.split()
        assert generation == observed, generations
        env.run(doc_blocks.block("docs/guides/working-with-liqopeerings.md", "kubectl -n liqo-peering get pods"))
        env.run(
            doc_blocks.block("docs/guides/working-with-liqopeerings.md", "kubectl -n default get lp provider -o yaml")
        )
        env.run(
            doc_blocks.block(
                "docs/guides/working-with-liqopeerings.md",
                "kubectl -n liqo-peering logs deploy/liqo-peering-operator | grep default/provider",
            )
        )
        uid = live(env)["metadata"]["uid"]

        # Rotated, switched to another Secret, poked, changed: the same peering, Ready after each.
        env.run(
            doc_blocks.block(
                "docs/guides/working-with-liqopeerings.md",
                "kubectl -n default create secret generic provider-kubeconfig \\",
            )
        )
        env.run(
            doc_blocks.block(
                "docs/guides/working-with-liqopeerings.md",
                'kubectl -n default patch lp provider --type=merge -p \'{"spec":{"remoteKubeconfigSecretRef"',
            )
        )
        env.run(
            doc_blocks.block(
                "docs/guides/working-with-liqopeerings.md", "kubectl -n default annotate lp provider poked-at="
            )
        )
        env.run(
            doc_blocks.block(
                "docs/guides/working-with-liqopeerings.md", "kubectl -n default patch lp provider --type=merge \\"
            )
        )
        status = env.peerings.wait_status(PEERING_NS, PEERING, "ready", timeout=180)
        assert live(env)["metadata"]["uid"] == uid
        assert status.get("observedGeneration") == live(env)["metadata"]["generation"]

        # The three ways to delete, each on a peering made again.
        env.run(
            doc_blocks.block(
                "docs/guides/working-with-liqopeerings.md", "kubectl -n default delete lp provider --wait=false"
            )
        )
        peering()
        env.peerings.wait_status(PEERING_NS, PEERING, "ready", timeout=180)
        ids = {"consumer": env.lc.ids["provider"], "provider": env.lc.ids["consumer"]}  # the peer, per side
        tenant_ns = {side: tenant_namespaces(env.lc.kube(side), peer) for side, peer in ids.items()}
        assert all(tenant_ns.values()), tenant_ns
        env.run(
            doc_blocks.block(
                "docs/guides/working-with-liqopeerings.md",
                'kubectl -n default patch lp provider --type=merge -p \'{"spec":{"deletion"',
            )
        )
        wait_for(
            f"the tenant namespaces {tenant_ns} gone",
            lambda: not any(tenant_namespaces(env.lc.kube(side), peer) for side, peer in ids.items()),
            timeout=120,
        )
        peering()
        env.peerings.wait_status(PEERING_NS, PEERING, "ready", timeout=180)
        env.run(
            doc_blocks.block(
                "docs/guides/working-with-liqopeerings.md",
                "kubectl -n default annotate lp provider peering.liqo-operator.io/force-delete=true",
            )
        )
        assert env.peerings.get(PEERING_NS, PEERING) is None
        # The provider is back: its ForeignCluster loses the mark.
        env.run(
            doc_blocks.block(
                "docs/guides/working-with-liqopeerings.md", "kubectl annotate foreigncluster <provider-id>"
            )
        )
        fc = env.kc.get(FOREIGN_CLUSTER, env.lc.ids["provider"]) or {}
        assert FC_UNREACHABLE not in ((fc.get("metadata") or {}).get("annotations") or {}), fc
    finally:
        env.reset()
        # What force-delete leaves on the provider, which the page leaves to its administrator: the next test
        # peers this consumer with it again.
        provider = env.lc.kube("provider")
        for name in tenant_namespaces(provider, env.lc.ids["consumer"]):
            provider.delete(k.NAMESPACE, name)
        wait_for(
            "the provider's tenant namespace gone",
            lambda: not tenant_namespaces(provider, env.lc.ids["consumer"]),
            timeout=120,
        )
        env.remove_secret(SECRET_V2)


def tenant_namespaces(kc: Kube, peer_id: str) -> list[str]:
    """Liqo's tenant namespaces for a peer on one cluster, by Liqo's labels."""
    return [ns["metadata"]["name"] for ns in kc.list(k.NAMESPACE, selector=tenant_namespace_selector(peer_id))]


def live(env: DocsEnv) -> dict[str, Any]:
    found = env.peerings.get(PEERING_NS, PEERING)
    assert found is not None, f"no LiqoPeering {PEERING_NS}/{PEERING}"
    return found
