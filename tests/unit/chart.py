"""`helm template` of the chart for unit tests. helm (and promtool) come from the tool cache
(hack/build-tools.sh); a missing tool fails the test, saying how to build it."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

from testenv.helm import CHART, PLACEHOLDER_IMAGE, run_helm
from testenv.localk8s import tool_path

RELEASE = "lpo"
NAMESPACE = "lpo-system"
FULLNAME = f"{RELEASE}-liqo-peering-operator"


def promtool(*args: str, cwd: Path) -> str:
    """promtool's output; the test fails with it unless promtool succeeds."""
    proc = subprocess.run([str(tool_path("promtool")), *args], capture_output=True, text=True, cwd=cwd, timeout=120)
    assert proc.returncode == 0, f"promtool {' '.join(args)}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def helm(*args: str, check: bool = True) -> str:
    return run_helm(*args, check=check, binary=tool_path("helm"))


def template_args(*sets: str, chart: Path = CHART, image: bool = True) -> list[str]:
    """`helm template` of `chart` with `sets`. The project's chart names no image of its own: with `image`, the
    placeholder image comes first (`sets` may override it)."""
    args = ["template", RELEASE, str(chart), "--namespace", NAMESPACE]
    for s in (*(PLACEHOLDER_IMAGE if image and chart == CHART else ()), *sets):
        args += ["--set", s]
    return args


def render(*sets: str, chart: Path = CHART) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(helm(*template_args(*sets, chart=chart))) if d]


def render_error(*sets: str, image: bool = True) -> str:
    """What helm says when it refuses these values (the test fails if it renders them); without `image`, no
    image values but those in `sets`."""
    out = helm(*template_args(*sets, image=image), check=False)
    assert "Error:" in out, f"rendered: {sets}"
    return out


def find(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]


def pod_spec(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (deployment,) = find(docs, "Deployment")
    spec: dict[str, Any] = deployment["spec"]["template"]["spec"]
    return spec
