"""examples/ stay valid against the LiqoPeering model, the GitOps example keeps its sync waves; README and the
Installation page install from source (no release is published), and the Flux and Argo CD examples install
the chart from the user's registry, where `make release` pushes it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from pydantic import BaseModel

from liqo_peering.api import model, peeringset

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"


def documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def peerings() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in sorted(EXAMPLES.rglob("*.yaml")):
        for doc in documents(path):
            if doc.get("kind") == model.KIND:
                found.append((str(path.relative_to(REPO)), doc))
    return found


@pytest.mark.parametrize(("path", "doc"), peerings(), ids=[p for p, _ in peerings()])
def test_liqopeering_examples_validate(path: str, doc: dict[str, Any]) -> None:
    assert doc["apiVersion"] == model.API_VERSION
    model.LiqoPeeringSpec.model_validate(doc["spec"])


def test_fleet_example() -> None:
    (doc,) = documents(EXAMPLES / "fleet.yaml")
    assert doc["apiVersion"] == model.API_VERSION and doc["kind"] == peeringset.KIND
    spec = peeringset.parse_set_spec(doc["spec"])
    assert spec.selector.match_labels == {"liqo-fleet": "edge"}
    assert (spec.deletion_policy, spec.max_concurrent) == ("Delete", 5)
    assert "remoteKubeconfigSecretRef" not in doc["spec"]["template"]


def test_cluster_api_fleet_example() -> None:
    (doc,) = documents(EXAMPLES / "cluster-api-fleet.yaml")
    assert doc["apiVersion"] == model.API_VERSION and doc["kind"] == peeringset.KIND
    spec = peeringset.parse_set_spec(doc["spec"])
    assert (spec.source, spec.selector.match_labels) == ("Cluster", {"liqo-fleet": "workload"})
    assert "remoteKubeconfigSecretRef" not in doc["spec"]["template"]


def test_several_slices_example() -> None:
    (doc,) = documents(EXAMPLES / "several-slices.yaml")
    spec = model.parse_spec(doc["spec"])
    assert [s.name for s in spec.offloading.resource_slices or []] == ["provider-general", "provider-gpu"]


def test_basic_example() -> None:
    (doc,) = documents(EXAMPLES / "basic.yaml")
    assert doc["metadata"] == {"name": "provider", "namespace": "default"}
    assert doc["spec"] == {"remoteKubeconfigSecretRef": {"name": "provider-kubeconfig"}}


def _aliases(cls: type[BaseModel], prefix: str = "") -> set[str]:
    paths: set[str] = set()
    for name, field in cls.model_fields.items():
        path = f"{prefix}{field.alias or name}"
        paths.add(path)
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            paths |= _aliases(annotation, path + ".")
    return paths


def _set_paths(data: dict[str, Any], prefix: str = "") -> set[str]:
    paths: set[str] = set()
    for key, value in data.items():
        paths.add(prefix + key)
        if isinstance(value, dict) and key != "resources":
            paths |= _set_paths(value, f"{prefix}{key}.")
    return paths


def test_all_options_sets_every_field() -> None:
    (doc,) = documents(EXAMPLES / "all-options.yaml")
    missing = _aliases(model.LiqoPeeringSpec) - _set_paths(doc["spec"])
    # loadBalancerIP is mutually exclusive with nodePort, resourceSlices with the single slice's fields, and
    # remoteClusterProfileRef with remoteKubeconfigSecretRef (CEL); the example shows them commented out.
    assert missing <= {
        "networking.gatewayServer.loadBalancerIP",
        "offloading.resourceSlices",
        "reverse.offloading.resourceSlices",
        "remoteClusterProfileRef",
        "remoteCluster",
        "authentication.apiServer",
    }, missing
    text = (EXAMPLES / "all-options.yaml").read_text()
    assert "# loadBalancerIP:" in text and "# resourceSlices:" in text and "# remoteClusterProfileRef:" in text
    assert "# remoteCluster:" in text and "# apiServer:" in text
    assert set(doc["spec"]["offloading"]["resources"]) >= {"cpu", "memory", "pods", "nvidia.com/gpu"}


def test_networking_disabled_example() -> None:
    (doc,) = documents(EXAMPLES / "networking-disabled.yaml")
    spec = model.LiqoPeeringSpec.model_validate(doc["spec"])
    assert spec.networking.enabled is False
    assert spec.authentication.in_band is False


def test_gitops_sync_waves() -> None:
    gitops = EXAMPLES / "gitops"
    kustomization = documents(gitops / "kustomization.yaml")[0]
    waves: dict[str, int] = {}
    for name in kustomization["resources"]:
        for doc in documents(gitops / name):
            waves[doc["kind"]] = int(doc["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"])
    assert waves == {"Secret": 0, "LiqoPeering": 1, "NamespaceOffloading": 2}
    assert {p.name for p in gitops.glob("*.yaml")} - set(kustomization["resources"]) == {
        "kustomization.yaml",
        "application.yaml",
    }
    (offloading,) = documents(gitops / "namespaceoffloading.yaml")
    assert offloading["apiVersion"] == "offloading.liqo.io/v1beta1"
    assert offloading["metadata"]["name"] == "offloading"
    (peering,) = documents(gitops / "liqopeering.yaml")
    (secret,) = documents(gitops / "secret.yaml")
    assert peering["spec"]["remoteKubeconfigSecretRef"]["name"] == secret["metadata"]["name"]
    assert peering["metadata"]["namespace"] == secret["metadata"]["namespace"] == offloading["metadata"]["namespace"]
    (app,) = documents(gitops / "application.yaml")
    assert app["kind"] == "Application"
    assert app["spec"]["source"]["path"] == "examples/gitops"


CHART = REPO / "deploy" / "helm" / "liqo-peering-operator"
HELM_CHART_LAYER = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
# The user's registry, the same placeholder on every page and example.
REGISTRY = "registry.example.com/platform"


def chart_meta() -> dict[str, Any]:
    return documents(CHART / "Chart.yaml")[0]


def released(registry: str) -> tuple[str, str]:
    """Where `make release REGISTRY=<registry>` pushes the image and the chart, as hack/release.sh names them."""
    script = (REPO / "hack" / "release.sh").read_text()
    assert "name=liqo-peering-operator\nimage=$REGISTRY/$name\n" in script
    assert '"chart": "oci://$REGISTRY/charts/$name",' in script
    return f"{registry}/liqo-peering-operator", f"oci://{registry}/charts/liqo-peering-operator"


# The tag the pages build a checkout's image under: not a release's version, which `make release` pushes (the
# mirror section copies that one, with its digest).
BUILT = "dev"


def readme_install() -> str:
    text = (REPO / "README.md").read_text()
    start = text.index("## Install\n")
    return text[start : text.index("\n## ", start)]


def test_readme_installs_from_source_and_names_the_installation_page() -> None:
    install = readme_install()
    image, _ = released(REGISTRY)
    assert "(docs/installation.md)" in install and "No release has been published" in install
    assert f"docker build -t {image}:{BUILT} ." in install and f"docker push {image}:{BUILT}" in install
    assert "helm install liqo-peering-operator deploy/helm/liqo-peering-operator " in install
    assert f"--set image.repository={image} --set image.tag={BUILT}" in install
    assert "oci://" not in install and "ghcr.io" not in install


def test_the_installation_page_builds_and_installs_from_your_registry() -> None:
    page, version = (REPO / "docs" / "installation.md").read_text(), chart_meta()["version"]
    image, chart = released(REGISTRY)
    headings = [line for line in page.splitlines() if line.startswith("## ")]
    assert headings == [
        "## From a published release",
        "## From source, into your registry",
        "## A mirror for air-gapped clusters",
        "## With Flux or Argo CD",
        "## Next",
    ]
    assert "No release has been published yet" in page and "ghcr.io" not in page
    assert f"make release REGISTRY={REGISTRY} VERSION={version}\n" in page
    assert f"helm install liqo-peering-operator {chart} \\\n  --version {version} " in page
    assert f"docker build -t {image}:{BUILT} ." in page
    assert f"--set image.repository={image} --set image.tag={BUILT}" in page


def test_no_user_page_installs_from_ghcr() -> None:
    """No release has been published: only the Releases page names the registry the release workflow will
    publish to, to verify a release once there is one."""
    pages = [REPO / "README.md", CHART / "README.md", *sorted((REPO / "docs").rglob("*.md")), *EXAMPLES.rglob("*.yaml")]
    naming = [str(p.relative_to(REPO)) for p in pages if "ghcr.io/liqo-peering-operator" in p.read_text()]
    assert naming == ["docs/operations/releases.md"]


def test_flux_helmrelease_installs_the_chart_from_your_registry() -> None:
    ocirepo, release = documents(EXAMPLES / "flux" / "helmrelease.yaml")
    assert ocirepo["kind"] == "OCIRepository"
    assert ocirepo["spec"]["url"] == released(REGISTRY)[1]
    # The chart's layer, copied as pushed; the version is this chart's.
    assert ocirepo["spec"]["layerSelector"] == {"mediaType": HELM_CHART_LAYER, "operation": "copy"}
    assert ocirepo["spec"]["ref"] == {"tag": chart_meta()["version"]}
    assert "chart" not in release["spec"]
    assert release["spec"]["chartRef"] == {"kind": ocirepo["kind"], "name": ocirepo["metadata"]["name"]}
    assert release["metadata"]["namespace"] == ocirepo["metadata"]["namespace"]
    # The release name holds the chart's, so the objects are named after it alone (the chart's fullname).
    assert chart_meta()["name"] in release["spec"]["releaseName"]
    # No image values: the chart `make release` pushed names its image.
    assert "image" not in release["spec"]["values"]
    schema = json.loads((CHART / "values.schema.json").read_text())
    jsonschema.validate(release["spec"]["values"], schema)


def test_argocd_application_installs_the_chart_from_your_registry() -> None:
    repository, app = documents(EXAMPLES / "argocd" / "operator.yaml")
    assert repository["metadata"]["labels"] == {"argocd.argoproj.io/secret-type": "repository"}
    assert repository["metadata"]["namespace"] == app["metadata"]["namespace"] == "argocd"
    creds = repository["stringData"]
    assert (creds["type"], creds["enableOCI"]) == ("helm", "true")
    source = app["spec"]["source"]
    # Argo CD's Helm OCI source: the registry path without a scheme, and the chart's name apart.
    assert source["repoURL"] == creds["url"] == f"{REGISTRY}/charts"
    assert f"oci://{source['repoURL']}/{source['chart']}" == released(REGISTRY)[1]
    assert source["targetRevision"] == chart_meta()["version"]
    assert chart_meta()["name"] in source["helm"]["releaseName"]
    assert "CreateNamespace=true" in app["spec"]["syncPolicy"]["syncOptions"]
    assert "image" not in source["helm"]["valuesObject"]
    schema = json.loads((CHART / "values.schema.json").read_text())
    jsonschema.validate(source["helm"]["valuesObject"], schema)


def test_the_guides_show_the_examples_registry() -> None:
    """The Flux and Argo CD guides quote their examples' registry: the same placeholder."""
    flux = (REPO / "docs" / "guides" / "flux.md").read_text()
    argocd = (REPO / "docs" / "guides" / "argocd.md").read_text()
    assert f"  url: {released(REGISTRY)[1]}   # your registry" in flux
    assert f"  url: {REGISTRY}/charts   # your registry" in argocd
    assert f"    repoURL: {REGISTRY}/charts   # no oci://" in argocd
