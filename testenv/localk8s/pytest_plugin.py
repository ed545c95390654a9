"""Pytest plugin: session-scoped pairs of local clusters, `consumer` and `provider`.

- `local_clusters`: control planes only (no nodes): the fast suites;
- `node_clusters`: each with one real node (containerd, kubelet, kube-proxy, CoreDNS), on a LAN of their
  own, with the images `make images` built loaded into the consumer's node;
- `two_node_clusters` (module): the consumer with two real nodes, the images in both, and the provider a
  control plane without nodes on the same LAN (drains: a Pod evicted from one node runs on the other);
- `floor_clusters` (module): control planes of the oldest Kubernetes the chart supports
  (hack/versions.env KUBERNETES_FLOOR_VERSION), gone at the end of the module that asked for them.

Enable with `pytest_plugins = ["testenv.localk8s.pytest_plugin"]` in a conftest.py.
The clusters are torn down at the end of the session, on failures, on Ctrl-C, on SIGTERM
and, as a last resort, at interpreter exit.
"""

from __future__ import annotations

import atexit
import contextlib
import shutil
import signal
import tempfile
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import FrameType

import pytest

from .cluster import LocalCluster, start_clusters
from .images import Image, built_images
from .registry import Registry
from .tools import read_versions

CLUSTER_NAMES = ["consumer", "provider"]

_live: dict[Path, list[LocalCluster]] = {}
_live_lock = threading.Lock()


def _teardown(base_dir: Path) -> None:
    with _live_lock:
        clusters = _live.pop(base_dir, [])
    for cluster in clusters:
        cluster.stop()
    shutil.rmtree(base_dir, ignore_errors=True)


def _teardown_all() -> None:
    for base_dir in list(_live):
        _teardown(base_dir)


atexit.register(_teardown_all)


def _install_sigterm_handler() -> None:
    # SIGTERM (CI cancelling a job) would otherwise kill pytest without running finalizers or
    # atexit hooks, leaving etcd and the API servers running. Tear down, then stop the session
    # the way Ctrl-C does (a SystemExit inside a test would only fail that one test).
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        _teardown_all()
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, handler)


@contextlib.contextmanager
def _session_clusters(
    nodes: int | Mapping[str, int], kubernetes_version: str | None = None
) -> Iterator[dict[str, LocalCluster]]:
    _install_sigterm_handler()
    base_dir = Path(tempfile.mkdtemp(prefix="localk8s-"))
    # Registered before starting: start_clusters cleans up after itself on failure, but an
    # interrupt between its return and the yield must not leak the clusters.
    with _live_lock:
        _live[base_dir] = []
    try:
        clusters = start_clusters(CLUSTER_NAMES, base_dir, nodes=nodes, kubernetes_version=kubernetes_version)
        with _live_lock:
            _live[base_dir] = list(clusters.values())
        yield clusters
    finally:
        _teardown(base_dir)


@pytest.fixture(scope="session")
def local_clusters() -> Iterator[dict[str, LocalCluster]]:
    """{"consumer": LocalCluster, "provider": LocalCluster}, fresh for this test session."""
    with _session_clusters(nodes=0) as clusters:
        yield clusters


@pytest.fixture(scope="module")
def floor_clusters() -> Iterator[dict[str, LocalCluster]]:
    """{"consumer", "provider"} on the oldest Kubernetes the chart supports (KUBERNETES_FLOOR_VERSION), without
    nodes; module-scoped, so that they do not outlive the tests that use them."""
    with _session_clusters(nodes=0, kubernetes_version=read_versions()["KUBERNETES_FLOOR_VERSION"]) as clusters:
        yield clusters


@pytest.fixture(scope="session")
def node_images() -> dict[str, Image]:
    """The images `make images` built ("python-base", "operator")."""
    return built_images()  # not built: ImagesMissingError names the script that builds them


@pytest.fixture(scope="session")
def node_clusters(node_images: dict[str, Image]) -> Iterator[dict[str, LocalCluster]]:
    """{"consumer", "provider"}, each with one real node; `node_images` in the consumer's node, where the
    tests run their Pods (importing them takes seconds per image and node: the provider's gets none)."""
    with _session_clusters(nodes=1) as clusters:
        for image in node_images.values():
            clusters["consumer"].load_image(image.archive)
        yield clusters


@pytest.fixture(scope="module")
def two_node_clusters(node_images: dict[str, Image]) -> Iterator[dict[str, LocalCluster]]:
    """{"consumer", "provider"}: the consumer with two real nodes, `node_images` in both, and the provider a
    control plane on the same LAN, where the consumer's Pods reach its API server (a provider needs no node
    for the stand-in). Module-scoped: only the module that drains a node pays for its second node."""
    with _session_clusters(nodes={"consumer": 2, "provider": 0}) as clusters:
        for image in node_images.values():
            clusters["consumer"].load_image(image.archive)
        yield clusters


@pytest.fixture(scope="session")
def oci_registry(node_clusters: dict[str, LocalCluster]) -> Iterator[Registry]:
    """An OCI registry on the node clusters' LAN (`host`: `<ip>:<port>`; `ca_cert`, `cert_dir`: its CA), which
    every node's containerd trusts through its hosts.toml."""
    consumer = node_clusters["consumer"]
    assert consumer.lan is not None
    registry = Registry(consumer.workdir.parent / "registry", consumer.lan.host_ip).start()
    try:
        for cluster in node_clusters.values():
            registry.trust(cluster.node_specs())
        yield registry
    finally:
        registry.stop()
