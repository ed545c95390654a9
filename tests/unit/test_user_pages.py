"""The pages users read speak to users: no test files, tiers or "a unit test checks" in them. How the project
is tested is the Development section's subject (docs/development/testing.md)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "liqo-peering-operator"
USER_PAGES = [
    ROOT / "README.md",
    CHART / "README.md",
    CHART / "values.yaml",
    ROOT / "docs" / "index.md",
    ROOT / "docs" / "getting-started.md",
    ROOT / "docs" / "installation.md",
    ROOT / "docs" / "troubleshooting.md",
    ROOT / "docs" / "security.md",
    ROOT / "docs" / "liqo-behaviour.md",
    *sorted((ROOT / "docs" / "guides").glob("*.md")),
    *sorted((ROOT / "docs" / "reference").glob("*.md")),
    *sorted((ROOT / "docs" / "operations").glob("*.md")),
    CHART / "templates" / "NOTES.txt",
    # What users apply: the examples, and the Argo CD health checks, which land in their argocd-cm.
    *sorted((ROOT / "examples").rglob("*.yaml")),
    *sorted((ROOT / "deploy" / "argocd").glob("*.lua")),
]
TEST_TALK = re.compile(
    "|".join(
        (
            r"\btests/|\btestenv\b|\btest_\w+\.py\b|\btier `?\w+`?",  # test files and tiers
            r"\bunit tests?\b|\bend[- ]to[- ]end (tests?|runs?|suites?)\b|\btested end[- ]to[- ]end\b",
            r"\breal-Liqo tests?\b|\bthe tests (check|checks|run|use|upgrade|adopt|install|do)\b",
            r"\btest (runs|checks)\b|\bTested by\b|^#+ Tested( with)?\s*$",
            r"\b(every|whole|test) suite\b|\bLiqo stand-in\b",
        )
    ),
    re.I,
)


@pytest.mark.parametrize("page", USER_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_user_page_names_no_test(page: Path) -> None:
    found = [
        f"{n}: {line.strip()}" for n, line in enumerate(page.read_text().splitlines(), 1) if TEST_TALK.search(line)
    ]
    assert not found, "\n".join(found)


def test_the_pattern_finds_test_talk() -> None:
    for said in (
        "see tests/e2e/x.py",
        "test_release.py runs it",
        "tier `liqo`",
        "a unit test checks that",
        "The end-to-end tests run the chart with two replicas",
        "the dashboard's panels from an end-to-end run",
        "it is tested end to end with v1.2.0",
        "a unit test holds it to those bytes",
        "The real-Liqo tests therefore offload",
        "The tests upgrade Liqo v1.1.2 to v1.2.0",
        "The tests do not cover this path.",
        "The Flux HelmRelease test runs the chart",
        "-- table. Tested by the health check's tests",
        "## Tested with",
        "kubelet (every suite)",
        "the operator against the Liqo stand-in",
    ):
        assert TEST_TALK.search(said), said
    for said in ("## Supported versions", "verified with v1.2.0", "a user's own tests", "the GitOps suites"):
        assert not TEST_TALK.search(said), said


# -- the operator's namespace ---------------------------------------------------------------------------------
OPERATOR_NAMESPACE = "liqo-peering"
INSTALL_PAGES = list(
    dict.fromkeys(
        [
            *(p for p in USER_PAGES if p.suffix in (".md", ".txt", ".yaml") and p != CHART / "values.yaml"),
            *sorted((ROOT / "docs").glob("*.md")),
        ]
    )
)
_NAMESPACE_FLAG = re.compile(r"(?:^|\s)(?:-n|--namespace)[ =]([a-z0-9-]+)")
# A command on the operator's release or its objects: the namespace it names is the operator's.
_OPERATOR_COMMAND = re.compile(
    r"\bhelm (?:install|upgrade|uninstall|list|status|rollback)\b"
    r"|\bkubectl\b.*\b(?:deploy(?:ment)?[/ ]|svc/)liqo-peering-operator"
)
_RELEASE_FIELD = re.compile(r"^\s*(?:targetNamespace|storageNamespace):\s*(\S+)")


def operator_namespaces(text: str) -> list[tuple[int, str]]:
    """(line, namespace) for each namespace a command on the operator's release or objects names."""
    found = []
    for n, line in enumerate(text.replace("\\\n", " ").splitlines(), 1):
        if _OPERATOR_COMMAND.search(line):
            found += [(n, ns) for ns in _NAMESPACE_FLAG.findall(line)]
        field = _RELEASE_FIELD.match(line)
        if field is not None:
            found.append((n, field[1]))
    return found


def _argocd_destinations(text: str) -> list[tuple[int, str]]:
    """The destination namespace of each Argo CD Application that installs the operator's chart."""
    found = []
    for doc in yaml.safe_load_all(text):
        spec = doc.get("spec") or {} if isinstance(doc, dict) else {}
        if doc and doc.get("kind") == "Application" and (spec.get("source") or {}).get("chart") == CHART.name:
            found.append((0, str((spec.get("destination") or {}).get("namespace"))))
    return found


@pytest.mark.parametrize("page", INSTALL_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_operator_has_one_namespace(page: Path) -> None:
    text = page.read_text()
    named = operator_namespaces(text) + (_argocd_destinations(text) if page.suffix == ".yaml" else [])
    other = [f"{n}: {ns}" for n, ns in named if ns != OPERATOR_NAMESPACE]
    assert not other, f"the operator is installed in {OPERATOR_NAMESPACE} everywhere:\n" + "\n".join(other)


def test_the_namespace_scan_finds_each_kind_of_command() -> None:
    text = """\
helm install liqo-peering-operator deploy/helm/liqo-peering-operator \\
  --namespace liqo-peering-system --create-namespace
kubectl -n operators logs deploy/liqo-peering-operator
kubectl -n default get lp
  targetNamespace: liqo-peering-operator
"""
    assert operator_namespaces(text) == [
        (1, "liqo-peering-system"),
        (2, "operators"),
        (4, "liqo-peering-operator"),
    ]
    assert _argocd_destinations((ROOT / "examples" / "argocd" / "operator.yaml").read_text()) == [
        (0, OPERATOR_NAMESPACE)
    ]
    demo = (ROOT / "hack" / "demo.py").read_text()
    assert f'RELEASE, RELEASE_NS = "liqo-peering-operator", "{OPERATOR_NAMESPACE}"' in demo
