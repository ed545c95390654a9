"""The Kubernetes versions the docs state are the ones hack/versions.env pins and the tests run, and the
chart's floor (Chart.yaml kubeVersion) is the one tests/e2e/test_kubernetes_floor.py runs. The pages speak to
users: they name the versions, not the tests."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
VERSIONS = dict(
    line.split("=", 1) for line in (ROOT / "hack" / "versions.env").read_text().splitlines() if re.match(r"^\w+=", line)
)
CURRENT, FLOOR = VERSIONS["KUBERNETES_VERSION"], VERSIONS["KUBERNETES_FLOOR_VERSION"]
FLOOR_MINOR = ".".join(FLOOR.split(".")[:2])
KUBERNETES_RELEASE = re.compile(r"\b1\.\d+\.\d+\b")  # etcd (3.x), helm (3.x) and the others do not match


def test_the_chart_accepts_kubernetes_from_the_floor_on() -> None:
    chart = yaml.safe_load((ROOT / "deploy" / "helm" / "liqo-peering-operator" / "Chart.yaml").read_text())
    assert chart["kubeVersion"] == f">={FLOOR_MINOR}.0-0"


def test_the_floor_wrapper_module_builds_the_pinned_floor() -> None:
    go_mod = (ROOT / "hack" / "tools" / "kubernetes-floor" / "go.mod").read_text()
    assert re.search(rf"^require k8s\.io/kubernetes v{re.escape(FLOOR)}$", go_mod, re.M)
    staging = set(re.findall(r"=> k8s\.io/[a-z-]+ (v\S+)", go_mod))
    assert staging == {"v0." + FLOOR.split(".", 1)[1]}


def test_the_readme_states_the_tested_kubernetes_versions() -> None:
    (row,) = [line for line in (ROOT / "README.md").read_text().splitlines() if line.startswith("| Kubernetes |")]
    required, tested = row.split("|")[2:4]
    assert set(KUBERNETES_RELEASE.findall(tested)) == {CURRENT, FLOOR}, tested
    assert required.strip().startswith(f"{FLOOR_MINOR} or later"), required


def test_the_getting_started_guide_states_the_tested_kubernetes_versions() -> None:
    text = (ROOT / "docs" / "getting-started.md").read_text()
    assert f"**Kubernetes {FLOOR_MINOR} or later**" in text
    section = text.split("### Kubernetes versions", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if re.match(r"^\| \d", line)]
    assert {line.split("|")[1].strip() for line in rows} == {CURRENT, FLOOR}, rows
    assert (ROOT / "tests" / "e2e" / "test_kubernetes_floor.py").is_file()  # what runs the floor
