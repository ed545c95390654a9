"""The operator installed as a user installs a release: from an OCI registry, by chart and image digest.

`hack/release.sh` (what `make release VERSION=x.y.z REGISTRY=host/path` runs) publishes the image, the chart
and the image's SBOM to the harness's registry (`oci_registry`: on the node clusters' LAN, TLS with a CA of
its own, trusted by the nodes' containerd through hosts.toml). Then `helm install oci://...` with no image
values: the kubelet pulls the image by the digest the packaged chart names, from the registry. The operator
peers an example (against the Liqo stand-in) to Ready, and `helm upgrade` to a second release, pulled the
same way, rolls the Pod while the peering stays Ready.

The release's image is the image the nodes run (`make test` checks that it builds again to the same config and
layer digests: `hack/build-images.sh --verify`, hack/run-tests.sh) with its version label, on the same layer;
its SBOM lists exactly the Python distributions in the image's venv.

One test: each release and each Pod start costs cluster time, and every step needs the one before.
"""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import time
import tomllib
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from testenv.liqo_env.pytest_plugin import LiqoClusters, StandInProcess
from testenv.localk8s.images import Image, archive_digests, image_files
from testenv.localk8s.registry import Registry
from testenv.localk8s.tools import REPO_ROOT, tool_path
from testenv.operator_release import RELEASE, RELEASE_NS, Release
from testenv.operator_support import SECRET, Peerings, api_client
from testenv.sampler import ReadySampler, is_ready

PEERING_NS = "e2e-release"
NAME = "provider"
PATH = "lpo"  # the repository path under the registry's host, as a user's REGISTRY=host/path
VERSIONS = ("1.0.0", "1.0.1")
IMAGE_REPO = "liqo-peering-operator"
INDEX = "application/vnd.oci.image.index.v1+json"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"


def release(registry: Registry, version: str, key: Path) -> dict[str, Any]:
    """hack/release.sh VERSION to the harness's registry, signed with the cosign key pair `key`; its
    release.json."""
    env = {
        **os.environ,
        "VERSION": version,
        "REGISTRY": f"{registry.host}/{PATH}",
        "REGISTRY_CA": str(registry.ca_cert),
        "COSIGN_KEY": str(key),
        "COSIGN_PASSWORD": "",
    }
    start = time.monotonic()
    proc = subprocess.run(
        [str(REPO_ROOT / "hack" / "release.sh")], env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=1200
    )
    assert proc.returncode == 0, f"release {version} failed:\n{proc.stdout}\n{proc.stderr[-5000:]}"
    print(f"release {version}: {time.monotonic() - start:.0f}s")
    published: dict[str, Any] = json.loads((REPO_ROOT / ".local" / "release" / version / "release.json").read_text())
    return published


def cosign(*args: str, cwd: Path | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COSIGN_PASSWORD": ""}
    proc = subprocess.run(
        [str(tool_path("cosign")), *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=120
    )
    assert not check or proc.returncode == 0, f"cosign {' '.join(args)}: {proc.stdout}{proc.stderr}"
    return proc


def verify(registry: Registry, public_key: Path, ref: str) -> subprocess.CompletedProcess[str]:
    """`cosign verify` of `ref` against the key pair's public key (no transparency log: a key-pair release)."""
    return cosign(
        "verify", "--key", str(public_key), "--insecure-ignore-tlog=true",
        "--registry-cacert", str(registry.ca_cert), ref, check=False,
    )  # fmt: skip


def registry_get(registry: Registry, path: str, accept: str = "") -> bytes:
    context = ssl.create_default_context(cafile=str(registry.ca_cert))
    request = urllib.request.Request(f"https://{registry.host}/v2/{path}", headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(request, context=context, timeout=10) as resp:
        body: bytes = resp.read()
        return body


def referrers_index(registry: Registry, repo: str, digest: str) -> bytes:
    """The OCI index of what refers to `digest`: the referrers API where the registry has it, else the
    distribution spec's fallback, the tag `<alg>-<hex>` (the distribution registry has no referrers API;
    oras then keeps that tag's index up to date)."""
    try:
        return registry_get(registry, f"{repo}/referrers/{digest}")
    except urllib.error.HTTPError as exc:
        if exc.code != 404:
            raise
    return registry_get(registry, f"{repo}/manifests/{digest.replace(':', '-')}", INDEX)


def locked_runtime_packages() -> set[str]:
    """The project and every package it needs at run time, as uv.lock pins them (no dev extra)."""
    lock = tomllib.loads((REPO_ROOT / "uv.lock").read_text())
    packages = {p["name"]: p for p in lock["package"]}
    found: set[str] = set()
    todo = ["liqo-peering-operator"]
    while todo:
        name = todo.pop()
        if name not in found:
            found.add(name)
            todo += [d["name"] for d in packages[name].get("dependencies", []) if "marker" not in d]
    return found


def normalized(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def distributions(archive: Path) -> dict[str, str]:
    """Normalized name -> version of every distribution installed in the image's venv (its .dist-info)."""
    found = {}
    for path in image_files(archive):
        if path.startswith("opt/venv/lib/") and path.endswith(".dist-info") and path.count("/") == 5:
            name, version = path.rsplit("/", 1)[1].removesuffix(".dist-info").rsplit("-", 1)
            found[normalized(name)] = version
    return found


@pytest.fixture
def peerings(liqo_node_clusters: LiqoClusters) -> Iterator[Peerings]:
    peerings = Peerings(api_client(liqo_node_clusters["consumer"].kubeconfig))
    peerings.make_namespace(PEERING_NS)
    kubeconfig = Path(liqo_node_clusters["provider"].kubeconfig).read_bytes()
    peerings.put_kubeconfig_secret(PEERING_NS, SECRET, kubeconfig)
    yield peerings


def test_a_release_from_the_registry_installs_peers_and_upgrades(
    liqo_node_clusters: LiqoClusters,
    node_images: dict[str, Image],
    oci_registry: Registry,
    peerings: Peerings,
    tmp_path: Path,
) -> None:
    started = time.monotonic()
    lc = liqo_node_clusters
    operator = Release(cluster=lc["consumer"], image=node_images["operator"], liqo_namespace=lc.namespace)
    node_ip = lc["consumer"].node_specs()[0].ip
    subprocess.run([str(REPO_ROOT / "hack" / "build-cosign.sh")], check=True, capture_output=True, timeout=1800)
    cosign("generate-key-pair", cwd=tmp_path)
    first, second = (release(oci_registry, v, tmp_path / "cosign.key") for v in VERSIONS)
    repo = f"{oci_registry.host}/{PATH}/{IMAGE_REPO}"
    assert first["chart"] == f"oci://{oci_registry.host}/{PATH}/charts/liqo-peering-operator"

    # Each release's image is the image the nodes run, with the release's version label: the same layers.
    _, layers = archive_digests(operator.image.archive)
    for published in (first, second):
        image_manifest = json.loads(
            registry_get(oci_registry, f"{PATH}/{IMAGE_REPO}/manifests/{published['image_digest']}", MANIFEST)
        )
        config = json.loads(
            registry_get(oci_registry, f"{PATH}/{IMAGE_REPO}/blobs/{image_manifest['config']['digest']}")
        )
        assert config["rootfs"]["diff_ids"] == layers, (config["rootfs"], layers)
        assert config["config"]["Labels"]["org.opencontainers.image.version"] == published["version"]

    # The SBOM is attached to the image in the registry (an OCI referrer) and lists every Python package
    # the image runs with, each with its version.
    referrers = json.loads(referrers_index(oci_registry, f"{PATH}/{IMAGE_REPO}", first["image_digest"]))
    (sbom_ref,) = [m for m in referrers["manifests"] if m.get("artifactType") == "application/spdx+json"]
    manifest = json.loads(
        registry_get(oci_registry, f"{PATH}/{IMAGE_REPO}/manifests/{sbom_ref['digest']}", sbom_ref["mediaType"])
    )
    assert manifest["subject"]["digest"] == first["image_digest"]
    (layer,) = manifest["layers"]
    sbom = json.loads(registry_get(oci_registry, f"{PATH}/{IMAGE_REPO}/blobs/{layer['digest']}"))
    assert sbom == json.loads(Path(first["sbom"]).read_text())
    listed = {normalized(p["name"]): p["versionInfo"] for p in sbom["packages"] if p["SPDXID"] != "SPDXRef-Image"}
    assert {normalized(n) for n in locked_runtime_packages()} <= set(listed), sorted(listed)
    assert all(listed.values()) and "pip" not in listed and "setuptools" not in listed, listed
    assert listed == distributions(operator.image.archive)

    # Image and chart verify against the release's public key; an image pushed without a signature does not.
    public_key = tmp_path / "cosign.pub"
    chart_ref = f"{first['chart'].removeprefix('oci://')}@{first['chart_digest']}"
    for ref in (f"{repo}@{first['image_digest']}", chart_ref, f"{repo}@{second['image_digest']}"):
        assert verify(oci_registry, public_key, ref).returncode == 0, verify(oci_registry, public_key, ref).stderr
    unsigned = f"{oci_registry.host}/{PATH}/unsigned:{first['version']}"
    subprocess.run(
        [str(tool_path("oras")), "copy", "--from-ca-file", str(oci_registry.ca_cert), "--to-ca-file",
         str(oci_registry.ca_cert), f"{repo}:{first['version']}", unsigned],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    refused = verify(oci_registry, public_key, f"{unsigned.rsplit(':', 1)[0]}@{first['image_digest']}")
    assert refused.returncode != 0 and "no signatures found" in refused.stderr, refused.stderr

    def install(verb: str, published: dict[str, Any]) -> None:
        # As a user would: the chart from the registry, no image values (the chart names its image).
        operator.helm(
            verb, RELEASE, published["chart"], "--version", published["version"],
            "--ca-file", str(oci_registry.ca_cert), "--namespace", RELEASE_NS, "--create-namespace",
            "--wait", "--timeout", "4m", "--set", f"liqoNamespace={lc.namespace}",
        )  # fmt: skip

    def assert_pulled(pod: dict[str, Any], published: dict[str, Any]) -> None:
        """The Pod runs the release's image by digest, which the node's containerd pulled from the registry."""
        digest = published["image_digest"]
        (container,) = pod["spec"]["containers"]
        assert container["image"] == f"{repo}@{digest}"
        assert container["imagePullPolicy"] == "IfNotPresent"
        (status,) = pod["status"]["containerStatuses"]
        assert status["imageID"] == f"{repo}@{digest}", status
        # The registry served that manifest to the node (its access log: the client's address first).
        log = (oci_registry.workdir / "registry.log").read_text()
        assert any(
            line.startswith(node_ip) and f"/v2/{PATH}/{IMAGE_REPO}/manifests/{digest}" in line
            for line in log.splitlines()
        ), f"no pull of {digest} from {node_ip} in the registry's log"

    install("install", first)
    (pod,) = operator.wait_ready(1, "the operator Pod to be ready", timeout=120)
    assert_pulled(pod, first)

    peerings.create(PEERING_NS, NAME, {"remoteKubeconfigSecretRef": {"name": SECRET}, "timeout": "3m"})
    standin = StandInProcess(lc, tmp_path / "liqo-standin.log")
    try:
        try:
            peerings.wait_status(PEERING_NS, NAME, "ready", timeout=180)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{operator.operator_logs()}") from None

        # The upgrade to the second release: a new Pod from the new digest; the peering never leaves Ready.
        with ReadySampler(lambda: peerings.status(PEERING_NS, NAME), "the peering, during the upgrade"):
            install("upgrade", second)
            after = operator.successor(pod)
        assert_pulled(after, second)
        assert is_ready(peerings.status(PEERING_NS, NAME))

        # Unpeered before the operator goes, so that no finalizer outlives it.
        peerings.delete(PEERING_NS, NAME)
        peerings.wait_gone(PEERING_NS, NAME, timeout=120)
    finally:
        standin.stop()
        operator.helm("uninstall", RELEASE, "--namespace", RELEASE_NS, "--wait", "--ignore-not-found")
    print(f"test_a_release_from_the_registry_installs_peers_and_upgrades: {time.monotonic() - started:.0f}s")
