"""The generated tables (hack/docs_gen.py) match the code: every operator flag and chart value is documented."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

from liqo_peering.cli import build_parser

REPO = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_gen", REPO / "hack" / "docs_gen.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("docs_gen", module)
    spec.loader.exec_module(module)
    return module


gen = _load()


@pytest.mark.parametrize("page", list(gen.PAGES), ids=[p.name for p in gen.PAGES])
def test_generated_tables_are_up_to_date(page: Path) -> None:
    assert (REPO / page).read_text() == gen.PAGES[page](REPO), f"{page} is stale: run `make generate`"


def test_every_chart_value_has_a_description() -> None:
    values = gen.chart_values((REPO / gen.VALUES).read_text())
    undocumented = [v.key for v in values if not v.description]
    assert not undocumented, f"values.yaml: add a `# --` comment above {', '.join(undocumented)}"


def test_every_flag_is_in_the_configuration_page_with_its_help() -> None:
    page = (REPO / gen.CONFIGURATION).read_text()
    flags = gen.operator_flags(build_parser(), (REPO / gen.DEPLOYMENT).read_text())
    names = [n for f in flags for n in f.names]
    assert "--peering-lifetime" in names and "--no-kubeconfig-secret-protection" in names
    assert [n for n in names if f"`{n}" not in page] == []
    assert [f.names[0] for f in flags if not f.help] == [], "give each flag a help text in cli.py"


def test_comments_and_defaults_are_read_per_key() -> None:
    text = """\
# A header, not a description.

# -- The image.
image:
  # -- Its tag;
  # empty: the appVersion.
  tag: ""
  pullPolicy: IfNotPresent
ha:
  enabled: false
# -- A list.
items:
  - a
"""
    values = gen.chart_values(text)
    assert [(v.key, v.default, v.description) for v in values] == [
        ("image", {"tag": "", "pullPolicy": "IfNotPresent"}, "The image."),
        ("ha.enabled", False, ""),
        ("items", ["a"], "A list."),
    ]
    assert gen.value_comments(text)["image.tag"] == "Its tag;\nempty: the appVersion."


def test_the_chart_value_of_a_flag_comes_from_its_line_or_its_block() -> None:
    template = """\
            {{- range .Values.watchNamespaces }}
            - --namespace={{ . }}
            {{- end }}
            - --log-level={{ .Values.logLevel }}
            {{- if not .Values.protection }}
            - --no-protection
            {{- end }}
            - --other
"""
    assert gen.chart_flags(template) == {
        "--namespace": ("watchNamespaces",),
        "--log-level": ("logLevel",),
        "--protection": ("protection",),
        "--other": (),
    }


def readme_row(component: str) -> tuple[str, str]:
    """README's compatibility row of ``component``: (supported, verified with)."""
    (row,) = [line for line in (REPO / "README.md").read_text().splitlines() if line.startswith(f"| {component} |")]
    supported, verified = row.split("|")[2:4]
    return supported.strip(), verified.strip()


def test_the_readme_names_the_liqo_versions_the_suite_runs() -> None:
    versions_env = (REPO / gen.VERSIONS_ENV).read_text()
    assert readme_row("Liqo")[1] == ", ".join(f"v{version}" for version, _ in gen.liqo_tested(versions_env))


@pytest.mark.parametrize(
    ("component", "keys"),
    [
        ("Helm", ["HELM_VERSION"]),
        ("Flux", [f"FLUX_{c}_CONTROLLER_VERSION" for c in ("SOURCE", "KUSTOMIZE", "HELM")]),
        ("Argo CD", ["ARGOCD_VERSION"]),
    ],
)
def test_the_readme_names_the_tool_versions_the_suite_runs(component: str, keys: list[str]) -> None:
    pinned = dict(
        line.split("=", 1) for line in (REPO / gen.VERSIONS_ENV).read_text().splitlines() if line[:1].isupper()
    )
    verified = readme_row(component)[1]
    assert [v for v in re.findall(r"\d+\.\d+\.\d+", verified)] == [pinned[key] for key in keys], verified
