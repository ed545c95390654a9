"""The chart's CRD template is exactly what hack/sync_chart_crd.py derives from crds/ (no hand-kept copy)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]


def _load_sync() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sync_chart_crd", REPO / "hack" / "sync_chart_crd.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("sync_chart_crd", module)
    spec.loader.exec_module(module)
    return module


sync = _load_sync()


def test_chart_crd_matches_crds_folder() -> None:
    source = REPO / sync.CRD_SOURCE
    target = REPO / sync.CHART_CRD
    assert source.exists(), f"{sync.CRD_SOURCE} is missing: run `make generate`"
    assert target.exists(), f"{sync.CHART_CRD} is missing: run `make generate`"
    assert target.read_text() == sync.render_chart_crd(source.read_text()), (
        f"{sync.CHART_CRD} is stale: run `make generate` (or python hack/sync-chart-crd.py)"
    )


def test_check_mode_reports_staleness(tmp_path: Path) -> None:
    (tmp_path / sync.CRD_SOURCE).parent.mkdir(parents=True)
    (tmp_path / sync.CRD_SOURCE).write_text((REPO / sync.CRD_SOURCE).read_text())
    assert sync.main(["--root", str(tmp_path), "--check"]) == 1
    assert not (tmp_path / sync.CHART_CRD).exists()
    assert sync.main(["--root", str(tmp_path)]) == 0
    assert sync.main(["--root", str(tmp_path), "--check"]) == 0


CRD_WITH_BRACES = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.io
  annotations:
    example.io/owner: team
status:
  acceptedNames: {}
spec:
  group: example.io
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        description: "Renders {{ .Values.x }} and }} literally"
"""


def test_render_wraps_escapes_and_keeps_existing_annotations() -> None:
    text = sync.render_chart_crd(CRD_WITH_BRACES)
    lines = text.splitlines()
    assert lines[1] == "{{- if .Values.crds.enabled }}"
    assert lines[-1] == "{{- end }}"
    assert "    example.io/owner: team" in lines
    keep = lines.index("    helm.sh/resource-policy: keep")
    assert lines[keep - 1].strip() == "{{- if .Values.crds.keep }}"
    assert "status:" not in text
    # Literal delimiters only appear escaped, as Go template string constants.
    assert '{{ "{{" }} .Values.x {{ "}}" }} and {{ "}}" }} literally' in text


def test_rendered_body_is_the_crd() -> None:
    """Stripping the template lines gives back the CRD's spec unchanged."""
    source = (REPO / sync.CRD_SOURCE).read_text()
    text = sync.render_chart_crd(source)
    plain = "\n".join(line for line in text.splitlines() if "{{" not in line)
    rendered = yaml.safe_load(plain)
    crd = yaml.safe_load(source)
    assert rendered["spec"] == crd["spec"]
    assert rendered["metadata"]["name"] == crd["metadata"]["name"]


def test_unexpected_input_is_rejected() -> None:
    with pytest.raises(ValueError):
        sync.render_chart_crd("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
