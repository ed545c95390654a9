"""deploy/argocd/health.lua through Argo CD's own Lua VM: the cases of test_argocd_health.py (lupa's C Lua
5.1) again, through hack/tools/argocd/main.go (argocd-lua-health, hack/build-gitops.sh). It reads
deploy/argocd/argocd-cm-snippet.yaml with Argo CD's settings manager, as Argo CD reads argocd-cm, and
computes each object's health as the application controller does: gitops-engine's GetResourceHealth with
those overrides, so gopher-lua in Argo CD's sandbox, `obj` converted Argo CD's way."""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from test_argocd_health import CASES, SET_CASES, SET_FIXTURES, SNIPPET, fixture

from testenv.localk8s.tools import tool_path

# In the gitops tier: its binary is built with Argo CD's, beside the first tiers (hack/run-tests.sh).
pytestmark = pytest.mark.gitops


@pytest.fixture(scope="module")
def argocd_health() -> Path:
    return tool_path("argocd-lua-health")


def health_of(
    binary: Path, objects: list[dict[str, Any]], snippet: Path = SNIPPET, vm_only: bool = False
) -> list[dict[str, str]]:
    argv = [str(binary), *(["-vm-only"] if vm_only else []), str(snippet)]
    out = subprocess.run(argv, input=json.dumps(objects), capture_output=True, text=True, check=True, timeout=60)
    result = json.loads(out.stdout)
    assert isinstance(result, list) and len(result) == len(objects)
    return result


def variant(name: str, change: Any) -> dict[str, Any]:
    obj = copy.deepcopy(fixture(name))
    change(obj)
    return obj


def _stalled(obj: dict[str, Any]) -> None:
    for cond in obj["status"]["conditions"]:
        if cond["type"] == "Stalled":
            cond.update(status="True", reason="Invalid", message="gateway template missing")


# The extra cases of test_argocd_health.py, as (object, expected status, expected message or None).
EXTRA: list[tuple[str, dict[str, Any], str, str | None]] = [
    (
        "timeout without messages",
        variant("timeout", lambda o: o["status"].update(conditions=[])),
        "Degraded",
        "Peering timed out",
    ),
    ("stalled while establishing", variant("establishing", _stalled), "Degraded", "gateway template missing"),
    (
        "no observedGeneration",
        variant("ready", lambda o: o["status"].pop("observedGeneration")),
        "Progressing",
        None,
    ),
    ("no generation", variant("ready", lambda o: o["metadata"].pop("generation")), "Healthy", None),
    (
        "unknown peerStatus",
        variant("ready", lambda o: o["status"].update(peerStatus="something-new")),
        "Progressing",
        None,
    ),
    # What the API server serves before the operator's first status write (the CRD's status default).
    (
        "defaulted status",
        variant("no-status", lambda o: o.update(status={"observedGeneration": 0})),
        "Progressing",
        "Waiting for the operator to observe generation 1",
    ),
]


# Where the application controller's verdict is not the script's: gitops-engine's GetResourceHealth answers
# for a deleting object before any health check runs.
CONTROLLER_DIFFERS = {"deleting": ("Progressing", "Pending deletion")}


def test_fixtures_through_argo_cds_lua_vm(argocd_health: Path) -> None:
    """The script alone in Argo CD's Lua VM (gopher-lua, Argo CD's sandbox and `obj`): what lupa says."""
    results = health_of(argocd_health, [fixture(name) for name, _, _ in CASES], vm_only=True)
    for (name, status, message), got in zip(CASES, results, strict=True):
        assert got == {"status": status, "message": message}, name


def test_fixtures_as_the_application_controller_sees_them(argocd_health: Path) -> None:
    results = health_of(argocd_health, [fixture(name) for name, _, _ in CASES])
    for (name, status, message), got in zip(CASES, results, strict=True):
        status, message = CONTROLLER_DIFFERS.get(name, (status, message))
        assert got == {"status": status, "message": message}, name


def test_extra_cases_through_argo_cds_lua_vm(argocd_health: Path) -> None:
    results = health_of(argocd_health, [obj for _, obj, _, _ in EXTRA], vm_only=True)
    assert results == health_of(argocd_health, [obj for _, obj, _, _ in EXTRA])  # none is deleting
    for (name, _, status, message), got in zip(EXTRA, results, strict=True):
        assert got.get("status") == status, (name, got)
        if message is not None:
            assert got.get("message") == message, (name, got)


def test_set_fixtures_as_the_application_controller_sees_them(argocd_health: Path) -> None:
    """LiqoPeeringSets get their own check from the same snippet (Argo CD picks it by group and kind)."""
    objects = [fixture(name, SET_FIXTURES) for name, _, _ in SET_CASES]
    assert health_of(argocd_health, objects, vm_only=True) == [{"status": s, "message": m} for _, s, m in SET_CASES]
    for (name, status, message), got in zip(SET_CASES, health_of(argocd_health, objects), strict=True):
        status, message = ("Progressing", "Pending deletion") if name == "deleting" else (status, message)
        assert got == {"status": status, "message": message}, name


def test_without_the_snippet_argo_cd_has_no_health_for_liqopeerings(argocd_health: Path, tmp_path: Path) -> None:
    """The verdicts above come from the snippet: with an argocd-cm without it, Argo CD has no check."""
    bare = tmp_path / "argocd-cm.yaml"
    bare.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: argocd-cm\n  namespace: argocd\n"
        "  labels: {app.kubernetes.io/part-of: argocd}\ndata: {}\n"
    )
    assert health_of(argocd_health, [fixture("error")], bare) == [{"error": "no health check applies"}]
