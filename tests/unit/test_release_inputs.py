"""The release's inputs: one version everywhere, and the SBOM hack/release.sh attaches to the image
(the end-to-end test: tests/e2e/test_release.py)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

from unit import hack_scripts

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "deploy" / "helm" / "liqo-peering-operator"


def test_one_version_pyproject_chart_and_dockerfile_agree() -> None:
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["version"] == chart["appVersion"] == version
    dockerfile = re.search(r"^ARG VERSION=(\S+)$", (REPO / "Dockerfile").read_text(), re.M)
    assert dockerfile is not None and dockerfile.group(1) == version


def test_values_name_the_image_in_the_lines_release_rewrites() -> None:
    # hack/release.sh rewrites the first `  repository:`, `  tag:` and `  digest:` lines of values.yaml: they
    # must be the image's.
    lines = (CHART / "values.yaml").read_text().splitlines()
    image = lines.index("image:")
    for key in ("repository", "tag", "digest"):
        first = next(i for i, line in enumerate(lines) if line.startswith(f"  {key}: "))
        assert first > image and all(line.startswith(("  ", "#")) for line in lines[image + 1 : first]), key


def test_sbom_lists_each_distribution_with_its_version_and_purl() -> None:
    sbom = hack_scripts.load("sbom")
    dists = [("kopf", "1.45.2"), ("PyYAML", "6.0.3"), ("typing_extensions", "4.16.0")]
    doc = sbom.sbom("registry.example/lpo/liqo-peering-operator", "1.2.3", "sha256:" + "ab" * 32, dists)
    assert doc["spdxVersion"] == "SPDX-2.3"
    packages = {p["name"]: p for p in doc["packages"]}
    assert packages["registry.example/lpo/liqo-peering-operator"]["checksums"][0]["checksumValue"] == "ab" * 32
    for name, version in dists:
        assert packages[name]["versionInfo"] == version
    purls = [p["externalRefs"][0]["referenceLocator"] for p in doc["packages"][1:]]
    assert purls == ["pkg:pypi/kopf@1.45.2", "pkg:pypi/pyyaml@6.0.3", "pkg:pypi/typing-extensions@4.16.0"]
    contained = {r["relatedSpdxElement"] for r in doc["relationships"] if r["relationshipType"] == "CONTAINS"}
    assert contained == {p["SPDXID"] for p in doc["packages"][1:]}
    # The same inputs, the same document.
    assert doc == sbom.sbom("registry.example/lpo/liqo-peering-operator", "1.2.3", "sha256:" + "ab" * 32, dists)
