"""examples/ stay valid against the LiqoPeering model, the GitOps example keeps its sync waves, and the Flux
and Argo CD examples install the released chart."""

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
    # loadBalancerIP is mutually exclusive with nodePort, resourceSlices with the single slice's fields (CEL);
    # the example shows them commented out.
    assert missing <= {
        "networking.gatewayServer.loadBalancerIP",
        "offloading.resourceSlices",
        "reverse.offloading.resourceSlices",
    }, missing
    text = (EXAMPLES / "all-options.yaml").read_text()
    assert "# loadBalancerIP:" in text and "# resourceSlices:" in text
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


# The released chart, as README.md's install line names it.
RELEASED_CHART = "oci://ghcr.io/liqo-peering-operator/charts/liqo-peering-operator"
CHART = REPO / "deploy" / "helm" / "liqo-peering-operator"
HELM_CHART_LAYER = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"


def chart_meta() -> dict[str, Any]:
    return documents(CHART / "Chart.yaml")[0]


def test_readme_installs_the_released_chart() -> None:
    assert f"helm install liqo-peering-operator {RELEASED_CHART}" in (REPO / "README.md").read_text()


def test_flux_helmrelease_installs_the_released_chart() -> None:
    ocirepo, release = documents(EXAMPLES / "flux" / "helmrelease.yaml")
    assert ocirepo["kind"] == "OCIRepository"
    assert ocirepo["spec"]["url"] == RELEASED_CHART
    # The chart's layer, copied as pushed; the version is this chart's.
    assert ocirepo["spec"]["layerSelector"] == {"mediaType": HELM_CHART_LAYER, "operation": "copy"}
    assert ocirepo["spec"]["ref"] == {"tag": chart_meta()["version"]}
    assert "chart" not in release["spec"]
    assert release["spec"]["chartRef"] == {"kind": ocirepo["kind"], "name": ocirepo["metadata"]["name"]}
    assert release["metadata"]["namespace"] == ocirepo["metadata"]["namespace"]
    # The release name holds the chart's, so the objects are named after it alone (the chart's fullname).
    assert chart_meta()["name"] in release["spec"]["releaseName"]
    schema = json.loads((CHART / "values.schema.json").read_text())
    jsonschema.validate(release["spec"]["values"], schema)


def test_argocd_application_installs_the_released_chart() -> None:
    repository, app = documents(EXAMPLES / "argocd" / "operator.yaml")
    assert repository["metadata"]["labels"] == {"argocd.argoproj.io/secret-type": "repository"}
    assert repository["metadata"]["namespace"] == app["metadata"]["namespace"] == "argocd"
    creds = repository["stringData"]
    assert (creds["type"], creds["enableOCI"]) == ("helm", "true")
    source = app["spec"]["source"]
    # Argo CD's Helm OCI source: the registry path without a scheme, and the chart's name apart.
    assert source["repoURL"] == creds["url"]
    assert f"oci://{source['repoURL']}/{source['chart']}" == RELEASED_CHART
    assert source["targetRevision"] == chart_meta()["version"]
    assert chart_meta()["name"] in source["helm"]["releaseName"]
    assert "CreateNamespace=true" in app["spec"]["syncPolicy"]["syncOptions"]
    schema = json.loads((CHART / "values.schema.json").read_text())
    jsonschema.validate(source["helm"]["valuesObject"], schema)
