"""docs/guides/working-with-liqopeerings.md tells users what to type: every field it names is in the CRD, every
patch it shows sets fields the CRD has, every key under peering.liqo-operator.io/ is one the operator uses, and
every operator flag is one the operator takes."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from liqo_peering.cli import build_parser
from liqo_peering.liqo import naming

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "guides" / "working-with-liqopeerings.md"
CRD = REPO / "crds" / "peering.liqo-operator.io_liqopeerings.yaml"
SET_CRD = REPO / "crds" / "peering.liqo-operator.io_liqopeeringsets.yaml"
FIELD = re.compile(r"`((?:spec|status|metadata)\.[A-Za-z.]+)`")
PATCH = re.compile(r"-p '(\{.*?\})'")
OWN_KEY = re.compile(r"peering\.liqo-operator\.io/[a-z-]+")
FLAG = re.compile(r"`(--[a-z-]+)`")


def _root(path: Path = CRD) -> dict[str, Any]:
    crd = yaml.safe_load(path.read_text())
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]  # type: ignore[no-any-return]


def _has(schema: dict[str, Any], parts: list[str]) -> bool:
    for part in parts:
        props = schema.get("properties")
        if props is None:
            return schema.get("type") == "object" and part in ("generation", "deletionTimestamp", "annotations")
        if part not in props:
            return False
        schema = props[part]
    return True


def _leaves(value: Any, prefix: list[str]) -> list[list[str]]:
    if isinstance(value, dict) and value and prefix[-2:] != ["offloading", "resources"]:
        return [path for key, sub in value.items() for path in _leaves(sub, [*prefix, key])]
    return [prefix]


def test_every_field_the_page_names_is_in_the_crds() -> None:
    text, roots = PAGE.read_text(), (_root(), _root(SET_CRD))
    named = set(FIELD.findall(text))
    assert "spec.networking.gatewayServer.location" in named and "status.observedGeneration" in named
    assert [f for f in sorted(named) if not any(_has(root, f.split(".")) for root in roots)] == []


def test_every_patch_the_page_shows_sets_fields_of_the_crd() -> None:
    text, root = PAGE.read_text(), _root()
    patches = [json.loads(p) for p in PATCH.findall(text.replace("\\\n", " "))]
    assert len(patches) >= 3
    paths = [path for patch in patches for path in _leaves(patch, [])]
    assert [".".join(p) for p in paths if not _has(root, p)] == []


def test_the_operators_own_keys_on_the_page_are_the_operators() -> None:
    used = {v for k, v in vars(naming).items() if k.isupper() and isinstance(v, str)}
    named = set(OWN_KEY.findall(PAGE.read_text()))
    assert naming.FORCE_DELETE in named and naming.KUBECONFIG_IN_USE in named
    assert named - used == set()


def test_the_flags_on_the_page_are_the_operators() -> None:
    run = next(a for a in build_parser()._actions if a.dest == "command").choices["run"]  # type: ignore[index]
    flags = {s for action in run._actions for s in action.option_strings}
    named = set(FLAG.findall(PAGE.read_text()))
    assert "--resync-interval" in named
    assert named - flags == set()
