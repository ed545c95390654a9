"""Chart.yaml's Artifact Hub metadata names every CRD the chart installs, as crds/ holds them."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy/helm/liqo-peering-operator/Chart.yaml"


def test_artifacthub_lists_every_crd_with_its_kind_and_version() -> None:
    listed = yaml.safe_load(yaml.safe_load(CHART.read_text())["annotations"]["artifacthub.io/crds"])
    crds = [yaml.safe_load(p.read_text()) for p in sorted((ROOT / "crds").glob("*.yaml"))]
    expected = {
        (c["metadata"]["name"], c["spec"]["names"]["kind"], v["name"]) for c in crds for v in c["spec"]["versions"]
    }
    assert {(e["name"], e["kind"], e["version"]) for e in listed} == expected
    assert all(e.get("displayName") and e.get("description") for e in listed)
